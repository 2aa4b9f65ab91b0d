"""Training-side extensions to verl: ASTRA's adaptive batch filling and the step metrics of astra episodes."""
