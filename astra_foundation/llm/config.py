"""LLM settings, their command-line flags, and the client they build.

Flags (each with an environment-variable default, so a cluster job can set them once):

    --llm-base-url URL[,URL...]   ASTRA_LLM_BASE_URL   OpenAI-compatible base URLs (.../v1); several = a pool
    --llm-model NAME              ASTRA_LLM_MODEL      model name the server knows
    --llm-api-key-env VAR         (OPENAI_API_KEY)     name of the variable holding the key (never the key)
    --llm-scripted FILE                                canned responses instead of a server (dry runs, tests)
    --llm-responder MODULE:FUNCTION                    a function answering instead of a server (dry runs)
    --llm-concurrency N --llm-timeout S --llm-retries N --llm-temperature T --llm-max-tokens N
    --llm-extra-body JSON          merged into every request (e.g. '{"chat_template_kwargs": {"enable_thinking": false}}')
    --llm-transport aiohttp|httpx  HTTP client (default aiohttp)
    --llm-no-cache

`add_llm_arguments(parser, prefix="judge")` adds the same set as `--judge-base-url` ...
for a second model; `LLMConfig.from_args(args, prefix="judge")` reads it back.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from astra_foundation.errors import UserError
from astra_foundation.llm.cache import ResponseCache
from astra_foundation.llm.client import LLMClient
from astra_foundation.llm.http import HTTPBackend
from astra_foundation.llm.scripted import ScriptedBackend, load_rules, scripted_model
from astra_foundation.llm.types import LLMError


class LLMSettingsError(UserError, LLMError):
    """The LLM flags cannot make a client (extra body not JSON, a responder that does not import);
    the message names the flag and what to fix. Command lines treat it as a usage error."""


class LLMConfig(BaseModel):
    base_urls: list[str] = Field(default_factory=list)
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    scripted: str | None = Field(default=None, description="rules file for the scripted backend")
    responder: str | None = Field(
        default=None, description="module:function answering requests (scripted backend; dry runs, benchmarks)"
    )
    max_concurrency: int = 32
    timeout_s: float = 120.0
    max_retries: int = 6
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    temperature: float = 0.7
    max_tokens: int | None = 4096
    extra_body: dict[str, Any] = Field(default_factory=dict)
    cache: bool = True
    transport: str = Field(default="aiohttp", description="HTTP client: aiohttp (default) or httpx")

    def describe(self) -> str:
        """One line for logs (endpoints and model, never a key)."""
        if self.responder or self.scripted:
            where = f"scripted:{self.responder or self.scripted}"
        else:
            where = ",".join(self.base_urls) or "(no endpoint)"
        return f"{self.model or '(default model)'} @ {where}, concurrency {self.max_concurrency}"

    @classmethod
    def from_args(cls, args: argparse.Namespace, prefix: str = "llm") -> LLMConfig:
        p = prefix.replace("-", "_")

        def get(name: str) -> Any:
            return getattr(args, f"{p}_{name}")

        extra = get("extra_body")
        try:
            extra_body = json.loads(extra) if extra else {}
        except json.JSONDecodeError as e:
            raise LLMSettingsError(f"--{prefix}-extra-body is not JSON ({e.msg}): {extra!r}") from None
        urls = [u.strip() for u in (get("base_url") or "").split(",") if u.strip()]
        return cls(
            base_urls=urls,
            model=get("model") or "",
            api_key_env=get("api_key_env"),
            scripted=get("scripted"),
            responder=get("responder"),
            max_concurrency=get("concurrency"),
            timeout_s=get("timeout"),
            max_retries=get("retries"),
            temperature=get("temperature"),
            max_tokens=get("max_tokens") or None,
            extra_body=extra_body,
            cache=not get("no_cache"),
            transport=get("transport"),
        )


def add_llm_arguments(
    parser: argparse.ArgumentParser, prefix: str = "llm", what: str = "the model", *, temperature: float = 0.7
) -> None:
    """The flags of one model (`--<prefix>-base-url` ...); `temperature` is its default sampling
    temperature (judges use 0: every astra-verl command line judges at 0 unless told otherwise)."""
    env = "ASTRA_" + prefix.upper().replace("-", "_")
    g = parser.add_argument_group(f"LLM ({what})")
    g.add_argument(
        f"--{prefix}-base-url",
        default=os.environ.get(f"{env}_BASE_URL"),
        help=f"OpenAI-compatible base URL(s), comma-separated for a pool of replicas (env {env}_BASE_URL)",
    )
    g.add_argument(f"--{prefix}-model", default=os.environ.get(f"{env}_MODEL"), help=f"model name (env {env}_MODEL)")
    g.add_argument(
        f"--{prefix}-api-key-env",
        default="OPENAI_API_KEY",
        help="name of the environment variable that holds the API key (default OPENAI_API_KEY; unset = no key)",
    )
    g.add_argument(f"--{prefix}-scripted", default=None, metavar="FILE", help="canned responses (.json/.jsonl rules)")
    g.add_argument(
        f"--{prefix}-responder",
        default=None,
        metavar="MODULE:FUNCTION",
        help="a function (step, payload) -> response answering instead of a server (dry runs)",
    )
    g.add_argument(f"--{prefix}-concurrency", type=int, default=32, help="requests in flight (default 32)")
    g.add_argument(f"--{prefix}-timeout", type=float, default=120.0, help="seconds per request (default 120)")
    g.add_argument(f"--{prefix}-retries", type=int, default=6, help="retries on timeouts/429/5xx (default 6)")
    g.add_argument(
        f"--{prefix}-temperature",
        type=float,
        default=temperature,
        help=f"sampling temperature (default {temperature:g})",
    )
    g.add_argument(f"--{prefix}-max-tokens", type=int, default=4096, help="max completion tokens (0 = server default)")
    g.add_argument(f"--{prefix}-extra-body", default=None, metavar="JSON", help="extra request fields, as JSON")
    g.add_argument(f"--{prefix}-no-cache", action="store_true", help="do not read or write the response cache")
    g.add_argument(
        f"--{prefix}-transport",
        choices=["aiohttp", "httpx"],
        default="aiohttp",
        help="HTTP client (default aiohttp: httpx's pool is several times slower under concurrency)",
    )


def load_responder(spec: str, flag: str = "--llm-responder"):
    """The function `spec` (MODULE:FUNCTION) names; LLMSettingsError naming `flag` when it cannot be had."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise LLMSettingsError(f"{flag} must be MODULE:FUNCTION (e.g. data_synth.traj.canned:respond), not {spec!r}")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise LLMSettingsError(f"{flag} {spec}: {e}; name an importable MODULE:FUNCTION") from None
    if not callable(fn):
        raise LLMSettingsError(f"{flag} {spec}: {type(fn).__name__} is not callable; name a function")
    return fn


def _callable_name(fn: Any) -> str:
    """MODULE:NAME of a responder, a function or a callable object (named by its class)."""
    named = fn if hasattr(fn, "__qualname__") else type(fn)
    return f"{named.__module__}:{named.__qualname__}"


def build_client(cfg: LLMConfig, *, cache_path: str | Path | None = None, responder=None) -> LLMClient:
    """The client for `cfg`. `cache_path` enables the response cache (unless cfg.cache is off).
    `responder` (a callable `(step, payload) -> response`, or cfg.responder by name) makes a
    scripted backend answer instead of a server."""
    if responder is None and cfg.responder:
        responder = load_responder(cfg.responder)
    model = cfg.model or "default"
    if responder is not None or cfg.scripted:
        backend = ScriptedBackend(load_rules(cfg.scripted) if cfg.scripted else [], responder=responder)
        source = cfg.responder or (_callable_name(responder) if responder is not None else cfg.scripted)
        model = scripted_model(source)  # not --llm-model: no model answers
    elif cfg.base_urls:
        backend = HTTPBackend(
            cfg.base_urls,
            api_key_env=cfg.api_key_env or None,
            timeout_s=cfg.timeout_s,
            max_connections=cfg.max_concurrency,
            backoff_base_s=cfg.backoff_base_s,
            backoff_max_s=cfg.backoff_max_s,
            transport=cfg.transport,
        )
    else:
        raise SystemExit(
            "no LLM configured: pass --llm-base-url (or set ASTRA_LLM_BASE_URL), or --llm-scripted FILE for a dry run"
        )
    defaults: dict[str, Any] = {"temperature": cfg.temperature}
    if cfg.max_tokens:
        defaults["max_tokens"] = cfg.max_tokens
    defaults.update(cfg.extra_body)
    cache = ResponseCache(cache_path) if cache_path is not None and cfg.cache else None
    return LLMClient(
        backend,
        model=model,
        cache=cache,
        max_concurrency=cfg.max_concurrency,
        max_retries=cfg.max_retries,
        backoff_base_s=cfg.backoff_base_s,
        backoff_max_s=cfg.backoff_max_s,
        defaults=defaults,
    )
