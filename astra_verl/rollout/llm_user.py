"""Where the LLM user used to live: it moved down to `env_registry.llm_user`, under both the verl
plugin and the synthesis pipelines (which may not import each other; `data_synth traj` words its
missing-value user with it too). Kept so that older imports still resolve; import from there."""

from env_registry.llm_user import MISSING_VALUE_USER_PROMPT, RoleSwappedChat, endpoints, missing_value_prompt

__all__ = ["MISSING_VALUE_USER_PROMPT", "RoleSwappedChat", "endpoints", "missing_value_prompt"]
