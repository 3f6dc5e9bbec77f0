"""Searching the Hugging Face hub for GGUF models, through huggingface-hub's own API (``HfApi``).

Two questions, each one request: ``search`` lists the repositories with GGUF files whose names match
the words (``list_models`` with the ``gguf`` filter, most downloaded first: name, downloads, likes,
whether it is gated), and ``repo_files`` lists one repository's GGUF files with their sizes
(``model_info`` with the files' metadata) as quantizations the model manager offers to download.

What is left out of a repository's files, and why: the parts of a split model
(``-00001-of-00003.gguf``; the downloader fetches one file a model), and the vision projectors
(``mmproj``) that are no chat model of their own. Blocking calls: the services layer runs them on a
worker thread. A failure is a ``SearchError`` with a sentence (no network, not found, gated).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from localchat.catalog.names import quant_of
from localchat.catalog.sizes import Fit, fits_in_memory

SEARCH_LIMIT = 40
_SPLIT_RE = re.compile(r"-\d{5}-of-\d{5}\.gguf$", re.IGNORECASE)


class SearchError(Exception):
    """The hub could not answer; str() is a sentence for the user."""


@dataclass(frozen=True)
class HubRepo:
    """A repository the search found."""

    repo: str
    downloads: int
    likes: int
    gated: bool


@dataclass(frozen=True)
class HubFile:
    """One GGUF file of a repository: a quantization the user may download."""

    repo: str
    filename: str
    size: int  # bytes; 0 when the hub did not say
    quant: str  # "Q4_K_M", or "" when the name does not say

    def fit(self, total_ram: int | None) -> Fit:
        """Whether it fits this computer's memory (catalog/sizes.py's rule, as for catalog models)."""
        return fits_in_memory(self.size, total_ram) if self.size else Fit.UNKNOWN


def gguf_files(repo: str, files: list[tuple[str, int | None]]) -> list[HubFile]:
    """The files of ``repo`` the model manager offers: single-file GGUF models, smallest first."""
    found = []
    for name, size in files:
        lowered = name.lower()
        if not lowered.endswith(".gguf") or _SPLIT_RE.search(lowered) or "mmproj" in lowered:
            continue
        found.append(HubFile(repo, name, int(size or 0), quant_of(name)))
    return sorted(found, key=lambda f: (f.size or 1 << 62, f.filename))


def search(query: str, *, endpoint: str | None = None, token: str | bool | None = None,
           limit: int = SEARCH_LIMIT) -> list[HubRepo]:
    """GGUF repositories on the hub whose names match ``query``, most downloaded first."""
    from huggingface_hub import HfApi

    _check_online("The hub could not be searched")
    try:
        found = HfApi(endpoint=endpoint, token=token).list_models(
            search=query.strip() or None, filter="gguf", sort="downloads", limit=limit,
            expand=["downloads", "likes", "gated"])
        return [HubRepo(m.id, int(m.downloads or 0), int(m.likes or 0), bool(m.gated)) for m in found]
    except Exception as exc:  # huggingface-hub's HTTP and hub errors, and the network's
        raise SearchError(_sentence(exc, "The hub could not be searched")) from exc


def repo_files(repo: str, *, endpoint: str | None = None, token: str | bool | None = None) -> list[HubFile]:
    """The GGUF files of ``repo`` with their sizes (``gguf_files``)."""
    from huggingface_hub import HfApi

    _check_online(f"The files of {repo} could not be listed")
    try:
        info = HfApi(endpoint=endpoint, token=token).model_info(repo, files_metadata=True)
    except Exception as exc:
        raise SearchError(_sentence(exc, f"The files of {repo} could not be listed")) from exc
    return gguf_files(repo, [(s.rfilename, s.size) for s in info.siblings or []])


def _check_online(what: str) -> None:
    """Offline mode (HF_HUB_OFFLINE) is said at once, not after huggingface-hub's retries."""
    from huggingface_hub import constants

    if constants.is_offline_mode():
        raise SearchError(f"{what}: offline mode is on (HF_HUB_OFFLINE); turn it off to reach the hub.")


def _sentence(exc: Exception, what: str) -> str:
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    if isinstance(exc, GatedRepoError):
        return (f"{what}: the repository is gated (accept its licence on the hub, then add a token in "
                "Settings).")
    if isinstance(exc, RepositoryNotFoundError):
        return f"{what}: the hub has no such repository (or it is private)."
    name = type(exc).__name__
    if "Connect" in name or "Timeout" in name or isinstance(exc, OSError):
        return f"{what}: the hub cannot be reached (is this computer online?)."
    return f"{what} ({name}: {exc})."
