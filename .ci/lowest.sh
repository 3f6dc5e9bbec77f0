#!/usr/bin/env bash
# CI: the hub tests against the LOWEST versions pyproject.toml allows of the pure-Python dependencies.
# A throwaway venv sees the system site-packages (llama-cpp-python, PySide6 and the test tools are
# reused, never rebuilt); the floors installed into it shadow the newer releases. Takes ~20 s.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="$(mktemp -d)/lowest"
trap 'rm -rf "$(dirname "$venv")"' EXIT
python -m venv --system-site-packages "$venv"
# Wheels only: a floor that exists only as source would be a floor no user can install quickly either.
# tests/hub/test_dependency_floors.py checks these pins against pyproject.toml.
"$venv/bin/python" -m pip install -q --disable-pip-version-check --only-binary=:all: \
  "huggingface-hub==2.0" "platformdirs==4.0" "psutil==5.9.4" "filelock==3.12" "tomlkit==0.12"
"$venv/bin/python" - <<'PY'
from importlib.metadata import version
print("lowest:", ", ".join(f"{n} {version(n)}" for n in
      ("huggingface-hub", "platformdirs", "psutil", "filelock", "tomlkit")))
PY
# platformdirs' pytest plugin is registered by the newer system copy and missing from 4.0: not loaded.
QT_QPA_PLATFORM=offscreen "$venv/bin/python" -m pytest -q -p no:platformdirs tests/hub
