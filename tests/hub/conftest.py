"""Fixtures for download tests: a hub stand-in on 127.0.0.1 and small chunks so progress and cancel show."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import constants

from localchat.hub import download
from tests.hub.hubserver import HubServer


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    # No login of the machine running the tests leaks into them: an empty token file of their own.
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "hf-home" / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "hf-home" / "stored_tokens"))
    # 64 KiB reads instead of 1 MiB: a few-MB test file then gives many progress and cancel checks.
    monkeypatch.setattr(download, "CHUNK", 64 * 1024)
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", constants.DOWNLOAD_CHUNK_SIZE)
    server = HubServer(tmp_path / "hub")
    yield server
    server.close()


@pytest.fixture
def models(tmp_path: Path) -> Path:
    return tmp_path / "models"
