"""Check every LLM endpoint once before the first record: reachable, key accepted, model served.

    preflight(cfg, flags=LLMFlags())            # raises PreflightError saying what, where, what to do

A run against a server that is down, a URL without `/v1`, a rejected key or a model name the
server does not know would otherwise retry each record for a minute and end as a run of
`llm_unavailable` errors. One `GET <base_url>/models` per endpoint (the OpenAI API's model list,
which vLLM, SGLang and hosted APIs serve) finds all four in a second. Scripted backends
(`--scripted`, `--responder`) have nothing to reach; what they name is loaded instead (a
responder that does not import, a rules file that is missing or not JSON), so a typo stops the
command before its run directory is written, not at the first record.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import httpx

from astra_foundation.llm.config import LLMConfig, LLMSettingsError, load_responder
from astra_foundation.llm.scripted import load_rules

__all__ = ["LLMFlags", "PreflightError", "list_models", "model_entries", "preflight"]

PREFLIGHT_TIMEOUT_S = 10.0


class PreflightError(LLMSettingsError):
    """An endpoint cannot serve the run; the message names the endpoint, the problem and the fix."""


@dataclass(frozen=True)
class LLMFlags:
    """The command-line names of one endpoint's settings, for messages: `--model`, or
    `--judge-model` for the second endpoint named `judge`."""

    prefix: str = ""

    def flag(self, name: str) -> str:
        return f"--{self.prefix}-{name}" if self.prefix else f"--{name}"


def _get(url: str, headers: dict[str, str], timeout_s: float) -> httpx.Response:
    # trust_env=False: the pipeline's own requests (aiohttp) ignore proxy variables too
    with httpx.Client(timeout=timeout_s, trust_env=False) as client:
        return client.get(url, headers=headers)


def list_models(base_url: str, *, api_key_env: str | None, flags: LLMFlags, timeout_s: float) -> list[str]:
    """The model ids `base_url` serves; PreflightError when it cannot be asked."""
    return [str(m["id"]) for m in model_entries(base_url, api_key_env=api_key_env, flags=flags, timeout_s=timeout_s)]


def model_entries(base_url: str, *, api_key_env: str | None, flags: LLMFlags, timeout_s: float) -> list[dict]:
    """The entries of `base_url`'s model list (each has an `id`; vLLM adds `max_model_len`)."""
    url = f"{base_url.rstrip('/')}/models"
    key = os.environ.get(api_key_env) if api_key_env else None
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        r = _get(url, headers, timeout_s)
    except httpx.TimeoutException:
        raise PreflightError(
            f"{url}: no answer within {timeout_s:g} s; is the server up and {flags.flag('base-url')} right?"
        ) from None
    except httpx.HTTPError as e:
        raise PreflightError(
            f"{url}: cannot connect ({type(e).__name__}: {e}); start the server or fix {flags.flag('base-url')}"
        ) from None
    if r.status_code in (401, 403):
        where = f"the variable {api_key_env}" if api_key_env else "no variable"
        state = "which is set" if key else "which is not set"
        raise PreflightError(
            f"{url}: HTTP {r.status_code}, the key was refused; the key is read from {where} ({state}); "
            f"set it, or name another variable with {flags.flag('api-key-env')}"
        )
    if r.status_code == 404:
        raise PreflightError(
            f"{url}: HTTP 404; {flags.flag('base-url')} must be the OpenAI-compatible base URL, usually ending "
            "in /v1 (e.g. http://host:8000/v1)"
        )
    if r.status_code != 200:
        raise PreflightError(f"{url}: HTTP {r.status_code}: {r.text[:200]!r}")
    try:
        data = r.json()["data"]
        if not all(isinstance(m, dict) and "id" in m for m in data):
            raise TypeError("an entry without an id")
        return list(data)
    except (json.JSONDecodeError, KeyError, TypeError):
        raise PreflightError(
            f"{url}: the answer is not an OpenAI model list ({r.text[:120]!r}); is {base_url} an "
            "OpenAI-compatible endpoint?"
        ) from None


def preflight(cfg: LLMConfig, *, flags: LLMFlags = LLMFlags(), timeout_s: float = PREFLIGHT_TIMEOUT_S) -> None:
    """Raise PreflightError unless every endpoint of `cfg` is reachable and serves `cfg.model`."""
    if cfg.scripted or cfg.responder:
        _check_scripted(cfg, flags)
        return
    if not cfg.base_urls:
        raise PreflightError(
            f"no LLM endpoint: pass {flags.flag('base-url')} URL (e.g. http://127.0.0.1:8000/v1) and "
            f"{flags.flag('model')} NAME"
        )
    for base_url in cfg.base_urls:
        served = list_models(base_url, api_key_env=cfg.api_key_env or None, flags=flags, timeout_s=timeout_s)
        shown = ", ".join(served[:10]) + (f" and {len(served) - 10} more" if len(served) > 10 else "")
        if not cfg.model:
            raise PreflightError(f"{flags.flag('model')} is required; {base_url} serves: {shown or 'no model'}")
        if cfg.model not in served:
            raise PreflightError(
                f"{base_url} does not serve the model {cfg.model!r} (it serves: {shown or 'no model'}); "
                f"fix {flags.flag('model')}"
            )


def _check_scripted(cfg: LLMConfig, flags: LLMFlags) -> None:
    """Load what a scripted backend names, as the client will, with the command line's flag names."""
    if cfg.responder:
        load_responder(cfg.responder, flags.flag("responder"))
    if cfg.scripted:
        try:
            load_rules(cfg.scripted)
        except OSError as e:
            raise PreflightError(f"{flags.flag('scripted')} {cfg.scripted}: {e.strerror}") from None
        except ValueError as e:
            raise PreflightError(f"{flags.flag('scripted')} {cfg.scripted}: {e}") from None
