"""A download that finishes while the model manager is closed: loaded at once when no model is (the
first run's starter), else the window offers it ("Load now")."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ui.apps import fake_engine_app
from tests.ui.fakes import FakeEngine


def test_the_window_offers_a_finished_download_and_loads_it(
    qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = fake_engine_app(qtbot, tmp_path, monkeypatch)
    window, engine = parts.window, parts.engine
    assert isinstance(engine, FakeEngine) and parts.downloads is not None
    window.show()
    window.load_model(str(tmp_path / "own" / "the-model-in-use.gguf"))  # a model is in use already
    target = str(tmp_path / "own" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    draft = str(tmp_path / "own" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    parts.downloads.finished.emit(1, target, draft)
    banner = window.suggestion
    assert banner.isVisible()
    assert "is downloaded with its drafter." in banner.text() and "Load now" in banner.text()
    assert banner.text().startswith("Qwen2.5-Coder 1.5B Instruct is")  # the catalog's name, not the file's
    banner.linkActivated.emit("load")
    assert not banner.isVisible()
    assert [(c.target_path, c.draft_path) for c in engine.configs][-1:] == [(target, draft)]


def test_not_now_hides_the_offer_and_loads_nothing(
    qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = fake_engine_app(qtbot, tmp_path, monkeypatch)
    assert parts.downloads is not None and isinstance(parts.engine, FakeEngine)
    parts.window.show()
    parts.window.load_model(str(tmp_path / "own" / "the-model-in-use.gguf"))
    parts.downloads.finished.emit(1, str(tmp_path / "own" / "some-model.gguf"), "")
    assert "some-model.gguf is downloaded." in parts.window.suggestion.text()
    loads = len(parts.engine.configs)
    parts.window.suggestion.linkActivated.emit("dismiss")
    assert not parts.window.suggestion.isVisible() and len(parts.engine.configs) == loads


def test_the_first_runs_download_is_loaded_at_once(
    qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = fake_engine_app(qtbot, tmp_path, monkeypatch)
    assert parts.downloads is not None and isinstance(parts.engine, FakeEngine)
    window = parts.window
    window.show()
    assert window.pages.currentWidget() is window.welcome  # no model yet: the first-run screen
    target = str(tmp_path / "own" / "starter.gguf")
    draft = str(tmp_path / "own" / "drafter.gguf")
    parts.downloads.finished.emit(1, target, draft)
    assert [(c.target_path, c.draft_path) for c in parts.engine.configs] == [(target, draft)]
    assert window.pages.currentWidget() is not window.welcome  # the chat, with the model loaded
