"""The Benchmark dialog: the user's prompts (or the built-in set) with speculation off, on and adaptive.

It shows a table (one row per prompt and mode), two charts (tokens/s per
prompt and mode; acceptance rate by draft position), saves each run as JSON
under the user data folder (``benchmarks/<timestamp>.json``) and exports JSON
or CSV. The measuring happens in a process of its own, driven by a service
object passed in (services.BenchService, or a stand-in: services.bench_service.BenchPort);
this widget only starts, cancels and shows.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import (
    QAbstractItemView,
    QButtonGroup,
    QCheckBox,
    QDialog,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from localchat.bench.modes import BenchMode, bench_mode
from localchat.bench.prompts import (
    BenchError,
    BenchPrompt,
    builtin_prompts,
    limit_per_category,
    load_prompts,
    typed_prompts,
)
from localchat.bench.report import (
    BenchRecord,
    BenchReport,
    report_json,
    result_rows,
    run_meta,
    same_text,
    write_csv,
)
from localchat.catalog.names import shipped_model_name
from localchat.engine.stats import combine
from localchat.engine.types import EngineConfig, EngineInfo, SpeculationConfig
from localchat.host.events import BenchDone, BenchProgress, Event, Failed, Loaded
from localchat.host.failure_words import Audience, sentence
from localchat.services.bench_service import BenchPort
from localchat.settings import folders
from localchat.settings.options import DRAFT_TOKENS_MAX, DRAFT_TOKENS_MIN
from localchat.ui import formatting
from localchat.ui.bench_chart import GroupedBarChart, LineChart

log = logging.getLogger(__name__)

COLUMNS = (
    "Prompt",
    "Category",
    "Mode",
    "Tokens",
    "Tok/s",
    "Speed-up",
    formatting.ACCEPTANCE_LENGTH,
    formatting.ACCEPTANCE_RATE,
    "Same text",
)
COLUMN_TIPS = (
    "The prompt's id",
    "The prompt's category",
    "off: plain decoding; draft / ngram: speculation with a fixed draft length; "
    "adaptive: draft length and drafter follow acceptance",
    "Tokens generated",
    "Generated tokens per second (prompt processing excluded)",
    formatting.SPEED_UP_TIP,
    formatting.ACCEPTANCE_LENGTH_TIP,
    formatting.ACCEPTANCE_RATE_TIP,
    "Whether the reply is token for token the same as with speculation off",
)

ConfigSource = EngineConfig | Callable[[], EngineConfig | None] | None


NO_MODEL = "Load a model first: the benchmark measures the model in use."


class BenchmarkDialog(QDialog):
    """Choose prompts and modes, run, watch progress, read the table and charts, export."""

    def __init__(
        self,
        service: BenchPort,
        config: ConfigSource = None,
        parent: QWidget | None = None,
        *,
        data_dir: Path | str | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("benchmark_dialog")
        self.setWindowTitle("Benchmark speculative decoding")
        self._service = service
        self._config_source = config
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self._report = BenchReport()
        self._run_config: EngineConfig | None = None
        self._run_meta: dict[str, object] = {}
        self._total = 0
        self.saved_path: Path | None = None

        self._build()
        self._connect_signals()
        self.refresh_config()
        self._set_running(False)
        self.resize(1020, 760)

    # -- construction -----------------------------------------------------------------

    def _build(self) -> None:
        prompts_box = QGroupBox("Prompts", self)
        self.builtin_radio = QRadioButton(self._builtin_label(), prompts_box)
        self.builtin_radio.setChecked(True)
        self.file_radio = QRadioButton("From a JSON Lines file:", prompts_box)
        self.typed_radio = QRadioButton("Typed here, one per line:", prompts_box)
        self.source_group = QButtonGroup(self)
        for b in (self.builtin_radio, self.file_radio, self.typed_radio):
            self.source_group.addButton(b)
        self.file_edit = QLineEdit(prompts_box)
        self.file_edit.setPlaceholderText('{"id": "...", "category": "...", "prompt": "..."} per line')
        self.browse_button = QPushButton("Browse…", prompts_box)
        self.typed_edit = QPlainTextEdit(prompts_box)
        self.typed_edit.setPlaceholderText("Write a haiku about the sea.\nRefactor this function: …")
        self.typed_edit.setFixedHeight(64)
        self.per_category = QSpinBox(prompts_box)
        self.per_category.setRange(0, 100)
        self.per_category.setValue(2)
        self.per_category.setSpecialValueText("all")
        self.per_category.setToolTip("Use at most this many prompts of each category (0: all)")
        grid = QGridLayout(prompts_box)
        grid.addWidget(self.builtin_radio, 0, 0, 1, 3)
        grid.addWidget(self.file_radio, 1, 0)
        grid.addWidget(self.file_edit, 1, 1)
        grid.addWidget(self.browse_button, 1, 2)
        grid.addWidget(self.typed_radio, 2, 0, Qt.AlignmentFlag.AlignTop)
        grid.addWidget(self.typed_edit, 2, 1, 1, 2)
        per_row = QHBoxLayout()
        per_row.addWidget(QLabel("At most", prompts_box))
        per_row.addWidget(self.per_category)
        per_row.addWidget(QLabel("prompts per category", prompts_box))
        per_row.addStretch(1)
        grid.addLayout(per_row, 3, 0, 1, 3)
        grid.setColumnStretch(1, 1)

        modes_box = QGroupBox("Modes", self)
        self.off_check = QCheckBox("Speculation off (plain decoding)", modes_box)
        self.on_check = QCheckBox("Speculation on", modes_box)
        self.adaptive_check = QCheckBox("Adaptive (draft length and auto-off follow acceptance)", modes_box)
        for c in (self.off_check, self.on_check, self.adaptive_check):
            c.setChecked(True)
        self.max_tokens = QSpinBox(modes_box)
        self.max_tokens.setRange(8, 4096)
        self.max_tokens.setValue(128)
        self.max_tokens.setToolTip("Tokens to generate for each prompt in each mode")
        self.draft_tokens = QSpinBox(modes_box)
        self.draft_tokens.setRange(DRAFT_TOKENS_MIN, DRAFT_TOKENS_MAX)
        self.draft_tokens.setValue(SpeculationConfig().draft_tokens)
        self.draft_tokens.setToolTip("Draft length of the fixed-length modes (adaptive decides per token)")
        modes_layout = QVBoxLayout(modes_box)
        for c in (self.off_check, self.on_check, self.adaptive_check):
            modes_layout.addWidget(c)
        form = QFormLayout()
        form.addRow("Max tokens per reply:", self.max_tokens)
        form.addRow("Draft length:", self.draft_tokens)
        modes_layout.addLayout(form)

        top = QHBoxLayout()
        top.addWidget(prompts_box, 3)
        top.addWidget(modes_box, 2)

        self.model_label = QLabel("", self)
        self.model_label.setObjectName("bench_model")
        self.model_label.setWordWrap(True)
        self.run_button = QPushButton("Run", self)
        self.run_button.setDefault(True)
        self.cancel_button = QPushButton("Cancel", self)
        self.progress_bar = QProgressBar(self)
        self.progress_bar.setFormat("%v of %m runs")
        self.status_label = QLabel("", self)
        self.status_label.setObjectName("bench_status")
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        run_row = QHBoxLayout()
        run_row.addWidget(self.run_button)
        run_row.addWidget(self.cancel_button)
        run_row.addWidget(self.progress_bar, 1)

        self.table = QTableWidget(0, len(COLUMNS), self)
        self.table.setObjectName("bench_table")
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        for i, tip in enumerate(COLUMN_TIPS):
            item = self.table.horizontalHeaderItem(i)
            if item is not None:
                item.setToolTip(tip)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setAlternatingRowColors(True)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for i in range(1, len(COLUMNS)):
            header.setSectionResizeMode(i, QHeaderView.ResizeMode.ResizeToContents)

        self.speed_chart = GroupedBarChart(parent=self)
        self.position_chart = LineChart(parent=self)
        charts = QSplitter(Qt.Orientation.Horizontal, self)
        charts.addWidget(self.speed_chart)
        charts.addWidget(self.position_chart)
        charts.setStretchFactor(0, 3)
        charts.setStretchFactor(1, 2)
        self.results = QSplitter(Qt.Orientation.Vertical, self)
        self.results.addWidget(self.table)
        self.results.addWidget(charts)
        self.results.setStretchFactor(0, 1)
        self.results.setStretchFactor(1, 1)

        self.saved_label = QLabel("", self)
        self.saved_label.setObjectName("bench_saved")
        self.saved_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.export_json_button = QPushButton("Export JSON…", self)
        self.export_csv_button = QPushButton("Export CSV…", self)
        self.close_button = QPushButton("Close", self)
        bottom = QHBoxLayout()
        bottom.addWidget(self.saved_label, 1)
        bottom.addWidget(self.export_json_button)
        bottom.addWidget(self.export_csv_button)
        bottom.addWidget(self.close_button)

        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.model_label)
        layout.addLayout(run_row)
        layout.addWidget(self.status_label)
        layout.addWidget(self.results, 1)
        layout.addLayout(bottom)

    def _connect_signals(self) -> None:
        """Every connection this dialog makes, in one place."""
        service = self._service
        service.bench_event.connect(self._on_service_bench_event)
        self.run_button.clicked.connect(self._on_run_button_clicked)
        self.cancel_button.clicked.connect(self._on_cancel_button_clicked)
        self.close_button.clicked.connect(self.close)
        self.browse_button.clicked.connect(self._on_browse_button_clicked)
        self.export_json_button.clicked.connect(self._on_export_json_button_clicked)
        self.export_csv_button.clicked.connect(self._on_export_csv_button_clicked)
        self.file_edit.textEdited.connect(self._on_file_edit_text_edited)
        self.typed_edit.textChanged.connect(self._on_typed_edit_text_changed)

    @staticmethod
    def _builtin_label() -> str:
        try:
            prompts = builtin_prompts()
        except BenchError:
            return "Built-in prompts"
        cats = ", ".join(dict.fromkeys(p.category for p in prompts))
        return f"Built-in prompts ({len(prompts)}: {cats})"

    # -- public -----------------------------------------------------------------------

    @property
    def report(self) -> BenchReport:
        return self._report

    def config(self) -> EngineConfig | None:
        source = self._config_source
        return source() if callable(source) else source

    def set_config(self, config: ConfigSource) -> None:
        self._config_source = config
        self.refresh_config()

    @Slot(object)
    def models_changed(self, _state: object = None) -> None:
        """The window's engine loaded (or lost) a model: show it, unless a run measures the old one."""
        if not self._service.is_running:
            self.refresh_config()

    def refresh_config(self) -> None:
        """Show which models will be measured and what "on" means for them."""
        config = self.config()
        running = self._service.is_running
        self.run_button.setEnabled(config is not None and not running)
        # Said once, beside what it is about (Run repeated it under the button, word for word).
        self.run_button.setToolTip("" if config is not None else NO_MODEL)
        if config is None:
            self.model_label.setText(NO_MODEL)
            self.on_check.setText("Speculation on")
            return
        target = shipped_model_name(config.target_path)
        memory = "The benchmark loads its own copy, so it needs as much memory again as the chat."
        if config.draft_path:
            draft = shipped_model_name(config.draft_path)
            self.on_check.setText(f"Speculation on: draft model {draft}")
            self.model_label.setText(f"Target {target}, draft model {draft}. {memory}")
        else:
            self.on_check.setText("Speculation on: n-gram lookup (no draft model is loaded)")
            self.model_label.setText(f"Target {target}, no draft model. {memory}")

    def selected_prompts(self) -> list[BenchPrompt]:
        """The prompts to run; BenchError (one sentence) if they cannot be read."""
        if self.file_radio.isChecked():
            text = self.file_edit.text().strip()
            if not text:
                raise BenchError("Choose a JSON Lines file of prompts first.")
            prompts = load_prompts(Path(text).expanduser())
        elif self.typed_radio.isChecked():
            prompts = typed_prompts(self.typed_edit.toPlainText())
        else:
            prompts = builtin_prompts()
        return limit_per_category(prompts, self.per_category.value())

    def selected_modes(self) -> list[BenchMode]:
        config = self.config()
        n = self.draft_tokens.value()
        names = []
        if self.off_check.isChecked():
            names.append("off")
        if self.on_check.isChecked():
            names.append("draft" if config is not None and config.draft_path else "ngram")
        if self.adaptive_check.isChecked():
            names.append("adaptive")
        return [bench_mode(name, n) for name in names]

    def run(self) -> bool:
        """Start the benchmark with the dialog's choices; False (and a sentence shown) if it cannot."""
        if self._service.is_running:
            return False
        config = self.config()
        if config is None:
            self.refresh_config()  # the label says so; Run stays greyed until a model is loaded
            return False
        try:
            prompts = self.selected_prompts()
        except BenchError as exc:
            self._show_status(str(exc), error=True)
            return False
        modes = self.selected_modes()
        if not modes:
            self._show_status("Choose at least one mode to measure.", error=True)
            return False
        self._report = BenchReport()
        self._run_config = config
        self._total = len(prompts) * len(modes)
        self._run_meta = run_meta(target=config.target_path, draft=config.draft_path,
                                  max_tokens=self.max_tokens.value(), draft_tokens=self.draft_tokens.value(),
                                  modes=modes, prompts=prompts)
        self.saved_path = None
        self.saved_label.setText("")
        self._refresh_results()
        try:
            self._service.start(config, prompts, modes, self.max_tokens.value())
        except Exception as exc:  # the process could not even start
            log.exception("the benchmark could not start")
            self._show_status(f"The benchmark could not start ({exc}).", error=True)
            return False
        self.progress_bar.setRange(0, 0)  # busy until the first run is measured
        self._show_status(
            f"Loading {shipped_model_name(config.target_path)} for {len(prompts)} prompts × "
            f"{len(modes)} modes…"
        )
        self._set_running(True)
        return True

    def show_report(self, report: BenchReport) -> None:
        """Put a finished (or loaded) report in the table and charts."""
        self._report = BenchReport(list(report.records), list(report.skipped), report.peak_rss_mb)
        self._refresh_results()

    def export_json(self, path: Path | str) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self._report_json(), indent=2), encoding="utf-8")
        return path

    def export_csv(self, path: Path | str) -> Path:
        path = Path(path)
        write_csv(self._report, path)
        return path

    # -- slots ------------------------------------------------------------------------

    def _on_run_button_clicked(self) -> None:
        self.run()

    def _on_cancel_button_clicked(self) -> None:
        if self._service.is_running:
            self._show_status("Cancelling after the current step…")
            self.cancel_button.setEnabled(False)
            self._service.cancel()

    def _on_browse_button_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Prompts file", str(Path.home()), "JSON Lines (*.jsonl *.json);;All files (*)"
        )
        if path:
            self.file_edit.setText(path)
            self.file_radio.setChecked(True)

    def _on_file_edit_text_edited(self, _text: str) -> None:
        self.file_radio.setChecked(True)

    def _on_typed_edit_text_changed(self) -> None:
        if self.typed_edit.toPlainText().strip():
            self.typed_radio.setChecked(True)

    def _on_export_json_button_clicked(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Export JSON", str(Path.home() / "benchmark.json"), "JSON (*.json)"
        )
        if path:
            self._export(self.export_json, path)

    def _on_export_csv_button_clicked(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Export CSV", str(Path.home() / "benchmark.csv"), "CSV (*.csv)"
        )
        if path:
            self._export(self.export_csv, path)

    def _on_service_bench_event(self, event: Event) -> None:
        if isinstance(event, Loaded):
            self._loaded(event.info, event.draft_problem)
        elif isinstance(event, BenchProgress):
            self._progress(event.done, event.total, event.record)
        elif isinstance(event, BenchDone):
            (self._cancelled if event.cancelled else self._finished)(event.report)
        elif isinstance(event, Failed):
            self._failed(sentence(event.failure, Audience.BENCH))

    def _loaded(self, info: EngineInfo, draft_problem: str) -> None:
        self._run_meta.update(backend=info.backend, threads=info.n_threads)
        # The catalog's names, as the window's: a GGUF's own general.name is the converter's ("... AWQ").
        drafter = shipped_model_name(info.draft.path) if info.draft is not None else "no draft model"
        text = f"Loaded {shipped_model_name(info.target.path)} ({drafter}) on {info.backend}; warming up…"
        if draft_problem:
            text = f"{text} {draft_problem}"
        self._show_status(text)

    def _progress(self, done: int, total: int, record: BenchRecord) -> None:
        self._report.records.append(record)
        self._total = total
        self.progress_bar.setRange(0, total)
        self.progress_bar.setValue(done)
        self._show_status(f"Measured {record.id} with {record.mode}: {record.tokens_per_s:.1f} tokens/s.")
        self._refresh_results()

    def _finished(self, report: BenchReport) -> None:
        self._set_running(False)
        self.show_report(report)
        self.progress_bar.setRange(0, max(1, self._total))
        self.progress_bar.setValue(len(report.records))
        self._show_status(f"Done: {len(report.records)} runs. {self._overall()}".strip())
        self._autosave(complete=True)

    def _cancelled(self, report: BenchReport) -> None:
        self._set_running(False)
        if len(report.records) >= len(self._report.records):
            self.show_report(report)
        self.progress_bar.setRange(0, max(1, self._total))
        self.progress_bar.setValue(len(self._report.records))
        self._show_status(f"Cancelled after {len(self._report.records)} of {self._total} runs.")
        if self._report.records:
            self._autosave(complete=False)

    def _failed(self, message: str) -> None:
        self._set_running(False)
        self.progress_bar.setRange(0, max(1, self._total))
        self.progress_bar.setValue(len(self._report.records))
        self._show_status(message, error=True)
        if self._report.records:
            self._autosave(complete=False)

    # -- internals --------------------------------------------------------------------

    def _set_running(self, running: bool) -> None:
        self.run_button.setEnabled(not running and self.config() is not None)
        self.cancel_button.setEnabled(running)
        for w in (
            self.builtin_radio,
            self.file_radio,
            self.typed_radio,
            self.file_edit,
            self.browse_button,
            self.typed_edit,
            self.per_category,
            self.off_check,
            self.on_check,
            self.adaptive_check,
            self.max_tokens,
            self.draft_tokens,
        ):
            w.setEnabled(not running)
        has = bool(self._report.records) and not running
        self.export_json_button.setEnabled(has)
        self.export_csv_button.setEnabled(has)

    def _show_status(self, text: str, error: bool = False) -> None:
        self.status_label.setText(text)
        self.status_label.setProperty("error", error)
        self.status_label.setStyleSheet("color: #c0392b;" if error else "")

    def _overall(self) -> str:
        parts = [
            f"{row.mode} {row.speedup_vs_off:.2f}×"
            for row in self._report.summary()
            if row.category == "all" and row.mode != "off" and row.speedup_vs_off is not None
        ]
        return f"Overall speed against plain decoding: {', '.join(parts)}." if parts else ""

    def _refresh_results(self) -> None:
        rows = result_rows(self._report.records)
        self.table.setRowCount(len(rows))
        right = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
        for i, row in enumerate(rows):
            r = row.record
            spec = r.mode != "off"
            cells: list[tuple[str, bool]] = [
                (r.id, False),
                (r.category, False),
                (r.mode, False),
                (str(r.tokens), True),
                (f"{r.tokens_per_s:.1f}", True),
                ("—" if row.speedup is None else f"{row.speedup:.2f}×", True),
                (formatting.format_length(r.acceptance_length) if spec and r.stats.drafted else "—", True),
                (formatting.format_share(r.acceptance_rate) if spec and r.stats.drafted else "—", True),
                (same_text(r), False),
            ]
            for col, (text, numeric) in enumerate(cells):
                item = QTableWidgetItem(text)
                if numeric:
                    item.setTextAlignment(right)
                if col == 0:
                    item.setToolTip(r.text[:500])
                self.table.setItem(i, col, item)
        if rows:
            self.table.scrollToBottom()
        groups = list(dict.fromkeys(r.id for r in self._report.records))
        modes = list(dict.fromkeys(r.mode for r in self._report.records))
        self.speed_chart.set_data(
            groups, modes, {(r.id, r.mode): r.tokens_per_s for r in self._report.records}
        )
        lines = {}
        for mode in modes:
            recs = [r.stats for r in self._report.records if r.mode == mode and r.stats.drafted]
            if recs:
                lines[mode] = list(combine(recs).acceptance_rate_by_position)
        self.position_chart.set_data(lines)

    def _report_json(self, complete: bool = True) -> dict[str, object]:
        return report_json(self._report, self._run_meta, complete=complete)

    def _autosave(self, complete: bool) -> None:
        folder = (self._data_dir or folders.data_dir()) / "benchmarks"
        stamp = _dt.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
        path = folder / f"{stamp}.json"
        data = self._report_json(complete)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            n = 1
            while path.exists():
                n += 1
                path = folder / f"{stamp}-{n}.json"
            path.write_text(json.dumps(data, indent=2), encoding="utf-8")
        except OSError as exc:
            log.warning("could not save the benchmark to %s: %s", path, exc)
            self.saved_label.setText(f"The results could not be saved to {folder} ({exc.strerror or exc}).")
            return
        self.saved_path = path
        self.saved_label.setText(f"Saved to {path}")
        log.info("benchmark saved to %s", path)
        self._set_running(False)

    def _export(self, write: Callable[[Path | str], Path], path: str) -> None:
        try:
            write(path)
        except OSError as exc:
            self._show_status(f"Could not write {path} ({exc.strerror or exc}).", error=True)
            return
        self._show_status(f"Exported to {path}.")

    def closeEvent(self, event: Any) -> None:
        if self._service.is_running:
            self._service.stop()
        super().closeEvent(event)


def open_benchmark_dialog(
    parent: QWidget | None,
    config: ConfigSource,
    *,
    service: BenchPort | None = None,
    data_dir: Path | str | None = None,
) -> BenchmarkDialog:
    """Show the Benchmark dialog (one per parent) for ``config``: the loaded models, or a callable.

    Without ``service`` a services.BenchService is made, owned by the dialog.
    The dialog is not modal, so the chat stays usable; it is deleted when closed.
    """
    if parent is not None:
        for existing in parent.findChildren(BenchmarkDialog):
            if existing.isVisible():
                if not existing._service.is_running:
                    existing.set_config(config)
                existing.raise_()
                existing.activateWindow()
                return existing
    owned = None
    if service is None:
        from localchat.services.bench_service import BenchService

        service = owned = BenchService()
    dialog = BenchmarkDialog(service, config, parent, data_dir=data_dir)
    if owned is not None:
        owned.setParent(dialog)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.show()
    return dialog
