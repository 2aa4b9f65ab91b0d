"""Publish finished environments into an `env_registry` store, and export verl parquet.

`Publish` (input `Merged`, output `Published`) re-checks each environment's structure (cheap;
the merge step replayed its golden calls) and appends it to the `EnvStore` held in
`ctx.store` (`EnvContext`); the store de-duplicates by content hash, so a rerun adds nothing twice.
`export_parquet` then writes train/val parquet for `main_ppo` through `env_registry.export`.
"""

from __future__ import annotations

from pathlib import Path

from data_synth.env.context import EnvContext
from data_synth.env.records import Merged, Published
from data_synth.pipeline import Reject, Step
from env_registry.export import ExportConfig, export_rows, write_export
from env_registry.spec import EnvSpec
from env_registry.structure import check_structure


class Publish(Step[Merged, Published]):
    name = "env.publish"
    input_type = Merged
    output_type = Published

    async def process(self, record: Merged, ctx: EnvContext) -> Published:
        env = EnvSpec.model_validate(record.env)
        issues = check_structure(env)
        if issues:
            raise Reject(f"invalid_env:{issues[0].rule.value}", "; ".join(str(i) for i in issues[:5]))
        if ctx.store is None:
            raise RuntimeError("publish needs the store in its EnvContext (the run opens it)")
        new = ctx.store.add(env)
        return Published(
            key=record.key,
            env_id=env.id,
            new=new,
            domain=env.domain,
            scenario_type=env.scenario_type.value,
            sub_questions=len(env.sub_questions),
            tools=len(env.tools),
        )


def export_parquet(store, env_ids: list[str], out: str | Path, *, val_fraction: float = 0.1, seed: int = 0) -> Path:
    """train/val parquet of the given environments (`<out>/mix_none/{train,val}.parquet`)."""
    config = ExportConfig(val_fraction=val_fraction, seed=seed)
    envs = [store.get(i) for i in env_ids]
    result = export_rows(store, envs, config=config, progress=False)
    return write_export(result, out, config, {"store": str(Path(store.path).resolve()), "source": "data_synth env"})
