"""Exporting a stored chat as Markdown and JSON, and what a failed write says."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from localchat.chat import ConversationStore, ExportError, export


@pytest.fixture
def chat(tmp_path: Path):
    with ConversationStore(tmp_path / "chats.sqlite3") as store:
        c = store.create("Sorting in Python", system_prompt="Be brief.")
        store.add_message(c.id, "user", "How do I sort a list?")
        stats = {"generated_tokens": 12, "generation_seconds": 0.5, "drafted": 8, "accepted": 6,
                 "model": "Qwen2.5 Coder 1.5B Q4_K_M"}
        store.add_message(c.id, "assistant", "Use `sorted`:\n\n```python\nsorted(xs)\n```", stats=stats)
        store.add_message(c.id, "assistant", "Half a rep", complete=False)
        yield store.get(c.id), store.messages(c.id)


def test_markdown_has_the_title_the_prompt_and_every_message(chat) -> None:
    conversation, messages = chat
    text = export.to_markdown(conversation, messages)
    assert text.startswith("# Sorting in Python\n")
    assert "Be brief." in text
    assert "## You\n\nHow do I sort a list?" in text
    assert "## Qwen2.5 Coder 1.5B Q4_K_M\n\nUse `sorted`:\n\n```python\nsorted(xs)\n```" in text
    assert "_(stopped before the end)_" in text


def test_json_carries_roles_texts_times_and_statistics(chat) -> None:
    conversation, messages = chat
    document = json.loads(export.to_json(conversation, messages))
    assert document["format"] == export.FORMAT
    assert document["title"] == "Sorting in Python" and document["system_prompt"] == "Be brief."
    assert [m["role"] for m in document["messages"]] == ["user", "assistant", "assistant"]
    assert document["messages"][0]["content"] == "How do I sort a list?"
    assert document["messages"][0]["stats"] is None
    assert document["messages"][1]["stats"]["accepted"] == 6
    assert document["messages"][1]["created"][:2] == "20"  # an ISO date, e.g. 2026-12-04T02:30:00+0000
    assert document["messages"][2]["complete"] is False


def test_a_failed_write_is_a_sentence_and_keeps_the_earlier_file(chat, tmp_path: Path) -> None:
    conversation, messages = chat
    with pytest.raises(ExportError, match="folder does not exist"):
        export.write_export(tmp_path / "missing" / "chat.md", "text")
    target = tmp_path / "chat.json"
    export.write_export(target, export.render("json", conversation, messages))
    assert json.loads(target.read_text(encoding="utf-8"))["title"] == "Sorting in Python"
    if os.name == "posix" and os.geteuid() != 0:
        tmp_path.chmod(0o500)
        try:
            with pytest.raises(ExportError, match="may not write"):
                export.write_export(target, "new text")
        finally:
            tmp_path.chmod(0o700)
        assert json.loads(target.read_text(encoding="utf-8"))["title"] == "Sorting in Python"
