"""``localchat selftest`` (also ``localchat --selftest``): does this install work, end to end?

Run after building a bundle and by users who report a problem. It:

1. opens the real main window (offscreen unless ``--show``) and times it from
   process start, the cold start a user waits through;
2. loads a target and its drafter in the engine process through the app's own
   engine client (spawn: in a frozen bundle this is the path that breaks when
   ``freeze_support`` or a shared library is missing) and reports the backend;
3. generates ``--tokens`` tokens greedily with speculation on and checks the
   statistics: tokens came out, the drafter drafted, acceptance length >= 1;
4. sends one request under a JSON schema (structured output: llguidance's compiled
   module must be in the bundle) and checks that the reply parses and matches it;
5. closes the window and stops the engine.

It prints a line per step and ends with one summary line starting
``selftest passed`` or ``selftest FAILED``; the exit code is 0 or 1.
``--in-process`` runs the engine in this process instead (no child process),
to tell an engine problem from a process problem.

The default pair is the catalog's starter pair, looked up where the app looks
(the models folder from the settings, and huggingface-hub's cache).

The user's settings and state are only read, never written: the window runs on
settings, chats and speculation profiles in a temporary folder, removed at the
end (it saved its window size and the pair it loaded as the user's "last model"
over theirs).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localchat.cli.common import drafter_name, model_name, whole

PROMPT = "Write a Python function that returns the n-th Fibonacci number, with a docstring and type hints."
LOAD_TIMEOUT_S = 600.0
SCHEMA_PROMPT = ("Describe the Python programming language as JSON: its name, the year it first appeared, "
                 "and whether it is statically typed.")
# Checked by hand below (jsonschema is a test dependency, not the bundle's): every property required,
# no others.
SCHEMA_TYPES: dict[str, type] = {"name": str, "year": int, "statically_typed": bool}
SCHEMA = {"type": "object", "additionalProperties": False, "required": list(SCHEMA_TYPES),
          "properties": {"name": {"type": "string"}, "year": {"type": "integer"},
                         "statically_typed": {"type": "boolean"}}}
SCHEMA_TOKENS = 64
WINDOW_TIMEOUT_S = 30.0


class SelftestError(Exception):
    """A check failed; the message is the summary's reason."""


@dataclass
class Outcome:
    backend: str = "?"
    pair: str = ""
    window_s: float | None = None
    tokens: int = 0
    tokens_per_s: float = 0.0
    drafted: int = 0
    accepted: int = 0
    acceptance_length: float = 0.0
    acceptance_rate: float = 0.0

    def summary(self) -> str:
        parts = [f"backend {self.backend}"]
        if self.pair:
            parts.append(self.pair)
        if self.tokens:
            parts.append(
                f"{self.tokens} tokens at {self.tokens_per_s:.1f} tok/s, acceptance length "
                f"{self.acceptance_length:.2f}, rate {self.acceptance_rate:.2f} "
                f"({self.accepted}/{self.drafted} drafted accepted)"
            )
        if self.window_s is not None:
            parts.append(f"window shown {self.window_s:.2f} s after start")
        return ", ".join(parts)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "selftest",
        help="check this install: backend, a speculative reply, the main window (exit 0 or 1)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("--model", help="target GGUF (default: the starter pair from the models folder)")
    p.add_argument("--draft", help="draft GGUF with the target's vocabulary (the target itself works too)")
    p.add_argument("--tokens", type=whole(1), default=32, help="tokens to generate (default 32)")
    p.add_argument("--ctx", type=whole(1), default=2048, help="context length (default 2048)")
    p.add_argument("--threads", type=whole(1), default=None, help="CPU threads (default: physical cores)")
    p.add_argument(
        "--gpu-layers",
        type=whole(-1),
        default=-1,
        help="layers to offload (default -1: all on a GPU; 0 keeps the model on the CPU, e.g. on a "
        "virtual machine whose GPU the Metal or CUDA kernels cannot use)",
    )
    p.add_argument("--show", action="store_true", help="open the window on the screen, not offscreen")
    p.add_argument(
        "--no-window",
        action="store_true",
        help="skip the window check (the engine then runs in this process, no Qt)",
    )
    p.add_argument("--in-process", action="store_true", help="run the engine in this process")
    p.set_defaults(func=run)


def _say(text: str) -> None:
    print(f"selftest: {text}", flush=True)


def _process_start_time() -> float:
    try:
        import psutil

        return float(psutil.Process().create_time())
    except Exception:  # the timing is informative only
        return time.time()


def default_pair() -> tuple[Path, Path] | None:
    """The starter pair's files if both are on disk where the app finds models."""
    from localchat.catalog.drafters import load_catalog
    from localchat.catalog.library import Library, default_models_dir, hf_cache_dir
    from localchat.settings import SettingsFile

    folder = SettingsFile().load().settings.models_folder or str(default_models_dir())
    catalog = load_catalog()
    starter = catalog.starter
    if starter is None or starter.model_drafter is None:
        return None
    library = Library([folder, hf_cache_dir()])
    target = library.find_file(starter.default_quant.filename, starter.default_quant.repo)
    drafter = starter.model_drafter
    draft = library.find_file(drafter.filename, drafter.repo)
    if target is None or draft is None:
        return None
    return target.path, draft.path


def _resolve_pair(args: argparse.Namespace) -> tuple[Path, Path]:
    if args.model:
        if not args.draft:
            raise SelftestError("--model needs --draft too (the target's own file works as a drafter)")
        pair = Path(args.model), Path(args.draft)
    elif args.draft:
        raise SelftestError("--draft needs --model")
    else:
        found = default_pair()
        if found is None:
            raise SelftestError(
                "the starter pair is not in the models folder; download it in the app (Models, Starter) "
                "or pass --model TARGET.gguf --draft DRAFT.gguf"
            )
        pair = found
    for path in pair:
        if not path.is_file():
            raise SelftestError(f"{path} does not exist")
    return pair


def _request(tokens: int) -> Any:
    from localchat.engine.types import (
        ChatMessage,
        DrafterKind,
        GenerationRequest,
        SamplingParams,
        SpeculationConfig,
    )

    return GenerationRequest(
        messages=(ChatMessage("user", PROMPT),),
        max_tokens=tokens,
        sampling=SamplingParams(temperature=0.0),
        # The draft model on every step, fixed length: the check is that drafting works at all.
        speculation=SpeculationConfig(drafter=DrafterKind.MODEL, draft_tokens=4, adaptive=False),
    )


def _schema_request() -> Any:
    import json

    from localchat.engine.types import (
        ChatMessage,
        ConstraintKind,
        GenerationRequest,
        OutputConstraint,
        SamplingParams,
        SpeculationConfig,
    )

    return GenerationRequest(
        messages=(ChatMessage("user", SCHEMA_PROMPT),),
        max_tokens=SCHEMA_TOKENS,
        sampling=SamplingParams(temperature=0.0),
        speculation=SpeculationConfig(),
        constraint=OutputConstraint(ConstraintKind.JSON_SCHEMA, json.dumps(SCHEMA)),
    )


def _check_schema_reply(result: Any) -> None:
    """The structured-output reply parses as JSON and matches ``SCHEMA``."""
    import json

    text = result.text
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SelftestError(f"the JSON-schema reply is not JSON ({exc.msg}): {text[:80]!r}") from None
    if not isinstance(value, dict) or set(value) != set(SCHEMA_TYPES):
        raise SelftestError(f"the JSON-schema reply does not have the schema's properties: {text[:80]!r}")
    for key, typ in SCHEMA_TYPES.items():
        # bool is an int in Python; the schema's integer is not a boolean
        if not isinstance(value[key], typ) or (typ is int and isinstance(value[key], bool)):
            raise SelftestError(f'the JSON-schema reply\'s "{key}" is not a {typ.__name__}: {text[:80]!r}')
    stats = result.stats
    _say(f"structured output: {text!r} matches the schema ({stats.generated_tokens} tokens, "
         f"{stats.forced_tokens} forced by the grammar)")


def _check_stats(result: Any, out: Outcome, info: Any) -> None:
    stats = result.stats
    out.tokens = stats.generated_tokens
    out.tokens_per_s = stats.tokens_per_s
    out.drafted = stats.drafted
    out.accepted = stats.accepted
    out.acceptance_length = stats.acceptance_length
    out.acceptance_rate = stats.acceptance_rate
    finish = result.finish_reason.value
    drafter = drafter_name(result.speculation.drafter, info)
    _say(f"reply: {stats.summary()} ({finish}); speculation: {drafter}")
    if stats.generated_tokens < 1:
        raise SelftestError("the reply has no tokens")
    if stats.drafted <= 0:
        reason = result.speculation.reason or "no draft tokens were proposed"
        raise SelftestError(f"speculation did not run ({reason})")
    if stats.acceptance_length < 1.0:
        raise SelftestError(f"acceptance length {stats.acceptance_length:.2f} is below 1")


def _engine_config(args: argparse.Namespace, target: Path, draft: Path) -> Any:
    from localchat.engine.types import EngineConfig

    return EngineConfig(
        str(target), str(draft), n_ctx=args.ctx, n_threads=args.threads, gpu_layers=args.gpu_layers
    )


def _describe_info(info: Any, out: Outcome) -> None:
    out.backend = info.backend
    target = model_name(info.target.path)
    draft = model_name(info.draft.path) if info.draft is not None else "none"
    out.pair = f"{target} + {draft}"
    where = f"{info.gpu_layers} GPU layers, {info.n_threads} threads, n_ctx {info.n_ctx}"
    _say(f"backend: {info.backend} ({where})")
    _say(
        f"loaded: target {target}, drafter {draft}; "
        f"speculation: {drafter_name(info.speculation.drafter, info)}"
        + (f" ({info.speculation.reason})" if info.speculation.reason else "")
    )


def _run_in_process(args: argparse.Namespace, target: Path, draft: Path, out: Outcome) -> None:
    from localchat.engine.backend import backend_name
    from localchat.engine.engine import Engine

    _say(f"backend (llama.cpp build): {backend_name()}")
    with Engine(_engine_config(args, target, draft)) as engine:
        _describe_info(engine.info, out)
        _check_stats(engine.generate(_request(args.tokens)), out, engine.info)
        _check_schema_reply(engine.generate(_schema_request()))


class _Waiter:
    """Runs a Qt event loop until a signal carries a value ``until`` accepts, or a timeout."""

    def __init__(self, signal: Any, until: Callable[[Any], bool]) -> None:
        from PySide6.QtCore import QEventLoop, QTimer

        self._loop = QEventLoop()
        self._timer = QTimer()
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._loop.quit)
        self.fired: Any = None

        def slot(value: Any) -> None:
            if self.fired is None and until(value):
                self.fired = value
                self._loop.quit()

        signal.connect(slot)

    def wait(self, timeout_s: float) -> Any:
        """The accepted value, or None at the timeout."""
        if self.fired is None:
            self._timer.start(int(timeout_s * 1000))
            self._loop.exec()
            self._timer.stop()
        return self.fired


def _wait_exposed(window: Any, timeout_s: float) -> bool:
    from PySide6.QtCore import QCoreApplication, QEventLoop

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        QCoreApplication.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)
        handle = window.windowHandle()
        if window.isVisible() and handle is not None and handle.isExposed():
            return True
        time.sleep(0.005)
    return False


@contextlib.contextmanager
def scratch_folders() -> Iterator[tuple[Path, Path]]:
    """A temporary config and data folder for the window, with the engine's speculation profiles
    (child processes inherit the variable) kept there too: the check leaves the user's own untouched.
    The settings are copied in, so the window and engine run as the user has them set."""
    from localchat.settings import SettingsFile
    from localchat.settings.folders import PROFILES_ENV

    before = os.environ.get(PROFILES_ENV)
    with tempfile.TemporaryDirectory(prefix="localchat-selftest-", ignore_cleanup_errors=True) as tmp:
        root = Path(tmp)
        own = SettingsFile()
        if own.path.is_file():
            (root / "config").mkdir()
            shutil.copyfile(own.path, root / "config" / own.path.name)
        os.environ[PROFILES_ENV] = str(root / "profiles")
        try:
            yield root / "config", root / "data"
        finally:
            if before is None:
                os.environ.pop(PROFILES_ENV, None)
            else:
                os.environ[PROFILES_ENV] = before


def _run_with_window(
    args: argparse.Namespace, pair: tuple[Path, Path], started: float, out: Outcome,
    folders: tuple[Path, Path],
) -> None:
    config, data = folders
    _use_offscreen_unless_shown(args)
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication

    from localchat.app import build_main_window
    from localchat.settings.folders import APP_NAME

    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else APP_NAME])
    app.setApplicationName(APP_NAME)
    app.setOrganizationName(APP_NAME)
    parts = build_main_window(config, data, autoload=False)
    window = parts.window
    client = parts.engine
    try:
        window.show()
        if not _wait_exposed(window, WINDOW_TIMEOUT_S):
            raise SelftestError(f"the main window was not shown within {WINDOW_TIMEOUT_S:.0f} s")
        out.window_s = time.time() - started
        _say(
            f"window: shown {out.window_s:.2f} s after the process started "
            f"(platform {QGuiApplication.platformName()}, {window.width()}x{window.height()})"
        )
        _check_highlighting()
        target, draft = pair
        from localchat.host.events import Failed, Finished, Phase
        from localchat.host.failure_words import sentence

        waiter = _Waiter(client.state_changed, lambda state: state.phase is not Phase.LOADING)
        t0 = time.monotonic()
        client.load(_engine_config(args, target, draft))
        state = waiter.wait(LOAD_TIMEOUT_S)
        if state is None or not state.ready:
            why = sentence(state.failure) if state is not None and state.failure else None
            raise SelftestError(f"loading failed: {why or 'no answer within the time limit'}")
        _say(f"engine process {state.pid} loaded the pair in {time.monotonic() - t0:.1f} s")
        _describe_info(state.info, out)
        waiter = _Waiter(client.job_event, lambda event: isinstance(event, Finished | Failed))
        client.generate(_request(args.tokens))
        event = waiter.wait(LOAD_TIMEOUT_S)
        if not isinstance(event, Finished):
            why = sentence(event.failure) if event is not None else None
            raise SelftestError(f"generation failed: {why or 'no answer within the time limit'}")
        _check_stats(event.result, out, state.info)
        waiter = _Waiter(client.job_event, lambda event: isinstance(event, Finished | Failed))
        client.generate(_schema_request())
        event = waiter.wait(LOAD_TIMEOUT_S)
        if not isinstance(event, Finished):
            why = sentence(event.failure) if event is not None else None
            raise SelftestError(f"the JSON-schema request failed: {why or 'no answer within the time limit'}")
        _check_schema_reply(event.result)
    finally:
        window.close()
        client.shutdown()
        parts.store.close()
        app.processEvents()


def _check_highlighting() -> None:
    """The chat view colours code with Pygments, which finds its lexers by name at run time: a bundle
    that left them out would show plain code without an error anywhere."""
    from localchat.ui.markdown_render import highlight_code

    html = highlight_code("def f():\n    return 1\n", "python", dark=False)
    if html is None or "<span" not in html:
        raise SelftestError("code highlighting does not work: Pygments' Python lexer is missing")
    _say("code highlighting: Pygments' Python lexer found")


def _use_offscreen_unless_shown(args: argparse.Namespace) -> None:
    headless = sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )
    if not args.show or headless:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def _run_window_only(
    args: argparse.Namespace, started: float, out: Outcome, folders: tuple[Path, Path],
) -> None:
    """Open and close the main window without loading anything (used with --in-process)."""
    config, data = folders
    _use_offscreen_unless_shown(args)
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication

    from localchat.app import build_main_window
    from localchat.settings.folders import APP_NAME

    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else APP_NAME])
    parts = build_main_window(config, data, autoload=False)
    try:
        parts.window.show()
        if not _wait_exposed(parts.window, WINDOW_TIMEOUT_S):
            raise SelftestError(f"the main window was not shown within {WINDOW_TIMEOUT_S:.0f} s")
        out.window_s = time.time() - started
        platform = QGuiApplication.platformName()
        _say(f"window: shown {out.window_s:.2f} s after the process started (platform {platform})")
    finally:
        parts.window.close()
        parts.engine.shutdown()
        parts.store.close()
        app.processEvents()


def run(args: argparse.Namespace) -> int:
    started = _process_start_time()
    out = Outcome()
    frozen = "frozen bundle" if getattr(sys, "frozen", False) else "Python install"
    _say(f"localchat {_version()} ({frozen}, Python {sys.version.split()[0]}, {sys.platform})")
    try:
        pair = _resolve_pair(args)
        _say(f"pair: {pair[0]} + {pair[1]}")
        with scratch_folders() as folders:
            if args.in_process:
                if not args.no_window:
                    _run_window_only(args, started, out, folders)
                _run_in_process(args, pair[0], pair[1], out)
            elif args.no_window:
                _run_in_process(args, pair[0], pair[1], out)
            else:
                _run_with_window(args, pair, started, out, folders)
    except SelftestError as exc:
        print(f"selftest FAILED: {exc}; {out.summary()}", flush=True)
        return 1
    except Exception as exc:  # anything else is a failure of the install, reported in one line
        traceback.print_exc()
        print(f"selftest FAILED: {type(exc).__name__}: {exc}; {out.summary()}", flush=True)
        return 1
    print(f"selftest passed: {out.summary()}", flush=True)
    return 0


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("localchat")
    except Exception:
        return "(version unknown)"
