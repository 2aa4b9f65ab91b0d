"""`python -m env_registry show` and `schema`: one environment, the environment format."""

from __future__ import annotations

import argparse
import json

from astra_foundation.clikit import UsageError
from env_registry.commands.common import open_store, say
from env_registry.spec import spec_json_schema


def cmd_show(args: argparse.Namespace) -> int:
    store = open_store(args)
    env_id = args.id
    if env_id not in store:
        matches = [i for i in store.ids() if i.startswith(env_id)] if len(env_id) >= 6 else []
        if len(matches) != 1:
            why = "is ambiguous" if matches else "matches no environment"
            raise UsageError(f"{env_id!r} {why} in {args.store} (give the full id or a unique prefix of >= 6)")
        env_id = matches[0]
    say(json.dumps(store.get(env_id).model_dump(mode="json"), indent=2, ensure_ascii=False))
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    say(json.dumps(spec_json_schema(), indent=2))
    return 0
