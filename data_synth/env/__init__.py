"""Environment synthesis (docs/method.md §2): input records -> QA traces -> verified, code-executable tool
environments in an `env_registry` store, and verl parquet. CLI: `python -m data_synth env`.

Steps (one module each): `decompose`, `necessity`, `verify` (+ select), `tools`, `merge`,
`publish`; records in `records`; `cli` wires them to the pipeline runner.
"""
