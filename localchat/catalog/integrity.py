"""Whether a downloaded model file is still the file that was verified: the ``.sha256`` marker.

A download (from the hub or the package index) hashes the finished file and
writes ``<name>.sha256`` next to it (the bare digest, as earlier versions
wrote it and read it, so going back to one of them does not download the file
again), and ``<name>.verified``, the digest with the file's size and
modification time at that moment::

    {"sha256": "<64 hexadecimal digits>", "size": 1117320736, "mtime_ns": 1733270400123456789}

Hashing gigabytes on every start (or every load) would cost seconds to
minutes, so the check is lazy: while the size and mtime are the recorded ones,
the file is trusted without reading it; when either changed (the file was
edited, replaced, restored from a backup, damaged by a copy), it is hashed
again before it is used. The same bytes get the new size/mtime recorded and
are trusted again; other bytes raise ``ModelChangedError`` with a sentence,
and the marker is left in place so the file keeps being refused until it is
downloaded again. A marker written by an earlier version has no
``.verified`` record (or one for another digest): the file is checked once,
then recorded.

Files without a marker (a GGUF the user brought, an LM Studio folder) are not
checked: there is nothing to compare them with.

This lives in the catalog layer because both the downloads (hub) and the
model load (engine) use it, and neither may import the other.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

log = logging.getLogger(__name__)

MARKER_SUFFIX = ".sha256"
RECORD_SUFFIX = ".verified"
HASH_BLOCK = 8 * 1024 * 1024
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


class ModelChangedError(Exception):
    """A verified model file's bytes are no longer the ones that were verified."""


@dataclass(frozen=True)
class Record:
    """What a marker says: the digest, and the size and mtime the file had when it was hashed."""

    sha256: str
    size: int | None = None  # None in a marker written before size and mtime were recorded
    mtime_ns: int | None = None

    def matches_stat(self, st: os.stat_result) -> bool:
        return self.size == st.st_size and self.mtime_ns == st.st_mtime_ns


class State(Enum):
    UNVERIFIED = "unverified"  # no marker: nothing to compare with
    VERIFIED = "verified"  # the marker's size and mtime are the file's: trusted without hashing
    NEEDS_CHECK = "needs check"  # the file changed since it was hashed (or an old marker): hash before use


def marker_path(path: Path) -> Path:
    return path.with_name(path.name + MARKER_SUFFIX)


def record_path(path: Path) -> Path:
    return path.with_name(path.name + RECORD_SUFFIX)


def sidecars(path: Path) -> tuple[Path, Path]:
    """The files that vouch for ``path``, to delete along with it."""
    return marker_path(path), record_path(path)


def sha256_file(
    path: Path,
    is_cancelled: Callable[[], bool] | None = None,
    on_block: Callable[[int], None] | None = None,
) -> str:
    """SHA-256 of the bytes on disk. ``is_cancelled`` is polled between blocks (raise from it to stop)."""
    digest = hashlib.sha256()
    with path.open("rb") as src:
        while block := src.read(HASH_BLOCK):
            if is_cancelled is not None and is_cancelled():
                raise InterruptedError(f"hashing {path.name} was cancelled")
            digest.update(block)
            if on_block is not None:
                on_block(len(block))
    return digest.hexdigest()


def read_record(path: Path) -> Record | None:
    """What vouches for ``path``, or None when it has no readable marker."""
    try:
        sha = marker_path(path).read_text(encoding="ascii").strip().lower()
    except (OSError, UnicodeDecodeError):
        return None
    if not _SHA256_RE.match(sha):
        return None
    try:
        data = json.loads(record_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Record(sha)
    if not isinstance(data, dict) or data.get("sha256") != sha:
        return Record(sha)  # recorded for another digest: the marker was rewritten since
    size, mtime_ns = data.get("size"), data.get("mtime_ns")
    if not isinstance(size, int) or not isinstance(mtime_ns, int):
        return Record(sha)
    return Record(sha, size, mtime_ns)


def _write_atomically(path: Path, text: str) -> None:
    # A name of its own per writer: two engine processes may re-record the same model at once.
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_record(path: Path, sha256: str) -> Record:
    """Record that ``path`` (as it is on disk now) has ``sha256``."""
    st = path.stat()
    record = Record(sha256.lower(), st.st_size, st.st_mtime_ns)
    _write_atomically(marker_path(path), record.sha256)
    _write_atomically(
        record_path(path),
        json.dumps({"sha256": record.sha256, "size": record.size, "mtime_ns": record.mtime_ns}),
    )
    return record


def state(path: Path) -> State:
    """Cheap (one stat, one small read): whether ``path`` would be hashed again before use."""
    record = read_record(path)
    if record is None:
        return State.UNVERIFIED
    try:
        st = path.stat()
    except OSError:
        return State.NEEDS_CHECK
    return State.VERIFIED if record.matches_stat(st) else State.NEEDS_CHECK


def verified_sha256(path: Path, is_cancelled: Callable[[], bool] | None = None) -> str | None:
    """The digest of ``path`` when it is the file its marker vouches for, hashing only if it changed.

    None when there is no marker (or no file). Raises ModelChangedError when the
    file's bytes differ from the recorded digest.
    """
    record = read_record(path)
    if record is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    if record.matches_stat(st):
        return record.sha256
    log.info("%s changed since it was verified (size or mtime); checking its SHA-256 again", path)
    got = sha256_file(path, is_cancelled)
    if got != record.sha256:
        raise ModelChangedError(
            f"{path.name} is no longer the file that was downloaded and verified: its bytes changed on "
            f"disk (SHA-256 {got[:12]}..., expected {record.sha256[:12]}...). Download it again from the "
            "model manager (or with `localchat pull`) before using it."
        )
    try:
        write_record(path, got)
    except OSError as exc:  # a folder we cannot write: the file is still good, only hashed again next time
        log.warning("could not record the verification of %s: %s", path, exc)
    return got


def check_before_use(path: Path) -> None:
    """Raise ModelChangedError when a verified model changed on disk; files without a marker pass."""
    verified_sha256(path)
