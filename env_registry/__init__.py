"""ASTRA's RL environments as data: spec, validation, store, export.

- `spec`: `EnvSpec` and its parts (the on-disk format, JSON Schema via `spec_json_schema`).
- `shape`: the trace's shape (hops, tool nodes) and the scenario type it implies.
- `matching`: `answer_in_text`, the one matching rule (validation and reward).
- `validate`: structural rules and golden-call replay in the sandbox.
- `store`: `EnvStore`, sharded append-only JSONL with an id index.
- `export`: verl `RLHFDataset` parquet rows (row contract in `rows`).
- `families.procedural`: the seeded, LLM-free generator.
- `python -m env_registry`: the CLI (`cli`).
"""
