"""Files attached to a message: read them, refuse what is not text, and inline them into the message.

A text or code file is read as UTF-8 (a byte-order mark or Latin-1 text that is not UTF-8 is read
too); a PDF's text comes out through pypdf (pure Python, so the bundles need no native library). A
file with NUL bytes, or a PDF with no text (a scan), is refused with a sentence: the model would read
noise. What is read is inlined after the typed text, each file in a fenced block headed by its name,
the fence longer than any run of backticks inside the file, so a Markdown file cannot close it early.

The context is finite: ``inline`` gives the files what the loaded context has left after the typed
text and room for the reply, in the order they were attached, and a file that does not fit whole is
cut at a line break with a sentence saying how much was kept (in the message, so the model knows
too). Tokens are counted by the caller's counter, else estimated at four characters a token, the
usual figure for English and code; the estimate is rough, so the budget keeps a margin.

No Qt here: the window's chips and the session's send use this module, and its tests need no window.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

# Reading stops here: what goes past it would not fit any context a computer like this loads
# (about 500k tokens), and a multi-gigabyte log would hold the window up.
MAX_READ_CHARS = 2_000_000
_SNIFF_BYTES = 8192
CHARS_PER_TOKEN = 4
_MARGIN = 0.9  # of the budget used: the chars/4 estimate is rough, and a chat template adds tokens
_MIN_REPLY_ROOM = 256  # tokens left for the reply, at least

TokenCounter = Callable[[str], int]


def estimate_tokens(text: str) -> int:
    """About how many tokens ``text`` is (four characters a token, rounded up)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Attachment:
    """One file read for a message: its name (what the message calls it), its path and its text.
    ``truncated`` says reading stopped at MAX_READ_CHARS (the file is longer than ``text``)."""

    name: str
    path: str
    text: str
    truncated: bool = False

    @property
    def size_words(self) -> str:
        """A short size for the chip ("1,234 lines")."""
        lines = self.text.count("\n") + (0 if self.text.endswith("\n") or not self.text else 1)
        return f"{lines:,} line{'s' if lines != 1 else ''}"


class AttachmentError(Exception):
    """A file that cannot be attached; str() is a sentence for the user."""


def read_attachment(path: str | Path) -> Attachment:
    """The text of the file at ``path``; AttachmentError with a sentence when it has none to give."""
    file = Path(path)
    name = file.name
    if file.is_dir():
        raise AttachmentError(f"{name} is a folder: attach the files in it one by one.")
    try:
        with file.open("rb") as stream:
            head = stream.read(_SNIFF_BYTES)
            if head.startswith(b"%PDF-") or file.suffix.lower() == ".pdf":
                return _read_pdf(file)
            rest = stream.read(MAX_READ_CHARS * 4)  # UTF-8 takes at most 4 bytes a character
            more = bool(stream.read(1))
    except FileNotFoundError:
        raise AttachmentError(f"{name} is not there any more.") from None
    except OSError as exc:
        raise AttachmentError(f"{name} could not be read ({exc.strerror or exc}).") from None
    data = head + rest
    if b"\0" in head and not _utf16(head):
        raise AttachmentError(f"{name} is not a text file (it looks like a program, image or archive): "
                              "only text, code and PDF files can be attached.")
    text = _decode(data)
    if text is None:
        raise AttachmentError(f"{name} is not a text file: only text, code and PDF files can be attached.")
    truncated = more or len(text) > MAX_READ_CHARS
    return Attachment(name, str(file), text[:MAX_READ_CHARS].replace("\r\n", "\n"), truncated)


def _utf16(head: bytes) -> bool:
    return head.startswith((b"\xff\xfe", b"\xfe\xff"))


def _decode(data: bytes) -> str | None:
    """The bytes as text: UTF-8 (a cut character at the end forgiven), UTF-16 with its mark, else
    Latin-1 when it reads as text (few control characters); None when it does not."""
    if _utf16(data[:2]):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if exc.start >= len(data) - 3:  # reading stopped inside a character
            return data[: exc.start].decode("utf-8-sig")
    text = data.decode("latin-1")
    controls = sum(1 for c in text[:_SNIFF_BYTES] if ord(c) < 32 and c not in "\t\n\r\f")
    return text if controls <= len(text[:_SNIFF_BYTES]) // 100 else None


def _read_pdf(file: Path) -> Attachment:
    # Imported here: only a PDF attachment pays for pypdf's import.
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    name = file.name
    pages: list[str] = []
    size = 0
    truncated = False
    try:
        reader = PdfReader(file)
        if reader.is_encrypted and not reader.decrypt(""):
            raise AttachmentError(f"{name} is a PDF locked with a password: open it, save an unlocked copy, "
                                  "and attach that.")
        for page in reader.pages:
            if size > MAX_READ_CHARS:
                truncated = True
                break
            text = page.extract_text() or ""
            pages.append(text.strip())
            size += len(text)
    except AttachmentError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise AttachmentError(f"{name} could not be read as a PDF ({exc}).") from None
    except Exception as exc:  # pypdf raises many kinds on broken files; none may take the window
        raise AttachmentError(f"{name} could not be read as a PDF ({type(exc).__name__}).") from None
    text = "\n\n".join(p for p in pages if p)
    if not text.strip():
        raise AttachmentError(f"{name} has no text to read (a scanned PDF holds pictures of pages): "
                              "only PDFs with text can be attached.")
    return Attachment(name, str(file), text[:MAX_READ_CHARS], truncated)


@dataclass(frozen=True)
class Inlined:
    """The message as sent (typed text and the files' blocks) and the sentences about files cut short."""

    text: str
    notes: tuple[str, ...] = ()


def budget_tokens(n_ctx: int, used_tokens: int, reply_tokens: int) -> int:
    """Tokens the files may take: the context less what the chat already holds and room for the reply
    (at most half the context, at least _MIN_REPLY_ROOM), with a margin for the estimate; never < 0."""
    reply_room = max(_MIN_REPLY_ROOM, min(reply_tokens, n_ctx // 2))
    return max(0, int((n_ctx - used_tokens - reply_room) * _MARGIN))


def inline(
    text: str,
    attachments: Sequence[Attachment],
    budget: int,
    count: TokenCounter = estimate_tokens,
) -> Inlined:
    """``text`` followed by each file in a fenced block headed by its name, within ``budget`` tokens for
    the files (``budget_tokens``); a file cut to fit says so in a sentence after its block."""
    parts = [text.strip()] if text.strip() else []
    notes: list[str] = []
    left = budget
    for attachment in attachments:
        body = attachment.text.rstrip("\n")
        # The block's name, fences and a possible sentence take tokens too: the text gets the rest.
        fence = _fence_for(body)
        frame = count(f"{attachment.name}:\n{fence}{_language(attachment.name)}\n\n{fence}")
        whole = count(body) + frame <= left and not attachment.truncated
        longest_note = _cut_sentence(attachment.name, "x\n" * 99_999, body, 10**9)
        room = left - frame - (0 if whole else count(longest_note))
        kept = body if whole else _fit(body, room, count)
        note = ""
        if len(kept) < len(body) or attachment.truncated:
            total = len(body) if not attachment.truncated else None
            note = _cut_sentence(attachment.name, kept, body, total)
            notes.append(note)
        if not kept and len(body) > 0:
            parts.append(note)
            continue
        fence = _fence_for(kept)
        block = f"{attachment.name}:\n{fence}{_language(attachment.name)}\n{kept}\n{fence}"
        parts.append(block + (f"\n{note}" if note else ""))
        left -= count(parts[-1])
    return Inlined("\n\n".join(parts), tuple(notes))


def _fit(body: str, budget: int, count: TokenCounter) -> str:
    """The longest start of ``body`` (ending at a line break when it is cut) within ``budget`` tokens."""
    if budget <= 0:
        return ""
    if count(body) <= budget:
        return body
    low, high = 0, len(body)
    while low < high:  # the longest prefix whose count fits (the count grows with the prefix)
        mid = (low + high + 1) // 2
        if count(body[:mid]) <= budget:
            low = mid
        else:
            high = mid - 1
    kept = body[:low]
    line_end = kept.rfind("\n")
    return kept[:line_end] if line_end > 0 else kept


def _cut_sentence(name: str, kept: str, body: str, total: int | None) -> str:
    if not kept:
        return f"[{name} was left out: there is no room left for it in the model's context.]"
    lines_kept = kept.count("\n") + 1
    if total is None:
        return (f"[Only the first {lines_kept:,} lines of {name} are included: the file is longer than "
                f"localchat reads ({MAX_READ_CHARS:,} characters).]")
    share = len(kept) / max(1, total)
    lines = body.count("\n") + 1
    return (f"[Only the first {lines_kept:,} of {lines:,} lines of {name} ({share:.0%} of it) are "
            "included: the whole file does not fit in the model's context.]")


def _fence_for(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


_LANGUAGES = {
    ".py": "python", ".js": "javascript", ".ts": "typescript", ".tsx": "tsx", ".jsx": "jsx",
    ".rs": "rust", ".go": "go", ".c": "c", ".h": "c", ".cpp": "cpp", ".hpp": "cpp", ".cc": "cpp",
    ".java": "java", ".kt": "kotlin", ".rb": "ruby", ".php": "php", ".sh": "bash", ".ps1": "powershell",
    ".sql": "sql", ".html": "html", ".css": "css", ".json": "json", ".toml": "toml", ".yaml": "yaml",
    ".yml": "yaml", ".md": "markdown", ".xml": "xml", ".cs": "csharp", ".swift": "swift",
}


def _language(name: str) -> str:
    """The fence's language tag from the file's ending (highlighting in the chat), or none."""
    return _LANGUAGES.get(Path(name).suffix.lower(), "")
