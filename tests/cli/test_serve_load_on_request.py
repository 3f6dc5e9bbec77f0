"""``localchat serve`` lists the other models of the app's folders and loads the one a request names;
``--no-load-on-request`` refuses it with a 403 that names the flag. The real command in a process of
its own, on SmolLM2 and Gemma 3 270M."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from localchat.settings import Settings, SettingsFile
from localchat.settings import folders as settings_folders

ROOT = Path(__file__).resolve().parents[2]
SMOL, GEMMA = "SmolLM2-135M-Instruct.Q4_1", "gemma-3-270m-q4_k_m"


@pytest.fixture
def env(tmp_path: Path, smollm2_path: Path, gemma3_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    own = tmp_path / "own"
    own.mkdir()
    for real in (smollm2_path, gemma3_path):
        (own / real.name).symlink_to(real)
    values = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
              "XDG_DATA_HOME": str(tmp_path / "xdg-data"), "HF_HUB_CACHE": str(tmp_path / "hf-cache")}
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        monkeypatch.setenv(name, values[name])
    SettingsFile(settings_folders.config_dir()).save(Settings({"models_folder": str(own)}))
    return values


def _serve(env: dict[str, str], *flags: str) -> Iterator[str]:
    command = [sys.executable, "-m", "localchat", "serve", "--model", SMOL, "--port", "0", "--ctx", "1024",
               *flags]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "localchat serving" in line, line
        yield line.split(" at ", 1)[1].split()[0]  # http://127.0.0.1:PORT/v1
    finally:
        process.terminate()
        process.wait(30)


def test_serve_loads_the_model_a_request_names(env: dict[str, str]) -> None:
    for url in _serve(env):
        client = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
        assert [m.id for m in client.models.list().data] == [SMOL, GEMMA]
        reply = client.chat.completions.create(model=GEMMA, messages=[{"role": "user", "content": "Hi"}],
                                               max_tokens=4)
        assert reply.model == GEMMA and reply.choices[0].message.content is not None
        assert [m.id for m in client.models.list().data] == [GEMMA, SMOL]


def test_serve_without_loads_on_request_refuses_naming_the_flag(env: dict[str, str]) -> None:
    for url in _serve(env, "--no-load-on-request"):
        client = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
        assert [m.id for m in client.models.list().data] == [SMOL, GEMMA]  # listed all the same
        with pytest.raises(openai.PermissionDeniedError, match="--no-load-on-request"):
            client.chat.completions.create(model=GEMMA, messages=[{"role": "user", "content": "Hi"}],
                                           max_tokens=4)
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="no-such-model",
                                           messages=[{"role": "user", "content": "Hi"}])
