"""What the τ-bench tests share: tau_bench is required under CI and skipped without elsewhere."""

from __future__ import annotations

import importlib.util
import os

import pytest
from testkit import in_ci

# As scripts/bootstrap.sh installs it: τ-bench's own dependencies serve its agents only (--no-deps).
INSTALL = (
    'pip install -e ".[tau]" && '
    'pip install --no-deps "tau_bench @ git+https://github.com/sierra-research/tau-bench@59a200c"'
)


def require_tau_bench() -> None:
    """Fail (under CI) or skip (elsewhere) when tau_bench is not installed, saying how to install it."""
    if importlib.util.find_spec("tau_bench") is None or importlib.util.find_spec("litellm") is None:
        if in_ci():
            pytest.fail(f"tau_bench (with litellm) is not installed; CI runs the τ-bench tests: {INSTALL}")
        pytest.skip(f"tau_bench (with litellm) is not installed: {INSTALL}")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
