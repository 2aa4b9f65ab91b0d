"""ASTRA's RL environments as data: spec, validation, store, export.

- `spec`: `EnvSpec` and its parts (the on-disk format, JSON Schema via `spec_json_schema`).
- `shape`: the trace's shape (hops, tool nodes) and the scenario type it implies.
- `matching`: the matching rules validation and reward share (`answer_in_text`, `answer_in_output`,
  `args_agree`).
- `call_key`: the identifying parameters of a synthesized tool, derived from its schema and golden calls.
- `validate`: structural rules and golden-call replay in the sandbox.
- `store`: `EnvStore`, sharded append-only JSONL with an id index.
- `export`: verl `RLHFDataset` parquet rows (row contract in `rows`).
- `families.procedural`: the seeded, LLM-free generator.
- `python -m env_registry`: the CLI (`cli`).
"""
