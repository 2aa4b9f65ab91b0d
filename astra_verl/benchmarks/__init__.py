"""External benchmarks as RL environments: what a verl run needs of BFCL v4 multi-turn and τ-bench.

- `bfcl_hook`    the `bfcl_multi_turn` environment hook (user turns, miss_func tools, step limit)
- `bfcl_score`   BFCL's multi-turn checker on an episode, run in the sandbox
- `bfcl_reward`  verl reward manager `astra_bfcl` (registered by the plugin, with the hook)
- `tau_hook`     the `tau_user` environment hook (τ-bench's user simulator)
- `tau_reward`   verl reward manager `astra_tau` (registered by the plugin, with the hook)

The plugin imports these in every verl process; the command-line evaluation (`astra_verl.eval`:
exports, chat rollouts, result files, reports) stands above them and uses the same pieces.
"""
