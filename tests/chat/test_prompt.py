from __future__ import annotations

from pathlib import Path

from localchat.chat import ConversationStore, PromptTurn, prompt_turns


def test_system_prompt_first_and_empty_replies_left_out(tmp_path: Path) -> None:
    with ConversationStore(tmp_path / "c.sqlite3") as store:
        conv = store.create(system_prompt="Be brief.")
        store.add_message(conv.id, "user", "Hi")
        store.add_message(conv.id, "assistant", "", complete=False)  # stopped before any text
        store.add_message(conv.id, "user", "Hello?")
        store.add_message(conv.id, "assistant", "Hel", complete=False)  # partial reply the user saw
        store.add_message(conv.id, "system", "old note")
        store.add_message(conv.id, "user", "Go on")
        turns = prompt_turns(store.get(conv.id).system_prompt, store.messages(conv.id))
    assert turns == (
        PromptTurn("system", "Be brief."),
        PromptTurn("user", "Hi"),
        PromptTurn("user", "Hello?"),
        PromptTurn("assistant", "Hel"),
        PromptTurn("user", "Go on"),
    )


def test_blank_system_prompt_is_left_out(tmp_path: Path) -> None:
    with ConversationStore(tmp_path / "c.sqlite3") as store:
        conv = store.create(system_prompt="  \n")
        store.add_message(conv.id, "user", "Hi")
        assert prompt_turns(conv.system_prompt, store.messages(conv.id)) == (PromptTurn("user", "Hi"),)
