"""The Settings dialog's Hugging Face tab with the real HubTokenService, against the hub stand-in."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import constants
from PySide6.QtWidgets import QLineEdit

from localchat.hub import token as hub_token
from localchat.services.hub_token_service import HubTokenService
from localchat.settings import OPTIONS, Settings
from localchat.ui.settings_dialog import HUB_TAB, SettingsDialog
from tests.hub.hubserver import HubServer

GOOD = "hf_granted0123456789"


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "hf-home" / "token"))
    server = HubServer(tmp_path / "hub")
    server.accounts[GOOD] = "ada"
    yield server
    server.close()


def _dialog(qtbot, service: HubTokenService) -> SettingsDialog:
    dialog = SettingsDialog(OPTIONS, Settings().as_dict(), token=service)
    qtbot.addWidget(dialog)
    return dialog


def test_the_tab_is_masked_links_to_the_tokens_page_and_saves_on_ok(qtbot, hub: HubServer) -> None:
    service = HubTokenService(endpoint=hub.url)
    dialog = _dialog(qtbot, service)
    tabs = [dialog.tabs.tabText(i) for i in range(dialog.tabs.count())]
    assert tabs[-1] == HUB_TAB
    page = dialog.token_page
    assert page is not None
    assert page.edit.echoMode() is QLineEdit.EchoMode.Password
    assert page.edit.text() == ""
    texts = " ".join(label.text() for label in page.findChildren(type(page.status)))
    assert "https://huggingface.co/settings/tokens" in texts and hub_token.token_file().name in texts
    page.show_box.setChecked(True)
    assert page.edit.echoMode() is QLineEdit.EchoMode.Normal

    page.edit.setText(f" {GOOD} ")
    assert not hub_token.token_file().exists()  # nothing is written before OK
    dialog.accept()
    assert dialog.result() == SettingsDialog.DialogCode.Accepted
    assert hub_token.stored_token() == GOOD
    assert dialog.changed_values() == {}  # the token is not a setting: it never reaches settings.toml

    again = _dialog(qtbot, service)
    assert again.token_page is not None and again.token_page.edit.text() == GOOD
    again.token_page.edit.setText("")
    again.accept()
    assert not hub_token.token_file().exists()
    # A closed dialog no longer listens to the service, which lives as long as the window.
    assert service.receivers("2checked(bool,QString)") == 0


def test_check_asks_the_hub_off_the_gui_thread(qtbot, hub: HubServer) -> None:
    service = HubTokenService(endpoint=hub.url)
    dialog = _dialog(qtbot, service)
    page = dialog.token_page
    assert page is not None
    page.edit.setText(GOOD)
    with qtbot.waitSignal(service.checked, timeout=10_000) as blocker:
        page.check_button.click()
        assert page.status.text() == "Asking the hub…" and not page.check_button.isEnabled()
    assert blocker.args == [True, "The hub accepted the token: signed in as ada (read access)."]
    assert page.status.text() == blocker.args[1] and page.check_button.isEnabled()
    assert hub.requests[-1].authorization == f"Bearer {GOOD}"

    page.edit.setText("hf_mistyped")
    with qtbot.waitSignal(service.checked, timeout=10_000) as blocker:
        page.check_button.click()
    assert blocker.args[0] is False
    assert "did not accept this token (401)" in page.status.text()


def test_a_token_that_cannot_be_saved_keeps_the_dialog_open(qtbot, hub: HubServer) -> None:
    dialog = _dialog(qtbot, HubTokenService(endpoint=hub.url))
    page = dialog.token_page
    assert page is not None
    dialog.tabs.setCurrentIndex(0)
    page.edit.setText("hf_two words")
    dialog.accept()
    assert dialog.result() != SettingsDialog.DialogCode.Accepted
    assert dialog.tabs.currentWidget() is page
    assert "no spaces" in page.status.text()
