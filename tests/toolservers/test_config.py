"""mcp.json: read in the common format, kept as written, a malformed file set aside; other apps' files
imported."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from localchat.toolservers import imports
from localchat.toolservers.config import (
    HTTP,
    STDIO,
    ServerConfig,
    ToolsConfig,
    ToolsFile,
    merge,
    parse_document,
)

DOCUMENT = {
    "mcpServers": {
        "files": {"command": "uvx", "args": ["mcp-server-files", "~/notes", 3], "env": {"TOKEN": "s3cret"},
                  "icon": "📁"},
        "hub": {"url": "https://huggingface.co/mcp", "headers": {"Authorization": "Bearer hf_x"},
                "disabled": True, "autoApprove": ["search"]},
        "old": {"type": "sse", "url": "http://127.0.0.1:8000/sse"},
        "nothing": {"args": []},
        "wrong": {"command": "x", "env": {"A": ["list"]}},
    },
    "globalShortcut": "Ctrl+M",
}


def test_servers_are_read_with_their_switches_and_problems() -> None:
    config = parse_document(DOCUMENT)
    files, hub, old, nothing, wrong = config.servers
    assert (files.kind, files.command, files.args, dict(files.env)) == (
        STDIO, "uvx", ("mcp-server-files", "~/notes", "3"), {"TOKEN": "s3cret"})
    assert files.enabled and not files.problem and files.where == "uvx mcp-server-files ~/notes 3"
    assert (hub.kind, hub.url, hub.enabled, hub.always_allowed) == (HTTP, "https://huggingface.co/mcp", False,
                                                                     ("search",))
    assert "SSE" in old.problem and "/mcp" in old.problem
    assert "needs a \"command\"" in nothing.problem
    assert "environment value must be text (A)" in wrong.problem
    assert [s.name for s in config.enabled] == ["files"]


def test_a_saved_file_keeps_what_other_apps_wrote(tmp_path: Path) -> None:
    file = ToolsFile(tmp_path / "mcp.json")
    config = parse_document(DOCUMENT)
    files = config.servers[0].allowing("read").allowing("list")
    file.save(config.with_server(files).with_server(ServerConfig("calc", "python", ("calc.py",))))
    written = json.loads((tmp_path / "mcp.json").read_text())
    assert written["globalShortcut"] == "Ctrl+M"
    assert written["mcpServers"]["files"]["icon"] == "📁"
    assert written["mcpServers"]["files"]["autoApprove"] == ["read", "list"]
    assert written["mcpServers"]["hub"]["disabled"] is True
    assert written["mcpServers"]["old"]["type"] == "sse"
    assert list(written["mcpServers"]) == ["files", "hub", "old", "nothing", "wrong", "calc"]
    if os.name == "posix":
        assert (tmp_path / "mcp.json").stat().st_mode & 0o077 == 0  # it may hold access tokens
    again = file.load()
    assert again.messages == () and again.config.server("files") == files
    assert not file.changed_on_disk()
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {}}) + "\n\n")
    assert file.changed_on_disk()


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"mcpServers": []}', "\xff\xfe".encode("latin-1")])
def test_a_malformed_file_is_set_aside_and_the_app_starts_without_servers(
    tmp_path: Path, text: str | bytes
) -> None:
    path = tmp_path / "mcp.json"
    (tmp_path / "mcp.json.bad").write_text("an earlier bad file")
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    result = ToolsFile(path).load()
    assert result.config == ToolsConfig()
    assert len(result.messages) == 1 and "mcp.json.bad-2" in result.messages[0]
    assert "started without tool servers" in result.messages[0]
    assert not path.exists() and (tmp_path / "mcp.json.bad-2").exists()
    assert (tmp_path / "mcp.json.bad").read_text() == "an earlier bad file"


def test_no_file_is_no_servers_without_a_message(tmp_path: Path) -> None:
    assert ToolsFile(tmp_path / "mcp.json").load().messages == ()


def test_import_adds_new_servers_and_keeps_clashing_names_apart(tmp_path: Path) -> None:
    home = tmp_path / "home"
    lm = home / ".lmstudio" / "mcp.json"
    lm.parent.mkdir(parents=True)
    lm.write_text(json.dumps({"mcpServers": {
        "calc": {"command": "python", "args": ["calc.py"]},
        "files": {"command": "other"},
        "web": {"url": "http://127.0.0.1:9000/mcp"},
    }}))
    ours = ToolsConfig((ServerConfig("calc", "python", ("calc.py",)), ServerConfig("files", "uvx")))
    source = imports.find(imports.LM_STUDIO, home=home)
    assert source.path == lm
    merged, sentence = imports.import_into(ours, source)
    assert [s.name for s in merged.servers] == ["calc", "files", "files (LM Studio)", "web"]
    assert merged.server("files (LM Studio)").command == "other"  # type: ignore[union-attr]
    assert "Added 2 tool servers from LM Studio: files (LM Studio), web." in sentence
    assert "1 was already listed" in sentence and str(lm) in sentence
    # importing again adds nothing
    assert imports.import_into(merged, source)[1].startswith("Added 0 tool servers")


def test_import_says_where_it_looked_when_the_app_is_not_there(tmp_path: Path) -> None:
    source = imports.find(imports.CLAUDE_DESKTOP, home=tmp_path, env={}, platform="linux")
    config, sentence = imports.import_into(ToolsConfig(), source)
    assert config == ToolsConfig()
    assert sentence.startswith("No Claude Desktop tool servers were found")
    assert str(tmp_path / ".config" / "Claude" / "claude_desktop_config.json") in sentence


def test_claude_desktops_file_is_where_each_platform_keeps_it(tmp_path: Path) -> None:
    name = "claude_desktop_config.json"
    assert imports.candidates(imports.CLAUDE_DESKTOP, tmp_path, {}, "darwin") == (
        tmp_path / "Library" / "Application Support" / "Claude" / name,)
    assert imports.candidates(imports.CLAUDE_DESKTOP, tmp_path, {"APPDATA": "C:/Users/a/AppData/Roaming"},
                              "win32") == (Path("C:/Users/a/AppData/Roaming") / "Claude" / name,)


def test_an_unreadable_import_is_a_sentence(tmp_path: Path) -> None:
    bad = tmp_path / ".lmstudio" / "mcp.json"
    bad.parent.mkdir()
    bad.write_text("{oops")
    _, sentence = imports.import_into(ToolsConfig(), imports.find(imports.LM_STUDIO, home=tmp_path))
    assert "could not be read: it is not valid JSON" in sentence


def test_merge_of_nothing_says_so() -> None:
    assert merge(ToolsConfig(), (), "LM Studio")[1] == "LM Studio lists no tool servers."
