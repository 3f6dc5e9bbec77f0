"""AttachmentBudget on the real store and settings with a fake engine: the room for files is the loaded
context (the one loading, else the setting) less the chat so far and the reply, and a file past it is
cut with a sentence."""

from __future__ import annotations

from pathlib import Path

from localchat.chat import ConversationStore
from localchat.chat.attachments import Attachment, budget_tokens, estimate_tokens
from localchat.engine.types import EngineConfig
from localchat.services import SettingsService
from localchat.services.attachment_budget import AttachmentBudget
from localchat.services.chat_options import ChatOptions
from localchat.services.loaded_model import LoadedModel
from localchat.settings import SettingsFile
from tests.ui.fakes import FakeEngine


def test_the_room_is_the_context_less_the_chat_and_the_reply(tmp_path: Path) -> None:
    engine = FakeEngine()
    settings = SettingsService(SettingsFile(tmp_path / "config"))
    with ConversationStore(tmp_path / "chats.sqlite3") as store:
        options = ChatOptions(store, settings, None)
        budget = AttachmentBudget(store, engine, settings, options, LoadedModel(engine, settings, None))
        reply = settings.max_reply_tokens
        ctx = settings.context_length
        assert budget.tokens(None, "hi") == budget_tokens(ctx, estimate_tokens("hi"), reply)
        engine.load(EngineConfig("/models/fake.gguf", n_ctx=2048))
        cid = store.create("chat").id
        store.set_system_prompt(cid, "Be brief.")
        store.add_message(cid, "user", "earlier words " * 50)
        held = "Be brief." + "hi" + "earlier words " * 50
        assert budget.tokens(cid, "hi") == budget_tokens(2048, estimate_tokens(held), reply)
        big = Attachment("big.txt", str(tmp_path / "big.txt"), "line of text\n" * 5000)
        inlined = budget.inline(cid, "hi", [big])
        assert inlined.text.startswith("hi") and "big.txt" in inlined.text
        assert len(inlined.notes) == 1 and "big.txt" in inlined.notes[0]  # cut, and said so
