"""The starter for this computer in the app: kept from a load's measurement, offered once, and
selected in the model manager (services/starter_advisor.py, app.ModelsWiring)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from localchat.app import AppParts
from localchat.engine.types import EngineConfig, EngineInfo, MeasuredCosts, ModelInfo
from localchat.host.events import Phase
from localchat.ui.model_manager import ModelManagerDialog
from tests.ui.apps import fake_engine_app
from tests.ui.fakes import ON, FakeEngine

GB = 10**9
STARTER = "/models/Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
DRAFTER = "/models/Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
GPU_CURVE = ((1, 0.006), (2, 0.0062), (4, 0.0065), (8, 0.007), (16, 0.008))
CPU_CURVE = ((1, 0.0574), (2, 0.0907), (4, 0.1082), (8, 0.1875), (16, 0.2169))


def info(target: str = STARTER, draft: str = DRAFTER, curve: tuple[tuple[int, float], ...] = GPU_CURVE,
         backend: str = "CUDA", drafter_s: float = 0.003) -> EngineInfo:
    gpu = 80 * GB if backend != "CPU" else None
    return EngineInfo(
        backend,
        ModelInfo(target, "Qwen2.5 Coder 1.5B Instruct GGUF", "qwen2", 1_500_000_000, 1_117_320_768, 32768,
                  151936, True),
        ModelInfo(draft, "Qwen2.5 Coder 0.5B Instruct AWQ", "qwen2", 500_000_000, 491_400_064, 32768, 151936,
                  True),
        4096, 2, 99 if gpu else 0, ON, measured=MeasuredCosts(curve, drafter_s, gpu),
    )


def loaded(parts: AppParts, engine_info: EngineInfo) -> None:
    """The engine says this pair is loaded (the fake engine's state, as the supervisor publishes it)."""
    engine = parts.engine
    assert isinstance(engine, FakeEngine)
    draft = engine_info.draft.path if engine_info.draft is not None else None
    engine.set_state(phase=Phase.READY, info=engine_info, config=EngineConfig(engine_info.target.path, draft))


@pytest.fixture
def parts(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppParts:
    parts = fake_engine_app(qtbot, tmp_path, monkeypatch)
    parts.window.show()
    return parts


def open_manager_and_read(trigger) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """Run ``trigger`` (which opens the modal manager); return the selected entry id and the note."""
    seen: list[tuple[str, str]] = []

    def look() -> None:
        dialog = QApplication.activeModalWidget()
        assert isinstance(dialog, ModelManagerDialog)
        row = dialog.catalog_table.currentRow()
        item = dialog.catalog_table.item(row, 0)
        seen.append((str(item.data(0x0100)) if item else "", dialog.catalog_message.text()))
        dialog.reject()

    QTimer.singleShot(0, look)
    trigger()
    assert seen, "the model manager did not open"
    return seen[0]


def test_a_gpu_measurement_of_the_starter_offers_the_bigger_model_once(
    parts: AppParts, tmp_path: Path
) -> None:
    window = parts.window
    loaded(parts, info())
    assert window.suggestion.isVisible()
    text = window.suggestion.text()
    assert "For this computer: Qwen2.5-Coder 32B Instruct" in text
    assert "Get Qwen2.5-Coder 32B Instruct" in text
    assert "measured with Qwen2.5-Coder 1.5B Instruct" in text
    kept = json.loads((tmp_path / "data" / "machine-measure.json").read_text())
    assert kept["backend"] == "CUDA" and kept["verify_s"]["1"] == 0.006

    entry, note = open_manager_and_read(lambda: window.suggestion.linkActivated.emit("get"))
    assert entry == "qwen2.5-coder-32b-instruct"
    assert note.startswith("For this computer: Qwen2.5-Coder 32B Instruct")
    assert not window.suggestion.isVisible()

    loaded(parts, info())  # the same pair again: offered once is enough
    assert not window.suggestion.isVisible()


def test_not_now_hides_the_offer_and_opens_nothing(parts: AppParts) -> None:
    loaded(parts, info())
    assert parts.window.suggestion.isVisible()
    opened: list[str] = []
    parts.window.suggestion.model_requested.connect(opened.append)
    parts.window.suggestion.linkActivated.emit("dismiss")
    assert not parts.window.suggestion.isVisible() and opened == []


def test_where_the_starter_suits_the_computer_nothing_is_offered(parts: AppParts, tmp_path: Path) -> None:
    loaded(parts, info(curve=CPU_CURVE, backend="CPU", drafter_s=0.0332))
    assert not parts.window.suggestion.isVisible()
    assert (tmp_path / "data" / "machine-measure.json").is_file()  # kept for the starter button


def test_another_drafter_says_nothing_about_the_starter_pairs(parts: AppParts, tmp_path: Path) -> None:
    loaded(parts, info(draft="/models/other/smollm2-135m.gguf"))
    assert not parts.window.suggestion.isVisible()
    assert not (tmp_path / "data" / "machine-measure.json").exists()


def test_a_model_the_user_chose_is_measured_but_not_second_guessed(parts: AppParts, tmp_path: Path) -> None:
    loaded(parts, info(target="/models/my-finetune-q8_0.gguf"))
    assert not parts.window.suggestion.isVisible()
    assert (tmp_path / "data" / "machine-measure.json").is_file()


def test_the_starter_button_selects_the_starter_for_this_computer(parts: AppParts) -> None:
    models = parts.models
    assert models is not None
    entry, _note = open_manager_and_read(parts.window.starter_requested.emit)
    assert entry == "qwen2.5-coder-1.5b-instruct"  # nothing measured yet: the catalog's starter

    loaded(parts, info())
    entry, note = open_manager_and_read(parts.window.starter_requested.emit)
    assert entry == "qwen2.5-coder-32b-instruct"
    assert "about 29 tokens/s expected (speculation 3.1x)" in note
