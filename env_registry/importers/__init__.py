"""Importers: environments released by other projects, read into `EnvSpec`s and then validated
like any other (structure, golden replay, determinism) before they reach a store.

- `sources`: reading JSON, JSONL and parquet files into located records.
- `astra`: ASTRA's environment-synthesis records (step 4/5) and ASTRA-RL-1k rows.
- `python -m env_registry import-astra FILE...`: the command (`env_registry.cli`).
"""
