"""Tools in the chat, on the real app with a fake engine (each model reply scripted) and real MCP servers
written with the SDK (tests/toolservers/mcp_servers.py): the tools go with the message, a call is
confirmed, run and its result goes back, the rounds are kept in the history and the export, and every
fault is a sentence in the chat while the app stays responsive."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from PySide6.QtCore import Qt

from localchat.app import build_main_window
from tests.toolservers.conftest import HttpServer
from tests.ui.fakes import FakeEngine
from tests.ui.tools_app import WAIT_MS, fake, request, server, tools_app, write_mcp


def _ask(qtbot, parts):
    """The confirmation dialog once it is open."""
    tools = parts.window.tools
    qtbot.waitUntil(lambda: tools.dialog is not None and tools.dialog.isVisible(), timeout=WAIT_MS)
    return tools.dialog


def _reply(parts):
    cid = parts.window.session.current_id
    return parts.store.messages(cid)[-1]


def test_a_call_is_confirmed_run_and_its_result_goes_back(qtbot, tmp_path: Path) -> None:
    with tools_app(qtbot, tmp_path, {"calc": server("calc")}) as parts:
        w, engine = parts.window, fake(parts)
        assert w.tools.button.isEnabled() and w.tools.button.isChecked()
        w.send_message("What is 6 times 7?")
        assert w.status.tool_label.text() == "Starting tool servers…"
        first = request(qtbot, parts, 1)
        assert [t.name for t in first.tools] == ["add", "multiply"]
        assert first.tools[1].description == "Multiply two numbers and return the product."
        assert first.separate_reasoning
        engine.call_tools(("multiply", '{"a": 6, "b": 7}'), text="Let me multiply.")
        dialog = _ask(qtbot, parts)
        assert dialog.always_button.text() == "Always run multiply"
        assert json.loads(dialog.arguments.toPlainText()) == {"a": 6, "b": 7}
        assert w.status.tool_label.text() == "Waiting for your answer: run multiply (calc)?"
        assert "Tool call: multiply" in w.chat_view.toPlainText() and "waiting for your answer" in (
            w.chat_view.toPlainText())
        qtbot.mouseClick(dialog.once_button, Qt.MouseButton.LeftButton)
        second = request(qtbot, parts, 2)
        assistant, result = second.messages[-2:]
        assert assistant.role == "assistant" and assistant.content == "Let me multiply."
        assert [(c.name, c.arguments) for c in assistant.tool_calls] == [("multiply", '{"a": 6, "b": 7}')]
        assert (result.role, result.content, result.name) == ("tool", "42", "multiply")
        assert result.tool_call_id == assistant.tool_calls[0].id
        assert w.status.tool_label.text() == "Round 2: the model reads the tools' results"
        assert w.status.last_reply_label.text().startswith("Round 1: ")
        engine.stream("6 × 7 = 42.")
        engine.finish()
        assert not w.session.generating and not w.status.tool_label.isVisible()

        reply = _reply(parts)
        assert reply.content == "6 × 7 = 42." and reply.complete
        (round_,) = reply.tools.rounds
        (call,) = round_.calls
        assert (round_.text, call.name, call.server, call.status, call.result) == (
            "Let me multiply.", "multiply", "calc", "done", "42")
        assert 0 < call.seconds < 30 and round_.stats is not None
        shown = w.chat_view.toPlainText()
        assert "Tool call: multiply · calc" in shown and "Round 1:" in shown
        order = [shown.index(t) for t in ("Let me multiply.", "Tool call: multiply", "6 × 7 = 42.")]
        assert order == sorted(order)
        assert "Arguments" not in shown  # folded
        w.chat_view.toggle_fold(f"{reply.id}:0:0")
        assert "Arguments" in w.chat_view.toPlainText() and '{"a": 6, "b": 7}' in w.chat_view.toPlainText()

        # the history's next prompt holds the round, and so does the export
        w.send_message("Thanks")
        third = request(qtbot, parts, 3)
        assert [m.role for m in third.messages] == ["user", "assistant", "tool", "assistant", "user"]
        assert [t.name for t in third.tools] == ["add", "multiply"]  # offered again with the next message
        engine.finish()
        target = tmp_path / "chat.md"
        assert parts.session.export(w.session.current_id, "markdown", target) == ""
        assert "**Tool call:** `multiply` (calc)" in target.read_text()


def test_a_server_over_streamable_http_in_the_chat(qtbot, tmp_path: Path) -> None:
    web = HttpServer("calc")
    try:
        with tools_app(qtbot, tmp_path, {"web": {"url": web.url, "headers": {"X-Key": "secret"}}}) as parts:
            w, engine = parts.window, fake(parts)
            w.send_message("What is 2 plus 3?")
            assert [t.name for t in request(qtbot, parts, 1).tools] == ["add", "multiply"]
            engine.call_tools(("add", '{"a": 2, "b": 3}'))
            dialog = _ask(qtbot, parts)
            assert dialog.ask.where == web.url and "secret" not in dialog.ask.where
            qtbot.mouseClick(dialog.once_button, Qt.MouseButton.LeftButton)
            assert request(qtbot, parts, 2).messages[-1].content == "5"
            engine.stream("2 + 3 = 5.")
            engine.finish()
            (call,) = _reply(parts).tools.rounds[0].calls
            assert (call.server, call.status, call.result) == ("web", "done", "5")
    finally:
        web.stop()


def test_parallel_calls_always_and_deny(qtbot, tmp_path: Path) -> None:
    with tools_app(qtbot, tmp_path, {"calc": server("calc")}) as parts:
        w, engine = parts.window, fake(parts)
        w.send_message("Add and multiply 2 and 3")
        request(qtbot, parts, 1)
        engine.call_tools(("add", '{"a": 2, "b": 3}'), ("multiply", '{"a": 2, "b": 3}'))
        first = _ask(qtbot, parts)
        assert first.ask.tool == "add"
        qtbot.mouseClick(first.always_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: w.tools.dialog is not None and w.tools.dialog is not first, timeout=WAIT_MS)
        second = _ask(qtbot, parts)
        assert second.ask.tool == "multiply"
        qtbot.mouseClick(second.deny_button, Qt.MouseButton.LeftButton)
        results = request(qtbot, parts, 2).messages[-2:]
        declined = "The user declined to run this tool."
        assert [(m.name, m.content) for m in results] == [("add", "5"), ("multiply", declined)]
        engine.finish()
        calls = _reply(parts).tools.rounds[0].calls
        assert [c.status for c in calls] == ["done", "denied"]
        kept = json.loads((tmp_path / "config" / "mcp.json").read_text())["mcpServers"]["calc"]
        assert kept["autoApprove"] == ["add"]
        # "always": the next call of add runs without a question; multiply still asks
        w.send_message("Again")
        request(qtbot, parts, 3)
        engine.call_tools(("add", '{"a": 1, "b": 1}'))
        fourth = request(qtbot, parts, 4)
        assert fourth.messages[-1].content == "2" and w.tools.dialog is None
        engine.finish()


def test_every_fault_is_a_sentence_in_the_chat(qtbot, tmp_path: Path) -> None:
    faulty = server("faulty", autoApprove=["wait", "crash", "fail", "big", "echo"])
    servers = {"faulty": faulty, "missing": {"command": "no-such-command-localchat", "args": []}}
    with tools_app(qtbot, tmp_path, servers) as parts:
        w, engine = parts.window, fake(parts)
        parts.settings.set("tool_timeout_s", 2)
        w.send_message("Try everything")
        first = request(qtbot, parts, 1)
        assert [t.name for t in first.tools] == ["wait", "crash", "fail", "big", "echo"]  # 'broken' left out
        shown = w.chat_view.toPlainText()
        assert "could not start: the command 'no-such-command-localchat' was not found" in shown
        assert "The tool 'broken' of the tool server 'faulty' was left out" in shown

        started = time.monotonic()
        engine.call_tools(("fail", "{}"), ("big", "{}"), ("wait", "{}"), ("nonexistent", "{}"),
                          ("echo", "{not json"))
        second = request(qtbot, parts, 2)
        assert time.monotonic() - started < 30  # the hung call timed out after 2 s
        results = {m.name: m.content for m in second.messages if m.role == "tool"}
        assert results["fail"] == "The fail tool always fails: no such record."
        cap = parts.engine.state.info.n_ctx * 3 // 2  # about half the context window, in characters
        assert results["big"] == ("0123456789" * 10_000)[:cap]
        assert results["wait"] == "Error: the tool did not answer in time, so its call was cancelled."
        assert results["nonexistent"].startswith("Error: there is no tool called 'nonexistent'")
        assert results["echo"].startswith("Error: the arguments are not valid JSON")
        shown = w.chat_view.toPlainText()
        for sentence in ("'fail' returned an error: The fail tool always fails",
                         f"'big' returned 50.0 MB; only the first {cap:,} characters went to the model.",
                         "'wait' did not answer within 2 s",
                         "The model called 'nonexistent', which is not one of the tools offered.",
                         "The model's arguments for 'echo' were not valid JSON"):
            assert sentence in shown, sentence

        # a crash in the middle of a call: said with its exit code, and the reply goes on
        engine.call_tools(("crash", "{}"))
        third = request(qtbot, parts, 3)
        assert third.messages[-1].content.startswith(
            "Error: The tool server 'faulty' stopped while running 'crash' (exit code 3).")
        assert "stopped while running 'crash' (exit code 3)" in w.chat_view.toPlainText()
        engine.stream("Some tools failed.")
        engine.finish()
        reply = _reply(parts)
        statuses = [c.status for r in reply.tools.rounds for c in r.calls]
        assert statuses == ["error", "done", "timed_out", "failed", "failed", "failed"]
        assert any("could not start" in n for n in reply.tools.notes)
        # the server that crashed starts again for the next message
        w.send_message("Echo hi")
        request(qtbot, parts, 4)
        engine.call_tools(("echo", '{"text": "hi"}'))
        assert request(qtbot, parts, 5).messages[-1].content == "hi"
        engine.finish()


def test_stop_ends_a_hung_call_and_the_reply(qtbot, tmp_path: Path) -> None:
    with tools_app(qtbot, tmp_path, {"faulty": server("faulty", autoApprove=["wait"])}) as parts:
        w, engine = parts.window, fake(parts)
        w.send_message("Wait")
        request(qtbot, parts, 1)
        engine.call_tools(("wait", "{}"), text="Waiting.")
        qtbot.waitUntil(lambda: w.status.tool_label.text() == "Running wait (faulty)…", timeout=WAIT_MS)
        started = time.monotonic()
        qtbot.mouseClick(w.stop_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not w.session.generating, timeout=WAIT_MS)
        assert time.monotonic() - started < 10
        assert len(engine.requests) == 1  # no next round
        reply = _reply(parts)
        (call,) = reply.tools.rounds[0].calls
        assert (call.status, call.result) == ("cancelled", "The user stopped this call before it answered.")
        assert not reply.complete and "Stopped." in w.chat_view.toPlainText()
        assert w.send_button.isEnabled()


def test_a_server_silent_at_start_stop_then_its_time_out(qtbot, tmp_path: Path) -> None:
    silent = {"command": sys.executable, "args": ["-c", "import time; time.sleep(120)"]}
    with tools_app(qtbot, tmp_path, {"calc": server("calc"), "silent": silent}) as parts:
        w, engine = parts.window, fake(parts)
        parts.settings.set("tool_timeout_s", 2)
        w.send_message("Add")
        assert w.status.tool_label.text() == "Starting tool servers…" and w.stop_button.isEnabled()
        qtbot.mouseClick(w.stop_button, Qt.MouseButton.LeftButton)  # the window answers while it waits
        assert not w.session.generating and w.send_button.isEnabled() and not w.status.tool_label.isVisible()
        qtbot.wait(3000)  # the servers' answer to the stopped message comes, and starts nothing
        assert engine.requests == [] and not w.session.generating
        # the next message waits for the silent one no longer than the time-out, then goes without it
        started = time.monotonic()
        w.send_message("Add again")
        first = request(qtbot, parts, 1)
        assert time.monotonic() - started < 30
        assert [t.name for t in first.tools] == ["add", "multiply"]
        assert "'silent' did not answer within 2 s of starting" in w.chat_view.toPlainText()
        engine.finish()


def test_stop_while_asked_withdraws_the_question(qtbot, tmp_path: Path) -> None:
    with tools_app(qtbot, tmp_path, {"calc": server("calc")}) as parts:
        w, engine = parts.window, fake(parts)
        w.send_message("Add")
        request(qtbot, parts, 1)
        engine.call_tools(("add", '{"a": 1, "b": 2}'))
        dialog = _ask(qtbot, parts)
        w.session.cancel()
        assert not dialog.isVisible() and not w.session.generating
        assert _reply(parts).tools.rounds[0].calls[0].status == "cancelled"


def test_at_most_n_rounds_a_message(qtbot, tmp_path: Path) -> None:
    with tools_app(qtbot, tmp_path, {"calc": server("calc", autoApprove=["add"])}) as parts:
        w, engine = parts.window, fake(parts)
        parts.settings.set("tool_rounds_max", 1)
        w.send_message("Add forever")
        request(qtbot, parts, 1)
        engine.call_tools(("add", '{"a": 1, "b": 1}'))
        request(qtbot, parts, 2)
        engine.call_tools(("add", '{"a": 2, "b": 2}'))
        qtbot.waitUntil(lambda: not w.session.generating, timeout=WAIT_MS)
        assert len(engine.requests) == 2
        sentence = "The model asked for tools again after 1 round, the most one message may use"
        assert sentence in w.notice.text() and sentence in w.chat_view.toPlainText()
        rounds = _reply(parts).tools.rounds
        assert [c.status for r in rounds for c in r.calls] == ["done", "not_run"]


def test_a_chat_can_turn_tools_off(qtbot, tmp_path: Path) -> None:
    with tools_app(qtbot, tmp_path, {"calc": server("calc")}) as parts:
        w, engine = parts.window, fake(parts)
        qtbot.mouseClick(w.tools.button, Qt.MouseButton.LeftButton)  # off, for the chat about to be written
        assert not w.tools.button.isChecked() and w.tools.button.text() == "Tools: off"
        w.send_message("No tools here")
        assert engine.requests[-1].tools == ()  # sent at once: no servers to wait for
        engine.finish()
        cid = w.session.current_id
        assert parts.store.get(cid).options == {"tools_in_chats": False}
        w.new_conversation()
        assert w.tools.button.isChecked()  # a new chat follows the setting again
        assert w.tools.button.text() == "Tools: on"
        w.send_message("With tools")
        assert [t.name for t in request(qtbot, parts, 2).tools] == ["add", "multiply"]
        engine.finish()
        w.session.select(cid)
        w._update_buttons()
        assert not w.tools.button.isChecked()


def test_a_model_without_tool_calls_greys_the_tools_with_the_reason(qtbot, tmp_path: Path) -> None:
    with tools_app(qtbot, tmp_path, {"calc": server("calc")}, tool_use=False) as parts:
        w, engine = parts.window, fake(parts)
        assert not w.tools.button.isEnabled() and w.tools.button.text() == "Tools"
        assert "was not trained to call tools: its chat template has none" in w.tools.button.toolTip()
        w.send_message("Hello")
        assert engine.requests[-1].tools == ()
        engine.finish()
        parts.settings.set("tools_for_untrained_models", True)
        w._update_buttons()
        assert w.tools.button.isEnabled()


def test_no_server_switched_on_says_where_to_add_one(qtbot, tmp_path: Path) -> None:
    with tools_app(qtbot, tmp_path, {"calc": server("calc", disabled=True)}) as parts:
        assert not parts.window.tools.button.isEnabled()
        assert parts.window.tools.button.toolTip() == (
            "No tool server is switched on: add one in Settings → Tools.")


def test_a_malformed_mcp_json_is_set_aside_and_the_app_starts(qtbot, tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "mcp.json").write_text('{"mcpServers": {"calc": ')
    parts = build_main_window(config, tmp_path / "data", engine=FakeEngine(), log_dir=tmp_path / "log")
    qtbot.addWidget(parts.window)
    try:
        notice = parts.window.notice.text()
        assert "The tool servers file" in notice and "it was saved as mcp.json.bad" in notice
        assert (config / "mcp.json.bad").read_text() == '{"mcpServers": {"calc": '
        assert parts.tools is not None and parts.tools.config.servers == ()
        assert not parts.window.tools.button.isEnabled()
    finally:
        assert parts.tools is not None
        parts.tools.close()


def test_a_closed_window_no_longer_follows_the_tool_servers(qtbot, tmp_path: Path) -> None:
    """The app closes its window, then the tool servers, then the chat store: the servers' last reports
    (stopped) must not reach the window's Tools button, which would read the closed store."""
    write_mcp(tmp_path / "config", {"calc": server("calc")})
    engine = FakeEngine()
    engine.tool_use = True
    parts = build_main_window(tmp_path / "config", tmp_path / "data", engine=engine, log_dir=tmp_path / "log")
    qtbot.addWidget(parts.window)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    parts.window.load_model(str(model))
    parts.window.send_message("What is 6 times 7?")
    request(qtbot, parts, 1)  # the servers are running
    engine.stream("42.")
    engine.finish()
    parts.window.close()
    assert parts.tools is not None
    parts.tools.close()  # reports each server stopped, on the GUI thread's next turn
    parts.store.close()
    qtbot.wait(500)  # an exception in a slot now fails the test (pytest-qt)
