"""Trajectory synthesis (docs/method.md §1): tool docs -> tool-call graph -> verified multi-turn SFT data.

    python -m data_synth traj run TOOL_DOCS... --out RUN --base-url URL --model NAME

Modules, in pipeline order: `ingest` (+ `schema`), `compat` + `propose` + `graph`, `chains`,
`verify_chains` (+ `query_checks`), `tasks`, `simulate` / `mcp_tools` + `interact`, `judge`,
`export_sft` (its verl dataset class is `astra_verl.training.sft_dataset`), `report`. `records` holds the typed
record of every step boundary, `steps` the pipeline steps, `run` the orchestration, `cli` the
command line, `config` the settings, `describe` the renderings of servers and tools for the
prompts (`data_synth/prompts/traj/*.md`, loaded with `data_synth.prompts.load_prompt`).
"""
