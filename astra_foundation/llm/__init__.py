"""LLM access for the synthesis pipelines (shared by `data_synth.env` and `data_synth.traj`).

    from astra_foundation.llm import LLMConfig, add_llm_arguments, build_client, usage_scope

    client = build_client(LLMConfig(base_urls=["http://127.0.0.1:8000/v1"], model="m"), cache_path=run_dir / "llm.sqlite")
    c = await client.complete(messages, step="traj.agent", tools=tools)      # Completion: text, tool_calls, usage
    r = await client.complete_json(messages, step="env.verify", schema=MyModel, check=fn)   # r.value
    await client.aclose()

Modules: `client` (LLMClient: cache, concurrency, retries, JSON + repair round), `http`
(OpenAI-compatible endpoint pool; aiohttp, or httpx), `scripted` (canned responses, or a
responder function), `fake_server` (loopback test server), `cache` (sqlite),
`extract` (JSON / code out of replies), `types` (Completion, ToolCall, errors), `config`
(flags and `build_client`), `preflight` (each endpoint reachable and serving the model, checked
once before a run's first record).
"""

from astra_foundation.llm.cache import ResponseCache, cache_key
from astra_foundation.llm.client import Backend, JSONReply, LLMClient, usage_scope
from astra_foundation.llm.config import LLMConfig, LLMSettingsError, add_llm_arguments, build_client, split_urls
from astra_foundation.llm.extract import ExtractError, ReplyError, extract_code, extract_json, strip_reasoning
from astra_foundation.llm.http import EndpointPool, HTTPBackend
from astra_foundation.llm.preflight import LLMFlags, PreflightError, preflight
from astra_foundation.llm.scripted import ScriptedBackend, load_rules, scripted_model, scripted_source
from astra_foundation.llm.types import (
    Completion,
    LLMError,
    LLMOutputError,
    LLMUnavailable,
    StepUsage,
    TokenCompletion,
    ToolCall,
    TransientError,
    Usage,
)

__all__ = [
    "Backend",
    "Completion",
    "EndpointPool",
    "ExtractError",
    "HTTPBackend",
    "JSONReply",
    "LLMFlags",
    "LLMClient",
    "LLMConfig",
    "LLMError",
    "LLMOutputError",
    "LLMSettingsError",
    "LLMUnavailable",
    "PreflightError",
    "ReplyError",
    "ResponseCache",
    "ScriptedBackend",
    "StepUsage",
    "TokenCompletion",
    "ToolCall",
    "TransientError",
    "Usage",
    "add_llm_arguments",
    "build_client",
    "cache_key",
    "extract_code",
    "extract_json",
    "load_rules",
    "scripted_model",
    "scripted_source",
    "split_urls",
    "preflight",
    "strip_reasoning",
    "usage_scope",
]
