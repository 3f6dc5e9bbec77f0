"""The command line names a catalog model as the window does (catalog.names.model_name), never by the
GGUF's general.name: the starter's drafter calls itself "Qwen2.5 Coder 0.5B Instruct AWQ" (issue 29)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CATALOG_NAME = "Qwen2.5-Coder 0.5B Instruct · Q4_K_M"
FILE_NAME = "Qwen2.5 Coder 0.5B Instruct AWQ"

pytestmark = pytest.mark.slow


def localchat(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "localchat", *args], capture_output=True, text=True,
                          timeout=600, check=False)


def test_generate_names_the_drafter_from_the_catalog(qwen_draft_path: Path) -> None:
    d = str(qwen_draft_path)  # the drafter drafting for itself: the smallest pair with a catalog name
    r = localchat("generate", "--model", d, "--draft", d, "--max-tokens", "6", "--ctx", "512", "Hi")
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"[{CATALOG_NAME}]" in r.stderr and FILE_NAME not in r.stderr, r.stderr[-3000:]


def test_bench_names_the_pair_from_the_catalog(qwen_draft_path: Path, tmp_path: Path) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "a", "category": "chat", "prompt": "Say hi."}\n')
    d = str(qwen_draft_path)
    r = localchat("bench", "--model", d, "--draft", d, "--prompts", str(prompts), "--modes", "draft",
                  "--max-tokens", "6", "--ctx", "512")
    assert r.returncode == 0, r.stderr[-3000:]
    head = r.stdout.splitlines()[0]
    assert head.startswith(f"target {CATALOG_NAME} on ") and f"drafter: {CATALOG_NAME}" in head, head
    assert FILE_NAME not in r.stdout


def test_selftest_names_the_pair_from_the_catalog(qwen_draft_path: Path) -> None:
    d = str(qwen_draft_path)
    r = localchat("selftest", "--model", d, "--draft", d, "--no-window", "--tokens", "6", "--ctx", "512")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # The load-time measurement may find the model drafting for itself too dear on this machine and
    # draft from n-grams instead: either way the drafter is named from the catalog.
    assert f"target {CATALOG_NAME}, drafter {CATALOG_NAME}; speculation: " in r.stdout, r.stdout
    line = next(x for x in r.stdout.splitlines() if x.startswith("selftest: loaded: "))
    drafting = line.split("; speculation: ", 1)[1]
    assert drafting.startswith((CATALOG_NAME, "n-gram")), line
    assert FILE_NAME not in r.stdout
