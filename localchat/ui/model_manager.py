"""The model manager: the catalog (sizes, fits in memory, paired drafter), downloads, local models.

The dialog reads the catalog and the local library (GGUF headers only, cached)
and never downloads or loads anything itself: downloads go through the
``downloader`` object the composition root passes in (a services object with
``start(entry_id)``, ``cancel(job_id)`` and progress signals), and "Load"
emits ``load_requested`` for the main window.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
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

from localchat.catalog.drafters import Catalog
from localchat.catalog.sizes import fits_in_memory
from localchat.services.qt_signals import emit
from localchat.ui.formatting import format_bytes

log = logging.getLogger(__name__)

CATALOG_COLUMNS = ("Model", "Parameters", "Quantization", "Size", "Fits in memory", "Drafter")
LOCAL_COLUMNS = ("File", "Size", "Architecture", "Quantization", "Status")


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
        library: Any,
        *,
        available_memory: int | None = None,
        downloader: QObject | None = None,
        pair: Any = None,  # callable(target_path) -> Pairing, from localchat.catalog.library
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
        self._job: object | None = None

        self.tabs = QTabWidget(self)
        self.catalog_table = _table(CATALOG_COLUMNS, self)
        self.download_button = QPushButton("Download", self)
        self.cancel_button = QPushButton("Cancel download", self)
        self.progress = QProgressBar(self)
        self.progress.setTextVisible(True)
        self.progress.hide()
        self.catalog_message = QLabel("", self)
        self.catalog_message.setWordWrap(True)
        catalog_page = QWidget(self)
        catalog_layout = QVBoxLayout(catalog_page)
        catalog_layout.addWidget(self.catalog_table, 1)
        catalog_buttons = QHBoxLayout()
        catalog_buttons.addWidget(self.progress, 1)
        catalog_buttons.addWidget(self.cancel_button)
        catalog_buttons.addWidget(self.download_button)
        catalog_layout.addWidget(self.catalog_message)
        catalog_layout.addLayout(catalog_buttons)

        self.local_table = _table(LOCAL_COLUMNS, self)
        self.load_button = QPushButton("Load", self)
        self.load_button.setDefault(True)
        self.import_button = QPushButton("Import a GGUF file…", self)
        self.delete_button = QPushButton("Delete", self)
        self.local_message = QLabel("", self)
        self.local_message.setWordWrap(True)
        local_page = QWidget(self)
        local_layout = QVBoxLayout(local_page)
        local_layout.addWidget(self.local_table, 1)
        local_layout.addWidget(self.local_message)
        local_buttons = QHBoxLayout()
        local_buttons.addWidget(self.import_button)
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
            name = entry.display_name + ("  (starter)" if entry.starter else "")
            cells = (
                _item(name, entry.id),
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
            cells = (
                _item(model.name, str(model.path)),
                _item(format_bytes(model.size)),
                _item(meta.architecture if meta else "?"),
                _item(meta.quantization if meta else "?"),
                _item(status),
            )
            for column, cell in enumerate(cells):
                self.local_table.setItem(row, column, cell)
        if not models:
            self.local_message.setText(
                "No models yet: download one from the Catalog tab or import a GGUF file."
            )
            self.tabs.setCurrentIndex(1)

    def _selected(self, table: QTableWidget) -> object | None:
        row = table.currentRow()
        item = table.item(row, 0) if row >= 0 else None
        return item.data(Qt.ItemDataRole.UserRole) if item else None

    def _update_buttons(self) -> None:
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
        self._job = self._downloader.start(entry_id)
        self.progress.setRange(0, 0)
        self.catalog_message.setText("Downloading…")
        self._update_buttons()

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
        answer = QMessageBox.question(
            self, "Delete model", f"Delete {name} from disk? This cannot be undone."
        )
        if answer != QMessageBox.StandardButton.Yes:
            return
        try:
            Path(str(path)).unlink()
        except OSError as exc:
            self.local_message.setText(f"{name} could not be deleted ({exc.strerror}).")
            return
        self.local_message.setText(f"Deleted {name}.")
        self.refresh()
