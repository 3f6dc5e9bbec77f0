"""The app starts, and says what is wrong, when a folder it writes to is a file.

``$XDG_DATA_HOME``, localchat's data folder or its log folder being a file stopped ``run_app`` with a
traceback and no window (issue 29). Each case runs the real entry point in a child process, as
tests/ui/test_run_app.py does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys, time
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QMessageBox

    app = QApplication(sys.argv)
    started = time.monotonic()
    seen = {"window": None, "at": 0.0, "boxes": []}

    def look():
        for w in app.topLevelWidgets():
            if not w.isVisible():
                continue
            if isinstance(w, QMessageBox):
                text = (w.text() + " " + w.informativeText()).replace(chr(10), " ")
                if text not in seen["boxes"]:
                    seen["boxes"].append(text)
            elif seen["window"] is None and w.windowTitle():
                seen["window"] = w.windowTitle()
                seen["at"] = time.monotonic()
        for w in app.allWidgets():  # dialogs parented to the window are not top-level widgets
            if isinstance(w, QMessageBox) and w.isVisible():
                text = (w.text() + " " + w.informativeText()).replace(chr(10), " ")
                if text not in seen["boxes"]:
                    seen["boxes"].append(text)
        if (seen["window"] and time.monotonic() - seen["at"] > 1.5) or time.monotonic() - started > 90:
            print("WINDOW:", seen["window"], flush=True)
            for text in seen["boxes"]:
                print("BOX:", text, flush=True)
            app.quit()
            return
        QTimer.singleShot(100, look)

    QTimer.singleShot(100, look)
    from localchat.app import run_app

    sys.exit(run_app(sys.argv))
    """
)


@pytest.mark.parametrize("as_file", ["XDG_DATA_HOME", "data folder", "log folder"])
def test_the_app_starts_and_names_a_folder_that_is_a_file(tmp_path: Path, as_file: str) -> None:
    sockets = Path(tempfile.mkdtemp(prefix="lc"))
    env = dict(os.environ)
    env.update(
        TMPDIR=str(sockets),
        QT_QPA_PLATFORM="offscreen",
        HOME=str(tmp_path),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    blocker = {
        "XDG_DATA_HOME": tmp_path / "data",
        "data folder": tmp_path / "data" / "localchat",
        "log folder": tmp_path / "state" / "localchat" / "log",
    }[as_file]
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("not a folder")
    try:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120, check=False
        )
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert "WINDOW: localchat" in done.stdout, out[-3000:]
    boxes = [line for line in done.stdout.splitlines() if line.startswith("BOX:")]
    assert any(str(blocker) in box and "is a file" in box for box in boxes), out[-3000:]
    assert blocker.read_text() == "not a folder"  # the file is the user's: left as it was
