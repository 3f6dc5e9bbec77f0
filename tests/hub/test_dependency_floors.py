"""The declared dependency floors match what the code imports.

huggingface-hub 1.x accepted by a ``>=1.0`` floor lacked the HTTP client 2.x bundles, so every download
error became "No module named httpx2". The hub layer now reaches that client only through what
huggingface-hub exports, and .ci/lowest.sh runs tests/hub against the lowest allowed versions.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HTTP_CLIENTS = {"httpx", "httpx2", "requests", "urllib3", "aiohttp"}


def _imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_no_module_imports_huggingface_hubs_http_client_directly() -> None:
    offenders = {
        str(p.relative_to(ROOT)): sorted(_imported_roots(p) & HTTP_CLIENTS)
        for p in (ROOT / "localchat").rglob("*.py")
        if _imported_roots(p) & HTTP_CLIENTS
    }
    assert offenders == {}


# tests/packaging shadows the `packaging` distribution here, so requirements are read with a pattern.
_REQ = re.compile(r"^([A-Za-z0-9._-]+)\s*(?:\[[^]]*\])?\s*(?:>=|==)\s*([0-9][0-9.]*)")


def _floors() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    floors: dict[str, str] = {}
    for line in project["dependencies"]:
        m = _REQ.match(line)
        if m:
            floors[m.group(1).lower()] = m.group(2)
    return floors


def test_huggingface_hub_floor_is_the_2x_line() -> None:
    assert int(_floors()["huggingface-hub"].split(".")[0]) >= 2


def test_the_lowest_versions_step_installs_every_floor() -> None:
    """.ci/lowest.sh pins exactly the floors pyproject declares, so the two cannot drift apart."""
    script = (ROOT / ".ci" / "lowest.sh").read_text(encoding="utf-8")
    floors = _floors()
    for name in ("huggingface-hub", "platformdirs", "psutil", "filelock", "tomlkit"):
        assert f"{name}=={floors[name]}" in script, name
