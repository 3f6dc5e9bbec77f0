"""Screenshots of the starter choice: the model manager as "Get the starter models" opens it after the
starter pair was measured on this computer, and the window's offer of a bigger model.

    PYTHONPATH=. python tools/screenshot_starter.py MANAGER.png OFFER.png [--measure FILE] [dark]

Run under a display (Xvfb); uses temporary folders under /tmp/shotstarter and the Qwen pair of the
test models in ~/.cache/localchat/test-models. The manager shot is this computer's own: the real pair
is loaded, the engine's measurement kept, and the choice made from it. The offer appears only where
a bigger model suits the computer; ``--measure FILE`` (a machine-measure.json, e.g. one kept on a GPU
machine) supplies the measurement the offer is made from, so the line can be shown on a computer
where the starter is already the right choice.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from localchat.app import ShutsDown, build_main_window
from localchat.catalog import starter_choice
from localchat.catalog.drafters import load_catalog
from localchat.catalog.sizes import total_ram
from localchat.ui.model_manager import ModelManagerDialog
from localchat.ui.theme import apply_theme

MODELS = Path.home() / ".cache/localchat/test-models"
TARGET = MODELS / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
DRAFT = MODELS / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def shoot(path: str) -> None:
    subprocess.run(["import", "-window", "root", path], check=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("manager_png")
    p.add_argument("offer_png")
    p.add_argument("--measure", help="a machine-measure.json to make the offer from")
    p.add_argument("theme", nargs="?", default="light")
    args = p.parse_args()
    app = QApplication(sys.argv)
    root = Path("/tmp/shotstarter")
    shutil.rmtree(root, ignore_errors=True)
    parts = build_main_window(root / "config", root / "data", autoload=False)
    parts.settings.set("theme", args.theme)
    apply_theme(app, args.theme)
    parts.settings.set("models_folder", str(root / "models"))
    window = parts.window
    window.resize(1180, 720)
    window.show()

    def spin(seconds: float) -> None:
        end = time.time() + seconds
        while time.time() < end:
            app.processEvents()
            time.sleep(0.02)

    window.load_model(str(TARGET), str(DRAFT))
    while window.engine_info is None:
        spin(0.2)
    spin(1.0)
    kept = root / "data" / "machine-measure.json"
    print("kept:", kept.read_text() if kept.is_file() else "nothing")

    def look() -> None:
        dialog = QApplication.activeModalWidget()
        assert isinstance(dialog, ModelManagerDialog)
        dialog.resize(1140, 580)
        spin(0.8)
        shoot(args.manager_png)
        print("manager note:", dialog.catalog_message.text())
        dialog.reject()

    QTimer.singleShot(300, look)
    assert parts.models is not None
    parts.models.open_manager(select=_chosen_id(kept), note=_sentence(kept))

    choice = _choice(Path(args.measure) if args.measure else kept)
    if choice is not None and choice.chosen.entry.id != "qwen2.5-coder-1.5b-instruct":
        window.show_suggestion(choice.sentence, choice.chosen.entry.id, choice.chosen.entry.display_name)
    spin(0.8)
    shoot(args.offer_png)
    print("offer:", window.suggestion.text() if window.suggestion.isVisible() else "(none)")
    if isinstance(parts.engine, ShutsDown):
        parts.engine.shutdown()


def _choice(kept: Path) -> starter_choice.StarterChoice | None:
    measured = starter_choice.load(kept)
    return starter_choice.choose(load_catalog(), measured, total_ram()) if measured else None


def _chosen_id(kept: Path) -> str:
    choice = _choice(kept)
    return choice.chosen.entry.id if choice else ""


def _sentence(kept: Path) -> str:
    choice = _choice(kept)
    return choice.sentence if choice else ""


if __name__ == "__main__":
    main()
