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
