from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from localchat.catalog.drafters import Catalog, CatalogEntry, DrafterEntry, QuantFile
from localchat.catalog.library import Library
from localchat.ui.model_manager import ModelManagerDialog, fits_text


class FakeDownloader(QObject):
    progress = Signal(object, int, int)
    finished = Signal(object)
    failed = Signal(object, str)

    def __init__(self) -> None:
        super().__init__()
        self.started: list[str] = []
        self.cancelled: list[object] = []

    def start(self, entry_id: str) -> object:
        self.started.append(entry_id)
        return 1

    def cancel(self, job: object) -> None:
        self.cancelled.append(job)
        self.failed.emit(job, "The download was cancelled.")


def catalog() -> Catalog:
    """Two entries built from the catalog's own types (the shipped file has its own tests)."""
    entries = tuple(
        CatalogEntry(
            id=f"model-{i}",
            display_name=f"Model {i}",
            family="qwen2.5",
            params="1.5B",
            gated=False,
            quants=(QuantFile("Q4_K_M", "org/repo", f"model-{i}.gguf", 1_000_000_000, "apache-2.0"),),
            drafters=(DrafterEntry("draft-model", 4, "org/draft", "draft.gguf", 400_000_000, "apache-2.0"),),
            starter=i == 0,
        )
        for i in range(2)
    )
    return Catalog(1, entries, (), "test")


def test_fits_text_is_the_cli_rule_in_words() -> None:
    gb = 10**9
    assert fits_text(2 * gb, 16 * gb) == "Yes"
    assert fits_text(12 * gb, 16 * gb) == "Tight"
    assert fits_text(20 * gb, 16 * gb) == "No"
    assert fits_text(1_000, None) == "?"


def test_lists_catalog_and_local_models_and_loads(qtbot, tmp_path: Path, smollm2_path: Path) -> None:
    library = Library([tmp_path], [smollm2_path])
    dialog = ModelManagerDialog(catalog(), library, available_memory=8 * 2**30)
    qtbot.addWidget(dialog)
    assert dialog.catalog_table.rowCount() == 2
    assert dialog.catalog_table.item(0, 5).text() == "draft.gguf"
    assert dialog.catalog_table.item(0, 3).text() == "1.4 GB"  # decimal, as the CLI
    assert dialog.local_table.rowCount() == 1
    assert dialog.local_table.item(0, 0).text() == smollm2_path.name
    assert dialog.local_table.item(0, 4).text() == "Ready"
    dialog.local_table.selectRow(0)
    with qtbot.waitSignal(dialog.load_requested) as blocker:
        dialog.load_button.click()
    assert blocker.args == [str(smollm2_path), None]


def test_download_progress_and_cancel(qtbot, tmp_path: Path) -> None:
    downloader = FakeDownloader()
    dialog = ModelManagerDialog(catalog(), Library([tmp_path]), downloader=downloader)
    qtbot.addWidget(dialog)
    dialog.catalog_table.selectRow(0)
    dialog.download_button.click()
    assert downloader.started
    assert not dialog.progress.isHidden()
    downloader.progress.emit(1, 50, 100)
    assert dialog.progress.value() == 500
    dialog.cancel_button.click()
    assert dialog.catalog_message.text() == "The download was cancelled."
    assert dialog.progress.isHidden()
