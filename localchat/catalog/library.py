"""The local model library and automatic drafter pairing.

Models live in localchat's models folder (settings.folders.models_dir),
in huggingface-hub's cache, and in any folders or single files the user adds
(an LM Studio folder, an Ollama-exported GGUF). The library lists the GGUF
files there with their header metadata; a file that cannot be read is listed
with the reason instead of being dropped, so the UI can say why.

Folders passed as ``read_only_dirs`` (huggingface-hub's cache, the user's
other model folders such as LM Studio's) and single files are another
program's or the user's own: their models are listed, paired and loaded where
they are, never copied, moved or deleted (``LocalModel.read_only``).

Pairing picks what drafts for a target, in this order:
1. the drafter drafters.toml lists for the target, if it is on disk and
   shares the target's vocabulary;
2. otherwise a local model with the same vocabulary fingerprint that is
   smaller than the target: the largest within ``MAX_DRAFT_RATIO`` (an eighth)
   of its size, else the smallest beyond it. The ratio is a prior, not a
   refusal: whether a drafter pays is a question of this computer's costs (a
   0.5B drafter is 44% of a Q4_K_M 1.5B, which it slows on a small CPU, and 14%
   of the same 1.5B in F16, which it speeds up by a third), so a drafter beyond
   it is tried (``Pairing.trial``), and the engine's measurement at load keeps
   it or drafts by lookup alone, saying so (engine.adaptive.lookup_instead);
3. otherwise n-gram prompt lookup, which needs no model.
The choice always comes with a sentence saying why, for the model manager and
the window.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from localchat.catalog.drafters import Catalog, DrafterEntry
from localchat.catalog.errors import GgufError
from localchat.catalog.gguf import GgufMetadata, MetadataCache, read_metadata
from localchat.settings import folders
from localchat.settings.drafter_kind import DrafterKind
from localchat.settings.options import DRAFT_TOKENS_DEFAULT

# A drafter within this share of the target's size usually pays (preferred); a bigger one, still
# smaller than the target, is tried and kept by what it measures (see the module's docstring).
MAX_DRAFT_RATIO = 1 / 8
MAX_VOCAB_DIFFERENCE = 128  # llama.cpp's limit on vocabulary size differences

_SHARD_RE = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)


def default_models_dir() -> Path:
    return folders.models_dir()


def hf_cache_dir() -> Path:
    """huggingface-hub's cache folder (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub)."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


@dataclass(frozen=True)
class LocalModel:
    """A GGUF on disk, with its metadata or the sentence saying why it cannot be used."""

    path: Path
    size: int  # bytes, all shards of a split model together
    metadata: GgufMetadata | None
    error: str = ""
    folder: Path | None = None  # the scanned folder it was found under (None for a single file)
    read_only: bool = False  # in a folder localchat only reads: never deleted or moved from there

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def usable(self) -> bool:
        return self.metadata is not None and not self.metadata.is_projector


class Library:
    """GGUF models in some folders plus some single files; scanned on demand."""

    def __init__(
        self,
        models_dirs: Sequence[str | os.PathLike[str]],
        extra_files: Sequence[str | os.PathLike[str]] = (),
        cache: MetadataCache | None = None,
        *,
        read_only_dirs: Sequence[str | os.PathLike[str]] = (),
    ) -> None:
        self.models_dirs = tuple(Path(d) for d in models_dirs)
        self.read_only_dirs = tuple(Path(d) for d in read_only_dirs)
        self.extra_files = tuple(Path(f) for f in extra_files)
        self.cache = cache
        self._models: list[LocalModel] | None = None

    @property
    def folders(self) -> tuple[Path, ...]:
        """Every folder scanned, localchat's own first."""
        return (*self.models_dirs, *self.read_only_dirs)

    def refresh(self) -> list[LocalModel]:
        seen: set[Path] = set()
        found: list[LocalModel] = []
        read_only = set(self.read_only_dirs) - set(self.models_dirs)
        places: list[tuple[Path, Path | None]] = [
            *((p, root) for root in self.folders for p in _scan(root)),
            *((f, None) for f in self.extra_files),
        ]
        for path, root in places:
            try:
                key = path.resolve()
            except OSError:
                key = path
            if key in seen:
                continue
            seen.add(key)
            model = self.describe(path)
            found.append(replace(model, folder=root, read_only=root is None or root in read_only))
        found.sort(key=lambda m: m.name.lower())
        self._models = found
        return found

    def models(self) -> list[LocalModel]:
        return self._models if self._models is not None else self.refresh()

    def describe(self, path: Path) -> LocalModel:
        size = _total_size(path)
        try:
            return LocalModel(path, size, read_metadata(path, self.cache))
        except GgufError as exc:
            return LocalModel(path, size, None, str(exc))

    def listed(self, path: Path) -> LocalModel | None:
        """The scanned model at ``path`` (the same file by its real path); None where it is not listed
        or the library was not scanned yet (pairing then reads the header itself)."""
        if self._models is None:
            return None
        key = _resolve(path)
        return next((m for m in self._models if _resolve(m.path) == key), None)

    def find_file(self, filename: str, repo: str = "") -> LocalModel | None:
        """A usable model whose file is called ``filename``; one under a folder named after ``repo`` first."""
        base = Path(filename).name.lower()
        matches = [m for m in self.models() if m.usable and m.name.lower() == base]
        if repo:
            repo_parts = tuple(p.lower() for p in repo.split("/"))
            for m in matches:
                parents = tuple(p.lower() for p in m.path.parent.parts[-2:])
                if parents == repo_parts:
                    return m
        return matches[0] if matches else None



def _scan(root: Path) -> Iterable[Path]:
    """The GGUF models under ``root``, a split model once (by its first shard)."""
    if not root.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        # Hidden folders hold temporary downloads and caches, never finished models.
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for fn in sorted(filenames):
            if not fn.lower().endswith(".gguf") or fn.startswith("."):
                continue
            shard = _SHARD_RE.search(fn)
            if shard and int(shard.group(1)) != 1:
                continue  # a split model is listed once, by its first shard
            path = Path(dirpath) / fn
            if path.is_file():
                yield path


def lmstudio_folders(home: Path | None = None) -> list[Path]:
    """LM Studio's models folders that exist on this computer (today's and the older location)."""
    base = home if home is not None else Path.home()
    candidates = (base / ".lmstudio" / "models", base / ".cache" / "lm-studio" / "models")
    return [c for c in candidates if c.is_dir()]


def _total_size(path: Path) -> int:
    try:
        size = path.stat().st_size
    except OSError:
        return 0
    shard = _SHARD_RE.search(path.name)
    if shard and int(shard.group(1)) == 1:
        count = int(shard.group(2))
        stem = path.name[: shard.start()]
        for n in range(2, count + 1):
            other = path.with_name(f"{stem}-{n:05d}-of-{count:05d}.gguf")
            with contextlib.suppress(OSError):
                size += other.stat().st_size
    return size


@dataclass(frozen=True)
class Pairing:
    """What will draft for a target, and why, in a sentence for the UI."""

    kind: DrafterKind  # MODEL, NGRAM, or NONE when nothing can draft for this target
    draft_path: Path | None
    reason: str
    draft_tokens: int = DRAFT_TOKENS_DEFAULT
    source: str = "fallback"  # "catalog", "fingerprint" or "fallback"
    missing_drafter: DrafterEntry | None = None  # the catalog's drafter, when it could be downloaded
    # The drafter is beyond MAX_DRAFT_RATIO of the target: tried, and kept where the engine's
    # measurement at load says it pays (else the engine drafts by lookup alone and says why).
    trial: bool = False
    # A drafter was there but not taken (the catalog's not downloaded or of another vocabulary, a
    # same-vocabulary model not smaller than the target): the reason is worth showing as it loads.
    refused: bool = False


def _label(meta: GgufMetadata, path: Path) -> str:
    return path.name if not meta.name else f"{meta.name} ({path.name})"


def _compatible(target: GgufMetadata, draft: GgufMetadata) -> bool:
    return (
        bool(target.fingerprint)
        and draft.fingerprint == target.fingerprint
        and abs(draft.n_vocab - target.n_vocab) <= MAX_VOCAB_DIFFERENCE
    )


def pair_drafter(
    target_path: str | os.PathLike[str],
    catalog: Catalog,
    library: Library,
    max_ratio: float = MAX_DRAFT_RATIO,
) -> Pairing:
    """Choose the drafter for ``target_path``: catalog drafter, same-vocabulary local model, or n-gram."""
    tpath = Path(target_path)
    known = library.listed(tpath)  # a listed model's header was read when the library was scanned
    try:
        target = known.metadata if known is not None and known.metadata is not None else read_metadata(
            tpath, library.cache)
    except GgufError as exc:
        return Pairing(
            DrafterKind.NONE, None, f"Speculative decoding is off because the target cannot be read: {exc}"
        )
    if target.is_recurrent:
        return Pairing(
            DrafterKind.NONE,
            None,
            (
                f"{tpath.name} is a recurrent or hybrid model ({target.architecture}); its state "
                "cannot be rolled back token by token, so speculative decoding is off."
            ),
        )
    if not target.has_vocab:
        return Pairing(
            DrafterKind.NONE,
            None,
            f"{tpath.name} has no vocabulary in its header, so nothing can draft for it.",
        )
    target_size = _total_size(tpath) or target.file_size
    try:
        target_key = tpath.resolve()
    except OSError:
        target_key = tpath

    notes: list[str] = []
    missing: DrafterEntry | None = None
    ngram_tokens = 4
    match = catalog.find_target_file(tpath.name)
    if match is not None:
        entry, _quant = match
        for d in entry.drafters:
            if d.kind == DrafterKind.NGRAM:
                ngram_tokens = d.draft_tokens
        first = entry.drafters[0]
        if first.kind == DrafterKind.NGRAM:
            return Pairing(
                DrafterKind.NGRAM,
                None,
                (
                    f"The catalog recommends n-gram prompt lookup for {entry.display_name}"
                    + (f": {first.notes}" if first.notes else ".")
                ),
                first.draft_tokens,
                "catalog",
            )
        for d in entry.drafters:
            if d.kind == DrafterKind.MTP or d.experimental:
                continue
            if d.kind != DrafterKind.MODEL:
                continue
            local = library.find_file(d.filename, d.repo)
            if local is None:
                missing = missing or d
                notes.append(
                    f"The catalog's drafter for {entry.display_name}, {Path(d.filename).name}, "
                    "is not downloaded."
                )
                continue
            assert local.metadata is not None
            if not _compatible(target, local.metadata):
                notes.append(f"The catalog's drafter {local.name} does not share the target's vocabulary.")
                continue
            return Pairing(
                DrafterKind.MODEL,
                local.path,
                (f"{local.name} drafts for {entry.display_name}, as the catalog recommends."),
                d.draft_tokens,
                "catalog",
            )

    same_vocab = [
        m
        for m in library.models()
        if m.usable
        and m.metadata is not None
        and not m.metadata.is_recurrent
        and _compatible(target, m.metadata)
        and _resolve(m.path) != target_key
    ]
    # A model at least as big as the target cannot draft faster than the target checks: refused.
    smaller = [m for m in same_vocab if m.size < target_size]
    within = [m for m in smaller if m.size <= target_size * max_ratio]
    beyond = [m for m in smaller if m.size > target_size * max_ratio]
    if within or beyond:
        trial = not within
        best = max(within, key=lambda m: m.size) if within else min(beyond, key=lambda m: m.size)
        share = best.size / target_size if target_size else 0.0
        shares = f"{best.name} shares {tpath.name}'s vocabulary and is {share:.0%} of its size"
        why = (
            f"{shares}, so it drafts for it." if not trial else
            f"{shares}, more than the {max_ratio * 100:g}% that usually pays: it is tried, and kept if it "
            "measures faster on this computer when the model loads."
        )
        reason = " ".join([*notes, why])
        return Pairing(DrafterKind.MODEL, best.path, reason, 4, "fingerprint", missing, trial)

    why_not: list[str] = list(notes)
    too_big = [m for m in same_vocab if m.size >= target_size]
    if too_big:
        m = min(too_big, key=lambda m: m.size)
        why_not.append(
            f"{m.name} shares its vocabulary but is not smaller than {tpath.name}, so drafting with it "
            "cannot be faster than the model itself."
        )
    elif not notes:
        why_not.append(f"No local model shares {tpath.name}'s vocabulary.")
    why_not.append("localchat drafts with n-gram prompt lookup instead.")
    if missing is not None:
        why_not.append(f"Download {Path(missing.filename).name} to use a draft model.")
    return Pairing(DrafterKind.NGRAM, None, " ".join(why_not), ngram_tokens, "fallback", missing,
                   refused=bool(notes or too_big))


def _resolve(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path
