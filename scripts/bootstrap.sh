#!/usr/bin/env bash
# Creates ./.venv and installs astra-verl with everything its tests and main job need.
# Idempotent: a second run only checks. Used by `make demo` and `make test`.
#
#   ASTRA_VENV=path      where the virtual environment lives (default .venv)
#   ASTRA_PYTHON=python3 the interpreter to build it from
#   ASTRA_NO_APT=1       never try to install bubblewrap or chromium with apt-get
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${ASTRA_VENV:-.venv}
PY=${ASTRA_PYTHON:-python3}
STAMP="$VENV/.astra-installed"

say() { printf '[bootstrap] %s\n' "$*"; }

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
  echo "$want" > "$STAMP"
  say "installed"
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
  say "  seccomp only (see README, 'The sandbox'). Install it: apt-get install bubblewrap"
fi
