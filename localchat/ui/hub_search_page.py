"""The model manager's "Search the hub" tab: GGUF repositories on the Hugging Face hub by name, their
quantizations with sizes and whether each fits this computer, and a download of the chosen one.

The page asks and shows; it never reaches the network itself. ``search`` is a services object with
``search(words)``, ``files(repo)`` and the signals ``found``, ``files_found`` and ``failed``
(services.HubSearchService); ``downloader`` has ``start_file(repo, filename, size)``, ``cancel`` and
the download signals (services.DownloadService), so a finished download is listed and offered by the
model manager as any other, and paired with a drafter as any local model is when it loads. A gated
repository says so, with the way in: its licence on the hub and a token in Settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from localchat.ui.formatting import format_bytes
from localchat.ui.model_manager import FITS_TIP, _item, _table, fits_text

if TYPE_CHECKING:
    from localchat.hub.search import HubFile, HubRepo

REPO_COLUMNS = ("Repository", "Downloads", "Likes", "Access")
FILE_COLUMNS = ("Quantization", "File", "Size", "Fits in memory")


class HubSearchPage(QWidget):
    def __init__(self, search: Any, downloader: Any, total_ram: int | None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("hub_search_page")
        self._search = search
        self._downloader = downloader
        self._total_ram = total_ram
        self._job: object | None = None
        self._repos: list[HubRepo] = []
        self._files: list[HubFile] = []

        self.query = QLineEdit(self)
        self.query.setObjectName("hub_query")
        self.query.setPlaceholderText("Search GGUF models on the Hugging Face hub (e.g. qwen2.5 coder)")
        self.search_button = QPushButton("Search", self)
        self.repo_table = _table(REPO_COLUMNS, "Repository", self)
        self.file_table = _table(FILE_COLUMNS, "File", self)
        self.file_table.horizontalHeaderItem(3).setToolTip(FITS_TIP)  # type: ignore[union-attr]
        self.message = QLabel("", self)
        self.message.setObjectName("hub_message")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.progress = QProgressBar(self)
        self.progress.hide()
        self.cancel_button = QPushButton("Cancel download", self)
        self.download_button = QPushButton("Download", self)

        row = QHBoxLayout()
        row.addWidget(self.query, 1)
        row.addWidget(self.search_button)
        tables = QSplitter(Qt.Orientation.Vertical, self)
        tables.addWidget(self.repo_table)
        tables.addWidget(self.file_table)
        buttons = QHBoxLayout()
        buttons.addWidget(self.progress, 1)
        buttons.addWidget(self.cancel_button)
        buttons.addStretch(0)
        buttons.addWidget(self.download_button)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(tables, 1)
        layout.addWidget(self.message)
        layout.addLayout(buttons)

        self.query.returnPressed.connect(self.start_search)
        self.search_button.clicked.connect(self.start_search)
        self.repo_table.itemSelectionChanged.connect(self._on_repo_selected)
        self.file_table.itemSelectionChanged.connect(self._update_buttons)
        self.file_table.itemDoubleClicked.connect(lambda _item: self.download())
        self.download_button.clicked.connect(self.download)
        self.cancel_button.clicked.connect(self._on_cancel_clicked)
        search.found.connect(self._on_found)
        search.files_found.connect(self._on_files_found)
        search.failed.connect(self._on_failed)
        if downloader is not None:
            downloader.progress.connect(self._on_progress)
            downloader.finished.connect(self._on_download_ended)
            downloader.failed.connect(self._on_download_failed)
        self._update_buttons()

    # -- asking ----------------------------------------------------------------------

    def start_search(self) -> None:
        words = self.query.text().strip()
        if not words:
            self.message.setText("Type part of a model's name (\"llama 3.2\", \"qwen coder\") and search.")
            return
        self.message.setText(f"Searching the hub for “{words}”…")
        self.search_button.setEnabled(False)
        self._search.search(words)

    def download(self) -> None:
        chosen = self._chosen_file()
        if chosen is None or self._downloader is None or self._job is not None:
            return
        self._job = self._downloader.start_file(chosen.repo, chosen.filename, chosen.size)
        self.progress.setRange(0, 0)
        self.progress.show()
        self.message.setText(f"Downloading {chosen.filename} from {chosen.repo}…")
        self._update_buttons()

    # -- answers ---------------------------------------------------------------------

    def _on_found(self, words: str, repos: list[HubRepo]) -> None:
        self.search_button.setEnabled(True)
        self._repos = list(repos)
        self.repo_table.setRowCount(len(repos))
        for r, repo in enumerate(repos):
            access = "Gated: accept its licence on the hub" if repo.gated else "Open"
            for c, text in enumerate((repo.repo, f"{repo.downloads:,}", f"{repo.likes:,}", access)):
                self.repo_table.setItem(r, c, _item(text, r if c == 0 else None))
        self.file_table.setRowCount(0)
        self._files = []
        self.message.setText(
            f"{len(repos)} repositor{'ies' if len(repos) != 1 else 'y'} with GGUF files for “{words}”, "
            "most downloaded first: choose one to see its quantizations." if repos
            else f"No GGUF repositories on the hub match “{words}”.")
        self._update_buttons()

    def _on_repo_selected(self) -> None:
        rows = self.repo_table.selectionModel().selectedRows()
        if not rows or rows[0].row() >= len(self._repos):
            return
        repo = self._repos[rows[0].row()]
        self.file_table.setRowCount(0)
        self._files = []
        self.message.setText(f"Listing the files of {repo.repo}…")
        self._search.files(repo.repo)
        self._update_buttons()

    def _on_files_found(self, repo: str, files: list[HubFile]) -> None:
        self._files = list(files)
        self.file_table.setRowCount(len(files))
        for r, f in enumerate(files):
            size = format_bytes(f.size) if f.size else "unknown"
            fits = fits_text(f.size, self._total_ram) if f.size else "unknown"
            for c, text in enumerate((f.quant or "?", f.filename, size, fits)):
                self.file_table.setItem(r, c, _item(text, r if c == 0 else None))
        gated = any(x.gated for x in self._repos if x.repo == repo)
        note = (" It is gated: accept its licence on the hub and add your token in Settings → Hugging Face "
                "before downloading." if gated else "")
        self.message.setText(
            (f"{len(files)} quantization{'s' if len(files) != 1 else ''} of {repo}, smallest first: "
             "the smaller, the faster and the less exact." if files
             else f"{repo} has no single-file GGUF model to download.") + note)
        self._update_buttons()

    def _on_failed(self, sentence: str) -> None:
        self.search_button.setEnabled(True)
        self.message.setText(sentence)
        self._update_buttons()

    def _on_progress(self, job: object, done: int, total: int) -> None:
        if job != self._job or total <= 0:
            return
        self.progress.setRange(0, 1000)
        self.progress.setValue(int(done * 1000 / total))
        self.progress.setFormat(f"{format_bytes(done)} of {format_bytes(total)}")

    def _on_download_ended(self, job: object, target: str = "", _draft: str = "") -> None:
        if job != self._job:
            return
        self._job = None
        self.progress.hide()
        self.message.setText(f"Downloaded {target}: listed under “On this computer”.")
        self._update_buttons()

    def _on_download_failed(self, job: object, sentence: str) -> None:
        if job != self._job:
            return
        self._job = None
        self.progress.hide()
        self.message.setText(sentence)
        self._update_buttons()

    def _on_cancel_clicked(self) -> None:
        if self._job is not None and self._downloader is not None:
            self._downloader.cancel(self._job)

    # -- helpers ---------------------------------------------------------------------

    def _chosen_file(self) -> HubFile | None:
        rows = self.file_table.selectionModel().selectedRows()
        if not rows or rows[0].row() >= len(self._files):
            return None
        return self._files[rows[0].row()]

    def _update_buttons(self) -> None:
        downloading = self._job is not None
        self.download_button.setEnabled(not downloading and self._chosen_file() is not None
                                        and self._downloader is not None)
        self.cancel_button.setVisible(downloading)
        self.progress.setVisible(downloading)

