"""The local models the API lists and may load on request: what ``/v1/models`` and ``/api/tags`` show
beside the loaded one, and how a request that names one of them is loaded.

LM Studio and Ollama list every local model and load the one a request names ("just-in-time"
loading); localchat does the same over its one engine. The shelf knows the models (the app's folders,
as the model manager lists them, through ``catalog.library.Library``) under the ids the servers give
them (``catalog.names.served_id``: the catalog id, else the file name without ".gguf"), and turns one
into the EngineConfig a window load would use: the drafter paired as the model manager pairs it
(``catalog.library.pair_drafter``: the catalog's drafter, else a same-vocabulary local model, else
n-gram lookup), then ``configure(target, draft)``, which in the app lays the model's preset (its
context length) over the settings, and in ``localchat serve`` applies the command's options.

Whether a request may load at all is ``allowed()`` (Settings → Server's "Let API requests load other
models", ``localchat serve --no-load-on-request``), asked at each request, so a change in Settings
holds at once. Listing and pairing read GGUF headers: the server calls them off the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from localchat.catalog.names import file_name, file_stem, model_name, served_id, shipped_served_id
from localchat.settings.drafter_kind import DrafterKind

if TYPE_CHECKING:
    from localchat.catalog.drafters import Catalog
    from localchat.catalog.gguf import GgufMetadata
    from localchat.catalog.library import Library
    from localchat.engine.types import EngineConfig


@dataclass(frozen=True)
class ShelfModel:
    """One local model as the API lists it."""

    id: str  # what /v1/models lists and a request's "model" names
    name: str  # its name in the window (catalog.names.model_name)
    path: str
    size: int  # bytes, all shards together
    metadata: GgufMetadata | None  # its GGUF header (Ollama's /api/tags describes the file from it)

    def answers_to(self, name: str) -> bool:
        """Whether a request's "model" names this one: its id, its file name, or the name without .gguf."""
        wanted = name.strip().lower()
        return wanted in {self.id.lower(), file_name(self.path).lower(), file_stem(self.path).lower()}


class ModelShelf:
    """The loadable local models, and the config a load of one uses (no Qt; any thread)."""

    def __init__(
        self,
        library: Callable[[], Library],
        catalog: Callable[[], Catalog | None],
        configure: Callable[[str, str | None], EngineConfig],
        allowed: Callable[[], bool],
        *,
        aliases: Mapping[str, str] | None = None,
    ) -> None:
        """``library`` and ``catalog`` are asked anew each time (the folders may have changed);
        ``aliases``: an id to list a file under instead of its own (``localchat serve --name``)."""
        self._library = library
        self._catalog = catalog
        self._configure = configure
        self._allowed = allowed
        self._aliases = {str(Path(k)): v for k, v in (aliases or {}).items()}

    @property
    def loads_allowed(self) -> bool:
        return self._allowed()

    def id_of(self, path: str, catalog: Catalog | None = None) -> str:
        """The id a file is listed under (``catalog`` None: the shipped catalog's)."""
        alias = self._aliases.get(str(Path(path)))
        if alias:
            return alias
        return served_id(path, catalog) if catalog is not None else shipped_served_id(path)

    def models(self) -> list[ShelfModel]:
        """Every usable model of the folders (not projectors, not unreadable files), by name."""
        catalog = self._catalog()
        found: list[ShelfModel] = []
        seen: set[str] = set()
        for local in self._library().models():
            if not local.usable:
                continue
            path = str(local.path)
            model_id = self.id_of(path, catalog)
            if model_id.lower() in seen:  # another quantization of a catalog model: its file's own name
                model_id = file_stem(path)
            if model_id.lower() in seen:  # the same file in two folders: listed once
                continue
            seen.add(model_id.lower())
            found.append(ShelfModel(model_id, model_name(path, catalog), path, local.size, local.metadata))
        return found

    def find(self, name: str) -> ShelfModel | None:
        """The model a request's "model" names (None: no local model has that name)."""
        return next((m for m in self.models() if m.answers_to(name)), None)

    def config_for(self, model: ShelfModel) -> EngineConfig:
        """How to load ``model``: the drafter paired as a window load pairs it, then ``configure``."""
        from localchat.catalog.library import pair_drafter

        catalog = self._catalog()
        draft: str | None = None
        if catalog is not None:
            pairing = pair_drafter(model.path, catalog, self._library())
            if pairing.kind is DrafterKind.MODEL and pairing.draft_path is not None:
                draft = str(pairing.draft_path)
        return self._configure(model.path, draft)
