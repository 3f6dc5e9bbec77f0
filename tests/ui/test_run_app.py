"""The app's real entry point (``localchat`` with no command) starts, shows its window and quits cleanly.

Most UI tests build the window with ``build_main_window``; this one runs ``run_app`` itself, the path
a user and the bundles take, in a child process with empty user folders. A name that ``run_app`` needs
at run time but that only a type-checking import provides fails here, not first in the bundle.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import sys
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    app = QApplication(sys.argv)
    shown = []

    def look():
        shown.extend(w.windowTitle() for w in app.topLevelWidgets() if w.isVisible())
        app.quit()

    QTimer.singleShot(1500, look)
    from localchat.app import run_app

    code = run_app(sys.argv)
    print("WINDOWS:", shown)
    sys.exit(code)
    """
)


def test_run_app_shows_the_window_and_exits_cleanly(tmp_path: Path) -> None:
    env = dict(os.environ)
    env.update(
        QT_QPA_PLATFORM="offscreen",
        HOME=str(tmp_path),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "WINDOWS:" in done.stdout, out[-3000:]
    assert "localchat" in done.stdout.split("WINDOWS:", 1)[1], out[-3000:]
