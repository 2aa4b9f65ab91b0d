"""Environment families: generators and adapters that emit `EnvSpec`s.

- `procedural`: seeded, LLM-free synthetic tool worlds (the embedded default).
"""
