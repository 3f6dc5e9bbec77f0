"""The README's one-line client setups, against a real server (SmolLM2-135M, no API key, as the app's
default). The Ollama client line runs as it is written (port and model swapped for the test server's).
Claude Code, Codex CLI, Continue, Zed and Open WebUI cannot run here: their lines are read as each
program reads them (environment, ``-c`` TOML, YAML, JSON, ``docker -e``), and the requests that program
makes are sent with what they say, through the official client of the API it speaks."""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import anthropic
import ollama
import openai
import pytest
import yaml

from tests.server.served import Served, serve

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[2] / "README.md"
PORT, MODEL = "11435", "qwen2.5-coder-1.5b-instruct"


@pytest.fixture(scope="module")
def served(smollm2_f16_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    # SmolLM2 under the starter's file name, and no model id given: the server names it by its own rule
    # (catalog.names.served_id), so the README's id is the one a real server answers to (a forced id
    # let the lines pass here while both servers answered them 404).
    starter = tmp_path_factory.mktemp("models") / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    starter.symlink_to(smollm2_f16_path)
    with serve(starter, ctx=1024, api_key=None, model_id="") as s:
        yield s


def snippet(name: str, served: Served) -> str:
    """The README's block for client ``name`` (its info string: "sh claude-code"), on the test server."""
    found = re.findall(rf"```\w+ {re.escape(name)}\n(.*?)\n\s*```", README.read_text(encoding="utf-8"), re.S)
    assert len(found) == 1, f"the README has no single block for {name}"
    line = found[0].strip()
    assert "\n" not in line, f"{name}: one line"
    port = served.url.rsplit(":", 1)[1]
    assert f"127.0.0.1:{PORT}" in line
    return line.replace(f"127.0.0.1:{PORT}", f"127.0.0.1:{port}")


def environment(words: list[str]) -> dict[str, str]:
    return dict(w.split("=", 1) for w in words if re.match(r"^[A-Z_]+=", w))


def test_claude_code(served: Served) -> None:
    words = shlex.split(snippet("claude-code", served))
    env = environment(words)
    assert words[len(env)] == "claude"
    # What Claude Code does with them: the key as a bearer token, the two models, count_tokens and a stream.
    client = anthropic.Anthropic(
        base_url=env["ANTHROPIC_BASE_URL"],
        auth_token=env["ANTHROPIC_AUTH_TOKEN"],
        api_key=None,
        max_retries=0,
    )
    for model in (env["ANTHROPIC_MODEL"], env["ANTHROPIC_DEFAULT_HAIKU_MODEL"]):
        msgs: list[anthropic.types.MessageParam] = [{"role": "user", "content": "Hello"}]
        assert client.messages.count_tokens(model=model, messages=msgs).input_tokens > 0
        with client.messages.stream(model=model, max_tokens=8, messages=msgs) as stream:
            assert "".join(stream.text_stream)


def test_codex_cli(served: Served) -> None:
    words = shlex.split(snippet("codex", served))
    assert words[0] == "codex"
    config: dict[str, object] = {}
    for flag, value in itertools.pairwise(words):
        if flag == "-c":
            key, _, toml_value = value.partition("=")
            config[key] = tomllib.loads(f"v = {toml_value}")["v"] if toml_value[:1] in '{["' else toml_value
    model = words[words.index("-m") + 1]
    provider = config[f"model_providers.{config['model_provider']}"]
    assert isinstance(provider, dict) and provider["wire_api"] == "responses"
    client = openai.OpenAI(base_url=provider["base_url"], api_key="unused", max_retries=0)
    events = list(client.responses.create(model=model, input="Hello", max_output_tokens=8, stream=True))
    assert events[-1].type in ("response.completed", "response.incomplete")


def test_continue(served: Served) -> None:
    config = yaml.safe_load(snippet("continue", served))
    entry = config["models"][0]
    assert entry["provider"] == "ollama"
    client = ollama.Client(host=entry["apiBase"])
    assert client.show(entry["model"]).modelinfo  # Continue reads the context length there
    assert client.chat(
        model=entry["model"],
        messages=[{"role": "user", "content": "Hello"}],
        options={"num_predict": 8},
        stream=False,
    ).message.content


def test_zed(served: Served) -> None:
    url = json.loads(snippet("zed", served))["language_models"]["ollama"]["api_url"]
    client = ollama.Client(host=url)
    names = [m.model for m in client.list().models]  # Zed lists the models, then shows and chats
    assert names == [f"{MODEL}:latest"]
    assert "tools" in (client.show(names[0]).capabilities or [])
    stream = client.chat(
        model=names[0],
        messages=[{"role": "user", "content": "Hello"}],
        options={"num_predict": 8},
        stream=True,
    )
    assert "".join(part.message.content or "" for part in stream)


def test_open_webui(served: Served) -> None:
    words = shlex.split(snippet("open-webui", served))
    assert words[:3] == ["docker", "run", "-d"]
    env = dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "-e")
    client = ollama.Client(host=env["OLLAMA_BASE_URL"])
    assert [m.model for m in client.list().models] == [f"{MODEL}:latest"]
    assert client.chat(
        model=f"{MODEL}:latest",
        messages=[{"role": "user", "content": "Hello"}],
        options={"num_predict": 8},
        stream=False,
    ).message.content


def test_an_ollama_client_runs_as_written(served: Served) -> None:
    line = snippet("ollama", served)
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    done = subprocess.run(
        ["bash", "-c", line], capture_output=True, text=True, timeout=300, env={**os.environ, "PATH": path}
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip()
