"""The Benchmark dialog with a stand-in service: table rows, charts, autosave, export, errors."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QColor

from localchat.bench.modes import BenchMode
from localchat.bench.prompts import BenchPrompt, limit_per_category, typed_prompts
from localchat.bench.report import BenchRecord, BenchReport
from localchat.engine.stats import GenerationStats
from localchat.engine.types import EngineConfig, EngineInfo
from localchat.host.events import BenchDone, BenchProgress, Failed, Failure, FailureKind, Loaded
from localchat.ui.bench_chart import mode_color, nice_step
from localchat.ui.bench_dialog import BenchmarkDialog, open_benchmark_dialog
from tests.ui.fakes import ON, model_info

CONFIG = EngineConfig("/models/target.gguf", draft_path="/models/draft.gguf")


class FakeBenchService(QObject):
    """A services.bench_service.BenchPort driven by the test."""

    bench_event = Signal(object)

    def __init__(self) -> None:
        super().__init__()
        self.started: list[tuple[EngineConfig, list[BenchPrompt], list[BenchMode], int]] = []
        self.cancels = 0
        self.stops = 0
        self.running = False

    @property
    def is_running(self) -> bool:
        return self.running

    def start(
        self,
        config: EngineConfig,
        prompts: Sequence[BenchPrompt],
        modes: Sequence[BenchMode],
        max_tokens: int,
    ) -> None:
        self.started.append((config, list(prompts), list(modes), max_tokens))
        self.running = True

    def cancel(self) -> None:
        self.cancels += 1

    def stop(self) -> None:
        self.stops += 1
        self.running = False


def record(
    pid: str, mode: str, tps: float, matches: bool | None = None, category: str = "code"
) -> BenchRecord:
    spec = mode != "off"
    stats = GenerationStats(
        generated_tokens=32,
        generation_seconds=32 / tps,
        verify_passes=16 if spec else 32,
        drafted=40 if spec else 0,
        accepted=16 if spec else 0,
        drafted_per_position=(16, 12, 8, 4) if spec else (),
        accepted_per_position=(10, 4, 1, 1) if spec else (),
    )
    return BenchRecord(
        pid,
        category,
        mode,
        32,
        32 / tps,
        tps,
        stats.acceptance_length,
        stats.acceptance_rate,
        matches,
        None if matches in (None, True) else 7,
        stats,
        f"reply of {pid} in {mode}",
    )


def feed(service: FakeBenchService, records: list[BenchRecord]) -> BenchReport:
    info = EngineInfo("CPU", model_info(), model_info("Draft"), 2048, 2, 0, ON)
    service.bench_event.emit(Loaded(info, ""))
    for i, r in enumerate(records, start=1):
        service.bench_event.emit(BenchProgress(r, i, len(records)))
    service.running = False
    report = BenchReport(list(records), peak_rss_mb=321.0)
    service.bench_event.emit(BenchDone(report, cancelled=False))
    return report


RECORDS = [
    record("code-a", "off", 20.0),
    record("code-a", "draft", 30.0, True),
    record("code-a", "adaptive", 35.0, False),
    record("chat-b", "off", 25.0, category="chat"),
    record("chat-b", "draft", 20.0, True, category="chat"),
    record("chat-b", "adaptive", 26.0, True, category="chat"),
]


def make(qtbot, tmp_path: Path, config: object = CONFIG) -> tuple[BenchmarkDialog, FakeBenchService]:
    service = FakeBenchService()
    dialog = BenchmarkDialog(service, config, None, data_dir=tmp_path)  # type: ignore[arg-type]
    qtbot.addWidget(dialog)
    return dialog, service


def cell(dialog: BenchmarkDialog, row: int, col: int) -> str:
    item = dialog.table.item(row, col)
    assert item is not None
    return item.text()


def test_run_fills_table_charts_and_saves(qtbot, tmp_path: Path) -> None:
    dialog, service = make(qtbot, tmp_path)
    dialog.per_category.setValue(1)
    dialog.max_tokens.setValue(16)
    assert dialog.run()
    config, prompts, modes, max_tokens = service.started[0]
    assert config == CONFIG and max_tokens == 16
    assert [m.name for m in modes] == ["off", "draft", "adaptive"]
    assert len({p.category for p in prompts}) == len(prompts)  # one per category
    assert not dialog.run_button.isEnabled() and dialog.cancel_button.isEnabled()

    feed(service, RECORDS)
    assert dialog.table.rowCount() == 6
    assert [cell(dialog, 1, c) for c in range(9)] == [
        "code-a",
        "code",
        "draft",
        "32",
        "30.0",
        "1.50×",
        "2.00",
        "40%",
        "yes",
    ]
    assert cell(dialog, 0, 5) == "1.00×" and cell(dialog, 0, 6) == "—" and cell(dialog, 0, 8) == "—"
    assert cell(dialog, 2, 8) == "no (from token 7)"
    assert cell(dialog, 4, 5) == "0.80×"
    assert dialog.run_button.isEnabled() and not dialog.cancel_button.isEnabled()
    assert "Overall speed against plain decoding: draft" in dialog.status_label.text()

    dialog.resize(1000, 720)
    dialog.show()
    qtbot.waitExposed(dialog)
    image = dialog.speed_chart.grab().toImage()
    assert not image.isNull()
    colors = {
        image.pixelColor(x, y).name() for x in range(0, image.width(), 2) for y in range(0, image.height(), 2)
    }
    assert {mode_color("off").name(), mode_color("draft").name(), mode_color("adaptive").name()} <= colors
    pos = dialog.position_chart.grab().toImage()
    assert not pos.isNull()
    assert any(
        pos.pixelColor(x, y) == QColor(mode_color("adaptive"))
        for x in range(0, pos.width(), 1)
        for y in range(0, pos.height(), 1)
    )
    assert not dialog.grab().isNull()

    saved = dialog.saved_path
    assert saved is not None and saved.parent == tmp_path / "benchmarks" and saved.suffix == ".json"
    data = json.loads(saved.read_text())
    assert data["schema"] == "localchat-bench/1"
    assert data["complete"] is True and data["target"] == CONFIG.target_path
    assert data["peak_rss_mb"] == 321.0 and len(data["records"]) == 6
    assert data["records"][1]["speedup_vs_off"] == 1.5
    assert data["records"][1]["acceptance_rate_by_position"] == [0.625, 0.333, 0.125, 0.25]
    assert any(s["category"] == "all" and s["mode"] == "draft" for s in data["summary"])


def test_export_json_and_csv(qtbot, tmp_path: Path) -> None:
    dialog, service = make(qtbot, tmp_path)
    assert dialog.run()
    feed(service, RECORDS)
    assert dialog.export_json_button.isEnabled() and dialog.export_csv_button.isEnabled()
    j = dialog.export_json(tmp_path / "out.json")
    c = dialog.export_csv(tmp_path / "out.csv")
    data = json.loads(j.read_text())
    assert [r["mode"] for r in data["records"]] == ["off", "draft", "adaptive"] * 2
    with c.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 6
    assert rows[1]["mode"] == "draft" and float(rows[1]["speedup_vs_off"]) == 1.5
    assert rows[0]["speedup_vs_off"] == "1.0" and rows[0]["matches_off"] == ""
    assert rows[2]["matches_off"] == "False" and rows[2]["first_mismatch"] == "7"
    assert rows[1]["acceptance_rate_by_position"] == "0.625 0.333 0.125 0.250"


def test_cancel_keeps_partial_results(qtbot, tmp_path: Path) -> None:
    dialog, service = make(qtbot, tmp_path)
    assert dialog.run()
    for i, r in enumerate(RECORDS[:2], start=1):
        service.bench_event.emit(BenchProgress(r, i, 6))
    dialog.cancel_button.click()
    assert service.cancels == 1 and not dialog.cancel_button.isEnabled()
    service.running = False
    service.bench_event.emit(BenchDone(BenchReport(list(RECORDS[:2])), cancelled=True))
    assert dialog.table.rowCount() == 2
    assert dialog.status_label.text() == "Cancelled after 2 of 6 runs."
    assert dialog.saved_path is not None and json.loads(dialog.saved_path.read_text())["complete"] is False
    assert dialog.run_button.isEnabled()


def test_failure_is_one_sentence_and_close_stops(qtbot, tmp_path: Path) -> None:
    dialog, service = make(qtbot, tmp_path)
    assert dialog.run()
    service.running = False
    service.bench_event.emit(Failed(0, "bench", Failure(FailureKind.LOAD_FAILED,
                                                    "The model file /models/target.gguf does not exist.")))
    assert dialog.status_label.text() == "The model file /models/target.gguf does not exist."
    assert dialog.saved_path is None and dialog.run_button.isEnabled()
    assert dialog.run()
    dialog.close()
    assert service.stops == 1


def test_prompt_sources_and_bad_input(qtbot, tmp_path: Path) -> None:
    dialog, service = make(qtbot, tmp_path)
    dialog.typed_edit.setPlainText("Write a haiku about rain.\n\nName three rivers.\n")
    assert dialog.typed_radio.isChecked()
    assert [p.prompt for p in dialog.selected_prompts()] == [
        "Write a haiku about rain.",
        "Name three rivers.",
    ]

    jsonl = tmp_path / "mine.jsonl"
    jsonl.write_text('{"id": "a", "category": "x", "prompt": "one"}\nnot json\n')
    dialog.file_edit.setText(str(jsonl))
    dialog.file_radio.setChecked(True)
    assert not dialog.run()
    assert dialog.status_label.text().endswith("line 2: not valid JSON (Expecting value).")
    jsonl.write_text('{"id": "a", "category": "x", "prompt": "one"}\n{"id": "b", "prompt": "two"}\n')
    assert dialog.run()
    assert [p.id for p in service.started[-1][1]] == ["a", "b"]

    for check in (dialog.off_check, dialog.on_check, dialog.adaptive_check):
        check.setEnabled(True)
        check.setChecked(False)
    service.running = False
    assert not dialog.run()
    assert dialog.status_label.text() == "Choose at least one mode to measure."


def test_ngram_without_draft_model_and_no_model(qtbot, tmp_path: Path) -> None:
    dialog, _service = make(qtbot, tmp_path, EngineConfig("/models/target.gguf"))
    assert "n-gram" in dialog.on_check.text()
    assert [m.name for m in dialog.selected_modes()] == ["off", "ngram", "adaptive"]
    current: list[EngineConfig | None] = [None]
    empty, _ = make(qtbot, tmp_path, lambda: current[0])
    assert empty.model_label.text() == "Load a model first: the benchmark measures the model in use."
    assert not empty.run_button.isEnabled()
    assert not empty.run()
    # Said once: Run wrote the same sentence again under the button.
    assert empty.status_label.text() == ""
    current[0] = CONFIG
    empty.refresh_config()
    assert "draft.gguf" in empty.on_check.text()
    assert empty.run_button.isEnabled()


def test_open_benchmark_dialog_reuses_the_open_one(qtbot, tmp_path: Path) -> None:
    from PySide6.QtWidgets import QWidget

    parent = QWidget()
    qtbot.addWidget(parent)
    first = open_benchmark_dialog(parent, CONFIG, service=FakeBenchService(), data_dir=tmp_path)
    second = open_benchmark_dialog(parent, EngineConfig("/models/other.gguf"), data_dir=tmp_path)
    assert first is second and "other.gguf" in first.model_label.text()
    first.close()


def test_helpers() -> None:
    assert nice_step(37.0) == 10.0 and nice_step(0.9) == 0.2
    prompts = [BenchPrompt(str(i), "a" if i % 2 else "b", "p") for i in range(6)]
    assert [p.id for p in limit_per_category(prompts, 2)] == ["0", "1", "2", "3"]
    assert [p.id for p in typed_prompts('{"id": "x", "prompt": "y"}')] == ["x"]


def test_the_starter_pair_is_called_by_the_catalogs_names(qtbot, tmp_path: Path) -> None:
    """The GGUFs' own general.name called the drafter "Qwen2.5 Coder 0.5B Instruct AWQ" (the tool it was
    converted with); the dialog names the pair as the window does."""
    pair = EngineConfig("/m/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                        draft_path="/m/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    dialog, service = make(qtbot, tmp_path, pair)
    assert dialog.model_label.text().startswith(
        "Target Qwen2.5-Coder 1.5B Instruct · Q4_K_M, draft model Qwen2.5-Coder 0.5B Instruct · Q4_K_M.")
    info = EngineInfo("CPU", model_info("Qwen2.5 Coder 1.5B Instruct GGUF", pair.target_path),
                      model_info("Qwen2.5 Coder 0.5B Instruct AWQ", str(pair.draft_path)), 2048, 2, 0, ON)
    service.bench_event.emit(Loaded(info, ""))
    status = dialog.status_label.text()
    assert status.startswith(
        "Loaded Qwen2.5-Coder 1.5B Instruct · Q4_K_M (Qwen2.5-Coder 0.5B Instruct · Q4_K_M)")
    assert "AWQ" not in status and "GGUF" not in status
