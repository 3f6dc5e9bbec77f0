"""Saved KV caches of recent prompts, so a conversation taken up again is not read again.

A context's cache holds one conversation at a time. Switching to another chat,
an API client alternating two conversations, or a restart would each make the
next prompt pay for its whole history again (about 80 s for 1000 tokens of the
1.5B starter on a 2-core CPU). ``StateCache`` keeps what llama.cpp's state
functions serialise (``Context.save_state``: the sequence's KV cells, no
logits) keyed by the exact tokens it holds:

- in memory, the states of the last prompts, least recently used first out,
  bounded in bytes;
- on disk (``DiskStates``), the last conversations' states under the user's
  cache folder, one file each, bounded in bytes, named by the model file's
  identity and a hash of the tokens, so a restart finds them.

A new prompt restores the stored state with the longest common prefix (when
it beats what the context already holds by enough to matter); the decode loop
then reads only the tokens after it. A state that is a prefix of a newer one
of the same model is dropped: the newer one serves every prompt the older one
could.

The restored cells are the bytes the model computed then, but not always the
bytes a read of the history from scratch computes: llama.cpp's kernels depend
on how many tokens one decode holds (on a CPU, flash attention takes another
algorithm from 64 tokens on, and a single token another matrix product), and a
reply's own cells were computed a token or a draft at a time. So by default a
restored state, like the cells a context keeps from one reply to the next, can
change a near-tie in the reply (docs/BENCHMARKS.md, "Restored states and the
reply"). With ``EngineConfig.exact`` the contexts read prompts on a grid
(``draft_sources.read_prompt``): only cells read in the chunks a read from
scratch reads are kept and saved, under a key naming how they were computed
(``model_key``'s recipe), and a restore stops at a grid line, so the reply is
the one it would be with the history read again, at the price of reading the
last reply (and up to a grid's worth of tokens before it) again.

Disk files are written by one background thread (a reply's end should not wait
on a disk), atomically (a temporary file renamed into place), and checked on
reading: a truncated or corrupt file, one of another model, or one llama.cpp
refuses is ignored with a log line, and deleted when damaged.
"""

from __future__ import annotations

import array
import contextlib
import hashlib
import json
import logging
import os
import queue
import struct
import sys
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from localchat.engine.backend import Context
from localchat.engine.draft_sources import common_prefix

log = logging.getLogger("localchat.engine.states")

MAGIC = b"LCKVST01"
FORMAT = 1
SUFFIX = ".kvstate"
_HEAD = struct.Struct("<8sI")  # magic, length of the JSON header that follows
_SAMPLE = 1 << 20  # bytes read from each end of a model file for its identity

Tokens = tuple[int, ...]


def _llama_version() -> str:
    import llama_cpp

    return str(llama_cpp.__version__)


def model_key(path: Path, recipe: str = "") -> str:
    """A short name for one model file as it is now (its size, time and first and last MiB).

    llama.cpp's version is part of it: its state layout may change between
    versions, and a state another version wrote is then never looked at.
    ``recipe`` names how the cells were computed, where that must match too
    (prompts read as from scratch: the layout of the weights, the grid, threads, devices).
    """
    st = path.stat()
    h = hashlib.sha256(f"{FORMAT}:{_llama_version()}:{st.st_size}:{st.st_mtime_ns}".encode())
    if recipe:
        h.update(f":{recipe}".encode())
    with path.open("rb") as fh:
        h.update(fh.read(_SAMPLE))
        if st.st_size > 2 * _SAMPLE:
            fh.seek(-_SAMPLE, os.SEEK_END)
            h.update(fh.read(_SAMPLE))
    return h.hexdigest()[:20]


def _token_bytes(tokens: Sequence[int]) -> bytes:
    arr = array.array("i", tokens)
    if sys.byteorder == "big":
        arr.byteswap()  # files are little-endian everywhere
    return arr.tobytes()


def _tokens_from(raw: bytes) -> Tokens:
    arr = array.array("i")
    arr.frombytes(raw)
    if sys.byteorder == "big":
        arr.byteswap()
    return tuple(arr)


def file_name(model: str, tokens: Sequence[int]) -> str:
    return f"{model}-{hashlib.sha256(_token_bytes(tokens)).hexdigest()[:16]}{SUFFIX}"


@dataclass(frozen=True)
class _FileHeader:
    tokens: Tokens
    offset: int  # where the state bytes start
    state_bytes: int
    crc32: int  # over the token bytes and the state bytes


class DiskStates:
    """The last conversations' states in ``folder``, at most ``max_bytes`` in all.

    ``write`` only queues; one daemon thread does the writing, so ``flush``
    (and ``close``) wait for it. Lookups run on the engine's thread against an
    index of the files' headers, read once per model.
    """

    def __init__(self, folder: Path, max_bytes: int) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self._index: dict[str, dict[Tokens, Path]] = {}
        self._lock = threading.Lock()
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._pending: set[tuple[str, Tokens]] = set()  # queued, not yet written

    # -- reading (the engine's thread) ------------------------------------------------
    def entries(self, model: str) -> list[Tokens]:
        with self._lock:
            known = self._index.get(model)
            if known is None:
                known = self._index[model] = self._scan(model)
            return list(known)

    def _scan(self, model: str) -> dict[Tokens, Path]:
        found: dict[Tokens, Path] = {}
        try:
            paths = sorted(self.folder.glob(f"{model}-*{SUFFIX}"))
        except OSError:
            return found
        for path in paths:
            header = self._header(path, model)
            if header is not None:
                found[header.tokens] = path
        return found

    def _header(self, path: Path, model: str) -> _FileHeader | None:
        """The file's header when it is whole and of ``model``; None (with a log line) otherwise."""
        try:
            size = path.stat().st_size
            with path.open("rb") as fh:
                magic, length = _HEAD.unpack(fh.read(_HEAD.size))
                if magic != MAGIC or length > 4096:
                    raise ValueError("not a saved state")
                meta = json.loads(fh.read(length))
                n = int(meta["n_tokens"])
                tokens = _tokens_from(fh.read(4 * n))
                offset = _HEAD.size + length + 4 * n
                header = _FileHeader(tokens, offset, int(meta["state_bytes"]), int(meta["crc32"]))
        except (OSError, ValueError, KeyError, TypeError, struct.error) as exc:
            log.warning("ignoring the damaged saved state %s (%s); deleting it", path.name, exc)
            _unlink(path)
            return None
        if meta.get("format") != FORMAT or meta.get("model") != model:
            log.warning("ignoring the saved state %s: it belongs to another model or version", path.name)
            return None
        if len(tokens) != n or size != offset + header.state_bytes:
            log.warning("ignoring the truncated saved state %s (%d bytes); deleting it", path.name, size)
            _unlink(path)
            return None
        return header

    def read(self, model: str, tokens: Tokens) -> bytearray | None:
        """The state saved for exactly ``tokens``; None, with a log line, when it is gone or damaged."""
        with self._lock:
            path = self._index.get(model, {}).get(tokens)
        if path is None:
            return None
        header = self._header(path, model)
        blob: bytearray | None = None
        if header is not None and header.tokens == tokens:
            blob = bytearray(header.state_bytes)
            try:
                with path.open("rb") as fh:
                    fh.seek(header.offset)
                    got = fh.readinto(blob)
            except OSError as exc:
                log.warning("could not read the saved state %s: %s", path.name, exc)
                got = -1
            crc = zlib.crc32(blob, zlib.crc32(_token_bytes(tokens)))
            if got != header.state_bytes or crc != header.crc32:
                if got >= 0:
                    log.warning("ignoring the corrupt saved state %s; deleting it", path.name)
                    _unlink(path)
                blob = None
        if blob is None:
            self.discard(model, tokens)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: the last to be pruned
        return blob

    def discard(self, model: str, tokens: Tokens) -> None:
        with self._lock:
            path = self._index.get(model, {}).pop(tokens, None)
        if path is not None:
            _unlink(path)

    # -- writing (the background thread) -------------------------------------------------
    def write(self, model: str, tokens: Tokens, blob: bytearray) -> None:
        """Queue ``blob`` (not to be changed afterwards) to be saved as the state of ``tokens``."""
        if len(blob) > self.max_bytes:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="kv-state-writer", daemon=True)
            self._thread.start()
        with self._lock:
            # A queued state this one extends need not reach the disk at all (an agent's quick turns).
            self._pending -= {k for k in self._pending if k[0] == model and _is_prefix(k[1], tokens)}
            self._pending.add((model, tokens))
        self._jobs.put(lambda: self._write_queued(model, tokens, blob))

    def _write_queued(self, model: str, tokens: Tokens, blob: bytearray) -> None:
        with self._lock:
            if (model, tokens) not in self._pending:
                return
            self._pending.discard((model, tokens))
        self._write_now(model, tokens, blob)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                job()
            except Exception:  # a cache must never take the engine down
                log.exception("saving a conversation's state failed")
            finally:
                self._jobs.task_done()

    def _write_now(self, model: str, tokens: Tokens, blob: bytearray) -> None:
        known = self.entries(model)
        path = self.folder / file_name(model, tokens)
        if tokens in known and path.exists():
            os.utime(path)
            return
        token_bytes = _token_bytes(tokens)
        meta = json.dumps({
            "format": FORMAT, "model": model, "llama_cpp": _llama_version(), "n_tokens": len(tokens),
            "state_bytes": len(blob), "crc32": zlib.crc32(blob, zlib.crc32(token_bytes)),
        }).encode()
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with tmp.open("wb") as fh:
                fh.write(_HEAD.pack(MAGIC, len(meta)))
                fh.write(meta)
                fh.write(token_bytes)
                fh.write(blob)
            # No fsync: a file cut short by a power cut fails the size and checksum tests and is dropped.
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("could not save a conversation's state in %s: %s", self.folder, exc)
            _unlink(tmp)
            return
        with self._lock:
            index = self._index.setdefault(model, {})
            older = [t for t in index if len(t) < len(tokens) and tokens[: len(t)] == t]
            stale = [index.pop(t) for t in older]
            index[tokens] = path
        for p in stale:
            _unlink(p)
        self._prune(keep=path)

    def _prune(self, keep: Path) -> None:
        """Delete the least recently used files (of any model) until the folder fits its bound."""
        files: list[tuple[float, int, Path]] = []
        try:
            for p in self.folder.glob(f"*{SUFFIX}"):
                with contextlib.suppress(OSError):  # gone meanwhile (another engine process pruned it)
                    st = p.stat()
                    files.append((st.st_mtime, st.st_size, p))
        except OSError:
            return
        total = sum(size for _, size, _ in files)
        with contextlib.suppress(OSError):
            for tmp in self.folder.glob(f".*{SUFFIX}.*.tmp"):  # left by a process killed mid-write
                if time.time() - tmp.stat().st_mtime > 600:
                    _unlink(tmp)
        for _, size, p in sorted(files):
            if total <= self.max_bytes:
                break
            if p == keep:
                continue
            _unlink(p)
            total -= size
            with self._lock:
                for index in self._index.values():
                    for t in [t for t, q in index.items() if q == p]:
                        del index[t]

    def flush(self) -> None:
        """Wait until every queued state is on disk."""
        if self._thread is not None:
            self._jobs.join()

    def close(self) -> None:
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None


def _unlink(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:  # e.g. open elsewhere on Windows: pruned next time
        log.debug("could not delete %s: %s", path, exc)


class StateCache:
    """Recent contexts' states in memory (``memory_bytes``) and on disk (``disk``, optional).

    ``remember`` after a reply, ``restore`` before the next prompt is read. One
    cache serves every context of an engine: states are keyed by their model.
    """

    def __init__(
        self,
        memory_bytes: int,
        disk: DiskStates | None = None,
        min_tokens: int = 64,
        min_gain: int = 16,
    ) -> None:
        self.memory_bytes = memory_bytes
        self.disk = disk
        self.min_tokens = min_tokens  # shorter states are read again faster than kept
        self.min_gain = min_gain  # restore only when it saves at least this many tokens
        self._memory: OrderedDict[tuple[str, Tokens], bytearray] = OrderedDict()
        self._used = 0

    @property
    def enabled(self) -> bool:
        return self.memory_bytes > 0 or self.disk is not None

    @property
    def memory_used(self) -> int:
        return self._used

    def stored(self, model: str) -> list[Tokens]:
        """The token sequences whose states are kept for ``model``, in memory or on disk."""
        held = [t for m, t in self._memory if m == model]
        on_disk = self.disk.entries(model) if self.disk is not None else []
        return held + [t for t in on_disk if t not in held]

    def remember(self, ctx: Context, model: str) -> None:
        """Keep the state of what ``ctx`` holds now.

        With a read grid (``ctx.read_grid``) only a state whose every cell was read
        as from scratch is kept (the caller cuts ``ctx`` back to ``ctx.fresh`` first):
        ``restore`` then trusts each cell of it.
        """
        tokens = tuple(ctx.tokens)
        if not self.enabled or len(tokens) < self.min_tokens:
            return
        if ctx.read_grid and ctx.fresh < len(tokens):
            return
        key = (model, tokens)
        if key in self._memory:
            self._memory.move_to_end(key)
            return
        t0 = time.perf_counter()
        blob = ctx.save_state()
        if not blob:
            return
        for old in [k for k in self._memory if k[0] == model and _is_prefix(k[1], tokens)]:
            self._drop(old)
        if len(blob) <= self.memory_bytes:
            self._memory[key] = blob
            self._used += len(blob)
            while self._used > self.memory_bytes:
                self._drop(next(iter(self._memory)))
        if self.disk is not None:
            self.disk.write(model, tokens, blob)
        log.debug("kept the state of %d tokens (%d bytes) in %.0f ms", len(tokens), len(blob),
                  (time.perf_counter() - t0) * 1000)

    def _drop(self, key: tuple[str, Tokens]) -> None:
        self._used -= len(self._memory.pop(key))

    def restore(self, ctx: Context, model: str, prompt: Sequence[int], whole_only: bool = False) -> int:
        """Load the stored state that shares the longest prefix with ``prompt`` into ``ctx``.

        Returns the number of cells ``ctx`` holds after the restore (0 when nothing
        beat what ``ctx`` already holds). ``whole_only``: only states that are
        a prefix of the prompt (recurrent caches cannot drop a partial tail).

        With a read grid (``ctx.read_grid``, see ``draft_sources.read_prompt``) a
        state is used up to a grid line only, and ``ctx`` is cut back to it: the
        prompt's next chunk is then the one a read from scratch reads.
        """
        if not self.enabled or not prompt:
            return 0
        grid = ctx.read_grid
        usable = len(prompt) - 1  # the prompt's last token is always read again, for its logits

        def usable_of(shared: int) -> int:
            n = min(shared, usable)
            return n - n % grid if grid else n

        have = usable_of(min(common_prefix(ctx.tokens, prompt), ctx.fresh if grid else usable))
        best: Tokens | None = None
        best_n = have
        from_disk = False
        candidates = [(t, False) for m, t in self._memory if m == model]
        if self.disk is not None:
            held = {t for t, _ in candidates}
            candidates += [(t, True) for t in self.disk.entries(model) if t not in held]
        for tokens, on_disk in candidates:
            n = usable_of(common_prefix(tokens, prompt))
            if whole_only and n < len(tokens):
                continue
            if n > best_n:
                best, best_n, from_disk = tokens, n, on_disk
        if best is None or best_n - have < self.min_gain:
            return 0
        t0 = time.perf_counter()
        blob = self._memory.get((model, best)) if not from_disk else None
        if blob is not None:
            self._memory.move_to_end((model, best))
        elif self.disk is not None:
            blob = self.disk.read(model, best)
        if blob is None:
            return 0
        if not ctx.load_state(blob, best, fresh=grid > 0):
            log.warning("llama.cpp refused a saved state of %d tokens; reading the prompt instead", len(best))
            if from_disk and self.disk is not None:
                self.disk.discard(model, best)
            elif (model, best) in self._memory:
                self._drop((model, best))
            return 0
        if grid:
            ctx.truncate(best_n)
        log.info("restored the cache of %d tokens (%d of the prompt) from %s in %.0f ms", len(best), best_n,
                 "disk" if from_disk else "memory", (time.perf_counter() - t0) * 1000)
        return ctx.n_past

    def forget_memory(self) -> None:
        self._memory.clear()
        self._used = 0

    def close(self) -> None:
        if self.disk is not None:
            self.disk.close()


def _is_prefix(short: Tokens, long: Tokens) -> bool:
    return len(short) <= len(long) and long[: len(short)] == short
