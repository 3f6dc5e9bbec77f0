"""Screenshot of a chat mid-reply (live speed, acceptance, drafted text) in the light or dark theme.

    QT_QPA_PLATFORM=offscreen PYTHONPATH=. python tools/screenshot_reply.py light|dark OUT.png [end] [DRAFTER]

``end``: wait for the reply to finish (its footer, the notice under the chat, the status bar's
last reply); DRAFTER: the Drafter setting (auto, draft-model, ngram), e.g. ``draft-model`` for
the paused state of the Q4_K_M starter on a CPU where its draft model cannot pay.

The real Qwen pair of the test models (~/.cache/localchat/test-models); settings and history in
/tmp/shot-reply/<theme>, so nothing of the user's is read or changed.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

from PySide6.QtWidgets import QApplication

from localchat.app import build_main_window

MODELS = Path.home() / ".cache/localchat/test-models"
TARGET = MODELS / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
DRAFT = MODELS / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
QUESTION = "Write a Python function that checks whether a string is a palindrome, with a docstring."


def main(theme: str, out: str, end: bool = False, drafter: str = "") -> None:
    app = QApplication(sys.argv)
    root = Path("/tmp/shot-reply") / theme
    shutil.rmtree(root, ignore_errors=True)
    parts = build_main_window(root / "config", root / "data", autoload=False)
    parts.settings.set("theme", theme)
    parts.settings.set("colour_accepted_tokens", True)
    if drafter:
        parts.settings.set("drafter", drafter)
    window = parts.window
    window.resize(1180, 720)
    window.show()
    window.load_model(str(TARGET), str(DRAFT))

    def spin(seconds: float) -> None:
        end = time.time() + seconds
        while time.time() < end:
            app.processEvents()
            time.sleep(0.02)

    while window.engine_info is None:
        spin(0.2)
    window.send_message(QUESTION)
    while not (window.chat_view.streaming_text or ""):
        spin(0.1)
    if end:
        while window.session.generating:
            spin(0.2)
        spin(1.0)
    else:
        spin(2.5)
    window.grab().save(out)
    window.session.cancel()
    spin(0.5)
    parts.engine.shutdown()
    parts.store.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], "end" in sys.argv[3:], next((a for a in sys.argv[3:] if a != "end"), ""))
