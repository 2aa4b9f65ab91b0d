"""The `astra.sandbox` config section, backend detection, and the synchronous batch helpers."""

from __future__ import annotations

import logging

import pytest

from astra_foundation.sandbox import (
    ErrorKind,
    Module,
    Program,
    SandboxConfig,
    SandboxUnavailable,
    describe_isolation,
    launch,
    run_calls,
    run_programs,
)

COUNTER = "_n = [0]\ndef bump(by=1):\n    _n[0] += by\n    return _n[0]\ndef fails():\n    raise ValueError('x')\n"


def test_run_calls_runs_in_one_session_in_order():
    prog = Program((Module("m", COUNTER),))
    out = run_calls(prog, [("m", "bump", {}), ("m", "bump", {"by": 2}), ("m", "fails", {})], SandboxConfig(workers=1))
    assert [r.output for r in out[:2]] == ["1", "3"] and out[2].error_kind is ErrorKind.EXCEPTION


def test_run_programs_keeps_order_and_reports_progress():
    prog = Program((Module("m", COUNTER),))
    seen = []
    results = run_programs(
        [(prog, [("m", "bump", {"by": i})]) for i in range(12)],
        SandboxConfig(workers=2),
        progress=lambda done, total: seen.append((done, total)),
    )
    assert [r[0].output for r in results] == [str(i) for i in range(12)]  # every job had a fresh session
    assert seen[-1] == (12, 12) and len(seen) == 12


def test_config_from_dict():
    cfg = SandboxConfig.from_dict({"workers": 3, "call_timeout_s": 2, "backend": "process"})
    assert cfg.workers == 3 and cfg.call_timeout_s == 2.0 and isinstance(cfg.call_timeout_s, float)
    assert SandboxConfig.from_dict(None) == SandboxConfig()
    with pytest.raises(ValueError, match=r"astra.sandbox: unknown keys \['timeout'\]; known keys: .*call_timeout_s"):
        SandboxConfig.from_dict({"timeout": 3})
    with pytest.raises(ValueError, match="backend must be one of"):
        SandboxConfig.from_dict({"backend": "docker"})
    with pytest.raises(TypeError, match="memory_mb must be int"):
        SandboxConfig.from_dict({"memory_mb": "512"})
    with pytest.raises(ValueError, match="workers must be > 0"):
        SandboxConfig.from_dict({"workers": 0})


def test_config_from_omegaconf():
    from omegaconf import OmegaConf

    node = OmegaConf.create({"astra": {"sandbox": {"workers": 1, "memory_mb": 256}}})
    assert SandboxConfig.from_dict(node.astra.sandbox) == SandboxConfig(workers=1, memory_mb=256)


@pytest.fixture
def no_cached_probe():
    launch.bwrap_probe.cache_clear()
    yield
    launch.bwrap_probe.cache_clear()


@pytest.mark.parametrize(
    "binary, why", [(None, "bwrap not found on PATH"), ("/bin/false", "cannot create the sandbox here")]
)
def test_auto_falls_back_to_process_and_says_so(monkeypatch, caplog, no_cached_probe, binary, why):
    monkeypatch.setattr(launch, "_bwrap_binary", lambda: binary)
    with caplog.at_level(logging.WARNING, "astra_foundation.sandbox"):
        assert launch.resolve_backend("auto") == "process"
    assert "bubblewrap unavailable" in caplog.text and why in caplog.text and "weaker 'process' backend" in caplog.text
    with pytest.raises(SandboxUnavailable, match=why):
        launch.resolve_backend("bwrap")
    text = describe_isolation(SandboxConfig())
    assert text.startswith("backend process (no namespaces: ") and why in text and "seccomp" in text


def test_describe_isolation_names_the_layers():
    text = describe_isolation(SandboxConfig(backend="process", memory_mb=300))
    assert "backend process" in text and "AS=300 MiB" in text and "seccomp" in text
    assert ("Landlock ABI" in text) == (launch.confine.landlock_abi() > 0)
    assert "Landlock disabled by config" in describe_isolation(SandboxConfig(backend="process", landlock=False))
