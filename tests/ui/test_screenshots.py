"""The docs' pictures, made by the real window: ``python -m pytest -m screenshots``.

Opt-in (pyproject.toml's addopts leaves the ``screenshots`` marker out of the default run): they load
real models and take minutes. Each test builds the app as a user has it, brings it to the state its
picture shows, checks that state (what the docs tell a reader to look for: the answer switcher, the
coloured draft text, "OpenAI request" in the status bar...), and writes the picture. A UI change that
breaks a picture fails here, not in a reader's eyes.

Where the pictures go: under pytest's temporary folder (``.../docs/...``, printed with ``-rA``), so a
run changes nothing in the repository; ``--docs-screenshots`` writes them over the docs' own copies
(README.md and docs/ cite them). Every picture keeps its committed copy's size, and must not be blank.

Offscreen, like every UI test: ``QWidget.grab`` renders what the screen shows (no X server, no window
manager); a modal dialog over the window is painted onto the window's picture where it stands.

The engine: the UI tests' fake (tests/ui/fakes.py) where the picture shows no reply being written (a
history written into the store, the settings, the model manager, the starter advice from a
recorded measurement of a 2-core CPU and of a GPU) and for the tool pictures (its replies scripted, the
tool a real MCP server of the suite's own); the real engine process with the real Qwen2.5-Coder
pair where it does (the main window and the chat mid-reply, the API answering a request).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from PySide6.QtCore import QPoint, QTimer
from PySide6.QtGui import QImage, QPainter, QPixmap
from PySide6.QtWidgets import QApplication, QWidget

from localchat.app import AppParts, build_main_window
from localchat.engine.types import EngineConfig, EngineInfo, MeasuredCosts, ModelInfo, SpeculationState
from localchat.host.events import Phase, Tokens
from localchat.ui.model_manager import ModelManagerDialog
from localchat.ui.settings_dialog import SettingsDialog
from localchat.ui.theme import apply_theme
from tests.toolservers.conftest import SCRIPT
from tests.ui.apps import fake_engine_app
from tests.ui.fakes import FakeEngine
from tests.ui.tools_app import WAIT_MS, fake, request, tools_app

pytestmark = pytest.mark.screenshots

ROOT = Path(__file__).resolve().parents[2]
# Generous: on a quiet 2-core machine a load takes seconds and a picture's reply under a minute, but the
# pictures are often made on a busy one.
LOAD_MS = 600_000
REPLY_MS = 1_200_000
REAL = pytest.mark.timeout(2400)
GB = 10**9
THEMES = ("light", "dark")

# Recorded measurements of the starter pair (Qwen2.5-Coder 1.5B Q4_K_M drafted by the 0.5B): pass
# seconds by batch size and the drafter's seconds a token, on the 2-core CPU of docs/BENCHMARKS.md
# and on an 80 GB GPU; what the window's starter advice reads from a loaded pair.
CPU_2_CORES = MeasuredCosts(((1, 0.0574), (2, 0.0907), (4, 0.1082), (8, 0.1875), (16, 0.2169)), 0.0332)
GPU_80_GB = MeasuredCosts(((1, 0.006), (2, 0.0062), (4, 0.0065), (8, 0.007), (16, 0.008)), 0.003, 80 * GB)

PALINDROME = ("Write a Python function that checks whether a string is a palindrome, "
              "ignoring case and punctuation, with a short explanation.")
QUESTION = "Write a Python function that checks whether a string is a palindrome."
FIRST = "Compare it with its reverse:\n\n```python\ndef is_palindrome(s):\n    return s == s[::-1]\n```"
SECOND = '''Ignore case and punctuation first, then compare with the reverse:

```python
import re


def is_palindrome(text: str) -> bool:
    """True when text reads the same both ways (letters and digits only)."""
    cleaned = re.sub(r"[^a-z0-9]", "", text.lower())
    return cleaned == cleaned[::-1]


print(is_palindrome("A man, a plan, a canal: Panama"))  # True
```

`re.sub` drops everything but letters and digits, and `[::-1]` reverses the string.'''


# -- where pictures go, and what every picture must be ----------------------------------------------


@pytest.fixture(scope="module")
def shots_root(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if request.config.getoption("--docs-screenshots"):
        return ROOT
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(autouse=True)
def _system_theme_after() -> Iterator[None]:
    """A picture's theme is the application's palette: give the next test the one it started with."""
    yield
    apply_theme("system")


def save(image: QImage | QPixmap, root: Path, name: str) -> Path:
    """Write ``image`` as docs/``name`` under ``root``, after checking it is the size of the committed
    copy and not blank."""
    picture = image.toImage() if isinstance(image, QPixmap) else image
    committed = QImage(str(ROOT / "docs" / name))
    assert not committed.isNull(), f"docs/{name} is not in the repository"
    assert picture.size() == committed.size(), (
        f"docs/{name} is {committed.width()}x{committed.height()}, the window gives "
        f"{picture.width()}x{picture.height()}: a widget grew past the picture's size, or the picture must "
        "be taken again at a new size")
    w, h = picture.width(), picture.height()
    colours = {picture.pixel(x, y) for x in range(0, w, 7) for y in range(0, h, 7)}
    assert len(colours) > 16, f"docs/{name} would be nearly blank ({len(colours)} colours)"
    out = root / "docs" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    assert picture.save(str(out)), f"could not write {out}"
    print(f"wrote {out}")
    return out


def settle(seconds: float = 0.4) -> None:
    """Let queued redraws run (the chat view redraws at most every 100 ms, the status bar every 200)."""
    app = QApplication.instance()
    assert app is not None
    deadline = QTimer()
    deadline.setSingleShot(True)
    deadline.start(int(seconds * 1000))
    while deadline.isActive():
        app.processEvents()
        time.sleep(0.01)


def over(window: QWidget, dialog: QWidget, at: QPoint) -> QPixmap:
    """The window's picture with ``dialog`` painted at ``at``, as a modal dialog stands over it."""
    picture = window.grab()
    painter = QPainter(picture)
    painter.drawPixmap(at, dialog.grab())
    painter.end()
    return picture


class InModal:
    """A QTimer callback: calls ``look`` with the open modal dialog of ``dialog_type``, then closes it
    (the app opens its dialogs with exec(), so the picture is taken inside the dialog's own loop; an
    assertion that fails there fails the test through pytest-qt)."""

    def __init__(self, dialog_type: type, look: Callable[[QWidget], None]) -> None:
        self.dialog_type, self.look = dialog_type, look
        self.opened = False

    def __call__(self) -> None:
        dialog = QApplication.activeModalWidget()
        try:
            assert isinstance(dialog, self.dialog_type), f"no {self.dialog_type.__name__} is open: {dialog!r}"
            self.opened = True
            self.look(dialog)
        finally:
            if isinstance(dialog, QWidget):
                dialog.close()


# -- the app on the fake engine ----------------------------------------------------------------------


@pytest.fixture
def fake_app(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppParts:
    return fake_engine_app(qtbot, tmp_path, monkeypatch)


def models_folder(root: Path, *files: Path) -> Path:
    """A models folder holding links to the test models (their real sizes and metadata)."""
    folder = root / "models"
    folder.mkdir()
    for f in files:
        (folder / f.name).symlink_to(f)
    return folder


def loaded_pair(parts: AppParts, target: Path, draft: Path, measured: MeasuredCosts | None = None) -> None:
    """The fake engine says the pair is loaded, with what its engine would have measured of it."""
    engine = parts.engine
    assert isinstance(engine, FakeEngine)
    backend = "CUDA" if measured is not None and measured.accelerator_bytes else "CPU"
    drafter = "Qwen2.5 Coder 0.5B Instruct"  # the GGUF's own name, which the engine reports
    info = EngineInfo(
        backend,
        ModelInfo(str(target), "Qwen2.5 Coder 1.5B Instruct", "qwen2", 1_543_714_304, target.stat().st_size,
                  32768, 151936, True),
        ModelInfo(str(draft), drafter, "qwen2", 494_032_768, draft.stat().st_size, 32768, 151936, True),
        4096, 2, 0, SpeculationState(active=True, drafter=drafter, draft_tokens=4), measured=measured,
    )
    engine.set_state(phase=Phase.READY, info=info, config=EngineConfig(str(target), str(draft)),
                     ever_loaded=True)


@pytest.mark.parametrize("theme", THEMES)
def test_chat_features(fake_app: AppParts, shots_root: Path, theme: str) -> None:
    """docs/screenshots/chat-features[-dark].png: a regenerated answer (its switcher shows 2/2) with a
    highlighted code block. The history is written into the store; no model runs."""
    parts = fake_app
    parts.settings.set("theme", theme)
    store = parts.store
    chat = store.create("Palindromes in Python")
    store.add_message(chat.id, "user", QUESTION)
    first = store.add_message(chat.id, "assistant", FIRST)
    store.add_message(chat.id, "assistant", SECOND, variant_of=first.id)
    window = parts.window
    window.resize(1000, 640)
    window.show()
    window.show_welcome(False)
    window.session.conversations_changed.emit()
    window.sidebar.list.setCurrentRow(0)
    settle(0.8)
    window.chat_view.verticalScrollBar().setValue(0)
    settle()
    html = window.chat_view.toHtml()
    assert "2/2" in window.chat_view.toPlainText(), "the answer switcher is not shown"
    assert "cleaned == cleaned[::-1]" in window.chat_view.toPlainText()
    assert html.count("color:") > 10, "the code block is not highlighted"
    save(window.grab(), shots_root, f"screenshots/chat-features{'-dark' if theme == 'dark' else ''}.png")


LONG_TURNS = 200  # 400 messages: the long chat users keep for weeks


def long_chat_turn(i: int) -> tuple[str, str]:
    """The ``i``-th question and answer of the long chat: prose, lists and code in turn, as a real
    working chat has them."""
    if i % 3 == 0:
        return (f"Step {i}: how do I read a CSV file and sum column {i % 7}?",
                f"Use the csv module:\n\n```python\nimport csv\n\nwith open('data.csv') as f:\n"
                f"    total = sum(float(row[{i % 7}]) for row in csv.reader(f))\n```\n\nStep {i} done.")
    if i % 3 == 1:
        return (f"Step {i}: give me three checks before a release.",
                "1. Run the tests.\n2. Read the changelog.\n3. Try the bundle on a clean machine.\n\n"
                f"Step {i} done.")
    return (f"Step {i}: explain in one paragraph why the cache misses.",
            f"The key includes the timestamp, so every request makes a new key and nothing is found "
            f"again; key on the content instead. Step {i} done.")


@pytest.mark.parametrize("theme", THEMES)
def test_long_chat(fake_app: AppParts, shots_root: Path, theme: str) -> None:
    """docs/screenshots/long-chat[-dark].png: a 400-message chat opened from the sidebar lands on its
    newest message (no jump button), the sidebar and the input ready. The history is written into
    the store; no model runs."""
    parts = fake_app
    parts.settings.set("theme", theme)
    store = parts.store
    chat = store.create("Release checklist and the CSV script")
    for i in range(LONG_TURNS):
        question, answer = long_chat_turn(i)
        store.add_message(chat.id, "user", question)
        store.add_message(chat.id, "assistant", answer)
    assert len(store.messages(chat.id)) == 2 * LONG_TURNS
    window = parts.window
    window.resize(1000, 640)
    window.show()
    window.show_welcome(False)
    window.session.conversations_changed.emit()
    started = time.perf_counter()
    window.sidebar.list.setCurrentRow(0)
    settle(0.8)
    print(f"the 400-message chat opened and settled in {time.perf_counter() - started:.2f} s")
    view = window.chat_view
    assert f"Step {LONG_TURNS - 1} done." in view.toPlainText()
    bar = view.verticalScrollBar()
    assert bar.maximum() > 50 * view.viewport().height(), "the chat is not long"
    assert bar.value() == bar.maximum(), f"opened at {bar.value()} of {bar.maximum()}, not the newest"
    assert not view.jump_button.isVisible(), "the jump button shows at the newest message"
    assert window.composer.isEnabled()
    save(window.grab(), shots_root, f"screenshots/long-chat{'-dark' if theme == 'dark' else ''}.png")


@pytest.mark.parametrize("theme", THEMES)
def test_settings_dialog(qtbot, fake_app: AppParts, shots_root: Path, theme: str) -> None:
    """docs/settings[-dark].png: Settings → Settings…, on its first page (speculation)."""
    parts = fake_app
    parts.settings.set("theme", theme)
    window = parts.window
    window.show()

    def look(dialog: QWidget) -> None:
        assert isinstance(dialog, SettingsDialog)
        dialog.resize(640, 520)
        settle()
        assert dialog.tabs.tabText(0) == "Speculation"
        assert {"speculation", "drafter", "draft_tokens", "adaptive"} <= set(dialog.editors)
        assert dialog.editors["drafter"].isVisible() and dialog.editors["draft_tokens"].isVisible()
        save(dialog.grab(), shots_root, f"settings{'-dark' if theme == 'dark' else ''}.png")

    taken = InModal(SettingsDialog, look)
    QTimer.singleShot(300, taken)
    window.menus.settings_action.trigger()
    assert taken.opened, "the settings dialog did not open"


def test_model_manager(
    fake_app: AppParts, shots_root: Path, monkeypatch: pytest.MonkeyPatch, qwen_target_path: Path,
    qwen_draft_path: Path, smollm2_path: Path,
) -> None:
    """docs/screenshots/model-manager[-dark].png and model-manager-catalog.png: the loaded starter pair
    with its drafter under it, and the catalog marking what is loaded."""
    from huggingface_hub import constants

    parts = fake_app
    root = Path(tempfile.mkdtemp(prefix="localchat-"))  # the folders the picture shows: short paths
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(root / "hf-cache"))
    folder = models_folder(root, qwen_target_path, qwen_draft_path, smollm2_path)
    parts.settings.set("models_folder", str(folder))
    window = parts.window
    window.resize(1180, 760)
    window.show()
    loaded_pair(parts, folder / qwen_target_path.name, folder / qwen_draft_path.name)
    assert parts.models is not None
    for theme in THEMES:
        parts.settings.set("theme", theme)
        dark = theme == "dark"

        def look(dialog: QWidget, dark: bool = dark) -> None:
            assert isinstance(dialog, ModelManagerDialog)
            dialog.resize(1140, 580)
            dialog.local_table.selectRow(0)
            settle()
            table = dialog.local_table
            rows = [[table.item(r, c).text() if table.item(r, c) else "" for c in range(table.columnCount())]
                    for r in range(table.rowCount())]
            assert rows[0][0] == qwen_target_path.name and "Loaded" in rows[0]
            assert rows[1][0].endswith(qwen_draft_path.name) and any("(loaded)" in c for c in rows[1]), rows
            save(dialog.grab(), shots_root, f"screenshots/model-manager{'-dark' if dark else ''}.png")
            if dark:
                return
            dialog.tabs.setCurrentIndex(1)
            dialog.catalog_table.selectRow(0)
            settle()
            catalog = dialog.catalog_table
            first = [catalog.item(0, c).text() if catalog.item(0, c) else ""
                     for c in range(catalog.columnCount())]
            assert "starter" in first[0] and "Loaded" in first, first
            save(dialog.grab(), shots_root, "screenshots/model-manager-catalog.png")

        taken = InModal(ModelManagerDialog, look)
        QTimer.singleShot(300, taken)
        window.model_manager_requested.emit()
        assert taken.opened, "the model manager did not open"
    shutil.rmtree(root)


@pytest.mark.parametrize("theme", THEMES)
def test_starter_manager(
    fake_app: AppParts, shots_root: Path, qwen_target_path: Path, qwen_draft_path: Path, theme: str
) -> None:
    """docs/screenshots/starter-manager[-dark].png: "Get the starter models" after the starter pair was
    measured on a 2-core CPU, where the 1.5B stays the starter: the manager opens on it, with the reason,
    and says that its drafter is predicted to cost more than it saves there (not downloaded with it;
    "Download with its drafter anyway")."""
    parts = fake_app
    parts.settings.set("theme", theme)
    window = parts.window
    window.resize(1180, 720)
    window.show()
    loaded_pair(parts, qwen_target_path, qwen_draft_path, CPU_2_CORES)
    assert not window.suggestion.isVisible(), "a 2-core CPU was offered a bigger model"

    def look(dialog: QWidget) -> None:
        assert isinstance(dialog, ModelManagerDialog)
        dialog.resize(1140, 580)
        settle(0.8)
        note = dialog.catalog_message.text()
        assert note.startswith("For this computer: Qwen2.5-Coder 1.5B Instruct, about "), note
        assert "Qwen2.5-Coder 7B Instruct would write about" in note
        assert "is predicted to run 0.8x plain speed with Qwen2.5-Coder 1.5B Instruct · Q4_K_M" in note, note
        assert "so it is not downloaded" in note and dialog.download_anyway_button.isVisible()
        assert dialog.tabs.currentIndex() == 1 and dialog.catalog_table.currentRow() == 0
        name = f"screenshots/starter-manager{'-dark' if theme == 'dark' else ''}.png"
        save(over(window, dialog, QPoint(10, 32)), shots_root, name)

    models = parts.models
    assert models is not None and models.advisor is not None
    choice = models.advisor.saved_choice()  # kept from the load, as "Get the starter models" reads it
    assert choice is not None and choice.chosen.entry.id == "qwen2.5-coder-1.5b-instruct"
    taken = InModal(ModelManagerDialog, look)
    QTimer.singleShot(300, taken)
    # What "Get the starter models" opens where the chosen pair's files are not here yet.
    models.open_manager(select=choice.chosen.entry.id, note=choice.sentence)
    assert taken.opened, "the model manager did not open"


@pytest.mark.parametrize("theme", THEMES)
def test_starter_offer(
    fake_app: AppParts, shots_root: Path, qwen_target_path: Path, qwen_draft_path: Path, theme: str
) -> None:
    """docs/screenshots/starter-offer[-dark].png: the window's offer of a bigger model, as a GPU's
    measurement of the starter pair gives it."""
    parts = fake_app
    parts.settings.set("theme", theme)
    window = parts.window
    window.resize(1180, 720)
    window.show()
    loaded_pair(parts, qwen_target_path, qwen_draft_path, GPU_80_GB)
    settle()
    text = window.suggestion.text()
    assert window.suggestion.isVisible(), "the GPU's measurement offered nothing"
    assert "For this computer: Qwen2.5-Coder" in text and "Not now" in text
    assert "measured with Qwen2.5-Coder 1.5B Instruct" in text
    save(window.grab(), shots_root, f"screenshots/starter-offer{'-dark' if theme == 'dark' else ''}.png")


# -- the app on the real engine ------------------------------------------------------------------------


@pytest.fixture
def real_app(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AppParts]:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    parts = build_main_window(tmp_path / "config", tmp_path / "data", autoload=False)
    qtbot.addWidget(parts.window)
    parts.settings.set("models_folder", str(tmp_path / "own"))
    yield parts
    session = parts.window.session
    if session.generating:  # a test that failed mid-reply: end it before the history closes
        session.cancel()
        with contextlib.suppress(qtbot.TimeoutError):
            qtbot.waitUntil(lambda: not session.generating, timeout=60_000)
    if parts.server is not None:
        parts.server.stop()
    parts.window.close()
    parts.engine.shutdown()  # type: ignore[attr-defined]
    parts.store.close()


def load_real(qtbot, parts: AppParts, target: Path, draft: Path) -> None:
    with qtbot.waitSignal(parts.engine.state_changed, timeout=LOAD_MS, check_params_cb=lambda s: s.ready):
        parts.window.load_model(str(target), str(draft))
    info = parts.engine.state.info
    assert info is not None and info.draft is not None, "the draft model did not load"


def write_until(qtbot, parts: AppParts, prompt: str, tokens: int) -> None:
    """Send ``prompt`` and wait until the reply holds ``tokens`` tokens (it goes on being written)."""
    written = [0]

    def count(event: object) -> None:
        if isinstance(event, Tokens) and event.source == "window":
            written[0] += event.event.n_tokens

    parts.engine.job_event.connect(count)
    parts.window.send_message(prompt)
    qtbot.waitUntil(lambda: written[0] >= tokens, timeout=REPLY_MS)
    settle()


def stop(qtbot, parts: AppParts) -> None:
    """Stop the reply, and let it end before the app closes."""
    parts.window.session.cancel()
    qtbot.waitUntil(lambda: not parts.window.session.generating, timeout=60_000)


def rate(text: str) -> float:
    return float(text.split()[0]) if text and text[0].isdigit() else 0.0


def assert_mid_reply(parts: AppParts) -> None:
    """The reply is being written, drafted, its accepted draft text coloured, the figures live."""
    view = parts.window.chat_view
    assert parts.window.session.generating, "the reply ended before the picture"
    assert (view.streaming_text or "").strip(), "no reply text on screen"
    drafted = sum(view.streaming_runs[1::2])
    assert view.colour_drafted and drafted > 0, "no accepted draft text to colour"
    status = parts.window.status
    assert rate(status.rate_label.text()) > 0, status.rate_label.text()
    assert "–" not in status.acceptance_length_label.text(), status.acceptance_length_label.text()


@REAL
@pytest.mark.parametrize("theme", THEMES)
def test_main_window(
    qtbot, real_app: AppParts, shots_root: Path, qwen_target_f16_path: Path, qwen_draft_path: Path,
    theme: str,
) -> None:
    """docs/main-window[-dark].png: the F16 1.5B drafted by the 0.5B, mid-reply, accepted draft text
    coloured (README's first picture)."""
    parts = real_app
    parts.settings.set("theme", theme)
    parts.settings.set("colour_accepted_tokens", True)
    window = parts.window
    window.resize(1180, 760)
    window.show()
    load_real(qtbot, parts, qwen_target_f16_path, qwen_draft_path)
    write_until(qtbot, parts, PALINDROME, 110)
    assert_mid_reply(parts)
    save(window.grab(), shots_root, f"main-window{'-dark' if theme == 'dark' else ''}.png")
    stop(qtbot, parts)


@REAL
@pytest.mark.parametrize("theme", THEMES)
def test_chat_mid_reply(
    qtbot, real_app: AppParts, shots_root: Path, qwen_target_path: Path, qwen_draft_path: Path, theme: str
) -> None:
    """docs/screenshots/chat-mid-reply[-dark].png: the Q4_K_M starter pair mid-reply."""
    parts = real_app
    parts.settings.set("theme", theme)
    parts.settings.set("colour_accepted_tokens", True)
    window = parts.window
    window.resize(1180, 720)
    window.show()
    load_real(qtbot, parts, qwen_target_path, qwen_draft_path)
    write_until(qtbot, parts, "Write a Python function that checks whether a string is a palindrome, "
                "with a docstring.", 40)
    assert_mid_reply(parts)
    save(window.grab(), shots_root, f"screenshots/chat-mid-reply{'-dark' if theme == 'dark' else ''}.png")
    stop(qtbot, parts)


def _port() -> int:
    """The API's default port where it is free (the picture shows it), else any free one."""
    import socket

    for port in (11435, 0):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise AssertionError("no free port")


@REAL
def test_api_request(
    qtbot, real_app: AppParts, shots_root: Path, qwen_target_path: Path, qwen_draft_path: Path
) -> None:
    """docs/screenshots/api-request.png: the local API answering a request on the window's engine; the
    status bar shows that request's figures and says so."""
    parts = real_app
    parts.settings.set("theme", "light")
    window = parts.window
    window.resize(1180, 720)
    window.show()
    port = _port()
    parts.settings.set("server_port", port)
    parts.settings.set("server_enabled", True)
    load_real(qtbot, parts, qwen_target_path, qwen_draft_path)
    body = {"model": qwen_target_path.stem, "max_tokens": 120,
            "messages": [{"role": "user", "content": "Write a Python function that reverses a string, "
                          "with a docstring."}]}
    answers: list[httpx.Response] = []
    asker = threading.Thread(target=lambda: answers.append(
        httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=REPLY_MS / 1000)))
    asker.start()
    status = window.status
    qtbot.waitUntil(lambda: status.server_label.text() == f"OpenAI request · :{port}"
                    and rate(status.rate_label.text()) > 0, timeout=REPLY_MS)
    # The first figure counts a step or two (it read 3.3 tok/s on a pair that writes 25): a couple of
    # seconds more, well inside a 120-token reply, show the request's own speed.
    settle(2.0)
    assert status.server_label.text() == f"OpenAI request · :{port}", "the request ended before the picture"
    save(window.grab(), shots_root, "screenshots/api-request.png")
    asker.join(REPLY_MS / 1000)
    assert answers and answers[0].status_code == 200, answers



# -- tools in the chat (the fake engine's scripted calls, the suite's own calculator server) -------


@pytest.mark.parametrize("theme", THEMES)
def test_tool_call(
    qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shots_root: Path, theme: str
) -> None:
    """docs/screenshots/tool-call[-dark].png: a reply that used the calculator tool of an MCP server
    (tests/toolservers/mcp_servers.py, run for real) in two rounds, its first call unfolded; and
    tool-confirm.png (light only): the question before the first call runs. The model's replies are the
    fake engine's, scripted; the tool's results are the server's own."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    dark = theme == "dark"
    # the server as a reader would list it ("python -m calculator calc"), not this machine's paths
    modules = tmp_path / "servers"
    modules.mkdir()
    shutil.copy(SCRIPT, modules / "calculator.py")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    calc = {"command": "python", "args": ["-m", "calculator", "calc"], "env": {"PYTHONPATH": str(modules)}}
    with tools_app(qtbot, tmp_path, {"calc": calc}, load=False) as parts:
        parts.settings.set("theme", theme)
        folder = tmp_path / "models"
        folder.mkdir()
        target = folder / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
        draft = folder / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
        for f in (target, draft):
            f.write_bytes(b"GGUF")
        loaded_pair(parts, target, draft)
        engine = fake(parts)
        info = engine.state.info
        assert info is not None
        engine.set_state(info=replace(info, target=replace(info.target, tool_use=True, tool_format="hermes")))
        monkeypatch.setattr(engine, "speculation", lambda: info.speculation)  # the drafter loaded
        window = parts.window
        window.resize(1000, 640)
        window.show()
        window.show_welcome(False)
        assert window.tools.button.isEnabled() and window.tools.button.text() == "Tools: on"
        window.send_message("What is 17 times 23, plus 4?")
        request(qtbot, parts, 1)
        engine.call_tools(("multiply", '{"a": 17, "b": 23}'), text="I'll use the calculator.")
        qtbot.waitUntil(lambda: window.tools.dialog is not None and window.tools.dialog.isVisible(),
                        timeout=WAIT_MS)
        dialog = window.tools.dialog
        assert dialog is not None and dialog.always_button.text() == "Always run multiply"
        assert dialog.ask.where == "python -m calculator calc"
        if not dark:
            settle()
            at = QPoint((window.width() - dialog.width()) // 2, 70)
            save(over(window, dialog, at), shots_root, "screenshots/tool-confirm.png")
        dialog.once_button.click()
        request(qtbot, parts, 2)
        engine.call_tools(("add", '{"a": 391, "b": 4}'))
        qtbot.waitUntil(lambda: window.tools.dialog is not None and window.tools.dialog.isVisible(),
                        timeout=WAIT_MS)
        window.tools.dialog.always_button.click()
        third = request(qtbot, parts, 3)
        assert [m.content for m in third.messages if m.role == "tool"] == ["391", "395"]
        engine.stream("17 × 23 = 391, and 391 + 4 = **395**.")
        engine.finish()
        settle()
        reply = parts.store.messages(window.session.current_id)[-1]
        window.chat_view.toggle_fold(f"{reply.id}:0:0")
        settle()
        text = window.chat_view.toPlainText()
        for shown in ("▾ Tool call: multiply · calc", "Arguments", "391", "▸ Tool call: add · calc",
                      "Round 1:", "Round 2:", "395"):
            assert shown in text, shown
        save(window.grab(), shots_root, f"screenshots/tool-call{'-dark' if dark else ''}.png")
