"""The GUI's composition root: builds the settings, the chat store, the engine client and the window.

Only this module (and cli.py) constructs objects from several layers; every
other piece receives the narrow object it needs. ``build_main_window`` takes
the folders explicitly so tests run the whole app on temporary folders.
"""

from __future__ import annotations

import logging
import logging.handlers
import multiprocessing
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs
import psutil
from PySide6.QtCore import QObject
from PySide6.QtWidgets import QApplication

from localchat.chat import ConversationStore
from localchat.settings import Settings, SettingsFile, Value
from localchat.ui.main_window import MainWindow

log = logging.getLogger(__name__)

APP_NAME = "localchat"


class FileSettings:
    """Settings that are written to settings.toml as soon as one changes."""

    def __init__(self, file: SettingsFile, settings: Settings) -> None:
        self._file = file
        self._settings = settings

    def get(self, name: str) -> Value:
        return self._settings.get(name)

    def set(self, name: str, value: object) -> Value:
        if self._settings.get(name) == value:
            return self._settings.get(name)
        checked = self._settings.set(name, value)
        try:
            self._file.save(self._settings)
        except OSError:
            log.warning("could not save the settings", exc_info=True)
        return checked


@dataclass
class AppParts:
    """What ``build_main_window`` made, so the caller (or a test) can reach each piece."""

    window: MainWindow
    engine: QObject
    store: ConversationStore
    settings: FileSettings
    messages: list[str]  # sentences about the settings file, shown once


def _memory_probe(engine: QObject) -> Callable[[], int | None]:
    def probe() -> int | None:
        pid = getattr(engine, "pid", None)
        if callable(pid):
            pid = pid()
        if not pid:
            return None
        try:
            return int(psutil.Process(int(pid)).memory_info().rss)
        except (psutil.Error, ValueError):
            return None

    return probe


def _make_engine_client() -> QObject:
    from localchat.services import EngineClient  # the services layer owns the child process

    client: QObject = EngineClient()
    return client


def build_main_window(
    config_dir: Path | str | None = None,
    data_dir: Path | str | None = None,
    *,
    engine: QObject | None = None,
    max_tokens: int = 1024,
    autoload: bool = True,
) -> AppParts:
    """Build the window and everything behind it. ``engine`` replaces the real client in tests."""
    settings_file = SettingsFile(config_dir)
    loaded = settings_file.load()
    for message in loaded.messages:
        log.warning("settings: %s", message)
    settings = FileSettings(settings_file, loaded.settings)
    data = Path(data_dir) if data_dir is not None else Path(platformdirs.user_data_dir(APP_NAME))
    store = ConversationStore(data / "chats.sqlite3")
    client = engine if engine is not None else _make_engine_client()
    window = MainWindow(store, client, settings, memory_probe=_memory_probe(client), max_tokens=max_tokens)
    if loaded.messages:
        window.show_notice(" ".join(loaded.messages))
    last = str(settings.get("last_model_path") or "")
    if autoload and last and Path(last).is_file():
        draft = str(settings.get("last_draft_path") or "") or None
        window.load_model(last, draft if draft and Path(draft).is_file() else None)
    elif not last or not Path(last).is_file():
        window.show_welcome(True)
    return AppParts(window, client, store, settings, list(loaded.messages))


def setup_logging(log_dir: Path | None = None) -> Path:
    """Log to a rotating file under the user's log folder (and warnings to stderr)."""
    folder = log_dir or Path(platformdirs.user_log_dir(APP_NAME))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "localchat.log"
    handler = logging.handlers.RotatingFileHandler(path, maxBytes=2_000_000, backupCount=3, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s: %(message)s"))
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    root.addHandler(handler)
    console = logging.StreamHandler()
    console.setLevel(logging.WARNING)
    root.addHandler(console)
    return path


def run_app(argv: Sequence[str] | None = None) -> int:
    """Start the desktop app and return its exit code."""
    multiprocessing.freeze_support()  # a frozen bundle re-enters here for the engine child
    args = list(argv if argv is not None else sys.argv)
    log_path = setup_logging()
    log.info("starting localchat; log at %s", log_path)
    app = QApplication.instance() or QApplication(args)
    assert isinstance(app, QApplication)
    app.setApplicationName(APP_NAME)
    app.setOrganizationName(APP_NAME)
    parts = build_main_window()
    parts.window.show()
    code = app.exec()
    shutdown = getattr(parts.engine, "shutdown", None)
    if callable(shutdown):
        shutdown()
    parts.store.close()
    return int(code)


def main() -> Any:
    return run_app(sys.argv)


if __name__ == "__main__":
    sys.exit(run_app(sys.argv))
