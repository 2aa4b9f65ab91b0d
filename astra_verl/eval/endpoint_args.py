"""The endpoint flags' settings (`--base-url`, `--model`, `--concurrency`, ... as the eval
subcommands declare them) as the LLM client's `LLMConfig`: one place for `eval bfcl` and
`eval bfcl-single`. Light at import; the client is imported when a command runs."""

from __future__ import annotations

import argparse
import json
from typing import Any

from astra_foundation.clikit import UsageError


def llm_config(args: argparse.Namespace) -> Any:
    from astra_foundation.llm import LLMConfig

    try:
        extra_body = json.loads(args.extra_body) if args.extra_body else {}
    except ValueError as exc:
        raise UsageError(f"--extra-body is not JSON: {exc}") from None
    return LLMConfig(
        base_urls=[u.strip() for u in args.base_url.split(",") if u.strip()],
        model=args.model,
        api_key_env=args.api_key_env,
        max_concurrency=args.concurrency,
        timeout_s=args.timeout,
        max_retries=args.retries,
        temperature=args.temperature,
        max_tokens=args.max_tokens or None,
        extra_body=extra_body,
        cache=not args.no_cache,
    )
