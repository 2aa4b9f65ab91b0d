"""The ground floor of astra-verl: what every other package stands on and nothing of ours below it.

- `strict`: the strict pydantic base of settings and records (unknown keys refused).
- `sandbox`: runs untrusted, model-written tool code in isolated, warm session processes.
- `llm`: the OpenAI-compatible client (retries, cache, preflight, scripted backends for tests).
- `clikit`: the runner every command line goes through (errors, Ctrl-C, exit codes).

It imports nothing from `env_registry`, `astra_verl` or `data_synth` (docs/architecture.md).
"""
