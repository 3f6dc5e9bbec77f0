"""A reply's tool calls and thinking as folded blocks in the chat view: folded by default, each fault's
sentence shown folded or not, a fold opened while the reply streams stays open when it is kept."""

from __future__ import annotations

from localchat.chat.rounds import ReplyTools, ToolCallRecord, ToolRound
from localchat.ui.chat_view import ChatView, DisplayMessage

ADD = ToolCallRecord("c1", "add", '{"a": 2, "b": 3}', "calc", "5", "done", "", 0.4)
SLOW = ToolCallRecord("c2", "wait", "{}", "faulty", "Error: …", "timed_out",
                      "'wait' did not answer within 2 s, so its call was cancelled.", 2.0)
ROUNDS = ReplyTools((ToolRound("Let me check.", (ADD, SLOW), "Two tools, then.",
                               {"generated_tokens": 20, "generation_seconds": 2.0}),),
                    ("The tool server 'web' could not start.",))


def test_calls_are_folded_and_their_sentences_shown(qtbot) -> None:
    view = ChatView()
    qtbot.addWidget(view)
    view.set_messages([DisplayMessage("assistant", "2 + 3 = 5.", message_id=7, tools=ROUNDS,
                                      reasoning="It is 5.")])
    text = view.toPlainText()
    assert "▸ Tool call: add · calc · 0.4 s" in text
    assert "▸ Tool call: wait · faulty · 2.0 s · timed out" in text
    assert "'wait' did not answer within 2 s" in text  # said while folded
    assert "The tool server 'web' could not start." in text
    assert "Round 1: 10.0 tok/s" in text
    assert "▸ Thinking · 3 words" in text and "Two tools, then." not in text
    assert text.index("Let me check.") < text.index("Tool call: add") < text.index("2 + 3 = 5.")
    assert '{"a": 2, "b": 3}' not in text
    view.toggle_fold("7:0:0")
    opened = view.toPlainText()
    assert "▾ Tool call: add" in opened and '{"a": 2, "b": 3}' in opened and "Result" in opened
    assert "Arguments" in opened and opened.count("Arguments") == 1  # only the opened call
    view.toggle_fold("7:0:t")
    assert "Two tools, then." in view.toPlainText()
    view.toggle_fold("7:0:0")
    assert '{"a": 2, "b": 3}' not in view.toPlainText()


def test_the_streaming_reply_shows_its_rounds_and_keeps_open_folds(qtbot) -> None:
    view = ChatView()
    qtbot.addWidget(view)
    view.begin_reply("Model")
    view.append_reasoning("Thinking first. ")
    view.append_reply("Let me check.")
    view.redraw()
    assert "Thinking · 2 words" in view.toPlainText()
    pending = ToolCallRecord("c1", "add", "{}", "calc", status="asking")
    asking = ReplyTools((ToolRound("Let me check.", (pending,)),))
    view.set_live_tools(asking)
    assert view.streaming_text == ""  # the round took the text so far
    assert "Tool call: add · calc · waiting for your answer" in view.toPlainText()
    view.toggle_fold("live:0:0")
    assert "Arguments" in view.toPlainText() and "Result" not in view.toPlainText()
    view.set_live_tools(ReplyTools((ToolRound("Let me check.", (ADD,)),)))
    view.append_reply("It is 5.")
    view.end_reply("", message_id=9)
    (kept,) = view.messages
    assert kept.tools.rounds[0].calls == (ADD,) and kept.content == "It is 5."
    assert "9:0:0" in view.expanded and "Result" in view.toPlainText()

