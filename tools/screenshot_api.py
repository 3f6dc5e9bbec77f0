"""Screenshot of the window while the local API answers a request: the status bar says "API request".

    QT_QPA_PLATFORM=offscreen PYTHONPATH=. python tools/screenshot_api.py BUSY.png IDLE.png

Uses temporary folders under /tmp/shotapi/run, port 11435, and the Qwen pair of the test models
in ~/.cache/localchat/test-models (tests/conftest.py fetches them).
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import httpx
from PySide6.QtWidgets import QApplication

from localchat.app import build_main_window

MODELS = Path.home() / ".cache/localchat/test-models"
TARGET = MODELS / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
DRAFT = MODELS / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
QUESTION = "Write a Python function that reverses a string, with a docstring."


def main(busy_png: str, idle_png: str) -> None:
    app = QApplication(sys.argv)
    root = Path("/tmp/shotapi/run")
    root.mkdir(parents=True, exist_ok=True)
    parts = build_main_window(root / "config", root / "data", autoload=False)
    window = parts.window
    window.resize(1180, 720)
    window.show()
    parts.settings.set("server_port", 11435)
    parts.settings.set("server_enabled", True)
    window.load_model(str(TARGET), str(DRAFT))

    def spin(seconds: float) -> None:
        end = time.time() + seconds
        while time.time() < end:
            app.processEvents()
            time.sleep(0.02)

    while window.engine_info is None:
        spin(0.2)
    answers: list[httpx.Response] = []
    body = {"model": TARGET.stem, "messages": [{"role": "user", "content": QUESTION}], "max_tokens": 120}
    asker = threading.Thread(target=lambda: answers.append(
        httpx.post("http://127.0.0.1:11435/v1/chat/completions", json=body, timeout=300)))
    asker.start()
    spin(6)
    window.grab().save(busy_png)
    while asker.is_alive():
        spin(0.2)
    print(answers[0].status_code, answers[0].text[:200])
    spin(0.5)
    window.grab().save(idle_png)
    if parts.server is not None:
        parts.server.stop()
    parts.engine.shutdown()
    parts.store.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
