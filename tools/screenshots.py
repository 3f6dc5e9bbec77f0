"""Capture the README screenshots: the real app under Xvfb, mid-reply with the Qwen2.5-Coder pair.

    Xvfb :99 -screen 0 1280x820x24 &
    DISPLAY=:99 python tools/screenshots.py light /tmp/shot/light   # -main.png and -settings.png
    DISPLAY=:99 python tools/screenshots.py dark /tmp/shot/dark

Needs ImageMagick's ``import`` and the test models in ~/.cache/localchat/test-models
(the F16 target is made by the test fixtures). Settings and history go to /tmp/shot.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from PySide6.QtCore import QRect, QTimer
from PySide6.QtWidgets import QApplication

from localchat.app import build_main_window
from localchat.settings import OPTIONS
from localchat.ui.settings_dialog import SettingsDialog

MODELS = Path.home() / ".cache/localchat/test-models"
PROMPT = (
    "Write a Python function that checks whether a string is a palindrome, "
    "ignoring case and punctuation, with a short explanation."
)


def snap(path: str, geom: QRect) -> None:
    crop = f"{geom.width()}x{geom.height()}+{geom.x()}+{geom.y()}"
    subprocess.run(["import", "-window", "root", "-crop", crop, path], check=True)


def main() -> int:
    theme, out = sys.argv[1], sys.argv[2]
    root = Path("/tmp/shot") / theme
    app = QApplication(sys.argv)
    app.setApplicationName("localchat")
    parts = build_main_window(root / "config", root / "data", autoload=False)
    settings = parts.settings
    settings.set("theme", theme)
    settings.set("colour_accepted_tokens", True)
    window = parts.window
    window.resize(1180, 760)
    window.move(0, 0)
    window.show()
    window.load_model(
        str(MODELS / "qwen2.5-coder-1.5b-instruct-f16.gguf"),
        str(MODELS / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
    )
    state = {"sent": False, "tokens": 0, "shot": False}

    def on_loaded(_info: object) -> None:
        if not state["sent"]:
            state["sent"] = True
            window.send_message(PROMPT)

    def on_tokens(event: object) -> None:
        state["tokens"] += getattr(event, "n_tokens", 0)
        if state["tokens"] >= 110 and not state["shot"]:
            state["shot"] = True
            QTimer.singleShot(300, take)

    def take() -> None:
        app.processEvents()
        snap(out + "-main.png", window.frameGeometry())
        window.session.cancel()
        dialog = SettingsDialog(OPTIONS, {o.name: settings.get(o.name) for o in OPTIONS}, window)
        dialog.move(0, 0)
        dialog.show()

        def shot_dialog() -> None:
            snap(out + "-settings.png", dialog.frameGeometry())
            dialog.close()
            QTimer.singleShot(200, window.close)

        QTimer.singleShot(700, shot_dialog)

    parts.engine.state_changed.connect(lambda s: on_loaded(s.info) if s.ready else None)
    parts.engine.job_event.connect(lambda e: on_tokens(e.event) if hasattr(e, "event") else None)
    QTimer.singleShot(240_000, app.quit)
    app.exec()
    parts.engine.shutdown()
    print("captured" if state["shot"] else "no capture", state)
    return 0 if state["shot"] else 1


if __name__ == "__main__":
    sys.exit(main())
