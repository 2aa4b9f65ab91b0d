"""Training-side extensions to verl: ASTRA's adaptive batch filling, the step metrics of astra episodes,
and the SFT dataset that reads our one SFT record (`env_registry.sft_record`), checking its version."""
