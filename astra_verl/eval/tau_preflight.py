"""What `eval tau` checks before its first episode: both endpoints, and that the domain fits.

An episode that cannot run would otherwise be found minutes into the run: a user simulator that
is down fails at the task's first user turn (after the agent's server and the sandbox started),
and a prompt over the context fails at the first request (vLLM's HTTP 400) or as the loop's
`PromptTooLong`. So, before any episode:

1. the policy's endpoint (`--base-url/--model`) and the user simulator's
   (`--user-base-url/--user-model`) are reachable and serve the model
   (`astra_foundation.llm.preflight`: one `GET /models` each);
2. the domain's prompt (the policy document and the tool schemas, rendered by the policy's chat
   template: what every episode starts with, before the user's first message) fits both the
   rollout's prompt budget (`actor_rollout_ref.rollout.prompt_length`) and the model's context
   (the `max_model_len` vLLM reports for it; a local checkpoint's `max_position_embeddings`);
3. the rollout's prompt + response budget fits that context: the agent loop asks for
   min(response_length, prompt_length + response_length - prompt) tokens per turn, so within
   it no request of a growing conversation can overflow the server mid-run.
"""

from __future__ import annotations

from typing import Any

from astra_foundation.llm import LLMConfig, LLMFlags, PreflightError, preflight, split_urls
from astra_foundation.llm.preflight import PREFLIGHT_TIMEOUT_S, model_entries
from env_registry.families import tau


def prompt_tokens(tokenizer: Any, domain: str) -> int:
    """Tokens of the domain's system prompt with its tool schemas and the generation prompt."""
    tools = [spec.openai_schema() for spec in tau.tool_specs(domain) if spec.name != tau.STATE_TOOL]
    messages = [{"role": "system", "content": tau.policy(domain)}]
    text = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def served_context(base_url: str, model: str, api_key_env: str | None) -> int | None:
    """The context length `base_url` reports for `model` (vLLM's `max_model_len`), None if it says none."""
    for entry in model_entries(base_url, api_key_env=api_key_env, flags=LLMFlags(""), timeout_s=PREFLIGHT_TIMEOUT_S):
        if entry.get("id") == model and isinstance(entry.get("max_model_len"), int):
            return int(entry["max_model_len"])
    return None


def check_fit(
    domain: str, prompt: int, prompt_length: int, response_length: int, context: int | None, where: str
) -> None:
    """PreflightError (one line: the sizes and what to do) unless the domain fits; see the module docstring."""
    if context is not None and prompt >= context:
        raise PreflightError(
            f"τ-bench {domain} does not fit {where}: its prompt (policy + tool schemas) is {prompt} tokens, the "
            f"context is {context}; use a model with a longer context (or serve it with a larger --max-model-len)"
        )
    if prompt > prompt_length:
        raise PreflightError(
            f"τ-bench {domain}: its prompt (policy + tool schemas) is {prompt} tokens, over the rollout's "
            f"prompt_length {prompt_length}; pass --set data.max_prompt_length=N with N >= {prompt} plus "
            "the user's first message"
            + (f" (and N + data.max_response_length <= {context}, the context of {where})" if context else "")
        )
    if context is not None and prompt_length + response_length > context:
        raise PreflightError(
            f"τ-bench {domain}: prompt_length {prompt_length} + response_length {response_length} = "
            f"{prompt_length + response_length} tokens, over the context of {where} ({context}); a long episode would "
            f"fail mid-run: pass --set data.max_prompt_length=P --set data.max_response_length=R with "
            f"{prompt} < P and P + R <= {context}"
        )


def check_endpoints(cfg: Any) -> int | None:
    """Preflight the policy's endpoint (if any) and the LLM user's; the policy's served context, if known."""
    context = None
    if cfg.base_url:
        urls = split_urls(cfg.base_url)
        preflight(LLMConfig(base_urls=urls, model=cfg.model, api_key_env=cfg.api_key_env), flags=LLMFlags(""))
        sizes = [served_context(u, cfg.model, cfg.api_key_env) for u in urls]
        known = [s for s in sizes if s is not None]
        context = min(known) if known else None
    if cfg.user == "llm":
        # the hook's client reads the key from LLMConfig's default variable (tau_hook.LLMUser, through llm_user.RoleSwappedChat)
        preflight(LLMConfig(base_urls=[cfg.user_base_url], model=cfg.user_model), flags=LLMFlags("user"))
    return context


def check(cfg: Any, config: Any, tokenizer: Any, model_config: Any) -> int:
    """Every check of the module docstring, for `TauEvalConfig` `cfg` under the composed `config`;
    the domain's prompt tokens."""
    served = check_endpoints(cfg)
    rollout = config.actor_rollout_ref.rollout
    if cfg.base_url:
        context, where = served, f"the model {cfg.model!r} at {cfg.base_url}"
    else:
        context, where = getattr(model_config, "max_position_embeddings", None), f"the checkpoint {cfg.model_path}"
    prompt = prompt_tokens(tokenizer, cfg.domain)
    check_fit(cfg.domain, prompt, int(rollout.prompt_length), int(rollout.response_length), context, where)
    return prompt
