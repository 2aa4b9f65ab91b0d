"""Evaluation: BFCL v4 multi-turn (and τ-bench, `tau_eval`) on astra-verl's stack, from the command line.

- `chat_rollout`  an exported row's episode against an OpenAI-compatible endpoint
- `bfcl_run`      resumable results file, concurrency, the per-category accuracy table
- `bfcl_replay`   ground-truth replay (the adapter's faithfulness check)
- `cli`           `python -m astra_verl.eval {bfcl,bfcl-export,bfcl-score,bfcl-replay}`

The environments themselves are `env_registry.families.bfcl`; the hooks, the reward managers and
BFCL's scorer that training uses too are `astra_verl.benchmarks` (`bfcl_hook`, `bfcl_score`,
`bfcl_reward`, `tau_hook`, `tau_reward`).

Where an episode here differs from BFCL's own inference loop (the verdict's input does not:
the scorer hands BFCL's checker every call BFCL would have decoded):
- Tool list: OpenAI function schemas (BFCL's types mapped to JSON Schema, the doc's response
  schema appended to the description), as BFCL's OpenAI-style handlers send them; BFCL's
  Qwen-FC handler prints its raw docs instead.
- A call our loop cannot run (arguments violating the schema, an unknown or not yet revealed
  tool) gets an error message and changes no state; BFCL's executor would run it (and expose a
  hidden miss_func function to a model that guesses its name). The checker re-executes it as
  BFCL does.
- Malformed calls: a step is decoded as BFCL's handler for the runner's call style decodes it
  (`bfcl_score.CallStyle`: `astra_tool_agent`'s generated text by the parser `astra_bfcl_qwen`,
  BFCL's Qwen FC handler rule for rule (docs/bfcl.md); the chat rollout's OpenAI tool calls like
  BFCL's OpenAI handler, where one argument string that is not a JSON object, `""` included,
  fails the whole step). A step BFCL fails or decodes to no call is not scored and ends the
  user turn, as in BFCL; but here the step's well-formed calls have run and the model has read
  their results and the parse errors (BFCL shows it nothing), so later observations can differ.
- Context: an episode that outgrows the response budget (`max_response_length`, long_context
  observations are up to 32k characters each) ends and fails as `astra:episode_truncated`.
- Hold-out turns: `astra_tool_agent` cannot change the tool list in its system prompt, so the
  hook lists the new functions in the message (BFCL's prompting-mode message); the CLI's
  default grows the request's tool list and sends BFCL's FC message (`--holdout-message`).
- Sampling: verl validation is greedy (`val_kwargs.do_sample: false`); the CLI uses BFCL's
  temperature 0.001.
"""
