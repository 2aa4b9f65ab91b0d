"""Resumable step runner shared by the synthesis pipelines (`data_synth.env`, `data_synth.traj`).

    from data_synth.pipeline import Record, Reject, Step, StepContext, Shard, run_step, read_outputs, Funnel

    class Scored(Record):            # typed output record; VERSION goes to disk as record_version
        VERSION = 1
        score: float

    class Score(Step[Task, Scored]):  # one job: input record -> output record(s) or Reject
        name, input_type, output_type = "traj.score", Task, Scored
        async def process(self, record, ctx): ...

    stats = await run_step(Score(), tasks, run_dir, ctx=StepContext(llm=client), concurrency=64,
                           shard=Shard.parse("1/4"))
    scored = read_outputs(run_dir, "traj.score", Scored)           # ok outputs, all shards, sorted by key
    stats = await run_chain([Task(), Score()], seeds, run_dir, ctx=ctx)   # records flow step to step
    print(Funnel.from_run(run_dir, ["traj.task", "traj.score"], first_inputs=len(tasks)).table())

On disk: `<run_dir>/<step>[.shard-I-of-N].jsonl`, one `Envelope` per input record (status
ok / rejected / error, reason, detail, outputs, meta). `run_step_ray` (in
`data_synth.pipeline.ray_runner`) runs the same step on a Ray cluster.
"""

from data_synth.pipeline.funnel import Funnel, StepCounts
from data_synth.pipeline.records import Envelope, Record, Reject
from data_synth.pipeline.runner import (
    ContextFactory,
    RunStats,
    Step,
    StepContext,
    gather_or_cancel,
    process_one,
    read_outputs,
    run_chain,
    run_step,
)
from data_synth.pipeline.shard import Shard
from data_synth.pipeline.store import Appender, RunDirError, read_envelopes, step_file, step_files

__all__ = [
    "Appender",
    "ContextFactory",
    "Envelope",
    "Funnel",
    "Record",
    "Reject",
    "RunStats",
    "Shard",
    "Step",
    "StepContext",
    "StepCounts",
    "RunDirError",
    "gather_or_cancel",
    "process_one",
    "read_envelopes",
    "read_outputs",
    "run_chain",
    "run_step",
    "step_file",
    "step_files",
]
