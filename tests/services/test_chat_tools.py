"""ChatTools, the session's reply rounds and each chat's choice of tools: without tool servers (a reply
is one round, Stop goes to the engine, a new chat keeps the choice made before it was written), and
with a real test server (tests/toolservers) driven through ``session.tools`` without the window's
widgets: a call is asked about, answered and run, and a message past its rounds ends with why."""

from __future__ import annotations

from pathlib import Path

from localchat.chat import ConversationStore
from localchat.engine.types import EngineConfig, FinishReason
from localchat.services import ChatSession, SettingsService
from localchat.services.chat_tools import ToolsAvailability
from localchat.services.shown import ReplyEnd
from localchat.services.tool_loop import ToolAnswer, ToolAsk
from localchat.settings import SettingsFile
from tests.ui.fakes import FakeEngine
from tests.ui.tools_app import WAIT_MS, fake, request, server, tools_app


def test_without_tool_servers_a_reply_is_one_round(tmp_path: Path) -> None:
    engine = FakeEngine()
    settings = SettingsService(SettingsFile(tmp_path / "config"))
    with ConversationStore(tmp_path / "chats.sqlite3") as store:
        session = ChatSession(store, engine, settings)
        session.load_model(EngineConfig("/models/fake.gguf"))
        assert session.tools.availability() == ToolsAvailability(False, settings.tools_in_chats, "")
        assert session.tools.set_for_chat(False)  # a new chat: kept until it is written
        assert not session.tools.availability().on and session.current_id is None
        rounds: list[int] = []
        session.tools.round_started.connect(rounds.append)
        assert session.send("hi")
        assert rounds == [1] and engine.requests[-1].tools == ()
        assert session.current_id is not None
        assert store.get(session.current_id).options == {"tools_in_chats": False}
        session.cancel()  # the round is the engine's to stop
        assert engine.cancelled == 1
        engine.finish(FinishReason.CANCELLED)
        assert session.tools.turn is None and not session.generating


def test_a_call_is_asked_run_and_a_message_past_its_rounds_ends_with_why(qtbot, tmp_path: Path) -> None:
    with tools_app(qtbot, tmp_path, {"calc": server("calc")}) as parts:
        session, engine = parts.window.session, fake(parts)
        parts.settings.set("tool_rounds_max", 1)
        assert session.tools.availability().available
        asked: list[ToolAsk] = []
        ended: list[ReplyEnd] = []
        session.tools.ask.connect(asked.append)
        session.reply_finished.connect(ended.append)
        assert session.send("What is 6 times 7?")
        assert [t.name for t in request(qtbot, parts, 1).tools] == ["add", "multiply"]
        engine.call_tools(("multiply", '{"a": 6, "b": 7}'))
        qtbot.waitUntil(lambda: len(asked) == 1, timeout=WAIT_MS)
        session.tools.answer(asked[0].call_id, ToolAnswer.ONCE)
        assert request(qtbot, parts, 2).messages[-1].content == "42"
        engine.call_tools(("add", '{"a": 1, "b": 2}'))
        qtbot.waitUntil(lambda: len(ended) == 1, timeout=WAIT_MS)
        assert "asked for tools again after 1 round" in ended[0].sentence
        assert len(engine.requests) == 2 and session.tools.turn is None
