"""Settings → Tools: the servers of mcp.json listed and switched on or off, their tools shown once they
run, one added in the form with its environment masked, servers imported from LM Studio, "always" taken
back, and the list saved on OK only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLineEdit

from localchat.settings import OPTIONS
from localchat.toolservers.config import ServerConfig
from localchat.ui.settings_dialog import SettingsDialog
from localchat.ui.tools_page import ServerEditDialog
from tests.ui.tools_app import WAIT_MS, server, tools_app


def _dialog(qtbot, parts) -> SettingsDialog:
    values = {o.name: parts.settings.get(o.name) for o in OPTIONS}
    dialog = SettingsDialog(OPTIONS, values, parts.window, tools=parts.tools,
                            tools_note="A note about the model.")
    qtbot.addWidget(dialog)
    return dialog


def _rows(page) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    rows = {}
    for i in range(page.tree.topLevelItemCount()):
        item = page.tree.topLevelItem(i)
        children = [(item.child(j).text(0), item.child(j).text(1)) for j in range(item.childCount())]
        rows[item.text(0)] = (item.text(1), children)
    return rows


def _file(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "config" / "mcp.json").read_text())["mcpServers"]


def test_servers_are_listed_their_tools_shown_and_switches_saved_on_ok(qtbot, tmp_path: Path) -> None:
    servers = {"calc": server("calc", autoApprove=["add"]), "faulty": server("faulty"),
               "broken": {"args": ["x"]}}
    with tools_app(qtbot, tmp_path, servers, load=False) as parts:
        dialog = _dialog(qtbot, parts)
        page = dialog.tools_page
        assert page is not None
        tabs = [dialog.tabs.tabText(i) for i in range(dialog.tabs.count())]
        dialog.tabs.setCurrentIndex(tabs.index("Tools"))
        assert page.isVisibleTo(dialog.tabs.currentWidget())
        assert page.note.text() == "A note about the model."
        rows = _rows(page)
        # the state first: the command line is cut at the column's edge, the state must not be
        assert rows["calc"][0].startswith("not started · ")
        assert rows["calc"][0].endswith("mcp_servers.py calc")
        assert rows["calc"][1] == [("add", "runs without asking")]
        assert rows["broken"][0].startswith("cannot start")
        assert "needs a \"command\"" in rows["broken"][1][0][1]
        qtbot.mouseClick(page.show_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: "running" in _rows(page)["faulty"][0], timeout=WAIT_MS)
        qtbot.waitUntil(lambda: "running" in _rows(page)["calc"][0], timeout=WAIT_MS)
        calc = _rows(page)["calc"]
        assert calc[0].startswith("running, 2 tools · ")
        starting = "Starting the switched-on tool servers…"
        qtbot.waitUntil(lambda: page.status.text() != starting, timeout=WAIT_MS)
        assert page.status.text() == "Running: calc (2 tools), faulty (5 tools)."
        # asked again with every server up: answered at once, not left saying "Starting…"
        qtbot.mouseClick(page.show_button, Qt.MouseButton.LeftButton)
        assert page.status.text() == "Running: calc (2 tools), faulty (5 tools)."
        assert calc[1] == [("add", "Add two numbers and return the sum. · runs without asking"),
                           ("multiply", "Multiply two numbers and return the product.")]
        faulty = _rows(page)["faulty"][1]
        assert faulty[0][1].startswith("The tool 'broken' of the tool server 'faulty' was left out")

        # take back "always" for add, switch faulty off: nothing is written until OK
        item = page.tree.topLevelItem(0).child(0)
        page.tree.setCurrentItem(item)
        assert page.ask_button.isEnabled()
        qtbot.mouseClick(page.ask_button, Qt.MouseButton.LeftButton)
        page.tree.topLevelItem(1).setCheckState(0, Qt.CheckState.Unchecked)
        assert "autoApprove" in _file(tmp_path)["calc"] and "disabled" not in _file(tmp_path)["faulty"]
        dialog.accept()
        assert "autoApprove" not in _file(tmp_path)["calc"]
        assert _file(tmp_path)["faulty"]["disabled"] is True
        assert _file(tmp_path)["broken"] == {"args": ["x"]}  # kept as the user wrote it


def test_a_server_is_added_in_the_form_with_its_environment_masked(qtbot, tmp_path: Path) -> None:
    with tools_app(qtbot, tmp_path, {}, load=False) as parts:
        form = ServerEditDialog(None, ["calc"])
        qtbot.addWidget(form)
        form.name.setText("calc")
        assert form.server() == "Another server is called 'calc'."
        form.name.setText("notes")
        form.command.setText("uvx")
        form.args.setText("mcp-notes --dir '/home/me/my notes'")
        form.env.add_row("NOTES_TOKEN", "s3cret")
        (_, value), = form.env.rows
        assert value.echoMode() == QLineEdit.EchoMode.Password
        form.env.show_box.setChecked(True)
        assert value.echoMode() == QLineEdit.EchoMode.Normal
        # a variable is removed with its ✕, and the next one added takes a row of its own
        form.env.add_row("OLD", "gone")
        old_name = form.env.rows[1][0]
        remove = form.env.grid.itemAtPosition(1, 2).widget()
        qtbot.mouseClick(remove, Qt.MouseButton.LeftButton)
        assert old_name not in [n for n, _ in form.env.rows]
        form.env.add_row("", "")  # a row left without a name is not kept
        assert form.env.grid.itemAtPosition(2, 0).widget() is form.env.rows[-1][0]
        made = form.server()
        assert isinstance(made, ServerConfig)
        assert (made.command, made.args, dict(made.env)) == (
            "uvx", ("mcp-notes", "--dir", "/home/me/my notes"), {"NOTES_TOKEN": "s3cret"})
        form.http.setChecked(True)
        form.name.setText("web")
        form.url.setText("ftp://x")
        assert form.server() == "The address must start with http:// or https://."
        form.url.setText("http://127.0.0.1:8000/mcp")
        form.headers.add_row("Authorization", "Bearer t")
        web = form.server()
        assert isinstance(web, ServerConfig) and web.kind == "http" and dict(web.headers) == {
            "Authorization": "Bearer t"}

        dialog = _dialog(qtbot, parts)
        page = dialog.tools_page
        assert page is not None
        page.add_server(made)
        page.add_server(web)
        dialog.accept()
        assert _file(tmp_path) == {
            "notes": {"command": "uvx", "args": ["mcp-notes", "--dir", "/home/me/my notes"],
                      "env": {"NOTES_TOKEN": "s3cret"}},
            "web": {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer t"}},
        }


def test_import_from_lm_studio(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / ".lmstudio").mkdir(parents=True)
    (home / ".lmstudio" / "mcp.json").write_text(json.dumps({"mcpServers": {
        "hf": {"url": "https://huggingface.co/mcp", "headers": {"Authorization": "Bearer hf_x"}}}}))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("USERPROFILE", str(home))
    with tools_app(qtbot, tmp_path, {"calc": server("calc")}, load=False) as parts:
        dialog = _dialog(qtbot, parts)
        page = dialog.tools_page
        assert page is not None
        qtbot.mouseClick(page.import_buttons["LM Studio"], Qt.MouseButton.LeftButton)
        assert page.status.text().startswith("Added 1 tool server from LM Studio: hf.")
        assert list(_rows(page)) == ["calc", "hf"]
        qtbot.mouseClick(page.import_buttons["Claude Desktop"], Qt.MouseButton.LeftButton)
        assert page.status.text().startswith("No Claude Desktop tool servers were found")
        dialog.reject()
        assert list(_file(tmp_path)) == ["calc"]  # Cancel keeps the file as it was


def test_an_edit_by_hand_is_read_before_the_next_message(qtbot, tmp_path: Path) -> None:
    with tools_app(qtbot, tmp_path, {"calc": server("calc")}) as parts:
        servers = {"calc": server("calc", disabled=True)}
        (tmp_path / "config" / "mcp.json").write_text(json.dumps({"mcpServers": servers}) + "\n\n")
        parts.window.send_message("Hello")
        assert parts.engine.requests[-1].tools == ()  # type: ignore[attr-defined]
