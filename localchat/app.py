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
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QApplication, QWidget

from localchat.chat import ConversationStore, Recovery
from localchat.services import ChatSession, SettingsService
from localchat.services.engine_port import EnginePort
from localchat.settings import SettingsFile, folders
from localchat.ui.main_window import MainWindow

if TYPE_CHECKING:
    from localchat.catalog.drafter_payoff import DrafterOutlook
    from localchat.catalog.drafters import Catalog
    from localchat.catalog.library import Library
    from localchat.engine.types import EngineInfo
    from localchat.host.events import EngineState
    from localchat.host.supervisor import EngineSupervisor
    from localchat.server import ServerThread
    from localchat.server.model_shelf import ModelShelf
    from localchat.services.starter_advisor import StarterAdvisor
    from localchat.ui.model_manager import ModelManagerDialog
from localchat.services.download_service import DownloadService
from localchat.services.main_thread_gc import MainThreadCollector
from localchat.services.mcp_service import McpService

log = logging.getLogger(__name__)


@dataclass
class AppParts:
    """What ``build_main_window`` made, so the caller (or a test) can reach each piece."""

    window: MainWindow
    engine: EnginePort
    store: ConversationStore
    settings: SettingsService
    messages: list[str]  # sentences about the settings file, shown once
    session: ChatSession
    recovery: Recovery | None = None  # the chat history on disk was unreadable and set aside
    downloads: DownloadService | None = None  # running downloads are cancelled when the app quits
    server: ApiServerSwitch | None = None  # the local API (Settings → Server), stopped when the app quits
    models: ModelsWiring | None = None  # the model manager and the starter advice
    tools: McpService | None = None  # the tool servers (Settings → Tools), stopped when the app quits


def _catalog_or_none() -> Catalog | None:
    """The shipped catalog; None (with a log line) if it cannot be read."""
    from localchat.catalog.drafters import load_catalog

    try:
        return load_catalog()
    except Exception as exc:  # a broken catalog must not keep local models from loading
        log.warning("catalog: %s", exc)
        return None


class ModelsWiring(QObject):
    """Opens the model manager and turns its choice into a load; offers the starter for this computer.

    It gets what it acts on, not the window: the dialogs' parent, the engine's state, a function
    that loads a pair and one that offers a model (the window's suggestion line)."""

    def __init__(
        self, parent: QWidget, settings: SettingsService, engine: EnginePort,
        load: Callable[[str, str | None], None], offer: Callable[[str, str, str], None],
        downloader: QObject | None = None, advisor: StarterAdvisor | None = None,
        offer_load: Callable[[str, str, str | None], None] | None = None,
        say_refusal: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(parent)
        self._parent = parent
        self._settings = settings
        self._engine = engine
        self._load = load
        self._offer = offer
        self._downloader = downloader
        self.advisor = advisor
        self._observed: EngineInfo | None = None
        self._offer_load = offer_load
        self._say_refusal = say_refusal  # why the next load drafts without the drafter that was there
        self._dialog: ModelManagerDialog | None = None  # the open model manager
        self._manager_open = False  # the manager offers a finished download itself
        if downloader is not None:
            downloader.finished.connect(self._on_download_finished)  # type: ignore[attr-defined]

    def _on_download_finished(self, _job: object, target: str, draft: str) -> None:
        """A download finished while the manager was closed. With no model loaded (the first run's
        starter) it is loaded at once: it is what the user asked for; otherwise the window offers it."""
        if self._manager_open or not target:
            return
        from localchat.host.events import Phase

        if self._engine.state.phase in (Phase.NO_MODEL, Phase.FAILED):
            self._load(target, draft or None)
            return
        if self._offer_load is None:
            return
        catalog = _catalog_or_none()
        match = catalog.find_target_file(Path(target).name) if catalog is not None else None
        name = match[0].display_name if match is not None else Path(target).name
        sentence = f"{name} is downloaded{' with its drafter' if draft else ''}."
        self._offer_load(sentence, target, draft or None)

    def library(self) -> Library:
        """The models the manager lists (and the API may load): the folders as the settings say now."""
        return self._library()

    def _library(self) -> Library:
        from localchat.catalog.library import Library, default_models_dir, hf_cache_dir

        folder = self._settings.models_folder or str(default_models_dir())
        extra = [p for p in (self._settings.last_model_path,) if p and Path(p).is_file()]
        # huggingface-hub's cache and the user's other folders are read where they are, never changed.
        others = [hf_cache_dir(), *(Path(f).expanduser() for f in self._settings.extra_model_folder_list())]
        return Library([folder], extra, read_only_dirs=others)

    def add_folder(self, path: str) -> tuple[Library, str]:
        """Add ``path`` to the extra_model_folders setting; the new library and a sentence for the manager."""
        from localchat.settings.settings import join_folders

        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise ValueError(f"{folder} is not a folder, so it was not added.")
        real = folder.resolve()
        known = {f.resolve() for f in self._library().folders if f.exists()}
        if real in known:
            return self._library(), f"{real} is already listed."
        self._settings.set(
            "extra_model_folders", join_folders([*self._settings.extra_model_folder_list(), str(real)])
        )
        library = self._library()
        found = sum(1 for m in library.refresh() if m.folder == real)
        return library, (
            f"Added {real}: {found} model{'s' if found != 1 else ''} found there. localchat reads them "
            "where they are and never moves or deletes them."
        )

    def open_manager(self, select_starter: bool = False, select: str = "", note: str = "") -> None:
        from localchat.catalog.drafter_payoff import outlook_for_entry
        from localchat.catalog.library import lmstudio_folders, pair_drafter
        from localchat.catalog.sizes import total_ram
        from localchat.ui.model_manager import ModelManagerDialog

        library, catalog = self._library(), _catalog_or_none()
        current = [library]  # pairing looks in the folders added while the manager is open too

        def pair(path: str) -> Any:
            assert catalog is not None  # offered to the dialog only with a catalog
            return pair_drafter(path, catalog, current[0])

        def add_folder(path: str) -> tuple[Library, str]:
            current[0], sentence = self.add_folder(path)
            return current[0], sentence

        # What the engine measured here predicts whether a catalog drafter pays before it is
        # downloaded; with nothing measured yet (a first run) it is downloaded, as before.
        measured = self.advisor.measurement() if self.advisor is not None else None

        def outlook(entry_id: str, quant: str | None) -> DrafterOutlook | None:
            assert catalog is not None and measured is not None  # offered only with both
            return outlook_for_entry(catalog.get(entry_id), quant, measured)

        # What the engine has now, marked in both lists (None before the first load or after a crash).
        info = self._engine.state.info
        dialog = ModelManagerDialog(
            catalog,
            library,
            available_memory=total_ram(),
            loaded_target=info.target.path if info is not None else None,
            loaded_draft=info.draft.path if info is not None and info.draft is not None else None,
            downloader=self._downloader,
            pair=pair if catalog is not None else None,
            outlook=outlook if catalog is not None and measured is not None else None,
            add_folder=add_folder,
            suggested_folders=lmstudio_folders(),
            parent=self._parent,
        )
        self._dialog = dialog  # its refusal sentence goes with the load it asks for
        dialog.load_requested.connect(self._on_dialog_load_requested)
        from localchat.services.hub_search_service import HubSearchService
        from localchat.ui.hub_search_page import HubSearchPage

        # The hub's GGUF models by name: downloaded through the same service, listed and offered alike.
        hub_page = HubSearchPage(HubSearchService(parent=dialog), self._downloader, total_ram(), dialog)
        dialog.tabs.addTab(hub_page, "Search the hub")
        if select:
            dialog.select_entry(select, note)
        elif select_starter:
            dialog.tabs.setCurrentIndex(1)
            dialog.catalog_table.selectRow(0)
        self._manager_open = True
        try:
            dialog.exec()
        finally:
            self._manager_open = False
            self._dialog = None

    def open_starter(self) -> None:
        """Load the starter for this computer when its files are here, else show it in the manager."""
        library, catalog = self._library(), _catalog_or_none()
        starter = catalog.starter if catalog is not None else None
        # What an earlier load measured on this computer chooses among the starter's family.
        choice = self.advisor.saved_choice() if self.advisor is not None else None
        entries = [choice.chosen.entry] if choice is not None else []
        entries += [starter] if starter is not None else []
        for entry in entries:
            target = library.find_file(entry.default_quant.filename, entry.default_quant.repo)
            drafter = entry.model_drafter
            draft = library.find_file(drafter.filename, drafter.repo) if drafter else None
            if target is not None:
                self._load(str(target.path), str(draft.path) if draft else None)
                return
        if choice is not None:
            self.open_manager(select=choice.chosen.entry.id, note=choice.sentence)
        else:
            self.open_manager(select_starter=True)

    def open_suggested(self, entry_id: str) -> None:
        choice = self.advisor.saved_choice() if self.advisor is not None else None
        self.open_manager(select=entry_id, note=choice.sentence if choice is not None else "")

    def observe(self, state: EngineState) -> None:
        """A pair loaded: keep what it measured of this computer and offer a better starter."""
        info = state.info
        if self.advisor is None or info is None or info == self._observed:
            return
        self._observed = info
        try:
            choice = self.advisor.observe(info)
        except Exception:  # advice is an extra: it must never get in the way of a loaded model
            log.exception("the starter advice failed")
            return
        if choice is not None:
            entry = choice.chosen.entry
            self._offer(choice.sentence, entry.id, entry.display_name)

    def _on_dialog_load_requested(self, target: str, draft: object) -> None:
        refusal = self._dialog.refusal if self._dialog is not None else ""
        if refusal and self._say_refusal is not None:
            self._say_refusal(refusal)
        self._load(target, str(draft) if draft else None)


class ApiServerSwitch:
    """Settings → Server: the local API on the window's own engine supervisor (one process, one model).

    On when ``server_enabled`` is and there is a supervisor to share; rebound when the port, the
    API key or the allowed web pages change. It binds 127.0.0.1 only. A port in use is a sentence
    (``notice``), and the switch stays off; ``show_url`` is told where it serves (None: nowhere).
    ``shelf``: the local models it lists and loads when a request names one (``server_loads_models``).
    """

    def __init__(self, settings: SettingsService, supervisor: EngineSupervisor | None,
                 show_url: Callable[[str | None], None], notice: Callable[[str], None],
                 shelf: ModelShelf | None = None) -> None:
        self._settings = settings
        self._supervisor = supervisor
        self._shelf = shelf
        self._show_url = show_url
        self._notice = notice
        self._thread: ServerThread | None = None
        self._running: tuple[int, str, str] | None = None  # port, key and allowed origins it serves with
        self.error = ""
        settings.changed.connect(self._on_settings_changed)
        self.apply()

    @property
    def url(self) -> str | None:
        return self._thread.url if self._thread is not None else None

    def apply(self) -> None:
        want = self._settings.server_enabled and self._supervisor is not None
        settings = self._settings
        wanted = (settings.server_port, settings.server_api_key, settings.server_allowed_origins)
        if self._thread is not None and (not want or wanted != self._running):
            self.stop()
        if want and self._thread is None:
            self._start(*wanted)

    def _start(self, port: int, key: str, origins: str) -> None:
        from localchat.server import BindError, ServerSettings, ServerThread, bind_socket, create_app

        assert self._supervisor is not None
        try:
            sock = bind_socket("127.0.0.1", port)
        except BindError as exc:
            log.warning("api server: %s", exc)
            self.error = (f"The API server could not start on port {port}: another program may be using "
                          "it. Choose another port in Settings → Server.")
            self._notice(self.error)
            self._show_url(None)
            return
        self._supervisor.start()
        allowed = tuple(o.strip() for o in origins.split(",") if o.strip())
        app = create_app(self._supervisor, ServerSettings(api_key=key or None, cors_origins=allowed),
                         self._shelf)
        thread = ServerThread(app, sock)
        thread.start()
        self._thread, self._running, self.error = thread, (port, key, origins), ""
        log.info("api server on %s", thread.url)
        self._show_url(thread.url)

    def stop(self) -> None:
        thread, self._thread, self._running = self._thread, None, None
        if thread is not None:
            thread.stop()
            log.info("api server stopped")
        self._show_url(None)

    def _on_settings_changed(self, name: str, _value: object) -> None:
        if name.startswith("server_"):
            self.apply()


def _api_shelf(settings: SettingsService, models: ModelsWiring, session: ChatSession) -> ModelShelf:
    """The models the API lists and loads on request: the manager's folders, paired as the manager
    pairs, each loaded with its preset over the settings (the window's own ``config_for``)."""
    from localchat.server.model_shelf import ModelShelf

    return ModelShelf(models.library, _catalog_or_none, session.model.config_for,
                      lambda: settings.server_loads_models)


def _make_engine_client() -> EnginePort:
    from localchat.services import EngineClient  # the services layer owns the child process

    # The engine process writes its own log (and llama.cpp's warnings and errors) there: the
    # windowed Windows bundle has no stderr, and a failed load or a crash must leave its reason.
    log_path = folders.log_dir() / "engine.log"
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        log.warning("cannot create the log folder %s; the engine logs nowhere", log_path.parent)
        return EngineClient()
    return EngineClient(log_path=str(log_path))


def _make_downloader(settings: SettingsService, parent: QObject) -> DownloadService:
    from localchat.catalog.library import default_models_dir
    from localchat.services.download_service import DownloadService

    def models_dir() -> Path:
        return Path(settings.models_folder or default_models_dir())

    return DownloadService(models_dir, parent=parent)


def build_main_window(
    config_dir: Path | str | None = None,
    data_dir: Path | str | None = None,
    *,
    engine: EnginePort | None = None,
    max_tokens: int | None = None,
    autoload: bool = True,
    log_dir: Path | None = None,
) -> AppParts:
    """Build the window and everything behind it. ``engine`` replaces the real client in tests.

    ``max_tokens`` caps every reply over the ``max_reply_tokens`` setting (None: the setting).
    The tool servers' list is mcp.json beside settings.toml; their own messages go to ``log_dir``
    (the user's log folder by default).
    """
    settings = SettingsService(SettingsFile(config_dir))
    for message in settings.load_messages:
        log.warning("settings: %s", message)
    data = Path(data_dir) if data_dir is not None else folders.data_dir()
    store, recovery = ConversationStore.open_or_recover(data / "chats.sqlite3")
    client = engine if engine is not None else _make_engine_client()
    tools = McpService(settings.file.dir / "mcp.json", log_dir if log_dir is not None else folders.log_dir())
    from localchat.services.model_presets import ModelPresets
    from localchat.settings.presets import PresetsFile

    presets = ModelPresets(PresetsFile(settings.file.dir))
    session = ChatSession(store, client, settings, max_tokens=max_tokens, mcp=tools, presets=presets)
    presets.setParent(session)
    window = MainWindow(session, settings, client)
    session.setParent(window)
    tools.setParent(window)
    window.tool_servers = tools
    downloads = _make_downloader(settings, window)
    from localchat.services.hub_token_service import HubTokenService
    from localchat.services.starter_advisor import StarterAdvisor

    advisor = StarterAdvisor(data / folders.machine_measure_path().name, _catalog_or_none)
    models = ModelsWiring(window, settings, client, window.load_model, window.suggestion.offer, downloads,
                          advisor, window.suggestion.offer_load, window.page.say_after_load)
    window.suggestion.load_requested.connect(window.load_model)
    window.model_manager_requested.connect(models.open_manager)
    window.starter_requested.connect(models.open_starter)
    window.suggestion.model_requested.connect(models.open_suggested)
    client.state_changed.connect(models.observe)
    window.hub_token = HubTokenService(parent=window)
    server = ApiServerSwitch(settings, client.supervisor, window.status.set_server, window.page.show_notice,
                             _api_shelf(settings, models, session))
    messages = [*settings.load_messages, *tools.load_messages, *presets.load_messages]
    if messages:
        window.page.show_notice(" ".join(messages))
    last = settings.last_model_path
    if autoload and last and Path(last).is_file():
        draft = settings.last_draft_path or None
        window.load_model(last, draft if draft and Path(draft).is_file() else None)
    elif not last or not Path(last).is_file():
        window.show_welcome(True)
    if recovery is not None:
        window.show_history_recovered(recovery.headline, recovery.details)
    return AppParts(window, client, store, settings, messages, session, recovery, downloads, server, models,
                    tools)


def setup_logging(log_dir: Path | None = None) -> Path | None:
    """Log to a rotating file under the user's log folder (and warnings to stderr).

    None when the folder cannot hold the file (it is a file itself, say): warnings then go to stderr
    only, and the app still starts.
    """
    folder = log_dir or folders.log_dir()
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    console = logging.StreamHandler()
    console.setLevel(logging.WARNING)
    root.addHandler(console)
    if folders.folder_problem(folder) is not None:
        return None
    path = folder / "localchat.log"
    try:
        handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=2_000_000, backupCount=3, encoding="utf-8"
        )
    except OSError:
        return None
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s: %(message)s"))
    root.addHandler(handler)
    return path


def run_app(argv: Sequence[str] | None = None) -> int:
    """Start the desktop app and return its exit code."""
    multiprocessing.freeze_support()  # a frozen bundle re-enters here for the engine child
    args = list(argv if argv is not None else sys.argv)
    log_path = setup_logging()
    log.info("starting localchat; log at %s", log_path)
    problems = [] if log_path is not None else [_log_folder_sentence(folders.log_dir())]
    data, data_problem = _data_folder()
    if data_problem:
        problems.append(data_problem)
    for sentence in problems:
        log.warning("%s", sentence)
    app = QApplication.instance() or QApplication(args)
    assert isinstance(app, QApplication)
    app.setApplicationName(folders.APP_NAME)
    app.setOrganizationName(folders.APP_NAME)
    from localchat.services.single_instance import InstanceGuard

    guard = InstanceGuard(data, app)
    if not guard.claim():  # another localchat has this history open: it comes forward instead
        return _defer_to_running_app(guard.wake_the_other())
    collector = MainThreadCollector(app)  # Qt objects in cycles are freed on this thread only
    collector.start()
    parts = build_main_window(data_dir=data)
    guard.activation_requested.connect(lambda: _bring_to_front(parts.window))
    parts.window.show()
    if problems:
        _say_folder_problems(parts.window, problems)
    code = app.exec()
    collector.stop()
    if parts.downloads is not None:
        parts.downloads.cancel_all()  # the .part files are closed and resume next time
    if parts.server is not None:
        parts.server.stop()
    if parts.tools is not None:
        parts.tools.close()  # every tool server's process ends with the app
    parts.engine.shutdown()
    parts.store.close()
    guard.release()
    return int(code)


def _log_folder_sentence(folder: Path) -> str:
    why = folders.folder_problem(folder) or f"{folder} cannot be written"
    return f"localchat cannot write its log: {why}. It runs without a log file until that is fixed."


def _data_folder() -> tuple[Path, str | None]:
    """The folder for the chats (and what else the app keeps), and a sentence when it cannot be the
    user's own: then a new temporary folder stands in for this run, named in the sentence."""
    folder = folders.data_dir()
    why = folders.folder_problem(folder, mode=0o700)
    if why is None:
        return folder, None
    import tempfile

    stand_in = Path(tempfile.mkdtemp(prefix="localchat-unsaved-"))
    return stand_in, (
        f"localchat cannot keep your chats: {why}. Rename or move it and start localchat again; "
        f"until then, chats are kept in a temporary folder, {stand_in}."
    )


def _say_folder_problems(window: MainWindow, problems: list[str]) -> None:
    """Say, in a dialog that does not block, which of the user's folders cannot be used and why."""
    from PySide6.QtWidgets import QMessageBox

    box = QMessageBox(QMessageBox.Icon.Warning, "A folder cannot be used", problems[0], parent=window)
    box.setInformativeText("\n\n".join(problems[1:]))
    box.setObjectName("folder_problem_dialog")
    box.open()


def _defer_to_running_app(answered: bool) -> int:
    """The end of a second start: the running localchat ``answered`` and showed its window (exit
    code 0), or did not, and a message box says so (1)."""
    if answered:
        sentence = "localchat is already running with this chat history; its window was brought to the front."
        log.warning("%s", sentence)
        return 0
    sentence = (
        "localchat is already running with this chat history, but its window does not answer. "
        "Close it (or end its process) and start localchat again."
    )
    log.warning("%s", sentence)
    from PySide6.QtWidgets import QMessageBox

    QMessageBox.warning(None, folders.APP_NAME, sentence)
    return 1


def _bring_to_front(window: MainWindow) -> None:
    """Show the window over the others, restored if it was minimized (a second start asked for it)."""
    from PySide6.QtCore import Qt

    window.setWindowState(window.windowState() & ~Qt.WindowState.WindowMinimized)
    window.show()
    window.raise_()
    window.activateWindow()


def main() -> Any:
    return run_app(sys.argv)


if __name__ == "__main__":
    sys.exit(run_app(sys.argv))
