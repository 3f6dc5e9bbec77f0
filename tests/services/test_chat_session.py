"""ChatSession with the real chat store and settings file, on a scripted engine, a fake engine process
and (once) the real SmolLM2 model."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from localchat.chat import ConversationStore
from localchat.chat import store as store_module
from localchat.engine.types import EngineConfig, FinishReason
from localchat.host.events import Phase
from localchat.services import ChatSession, SettingsService
from localchat.services.reply_recorder import SAVE_INTERVAL_S
from localchat.services.shown import ReplyEnd
from localchat.settings import SettingsFile
from tests.ui.fakes import FakeEngine

ROOT = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ConversationStore]:
    with ConversationStore(tmp_path / "chats.sqlite3") as s:
        yield s


@pytest.fixture
def settings(tmp_path: Path) -> SettingsService:
    return SettingsService(SettingsFile(tmp_path / "config"))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
def session(
    store: ConversationStore, engine: FakeEngine, settings: SettingsService, clock: Clock
) -> ChatSession:
    s = ChatSession(store, engine, settings, clock=clock)
    s.load_model(EngineConfig("/models/fake.gguf"))
    return s


def stored(store: ConversationStore, session: ChatSession) -> list[tuple[str, str, bool]]:
    assert session.current_id is not None
    return [(m.role, m.content, m.complete) for m in store.messages(session.current_id)]


def test_send_builds_the_prompt_from_the_store(session: ChatSession, engine: FakeEngine) -> None:
    assert session.set_system_prompt("  Be brief.  ")
    assert session.send("Hello")
    engine.stream("Hi.")
    engine.finish()
    assert session.send("And again")
    request = engine.requests[-1]
    assert [(m.role, m.content) for m in request.messages] == [
        ("system", "Be brief."), ("user", "Hello"), ("assistant", "Hi."), ("user", "And again"),
    ]
    assert request.session == str(session.current_id)


def test_reply_is_saved_as_it_streams_at_most_every_interval(
    qtbot, session: ChatSession, engine: FakeEngine, store: ConversationStore, clock: Clock
) -> None:
    session.send("Count")
    engine.stream("one ")
    assert stored(store, session)[-1] == ("assistant", "one ", False)  # the first text at once
    clock.now += 0.5
    engine.stream("two ")
    assert stored(store, session)[-1] == ("assistant", "one ", False)  # not again within the interval
    clock.now += SAVE_INTERVAL_S
    engine.stream("three ")
    assert stored(store, session)[-1] == ("assistant", "one two three ", False)
    clock.now += 0.1
    engine.stream("four ")
    # the engine falls silent: the timer saves what was shown anyway
    qtbot.waitUntil(lambda: stored(store, session)[-1][1] == "one two three four ", timeout=5000)
    engine.finish()
    messages = store.messages(session.current_id)  # type: ignore[arg-type]
    assert len(messages) == 2 and messages[-1].complete
    assert messages[-1].stats is not None and messages[-1].stats["finish_reason"] == "stop"


def test_stop_keeps_the_partial_reply_marked_as_stopped(
    session: ChatSession, engine: FakeEngine, store: ConversationStore
) -> None:
    ends: list[ReplyEnd] = []
    session.reply_finished.connect(ends.append)
    session.send("Count")
    engine.stream("1 2 3")
    session.cancel()
    assert not session.generating
    assert stored(store, session)[-1] == ("assistant", "1 2 3", False)
    assert ends[-1].result is not None and ends[-1].result.finish_reason is FinishReason.CANCELLED
    shown = session.messages(session.current_id)  # type: ignore[arg-type]
    assert shown[-1].finish_reason is FinishReason.CANCELLED and shown[-1].stats is not None


def test_regenerate_and_edit_replace_the_last_exchange(
    session: ChatSession, engine: FakeEngine, store: ConversationStore
) -> None:
    session.send("first")
    engine.stream("one")
    engine.finish()
    assert session.regenerate()
    engine.stream("two")
    engine.finish()
    assert stored(store, session) == [("user", "first", True), ("assistant", "two", True)]
    assert session.edit_last() == "first"
    assert session.send("second")
    assert [m.content for m in engine.requests[-1].messages] == ["second"]
    engine.finish()
    assert [c for _, c, _ in stored(store, session)] == ["second"]


def test_engine_death_keeps_the_text_and_the_next_message_is_sent(
    session: ChatSession, engine: FakeEngine, store: ConversationStore
) -> None:
    """The engine's supervisor restarts it when the next reply asks; the session keeps the partial reply,
    says so in the window's words, and sends the next message as usual (no reload of its own)."""
    ends: list[ReplyEnd] = []
    session.reply_finished.connect(ends.append)
    session.send("tell me")
    engine.stream("partial")
    engine.die(-9)
    assert not session.generating and engine.state.info is None
    assert ends[-1].text == "partial" and ends[-1].result is None
    assert ends[-1].sentence == ("The engine stopped unexpectedly (exit code -9). "
                                 "Your chat is saved; the next message starts a new engine.")
    assert stored(store, session)[-1] == ("assistant", "partial", False)
    assert engine.state.phase is Phase.STOPPED
    assert session.send("again")
    assert engine.configs == [EngineConfig("/models/fake.gguf")] and len(engine.requests) == 2
    engine.stream("fine")
    engine.finish()
    assert stored(store, session)[-1] == ("assistant", "fine", True)


def test_the_reply_end_carries_the_stored_message_and_its_place_among_the_answers(
    session: ChatSession, engine: FakeEngine, store: ConversationStore
) -> None:
    ends: list[ReplyEnd] = []
    session.reply_finished.connect(ends.append)
    session.send("Name a colour")
    engine.stream("Red.")
    engine.finish()
    cid = session.current_id
    assert cid is not None
    assert ends[-1].message_id == store.messages(cid)[-1].id and ends[-1].variant == (1, 1)
    assert session.regenerate()
    engine.stream("Blue.")
    engine.finish()
    assert ends[-1].message_id == store.messages(cid)[-1].id and ends[-1].variant == (2, 2)


def test_no_model_is_a_sentence(store: ConversationStore, settings: SettingsService) -> None:
    s = ChatSession(store, FakeEngine(), settings)
    notices: list[str] = []
    s.notice.connect(notices.append)
    assert not s.send("hello")
    assert "Load a model first" in notices[-1]
    assert store.list_conversations() == []


def test_a_locked_history_is_a_sentence_and_nothing_is_sent(
    tmp_path: Path, engine: FakeEngine, settings: SettingsService, monkeypatch
) -> None:
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_MS", 100)
    path = tmp_path / "locked.sqlite3"
    with ConversationStore(path) as store:
        s = ChatSession(store, engine, settings)
        s.load_model(EngineConfig("/models/fake.gguf"))
        s.send("first")
        engine.finish()
        notices: list[str] = []
        s.notice.connect(notices.append)
        other = ConversationStore(path)
        other._db.execute("BEGIN EXCLUSIVE")  # another localchat in the middle of a write
        try:
            assert not s.send("second")
        finally:
            other._db.execute("ROLLBACK")
            other.close()
        assert notices == ["Could not save the chat: the chat history is in use by another localchat."]
        assert len(engine.requests) == 1 and not s.generating
        assert s.send("second")


def test_a_full_disk_while_streaming_is_said_at_the_end(
    session: ChatSession, engine: FakeEngine, store: ConversationStore
) -> None:
    ends: list[ReplyEnd] = []
    session.reply_finished.connect(ends.append)
    session.send("write a lot")
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages + 1}")
    engine.stream("x" * 200_000)
    engine.finish()
    assert "Could not save the chat: the disk is full." in ends[-1].sentence
    assert ends[-1].text == "x" * 200_000  # still shown to the user


KILLED_APP = textwrap.dedent(
    """
    import sys
    from PySide6.QtCore import QCoreApplication, QTimer
    from localchat.chat import ConversationStore
    from localchat.engine.types import EngineConfig
    from localchat.services import ChatSession, EngineClient, SettingsService
    from localchat.settings import SettingsFile

    app = QCoreApplication([])
    store = ConversationStore(sys.argv[1])
    engine = EngineClient(engine_factory="host.fake_engine:FakeEngine")
    session = ChatSession(store, engine, SettingsService(SettingsFile(sys.argv[2])), max_tokens=5000)
    shown = []

    def on_text(cid, event, runs):
        shown.append(event.text)
        print("shown", len("".join(shown)), flush=True)

    session.text_streamed.connect(on_text)
    session.load_model(EngineConfig("/models/fake.gguf"))
    session.send("slow please, a long answer")
    app.exec()
    """
)


def test_killed_mid_reply_keeps_what_was_shown(tmp_path: Path) -> None:
    """The app process is killed while a reply streams from a real engine process; the text survives."""
    path = tmp_path / "chats.sqlite3"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_APP, str(path), str(tmp_path / "config")],
        stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env,
    )
    assert child.stdout is not None
    shown_at: list[tuple[float, int]] = []
    try:
        for line in child.stdout:
            shown_at.append((time.monotonic(), int(line.split()[1])))
            if shown_at[-1][0] - shown_at[0][0] > 2 * SAVE_INTERVAL_S + 1:
                break
        killed_at = time.monotonic()
        child.kill()
    finally:
        child.kill()
        child.wait(timeout=20)
        child.stdout.close()
    assert shown_at, "the reply never started"
    with ConversationStore(path) as store:
        conv = store.list_conversations()[0]
        messages = store.messages(conv.id)
    assert [m.role for m in messages] == ["user", "assistant"]
    reply = messages[-1]
    assert not reply.complete and reply.content.startswith("t0 t1 ")
    # everything shown up to one save interval before the kill is on disk
    shown_before = max(n for t, n in shown_at if t <= killed_at - SAVE_INTERVAL_S - 0.5)
    assert len(reply.content) >= shown_before


@pytest.mark.slow
def test_real_model_reply_is_stored_with_its_statistics(
    qtbot, store: ConversationStore, settings: SettingsService, smollm2_path: Path
) -> None:
    pytest.importorskip("llama_cpp")
    from localchat.services import EngineClient

    engine = EngineClient()
    try:
        session = ChatSession(store, engine, settings, max_tokens=24)
        with qtbot.waitSignal(engine.state_changed, timeout=180_000,
                              check_params_cb=lambda state: state.phase is Phase.READY):
            session.load_model(EngineConfig(str(smollm2_path), n_ctx=1024))
        with qtbot.waitSignal(session.reply_finished, timeout=180_000) as blocker:
            assert session.send("Name three colours.")
        end: ReplyEnd = blocker.args[0]
        assert end.result is not None and end.text.strip()
        reply = store.messages(end.conversation_id)[-1]
        assert reply.role == "assistant" and reply.content == end.text
        assert reply.stats is not None and reply.stats["generated_tokens"] > 0
        assert settings.get("last_model_path") == str(smollm2_path)
    finally:
        engine.shutdown()


def test_the_reply_being_written_is_shown_once(
    session: ChatSession, engine: FakeEngine, store: ConversationStore
) -> None:
    session.send("Count")
    engine.stream("one two")
    cid = session.current_id
    assert cid is not None and stored(store, session)[-1] == ("assistant", "one two", False)
    assert [m.content for m in session.messages(cid)] == ["Count"]  # the live reply comes from reply_text
    assert session.reply_conversation_id == cid and session.reply_text[0] == "one two"
    engine.finish()
    assert [m.content for m in session.messages(cid)] == ["Count", "one two"]


def test_deleting_the_chat_while_its_reply_streams_says_nothing_odd(
    store: ConversationStore, settings: SettingsService
) -> None:
    class SlowToCancel(FakeEngine):
        def cancel(self) -> None:  # the real engine answers a cancel later, not at once
            self.cancelled += 1

    engine = SlowToCancel()
    s = ChatSession(store, engine, settings)
    s.load_model(EngineConfig("/models/fake.gguf"))
    ends: list[ReplyEnd] = []
    s.reply_finished.connect(ends.append)
    s.send("Count")
    engine.stream("one ")
    cid = s.current_id
    assert cid is not None and s.delete(cid)
    engine.stream("two ")
    engine.finish(FinishReason.CANCELLED)
    assert engine.cancelled == 1 and ends[-1].sentence == ""
    assert store.list_conversations() == []


def test_turning_speculation_back_on_asks_a_paused_chat_to_try_again(
    session: ChatSession, engine: FakeEngine, settings: SettingsService
) -> None:
    assert session.send("one")
    assert engine.requests[-1].speculation.resume is False
    engine.finish()
    settings.set("speculation", False)
    assert session.send("two")
    assert engine.requests[-1].speculation.enabled is False
    engine.finish()
    settings.set("speculation", True)  # the user's toggle, back on
    assert session.send("three")
    assert engine.requests[-1].speculation.enabled and engine.requests[-1].speculation.resume
    engine.finish()
    assert session.send("four")  # once: the engine's policy judges from there
    assert engine.requests[-1].speculation.resume is False


def test_each_reply_keeps_the_catalog_name_of_the_model_that_wrote_it(
    store: ConversationStore, engine: FakeEngine, settings: SettingsService, clock: Clock
) -> None:
    s = ChatSession(store, engine, settings, clock=clock)
    s.load_model(EngineConfig("/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"))
    assert s.model.target_name == "Qwen2.5-Coder 1.5B Instruct · Q4_K_M"  # not the GGUF's general.name
    assert s.send("hi")
    engine.stream("partial")
    assert s.current_id is not None
    assert store.messages(s.current_id)[-1].stats == {"model": "Qwen2.5-Coder 1.5B Instruct · Q4_K_M"}
    engine.finish()
    shown = s.messages(s.current_id)
    assert shown[-1].model == "Qwen2.5-Coder 1.5B Instruct · Q4_K_M"
    assert shown[-1].stats is not None and shown[-1].stats.generated_tokens == 12
    s.load_model(EngineConfig("/models/somebody-elses.gguf"))
    assert s.send("again")
    engine.stream("other words")
    engine.finish()
    assert [m.model for m in s.messages(s.current_id) if m.role == "assistant"] == [
        "Qwen2.5-Coder 1.5B Instruct · Q4_K_M", "somebody-elses.gguf",
    ]


def test_the_reply_length_is_a_setting_and_a_chat_may_have_its_own(
    session: ChatSession, engine: FakeEngine, settings: SettingsService
) -> None:
    assert session.send("Hello")
    assert engine.requests[-1].max_tokens == 1024  # the setting's default
    assert engine.requests[-1].sampling.temperature == 0.7
    engine.finish()
    settings.set("max_reply_tokens", 300)
    settings.set("temperature", 0.5)
    assert session.regenerate()
    assert engine.requests[-1].max_tokens == 300
    engine.finish()
    cid = session.current_id
    assert cid is not None
    assert session.set_chat_options(cid, {"temperature": 0.1, "max_reply_tokens": 64})
    assert session.regenerate()
    assert (engine.requests[-1].max_tokens, engine.requests[-1].sampling.temperature) == (64, 0.1)
    engine.finish()
    notices: list[str] = []
    session.notice.connect(notices.append)
    assert not session.set_chat_options(cid, {"max_reply_tokens": 5})  # below the option's minimum
    assert notices and "max_reply_tokens must be at least 16" in notices[-1]
    assert session.options.values(cid) == {"temperature": 0.1, "max_reply_tokens": 64}
    assert session.set_chat_options(cid, {})
    assert session.options.reply_settings(cid) == (0.5, 300)


def test_regenerate_keeps_earlier_answers_and_the_prompt_uses_the_shown_one(
    session: ChatSession, engine: FakeEngine, store: ConversationStore
) -> None:
    assert session.send("Name a colour")
    engine.stream("Red.")
    engine.finish()
    assert session.regenerate()
    assert [m.content for m in engine.requests[-1].messages] == ["Name a colour"]  # not the kept answer
    cid = session.current_id
    assert cid is not None
    assert [m.content for m in session.messages(cid)] == ["Name a colour"]  # the old one hidden meanwhile
    engine.stream("Blue.")
    engine.finish()
    shown = session.messages(cid)
    assert [(m.content, m.variant) for m in shown] == [("Name a colour", (1, 1)), ("Blue.", (2, 2))]
    assert shown[1].id is not None
    assert session.switch_variant(shown[1].id, -1)
    shown = session.messages(cid)
    assert [(m.content, m.variant) for m in shown] == [("Name a colour", (1, 1)), ("Red.", (1, 2))]
    assert shown[1].id is not None
    assert not session.switch_variant(shown[1].id, -1)  # already the first
    assert session.send("Another")
    assert [m.content for m in engine.requests[-1].messages] == ["Name a colour", "Red.", "Another"]
    engine.finish()
    assert len(store.messages(cid, every=True)) == 4  # both answers kept (the last reply had no text)


def test_a_regenerate_stopped_before_any_text_keeps_the_answer_shown(
    session: ChatSession, engine: FakeEngine
) -> None:
    assert session.send("Hi")
    engine.stream("Hello.")
    engine.finish()
    assert session.regenerate()
    session.cancel()
    cid = session.current_id
    assert cid is not None
    assert [(m.content, m.variant) for m in session.messages(cid)] == [("Hi", (1, 1)), ("Hello.", (1, 1))]


def test_any_user_message_can_be_edited_and_the_chat_continues_from_there(
    session: ChatSession, engine: FakeEngine, store: ConversationStore
) -> None:
    for question, answer in (("one?", "1"), ("two?", "2"), ("three?", "3")):
        assert session.send(question)
        engine.stream(answer)
        engine.finish()
    cid = session.current_id
    assert cid is not None
    second = next(m for m in store.messages(cid) if m.content == "two?")
    first_reply = next(m for m in store.messages(cid) if m.content == "1")
    assert session.edit_message(first_reply.id) is None  # a reply is not edited
    assert session.edit_message(second.id) == "two?" and session.editing
    assert session.send("TWO?")
    assert [m.content for m in engine.requests[-1].messages] == ["one?", "1", "TWO?"]
    engine.stream("II")
    engine.finish()
    assert [c for _, c, _ in stored(store, session)] == ["one?", "1", "TWO?", "II"]
    assert not session.editing
