"""Evaluation: BFCL v4 multi-turn on astra-verl's stack (issue 8).

- `bfcl_hook`     the `bfcl_multi_turn` environment hook (user turns, miss_func tools, step limit)
- `bfcl_score`    BFCL's multi-turn checker on an episode, run in the sandbox
- `bfcl_reward`   verl reward manager `astra_bfcl` (registered by the plugin, with the hook)
- `chat_rollout`  an exported row's episode against an OpenAI-compatible endpoint
- `bfcl_run`      resumable results file, concurrency, the per-category accuracy table
- `bfcl_replay`   ground-truth replay (the adapter's faithfulness check)
- `cli`           `python -m astra_verl.eval {bfcl,bfcl-export,bfcl-score,bfcl-replay}`

The environments themselves are `env_registry.families.bfcl`.
"""
