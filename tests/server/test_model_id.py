"""The app's server names the loaded file as `localchat serve` does (catalog.names.served_id), and the
README's client lines use that name."""

from __future__ import annotations

import re
from pathlib import Path

from localchat.catalog.names import shipped_served_id
from tests.server.served import serve

README = Path(__file__).resolve().parents[2] / "README.md"
STARTER = Path("/models/Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")


def test_the_apps_server_lists_the_starter_under_its_catalog_id() -> None:
    # model_id "" is the app's server: it follows the model loaded in the window.
    with serve(STARTER, start=False, model_id="", api_key=None) as served, served.http() as http:
        models = http.get("/v1/models").json()["data"]
        assert [m["id"] for m in models] == ["qwen2.5-coder-1.5b-instruct"]


def test_a_file_the_catalog_does_not_list_is_its_name_without_gguf() -> None:
    mine = Path("/models/My-Model.Q5_K_M.gguf")
    with serve(mine, start=False, model_id="", api_key=None) as served, served.http() as http:
        assert [m["id"] for m in http.get("/v1/models").json()["data"]] == ["My-Model.Q5_K_M"]


def test_the_readme_names_the_starter_by_the_id_the_servers_give_it() -> None:
    text = README.read_text(encoding="utf-8")
    starter_id = shipped_served_id(str(STARTER))
    assert f"localchat serve --model {starter_id} " in text
    # Every model a client line names is that id (Ollama's clients may add ":latest").
    named = re.findall(r"(?:ANTHROPIC_MODEL|ANTHROPIC_DEFAULT_HAIKU_MODEL)=(\S+)"
                       r"|wire_api=\"responses\"\}' -m (\S+)|provider: ollama, model: ([\w.-]+)"
                       r"|ollama\.chat\(model='([^']+)'|Model ID `([^`]+)`"
                       r"|--model openai/(\S+?)`", text)
    ids = [next(g for g in groups if g) for groups in named]
    assert len(ids) == 7 and set(ids) == {starter_id}, ids
