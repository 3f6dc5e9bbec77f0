"""Capture docs/screenshots/chat-features[-dark].png: a highlighted code block and the answer switcher.

    export PYTHONPATH=. XVFB='-screen 0 1280x820x24'
    xvfb-run -a -s "$XVFB" python tools/screenshot_chat.py light docs/screenshots/chat-features.png
    xvfb-run -a -s "$XVFB" python tools/screenshot_chat.py dark docs/screenshots/chat-features-dark.png

The chat is written into a fresh history (no model runs, so no reply carries speed figures):
one question, and two answers to it as a regenerate leaves them, the second shown.
Settings and history go to /tmp/shot-chat.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from localchat.app import build_main_window

QUESTION = "Write a Python function that checks whether a string is a palindrome."
FIRST = "Compare it with its reverse:\n\n```python\ndef is_palindrome(s):\n    return s == s[::-1]\n```"
SECOND = """Ignore case and punctuation first, then compare with the reverse:

```python
import re


def is_palindrome(text: str) -> bool:
    \"\"\"True when text reads the same both ways (letters and digits only).\"\"\"
    cleaned = re.sub(r"[^a-z0-9]", "", text.lower())
    return cleaned == cleaned[::-1]


print(is_palindrome("A man, a plan, a canal: Panama"))  # True
```

`re.sub` drops everything but letters and digits, and `[::-1]` reverses the string."""


def main() -> int:
    theme, out = sys.argv[1], sys.argv[2]
    root = Path("/tmp/shot-chat") / theme
    shutil.rmtree(root, ignore_errors=True)
    app = QApplication(sys.argv)
    app.setApplicationName("localchat")
    parts = build_main_window(root / "config", root / "data", autoload=False)
    parts.settings.set("theme", theme)
    store = parts.store
    chat = store.create("Palindromes in Python")
    store.add_message(chat.id, "user", QUESTION)
    first = store.add_message(chat.id, "assistant", FIRST)
    store.add_message(chat.id, "assistant", SECOND, variant_of=first.id)
    window = parts.window
    window.resize(1000, 640)
    window.move(0, 0)
    window.show()
    window.show_welcome(False)
    window.session.conversations_changed.emit()
    window.sidebar.list.setCurrentRow(0)

    def take() -> None:
        window.chat_view.verticalScrollBar().setValue(0)
        app.processEvents()
        if not window.grab().save(out):
            print(f"could not write {out}", file=sys.stderr)
            app.exit(1)
            return
        print(out)
        app.exit(0)

    QTimer.singleShot(800, take)
    return app.exec()


if __name__ == "__main__":
    raise SystemExit(main())
