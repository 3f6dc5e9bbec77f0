"""Model downloads for the GUI: a catalog entry's target and drafter, off the GUI thread.

``DownloadService.start(entry_id)`` runs ``hub.pull.pull`` in a worker thread
and returns a job id. Progress, completion and failure reach the GUI thread
through services/main_thread.py (the GUI thread never waits on the network),
as signals:

- ``progress(job, bytes_done, bytes_total)``
- ``finished(job, target_path, draft_path_or_empty)``
- ``failed(job, sentence)`` (a cancel is reported as ``failed`` with "Download cancelled.")

``start_file(repo, filename)`` downloads one GGUF file the hub search found (no catalog entry, no
drafter: the model manager pairs it as any local model), through the same verified, resumable
``hub.download.DownloadJob``, with the same signals.

Cancel sets the job's event; huggingface-hub checks it between chunks, and the
partial ``.part`` file is kept so the next start resumes it. ``cancel_all`` is
what the app calls as it quits: it cancels every running download and waits
(a few seconds at most) for the workers to close their files, so a download
stopped by closing the window resumes next time like a cancelled one.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from localchat.services.main_thread import on_main
from localchat.services.qt_signals import emit

log = logging.getLogger(__name__)


class DownloadService(QObject):
    progress = Signal(object, object, object)  # job, bytes done, bytes total (ints may exceed 32 bits)
    finished = Signal(object, str, str)  # job, target path, draft path ("" without one)
    failed = Signal(object, str)  # job, sentence

    def __init__(
        self,
        models_dir: Callable[[], Path],
        *,
        source: str = "hub",
        catalog: Callable[[], Any] | None = None,
        endpoint: str | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._models_dir = models_dir
        self._source = source
        self._catalog = catalog
        self._endpoint = endpoint
        self._ids = itertools.count(1)
        self._cancel: dict[int, threading.Event] = {}
        self._entries: dict[int, str] = {}  # running job -> catalog entry id
        self._workers: dict[int, threading.Thread] = {}
        self._tell = on_main(self._on_worker_event)  # (kind, job, args) from a worker, on the GUI thread

    @property
    def active(self) -> bool:
        return bool(self._cancel)

    def running(self) -> dict[int, str]:
        """The downloads still running (job -> entry id), so a reopened window can show them."""
        return dict(self._entries)

    def start(self, entry_id: str, *, source: str | None = None, quant: str | None = None,
              with_drafter: bool = True) -> int:
        """Start downloading ``entry_id`` (its ``quant``, else the default one), with its draft model
        unless ``with_drafter`` is False (predicted not to pay here: catalog/drafter_payoff.py); if it
        is already downloading, return that job instead."""
        return self._spawn(entry_id, self._run, (entry_id, source or self._source, quant, with_drafter))

    def start_file(self, repo: str, filename: str, size: int = 0) -> int:
        """Start downloading ``filename`` of the hub repository ``repo`` (one file, no drafter); if it
        is already downloading, return that job instead."""
        return self._spawn(f"{repo}/{filename}", self._run_file, (repo, filename, size))

    def _spawn(self, key: str, run: Callable[..., None], args: tuple[Any, ...]) -> int:
        for job, running in self._entries.items():
            if running == key:
                return job
        job = next(self._ids)
        self._entries[job] = key
        cancel = threading.Event()
        self._cancel[job] = cancel
        worker = threading.Thread(target=run, args=(job, *args, cancel), name=f"download-{job}", daemon=True)
        self._workers[job] = worker
        worker.start()
        return job

    def cancel(self, job: object) -> None:
        event = self._cancel.get(job) if isinstance(job, int) else None
        if event is not None:
            event.set()

    def cancel_all(self, wait_s: float = 5.0) -> bool:
        """Cancel every running download and wait up to ``wait_s`` for the workers to stop.

        Called when the app quits (after the event loop ended, so the wait freezes nothing).
        True when every worker stopped in time.
        """
        for event in list(self._cancel.values()):
            event.set()
        deadline = time.monotonic() + wait_s
        for worker in list(self._workers.values()):
            worker.join(max(0.0, deadline - time.monotonic()))
        self._workers = {job: w for job, w in self._workers.items() if w.is_alive()}
        if self._workers:
            log.warning("%d download(s) still stopping at exit", len(self._workers))
        return not self._workers

    # -- worker thread ------------------------------------------------------------------

    def _run(
        self, job: int, entry_id: str, source: str, quant: str | None, with_drafter: bool,
        cancel: threading.Event,
    ) -> None:
        from localchat.catalog.drafters import load_catalog
        from localchat.hub.errors import DownloadError
        from localchat.hub.pull import pull as hub_pull


        def on_progress(p: Any) -> None:
            self._tell("progress", job, (int(p.bytes_done), int(p.bytes_total)))

        try:
            catalog = (self._catalog or load_catalog)()
            entry = catalog.get(entry_id)
            result = hub_pull(entry, self._models_dir(), catalog=catalog, source=source, quant=quant,
                              with_drafter=with_drafter, progress=on_progress, cancel=cancel,
                              endpoint=self._endpoint)
        except DownloadError as exc:
            message = "Download cancelled." if cancel.is_set() else str(exc)
            self._tell("failed", job, (message,))
        except KeyError:
            self._tell("failed", job, (f"The catalog has no model called {entry_id!r}.",))
        except Exception as exc:  # a sentence for the user, the details for the log
            log.exception("download %s failed", entry_id)
            self._tell("failed", job, (f"The download failed ({type(exc).__name__}: {exc}).",))
        else:
            draft = str(result.drafter) if result.drafter else ""
            self._tell("finished", job, (str(result.target), draft))

    def _run_file(self, job: int, repo: str, filename: str, size: int, cancel: threading.Event) -> None:
        from localchat.hub.download import DownloadItem, DownloadJob
        from localchat.hub.errors import DownloadError

        def on_progress(p: Any) -> None:
            self._tell("progress", job, (int(p.bytes_done), int(p.bytes_total)))

        try:
            paths = DownloadJob([DownloadItem(repo, filename, size=size)], self._models_dir(),
                                endpoint=self._endpoint, progress=on_progress, cancel=cancel).run()
        except DownloadError as exc:
            self._tell("failed", job, ("Download cancelled." if cancel.is_set() else str(exc),))
        except Exception as exc:  # a sentence for the user, the details for the log
            log.exception("download %s/%s failed", repo, filename)
            self._tell("failed", job, (f"The download failed ({type(exc).__name__}: {exc}).",))
        else:
            self._tell("finished", job, (str(paths[0]), ""))

    # -- GUI thread -----------------------------------------------------------------------

    def _on_worker_event(self, kind: str, job: int, args: tuple[Any, ...]) -> None:
        if kind == "progress":
            emit(self.progress, job, *args)
            return
        self._cancel.pop(job, None)
        self._entries.pop(job, None)
        self._workers.pop(job, None)
        emit(self.finished if kind == "finished" else self.failed, job, *args)
