"""Files attached to a message: what is read, what is refused (with a sentence), and how the files are
inlined and cut to fit the context."""

from __future__ import annotations

from pathlib import Path

import pytest

from localchat.chat.attachments import (
    MAX_READ_CHARS,
    Attachment,
    AttachmentError,
    budget_tokens,
    estimate_tokens,
    inline,
    read_attachment,
)
from tests.chat.pdfs import write_pdf


def test_a_code_file_is_read_as_text(tmp_path: Path) -> None:
    path = tmp_path / "sort.py"
    path.write_text("def key(x):\r\n    return x\n", encoding="utf-8")
    got = read_attachment(path)
    assert (got.name, got.text, got.truncated) == ("sort.py", "def key(x):\n    return x\n", False)
    assert got.size_words == "2 lines"


def test_utf8_with_a_byte_order_mark_utf16_and_latin1_text_are_read(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes("\ufeffcafé".encode())
    (tmp_path / "b.txt").write_text("naïve", encoding="utf-16")
    (tmp_path / "c.txt").write_bytes("déjà vu\n".encode("latin-1"))
    assert [read_attachment(tmp_path / n).text for n in ("a.txt", "b.txt", "c.txt")] == [
        "café", "naïve", "déjà vu\n"]


@pytest.mark.parametrize("data", [b"\x7fELF\x02\x01\x01\0\0\0\0binary", bytes(range(256)) * 4])
def test_a_binary_file_is_refused_with_a_sentence(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "program.bin"
    path.write_bytes(data)
    with pytest.raises(AttachmentError, match=r"program\.bin is not a text file.*text, code and PDF"):
        read_attachment(path)


def test_a_folder_and_a_missing_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(AttachmentError, match="is a folder"):
        read_attachment(tmp_path)
    with pytest.raises(AttachmentError, match=r"gone\.txt is not there any more"):
        read_attachment(tmp_path / "gone.txt")


def test_a_pdf_gives_the_text_of_its_pages(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "paper.pdf", ["Speculative decoding", "", "Draft then verify"])
    got = read_attachment(path)
    assert got.text == "Speculative decoding\n\nDraft then verify"


def test_a_pdf_without_text_and_a_broken_pdf_are_refused(tmp_path: Path) -> None:
    with pytest.raises(AttachmentError, match="no text to read"):
        read_attachment(write_pdf(tmp_path / "scan.pdf", ["", ""]))
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4\nthis is not a PDF body")
    with pytest.raises(AttachmentError, match=r"broken\.pdf could not be read as a PDF"):
        read_attachment(broken)


def test_a_huge_file_is_read_up_to_the_limit_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "huge.log"
    line = "x" * 99 + "\n"
    path.write_text(line * (MAX_READ_CHARS // 100 + 50))
    got = read_attachment(path)
    assert got.truncated and len(got.text) == MAX_READ_CHARS
    out = inline("", [got], budget=10**9)
    assert "longer than localchat reads" in out.text and len(out.notes) == 1


def test_files_are_inlined_after_the_text_in_fenced_blocks_headed_by_their_names() -> None:
    files = [Attachment("notes.md", "/x/notes.md", "Use ```code``` here\n"),
             Attachment("main.py", "/x/main.py", "print(1)\n")]
    out = inline("  Review these  ", files, budget=10_000)
    assert out.notes == ()
    assert out.text == ("Review these\n\nnotes.md:\n````markdown\nUse ```code``` here\n````"
                        "\n\nmain.py:\n```python\nprint(1)\n```")


def test_a_file_too_big_for_the_context_is_cut_at_a_line_with_a_sentence() -> None:
    body = "".join(f"line {i:04d}\n" for i in range(1000))  # 10 chars a line, 10,000 in all
    out = inline("Summarise", [Attachment("big.txt", "/big.txt", body)], budget=500)
    assert estimate_tokens(out.text) <= 500 + estimate_tokens("Summarise\n\n") + 30
    kept = out.text.split("```\n", 1)[1].split("\n```", 1)[0]
    lines = kept.split("\n")
    assert lines[0] == "line 0000" and all(len(line) == 9 for line in lines)  # whole lines only
    assert 150 < len(lines) < 200
    assert len(out.notes) == 1
    assert f"Only the first {len(lines)} of 1,000 lines of big.txt" in out.notes[0]
    assert out.notes[0] in out.text


def test_the_files_share_the_budget_in_order_and_a_file_with_no_room_is_left_out() -> None:
    a = Attachment("a.txt", "/a.txt", "a\n" * 400)
    b = Attachment("b.txt", "/b.txt", "b\n" * 400)
    out = inline("", [a, b], budget=205)
    assert out.text.startswith("a.txt:")
    assert "[b.txt was left out: there is no room left for it" in out.text
    assert len(out.notes) == 1  # a fitted whole


def test_a_real_token_counter_is_used_when_given() -> None:
    words = Attachment("w.txt", "/w.txt", "word\n" * 100)
    out = inline("", [words], budget=50, count=lambda s: len(s.split()))
    assert "Only the first" in out.notes[0]
    assert out.text.count("word") < 50


def test_the_budget_leaves_room_for_the_chat_and_the_reply() -> None:
    assert budget_tokens(4096, used_tokens=96, reply_tokens=1024) == int((4096 - 96 - 1024) * 0.9)
    assert budget_tokens(4096, used_tokens=0, reply_tokens=100_000) == int(2048 * 0.9)  # reply room ≤ half
    assert budget_tokens(1024, used_tokens=2000, reply_tokens=512) == 0
