"""The model manager's hub search, against the suite's 127.0.0.1 hub (never the real one): repositories
by name with downloads and likes, a repository's quantizations with sizes and whether they fit, a
download of the chosen one through the download service, a gated repository and a failed search said."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import constants
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication

from localchat.services.download_service import DownloadService
from localchat.services.hub_search_service import HubSearchService
from localchat.ui.hub_search_page import HubSearchPage
from localchat.ui.model_manager import ModelManagerDialog
from tests.hub.hubserver import HubServer
from tests.ui.apps import fake_engine_app
from tests.ui.fakes import FakeEngine

GB = 10**9


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "hf-home" / "token"))
    server = HubServer(tmp_path / "hub")
    server.add("bartowski/Tiny-Coder-GGUF", "Tiny-Coder-Q8_0.gguf", b"GGUF" + b"\0" * 30_000)
    server.add("bartowski/Tiny-Coder-GGUF", "Tiny-Coder-Q4_K_M.gguf", b"GGUF" + b"\0" * 15_000)
    server.add("locked/Tiny-Coder-GGUF", "tiny-coder-q4_0.gguf", b"GGUF" + b"\0" * 100)
    server.stats = {"bartowski/Tiny-Coder-GGUF": (5000, 40), "locked/Tiny-Coder-GGUF": (90, 1)}
    server.grants["locked/Tiny-Coder-GGUF"] = {"hf_granted"}
    yield server
    server.close()


@pytest.fixture
def page(qtbot, hub: HubServer, tmp_path: Path) -> HubSearchPage:
    downloads = DownloadService(lambda: tmp_path / "models", endpoint=hub.url)
    page = HubSearchPage(HubSearchService(endpoint=hub.url), downloads, total_ram=16 * GB)
    qtbot.addWidget(page)
    page.show()
    return page


def _search(qtbot, page: HubSearchPage, words: str) -> None:
    page.query.setText(words)
    qtbot.mouseClick(page.search_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: page.search_button.isEnabled(), timeout=20_000)


def test_search_choose_a_quantization_and_download_it(qtbot, page: HubSearchPage, tmp_path: Path) -> None:
    _search(qtbot, page, "tiny-coder")
    cells = [[page.repo_table.item(r, c).text() for c in range(4)] for r in range(page.repo_table.rowCount())]
    assert cells == [["bartowski/Tiny-Coder-GGUF", "5,000", "40", "Open"],
                     ["locked/Tiny-Coder-GGUF", "90", "1", "Gated: accept its licence on the hub"]]
    assert "2 repositories with GGUF files" in page.message.text()
    assert not page.download_button.isEnabled()

    page.repo_table.selectRow(0)
    qtbot.waitUntil(lambda: page.file_table.rowCount() == 2, timeout=20_000)
    first = [page.file_table.item(0, c).text() for c in range(4)]
    assert first[:3] == ["Q4_K_M", "Tiny-Coder-Q4_K_M.gguf", "15.0 KB"]
    assert first[3].startswith("Yes: needs about")
    assert "2 quantizations of bartowski/Tiny-Coder-GGUF, smallest first" in page.message.text()

    page.file_table.selectRow(0)
    assert page.download_button.isEnabled()
    downloader = page._downloader
    with qtbot.waitSignal(downloader.finished, timeout=30_000) as done:
        qtbot.mouseClick(page.download_button, Qt.MouseButton.LeftButton)
        assert page.cancel_button.isVisible() and not page.download_button.isEnabled()
    target = Path(done.args[1])
    folder = tmp_path / "models" / "bartowski" / "Tiny-Coder-GGUF"
    assert target == (folder / "Tiny-Coder-Q4_K_M.gguf").resolve()
    assert target.stat().st_size == 15_004
    assert "listed under “On this computer”" in page.message.text()
    assert not page.cancel_button.isVisible()


def test_a_gated_repository_says_how_to_get_in(qtbot, page: HubSearchPage) -> None:
    _search(qtbot, page, "tiny-coder")
    page.repo_table.selectRow(1)
    qtbot.waitUntil(lambda: page.file_table.rowCount() == 1, timeout=20_000)
    assert "It is gated: accept its licence on the hub and add your token in Settings" in page.message.text()
    # Downloading it without a token: the download's own sentence, with the licence page and the token step.
    page.file_table.selectRow(0)
    with qtbot.waitSignal(page._downloader.failed, timeout=30_000):
        page.download()
    assert "locked/Tiny-Coder-GGUF is gated" in page.message.text()
    assert "accept its licence" in page.message.text() and page.download_button.isEnabled()


def test_no_match_and_an_empty_search_are_said(qtbot, page: HubSearchPage) -> None:
    _search(qtbot, page, "no-such-model")
    assert page.repo_table.rowCount() == 0
    assert "No GGUF repositories on the hub match “no-such-model”" in page.message.text()
    page.query.setText("  ")
    page.start_search()
    assert "Type part of a model's name" in page.message.text()


def test_the_model_manager_has_the_hub_search_tab(qtbot, tmp_path: Path, monkeypatch) -> None:
    parts = fake_engine_app(qtbot, tmp_path, monkeypatch)
    seen: list[str] = []

    def look() -> None:
        dialog = QApplication.activeModalWidget()
        assert isinstance(dialog, ModelManagerDialog)
        seen.extend(dialog.tabs.tabText(i) for i in range(dialog.tabs.count()))
        dialog.reject()

    QTimer.singleShot(0, look)
    parts.models.open_manager()
    assert seen == ["On this computer", "Catalog", "Search the hub"]


def test_a_model_found_on_the_hub_downloads_lists_and_loads_from_the_manager(
        qtbot, hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parts = fake_engine_app(qtbot, tmp_path, monkeypatch)
    # The app's own search and downloads reach this hub, as HF_ENDPOINT set before the start would do.
    monkeypatch.setattr(constants, "ENDPOINT", hub.url)
    template = hub.url + "/{repo_id}/resolve/{revision}/{filename}"
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
    engine = parts.engine
    assert isinstance(engine, FakeEngine)
    seen: dict[str, object] = {}

    def use() -> None:
        dialog = QApplication.activeModalWidget()
        assert isinstance(dialog, ModelManagerDialog)
        try:
            steps(dialog)
        except BaseException as exc:  # a failure closes the dialog, then fails the test
            seen["error"] = exc
            dialog.reject()

    def steps(dialog: ModelManagerDialog) -> None:
        page = dialog.tabs.widget(2)
        assert isinstance(page, HubSearchPage)
        dialog.tabs.setCurrentWidget(page)
        _search(qtbot, page, "tiny coder")
        page.repo_table.selectRow(0)
        qtbot.waitUntil(lambda: page.file_table.rowCount() == 2, timeout=20_000)
        page.file_table.selectRow(0)
        page.download()
        qtbot.waitUntil(lambda: dialog.load_now_button.isVisible(), timeout=30_000)
        seen["tab"] = dialog.tabs.currentIndex()
        seen["message"] = dialog.local_message.text()
        dialog.load_now_button.click()

    QTimer.singleShot(0, use)
    parts.models.open_manager()
    if "error" in seen:
        raise AssertionError("in the model manager") from seen["error"]  # type: ignore[misc]
    assert seen["tab"] == 0  # listed at once under "On this computer"
    assert "Downloaded Tiny-Coder-Q4_K_M.gguf: ready to chat with" in str(seen["message"])
    folder = tmp_path / "own" / "bartowski" / "Tiny-Coder-GGUF"
    assert Path(engine.configs[-1].target_path).resolve() == (folder / "Tiny-Coder-Q4_K_M.gguf").resolve()
