"""The starter pair for this computer: kept from what the engine measured, and offered once.

When a pair with the starter's drafter loads, the engine's measurement of it
(``EngineInfo.measured``: its calibration at load or saved profile) is kept in
the user's data folder, and ``catalog.starter_choice`` predicts from it which
target of the starter's family suits this computer. Where that is a bigger
target than the one loaded (a GPU, or a fast CPU, where the 1.5B starter is too
cheap next to its drafter for speculation to pay), the window offers it, once
per target in a run of the app. The welcome screen's "Get the starter models"
selects the chosen entry in the model manager when a measurement is kept.

Plain Python: the app wires it to the engine's ``state_changed`` signal (app.ModelsWiring.observe).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from localchat.catalog import starter_choice
from localchat.catalog.drafters import Catalog, file_key
from localchat.catalog.sizes import total_ram
from localchat.catalog.starter_choice import MachineMeasure, StarterChoice
from localchat.engine.types import EngineInfo

log = logging.getLogger(__name__)


class StarterAdvisor:
    def __init__(self, path: Path, catalog: Callable[[], Catalog | None],
                 memory: Callable[[], int | None] = total_ram) -> None:
        self.path = path
        self._catalog = catalog
        self._memory = memory
        self._offered: set[str] = set()  # catalog entries a bigger starter was already offered for

    def observe(self, info: EngineInfo) -> StarterChoice | None:
        """Keep ``info``'s measurement if it speaks for the starter's family; the choice to offer
        when it is a bigger target than the one loaded (once per loaded target), else None."""
        catalog = self._catalog()
        if catalog is None or info.measured is None or info.draft is None:
            return None
        starter = catalog.starter
        drafter = starter.model_drafter if starter is not None else None
        if drafter is None or file_key(info.draft.path) != file_key(drafter.filename):
            return None  # another drafter's cost says nothing about the starter pairs
        found = catalog.find_target_file(info.target.path)
        try:
            measured = MachineMeasure(
                target_bytes=info.target.size_bytes, verify_s=dict(info.measured.verify_s),
                draft_token_s=info.measured.draft_token_s, drafter_file=file_key(info.draft.path),
                backend=info.backend,
                measured_on=found[0].display_name if found is not None else Path(info.target.path).name,
                accelerator_bytes=info.measured.accelerator_bytes, drafter_bytes=info.draft.size_bytes,
            )
        except ValueError as exc:
            log.info("not a usable measurement: %s", exc)
            return None
        starter_choice.save(self.path, measured)
        choice = starter_choice.choose(catalog, measured, self._memory())
        if choice is None:
            return None
        log.info("starter for this computer: %s", choice.sentence)
        loaded = found[0] if found is not None else None
        if loaded is None or loaded not in {p.entry for p in choice.candidates} or loaded.id in self._offered:
            return None  # not a starter pair (the user chose their model), or offered already
        if choice.chosen.entry.default_quant.size <= loaded.default_quant.size:
            return None
        self._offered.add(loaded.id)
        return choice

    def measurement(self) -> MachineMeasure | None:
        """This computer's kept measurement (catalog/drafter_payoff.py predicts drafters from it);
        None before any was kept."""
        return starter_choice.load(self.path)

    def saved_choice(self) -> StarterChoice | None:
        """The choice from the kept measurement; None before any was kept."""
        catalog = self._catalog()
        measured = starter_choice.load(self.path)
        if catalog is None or measured is None:
            return None
        return starter_choice.choose(catalog, measured, self._memory())
