"""Why a drafter does not draft, in the window (issue 30): predicted not to pay before its download
(the model manager, from the measurement the app keeps), and measured not to pay when it loads (the
engine's reason under the chat, not only in the log)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from localchat.app import AppParts
from localchat.engine.adaptive import lookup_instead
from localchat.engine.types import SpeculationState
from localchat.ui.model_manager import CATALOG_COLUMNS, ModelManagerDialog
from tests.ui.apps import fake_engine_app
from tests.ui.test_starter_advice import CPU_CURVE, info, loaded


@pytest.fixture
def parts(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppParts:
    parts = fake_engine_app(qtbot, tmp_path, monkeypatch)
    parts.window.show()
    return parts


def read_manager(trigger) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """Run ``trigger`` (which opens the modal manager); what its catalog tab says."""
    seen: dict[str, object] = {}

    def look() -> None:
        dialog = QApplication.activeModalWidget()
        assert isinstance(dialog, ModelManagerDialog)
        row = dialog.catalog_table.currentRow()
        seen["message"] = dialog.catalog_message.text()
        seen["drafter"] = dialog.catalog_table.item(row, CATALOG_COLUMNS.index("Drafter")).text()
        seen["anyway"] = dialog.download_anyway_button.isVisible()
        dialog.reject()

    QTimer.singleShot(0, look)
    trigger()
    assert seen, "the model manager did not open"
    return seen


def test_a_small_cpus_measurement_predicts_the_starters_drafter_does_not_pay(
    parts: AppParts, tmp_path: Path
) -> None:
    before = read_manager(parts.window.starter_requested.emit)
    assert "predicted" not in str(before["message"]) and not before["anyway"]  # nothing measured yet

    loaded(parts, info(curve=CPU_CURVE, backend="CPU", drafter_s=0.0332))
    kept = json.loads((tmp_path / "data" / "machine-measure.json").read_text())
    assert kept["drafter_bytes"] == 491_400_064
    seen = read_manager(parts.window.starter_requested.emit)
    assert ("the drafter Qwen2.5-Coder 0.5B Instruct · Q4_K_M is predicted to run 0.8x plain speed "
            "with Qwen2.5-Coder 1.5B Instruct · Q4_K_M: it costs more than it saves, so it is not "
            "downloaded.") in str(seen["message"])
    assert str(seen["drafter"]).startswith("0.8x here · Qwen2.5-Coder 0.5B Instruct") and seen["anyway"]


def test_a_drafter_the_load_measured_not_to_pay_says_so_under_the_chat(parts: AppParts) -> None:
    dropped = SpeculationState(True, "n-gram", lookup_instead(0.8), 4)
    loaded(parts, replace(info(curve=CPU_CURVE, backend="CPU", drafter_s=0.0332), speculation=dropped))
    notice = parts.window.page.notice
    assert not notice.isHidden()
    assert "On this computer the draft model costs more than it saves for this model (0.80x at best)" in (
        notice.text())
    assert "lookup" in parts.window.status.speculation_button.toolTip()


def test_a_drafter_that_drafts_adds_nothing_under_the_chat(parts: AppParts) -> None:
    loaded(parts, info(curve=CPU_CURVE, backend="CPU", drafter_s=0.0332))
    assert parts.window.page.notice.isHidden() or parts.window.page.notice.text() == ""


def test_loading_a_model_whose_drafter_was_not_taken_says_why_under_the_chat(
    parts: AppParts, tmp_path: Path, qwen_target_path: Path
) -> None:
    """The catalog's drafter for the starter is not downloaded: the pairing's reason reaches the
    window with the load, not only the log."""
    own = tmp_path / "own"
    own.mkdir()
    (own / qwen_target_path.name).symlink_to(qwen_target_path)
    parts.settings.set("models_folder", str(own))
    wiring = parts.models
    assert wiring is not None
    selected: list[str] = []

    def load() -> None:  # the manager is modal: act while it is open
        dialog = QApplication.activeModalWidget()
        assert isinstance(dialog, ModelManagerDialog)
        dialog.local_table.selectRow(0)
        selected.append(dialog.local_message.text())
        dialog.load_button.click()

    QTimer.singleShot(0, load)
    wiring.open_manager()
    assert selected and "is not downloaded" in selected[0]
    notice = parts.window.page.notice
    assert not notice.isHidden()
    assert ("The catalog's drafter for Qwen2.5-Coder 1.5B Instruct, qwen2.5-coder-0.5b-instruct-q4_k_m.gguf, "
            "is not downloaded.") in notice.text()
    assert "n-gram prompt lookup instead" in notice.text()
