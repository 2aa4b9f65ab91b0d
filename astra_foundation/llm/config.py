"""LLM settings, their command-line flags, and the client they build.

One endpoint's flags, the same in every command line (docs/cli.md), declared here only:

    --base-url URL[,URL...]   ASTRA_LLM_BASE_URL   OpenAI-compatible base URLs (.../v1); several = a pool
    --model NAME              ASTRA_LLM_MODEL      model name the server knows
    --api-key-env VAR         (OPENAI_API_KEY)     name of the variable holding the key (never the key)
    --scripted FILE                                canned responses instead of a server (dry runs, tests)
    --responder MODULE:FUNCTION                    a function answering instead of a server (dry runs)
    --concurrency N --timeout S --retries N --temperature T --max-tokens N
    --extra-body JSON          merged into every request (e.g. '{"chat_template_kwargs": {"enable_thinking": false}}')
    --transport aiohttp|httpx  HTTP client (default aiohttp)
    --no-cache

`add_llm_arguments(parser, prefix="judge")` adds the same set as `--judge-base-url` ... for a
second model (env ASTRA_JUDGE_BASE_URL ...); `LLMConfig.from_args(args, prefix="judge")` reads
it back. A command that takes only some of the knobs names them (`only=`); a knob the command
declares itself (its own `--concurrency`) is named in `shared=` and serves the client too (any
other clash is an error when the parser is built).
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


def split_urls(text: str | None) -> list[str]:
    """The replicas an endpoint flag names: comma-separated URLs (`--base-url URL1,URL2`), blanks dropped."""
    return [u.strip() for u in (text or "").split(",") if u.strip()]


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
    def from_args(cls, args: argparse.Namespace, prefix: str = "") -> LLMConfig:
        """The settings `add_llm_arguments(parser, prefix)` declared, as parsed; a knob the command
        did not take keeps its default here."""
        fields = cls.model_fields

        def get(name: str, field: str) -> Any:
            value = getattr(args, _dest(prefix, name), None)  # None: not taken, or left to a config file
            return fields[field].get_default(call_default_factory=True) if value is None else value

        extra = get("extra_body", "extra_body")
        try:
            extra_body = json.loads(extra) if isinstance(extra, str) and extra else {}
        except json.JSONDecodeError as e:
            raise LLMSettingsError(f"{_flag(prefix, 'extra-body')} is not JSON ({e.msg}): {extra!r}") from None
        urls = split_urls(getattr(args, _dest(prefix, "base_url"), None))
        return cls(
            base_urls=urls,
            model=get("model", "model") or "",
            api_key_env=get("api_key_env", "api_key_env"),
            scripted=get("scripted", "scripted"),
            responder=get("responder", "responder"),
            max_concurrency=get("concurrency", "max_concurrency"),
            timeout_s=get("timeout", "timeout_s"),
            max_retries=get("retries", "max_retries"),
            temperature=get("temperature", "temperature"),
            max_tokens=get("max_tokens", "max_tokens") or None,
            extra_body=extra_body,
            cache=not getattr(args, _dest(prefix, "no_cache"), False),
            transport=get("transport", "transport"),
        )


def _flag(prefix: str, name: str) -> str:
    """`--base-url` for the endpoint, `--judge-base-url` for the second one named `judge`."""
    return f"--{prefix}-{name}" if prefix else f"--{name}"


def _dest(prefix: str, name: str) -> str:
    return f"{prefix.replace('-', '_')}_{name}" if prefix else name


# (name, add_argument keywords) of every knob, in --help's order; `default` may be replaced.
_KNOBS: dict[str, dict[str, Any]] = {
    "base-url": {
        "metavar": "URL",
        "help": "OpenAI-compatible base URL(s) (.../v1), comma-separated for a pool of replicas",
    },
    "model": {"metavar": "NAME", "help": "model name the server knows"},
    "api-key-env": {
        "metavar": "VAR",
        "default": "OPENAI_API_KEY",
        "help": "name of the environment variable that holds the API key (default OPENAI_API_KEY; unset = no key)",
    },
    "scripted": {"metavar": "FILE", "help": "canned responses (.json/.jsonl rules) instead of a server"},
    "responder": {
        "metavar": "MODULE:FUNCTION",
        "help": "a function (step, payload) -> response answering instead of a server (dry runs)",
    },
    "concurrency": {"metavar": "N", "type": int, "default": 32, "help": "requests in flight (default %(default)s)"},
    "timeout": {"metavar": "S", "type": float, "default": 120.0, "help": "seconds per request (default %(default)g)"},
    "retries": {"metavar": "N", "type": int, "default": 6, "help": "retries on timeouts/429/5xx (default %(default)s)"},
    "temperature": {
        "metavar": "T",
        "type": float,
        "default": 0.7,
        "help": "sampling temperature (default %(default)g)",
    },
    "max-tokens": {
        "metavar": "N",
        "type": int,
        "default": 4096,
        "help": "max completion tokens (default %(default)s; 0 = server default)",
    },
    "extra-body": {"metavar": "JSON", "help": "extra request fields, as JSON (e.g. chat_template_kwargs)"},
    "no-cache": {"action": "store_true", "help": "do not read or write the response cache"},
    "transport": {
        "choices": ["aiohttp", "httpx"],
        "default": "aiohttp",
        "help": "HTTP client (default aiohttp: httpx's pool is several times slower under concurrency)",
    },
}
ENDPOINT = ("base-url", "model", "api-key-env")  # a policy's server, driven by the command's own engine
SERVED = tuple(k for k in _KNOBS if k not in ("scripted", "responder"))  # a real server only (evaluation)


def add_llm_arguments(
    parser: argparse.ArgumentParser,
    prefix: str = "",
    what: str = "the model",
    *,
    temperature: float = 0.7,
    only: tuple[str, ...] | None = None,
    defaults: dict[str, Any] | None = None,
    required: bool = False,
    from_env: bool = True,
    shared: tuple[str, ...] = (),
) -> None:
    """The flags of one endpoint: `--base-url`, `--model`, ... (`--<prefix>-base-url` ... for a
    second one). `temperature` is its default sampling temperature (judges use 0); `only` the
    knobs taken (default all, in `_KNOBS`' names); `defaults` other defaults by knob name;
    `required` makes `--base-url` and `--model` required unless the environment sets them
    (`from_env`: ASTRA_LLM_BASE_URL / ASTRA_<PREFIX>_BASE_URL and ..._MODEL are the defaults).
    `shared`: knobs the command has declared itself (its `--concurrency`), whose value serves the
    client too. A knob the parser already has that is not in `shared`, or one in `shared` it does
    not have, is an error here, when the parser is built: never a flag silently dropped."""
    env = "ASTRA_" + (prefix or "llm").upper().replace("-", "_")
    chosen = {**{"temperature": temperature}, **(defaults or {})}
    taken = [name for name in _KNOBS if only is None or name in only]
    declared = {name for name in taken if _flag(prefix, name) in parser._option_string_actions}
    if declared != set(shared):
        clash, stale = sorted(declared - set(shared)), sorted(set(shared) - declared)
        raise ValueError(
            f"add_llm_arguments({prefix!r}): "
            + (f"the parser already has {[_flag(prefix, n) for n in clash]}: leave them out of only= or pass "
               f"shared={tuple(clash)!r} if the command's value serves the client" if clash else
               f"shared={tuple(stale)!r} names knobs the parser does not have: declare them first")
        )  # fmt: skip
    g = parser.add_argument_group(f"endpoint ({what})")
    for name, spec in _KNOBS.items():
        if name not in taken or name in declared:  # a shared knob: the command's flag serves the client
            continue
        kw = dict(spec)
        key = name.replace("-", "_")
        if key in chosen:
            kw["default"] = chosen[key]
        if name in ("base-url", "model"):
            variable = f"{env}_{key.upper()}"
            kw["default"] = os.environ.get(variable) if from_env else kw.get("default")
            kw["required"] = required and kw["default"] is None
            if from_env:
                kw["help"] += f" (env {variable})"
        g.add_argument(_flag(prefix, name), dest=_dest(prefix, key), **kw)


def load_responder(spec: str, flag: str = "--responder"):
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
        model = scripted_model(source)  # not --model: no model answers
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
        raise LLMSettingsError(
            "no LLM configured: pass --base-url URL --model NAME (or set ASTRA_LLM_BASE_URL), or --scripted FILE for a dry run"
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
