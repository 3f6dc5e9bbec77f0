"""A chat template that raises, reaches outside Jinja's sandbox or does not parse is a sentence and a
non-zero exit on the command line, as it is in the app (issue 29: tracebacks). Real model, real process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine.gguf_template import with_chat_template

EACH = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"

TEMPLATES = {
    "raises": (EACH + "{{ raise_exception('System messages are not supported by this model.') }}",
               "System messages are not supported by this model."),
    "escapes the sandbox": (EACH + "{{ messages.__class__.__mro__ }}", "sandbox"),
    "does not parse": ("{% for m in messages %}{{ m['content'] }", "cannot be read"),
    "fails as it runs": (EACH + "{{ 1 / 0 }}", "chat template"),
}


def localchat(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "localchat", *args], capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.fixture(scope="module")
def models(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("templates")
    return {name: with_chat_template(smollm2_path, folder / f"{i}.gguf", template)
            for i, (name, (template, _)) in enumerate(TEMPLATES.items())}


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_a_broken_template_is_a_sentence_and_a_non_zero_exit(models: dict[str, Path], name: str) -> None:
    r = localchat("generate", "--model", str(models[name]), "--no-spec", "--ctx", "512",
                  "--max-tokens", "4", "Hello")
    assert r.returncode == 1, r.stderr[-3000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("localchat: ") and TEMPLATES[name][1] in last, r.stderr[-3000:]


def test_a_template_that_does_not_parse_leaves_raw_prompts_working(models: dict[str, Path]) -> None:
    r = localchat("generate", "--model", str(models["does not parse"]), "--no-spec", "--ctx", "512",
                  "--max-tokens", "4", "--raw", "1, 2, 3,")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip()


def test_the_copy_keeps_the_model_working(smollm2_path: Path, tmp_path: Path) -> None:
    copy = with_chat_template(smollm2_path, tmp_path / "same.gguf", EACH + "assistant: ")
    r = localchat("generate", "--model", str(copy), "--no-spec", "--ctx", "512", "--max-tokens", "4", "Hi")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip()
