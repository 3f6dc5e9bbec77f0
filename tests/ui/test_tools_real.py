"""Tools in the chat on the whole app with the real engine process and the real Qwen2.5-Coder pair
(1.5B target, 0.5B drafter), greedy, with the test suite's calculator server: each answer of the
confirmation dialog, the tool's result used in the reply, and the rounds kept with it.

Each question is asked in a chat of its own, at most one tool round a message. With the earlier
questions in its history the 1.5B model copies its own earlier answer instead of calling a tool
(after its first answer, "To verify the correctness of the multiplication function, we can use the
provided tool response...", a second question, even "Call the add tool with a=12 and b=30.", gets
"To verify the correctness of the addition function..." in text); after a declined or a finished
call it asks for the same call again. The prompt it reads is Qwen's own template, tools included, in
every round (tests/engine/test_tool_render.py); what it does with it is the model's. A question the
model answers without the call it was asked for fails at once, with what it wrote."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.exceptions import TimeoutError as QtTimeout

from localchat.app import AppParts, build_main_window
from localchat.host.events import Finished
from tests.ui.tools_app import server, write_mcp

pytest.importorskip("llama_cpp")
pytestmark = pytest.mark.slow

LOAD_MS = 300_000
REPLY_MS = 240_000  # one reply of at most 80 tokens and a call, on a busy 2-core machine


def _written(parts: AppParts) -> str:
    """What the model wrote in the chat shown (its last reply), for a failure's message."""
    return parts.window.chat_view.toPlainText()[-600:]


def _wait(qtbot, parts: AppParts, done, what: str) -> None:
    try:
        qtbot.waitUntil(done, timeout=REPLY_MS)
    except QtTimeout:
        pytest.fail(f"{what} within {REPLY_MS // 1000} s; the chat shows: {_written(parts)!r}")


def _ask_and_answer(qtbot, parts: AppParts, question: str, button: str) -> str:
    """Send ``question`` in a new chat, wait for the confirmation and answer it with ``button``; the
    tool it asked about. Fails as soon as the reply ends without asking."""
    w = parts.window
    w.new_conversation()
    w.send_message(question)
    assert w.session.generating
    tools = w.tools
    _wait(qtbot, parts, lambda: (tools.dialog is not None and tools.dialog.isVisible())
          or not w.session.generating, "no tool call and no end of the reply")
    dialog = tools.dialog
    if dialog is None or not dialog.isVisible():
        pytest.fail(f"the model answered {question!r} without a tool call: {_written(parts)!r}")
    tool = dialog.ask.tool
    qtbot.mouseClick(getattr(dialog, button), Qt.MouseButton.LeftButton)
    return tool


def _finished(qtbot, parts: AppParts) -> None:
    _wait(qtbot, parts, lambda: not parts.window.session.generating, "the reply did not end")


def test_qwen_calls_the_calculator_after_each_answer_and_uses_its_result(
    qtbot, tmp_path: Path, qwen_target_path: Path, qwen_draft_path: Path
) -> None:
    write_mcp(tmp_path / "config", {"calc": server("calc")})
    parts = build_main_window(tmp_path / "config", tmp_path / "data", max_tokens=80, log_dir=tmp_path / "log")
    qtbot.addWidget(parts.window)
    w = parts.window
    rounds: list[str] = []
    parts.engine.job_event.connect(
        lambda e: rounds.append(w.status.last_reply_label.text()) if isinstance(e, Finished) else None)
    asked: list[str] = []
    w.session.tools.ask.connect(lambda ask: asked.append(ask.tool))
    try:
        parts.settings.set("temperature", 0.0)
        # One round a message: the model asks for the same call again after its result (or a refusal).
        parts.settings.set("tool_rounds_max", 1)
        with qtbot.waitSignal(parts.engine.state_changed, timeout=LOAD_MS, check_params_cb=lambda s: s.ready):
            w.load_model(str(qwen_target_path), str(qwen_draft_path))
        assert w.tools.button.isEnabled() and w.tools.button.isChecked()  # Qwen's template has tools

        # Run once: the product comes back and the reply uses it
        assert _ask_and_answer(qtbot, parts, "What is 1234 multiplied by 5678?", "once_button") == "multiply"
        _finished(qtbot, parts)
        reply = parts.store.messages(w.session.current_id)[-1]
        (round_,) = reply.tools.rounds
        (call,) = round_.calls
        assert (call.name, call.status, call.result) == ("multiply", "done", "7006652")
        assert re.search(r"7,?006,?652", reply.content), reply.content
        assert round_.stats is not None and round_.stats["generated_tokens"] > 0
        assert "Tool call: multiply · calc" in w.chat_view.toPlainText()
        assert w.status.last_reply_label.text().startswith("Round 2: ")  # each round's own figures

        # Deny: the model is told; a call it asks for again is not run (one round) and not asked about
        asked.clear()
        assert _ask_and_answer(qtbot, parts, "What is 12 plus 30? Use the add tool.", "deny_button") == "add"
        _finished(qtbot, parts)
        denied = parts.store.messages(w.session.current_id)[-1]
        assert [c.status for c in denied.tools.rounds[0].calls] == ["denied"]
        assert asked == ["add"] and denied.complete

        # Always: it runs, and mcp.json keeps the choice
        question = "What is 1234 multiplied by 5678?"  # as in the first chat: the call is known to come
        assert _ask_and_answer(qtbot, parts, question, "always_button") == "multiply"
        _finished(qtbot, parts)
        last = parts.store.messages(w.session.current_id)[-1]
        assert last.tools.rounds[0].calls[0].result == "7006652"
        assert re.search(r"7,?006,?652", last.content), last.content
        assert "multiply" in parts.tools.config.server("calc").always_allowed  # type: ignore[union-attr]
        assert not w.session.generating and w.send_button.isEnabled()
    finally:
        w.close()
        assert parts.tools is not None
        parts.tools.close()
        parts.engine.shutdown()
        parts.store.close()
    print("status bar after each round:", rounds)
