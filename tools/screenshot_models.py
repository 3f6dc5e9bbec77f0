"""Capture the model manager as a user sees it: the real app under Xvfb with the starter pair loaded.

    Xvfb :99 -screen 0 1280x820x24 &
    DISPLAY=:99 python tools/screenshot_models.py /tmp/shot/models [dark]   # -local.png and -catalog.png

The models folder is a temporary one holding links to the test models in
~/.cache/localchat/test-models (the Qwen2.5-Coder 1.5B target, its 0.5B drafter
and SmolLM2 135M); settings, history and huggingface-hub's cache go to
/tmp/shot/models-run, so nothing of the user's is read or changed. Needs
ImageMagick's ``import``. The RAM figures are this computer's. The committed
copies are made small with ``convert IN.png +dither -colors 64 -strip OUT.png``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path("/tmp/shot/models-run")
os.environ["HF_HUB_CACHE"] = str(ROOT / "hf-cache")  # before huggingface_hub reads it

from PySide6.QtCore import QRect, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from localchat.app import build_main_window  # noqa: E402
from localchat.ui.model_manager import ModelManagerDialog  # noqa: E402

MODELS = Path.home() / ".cache/localchat/test-models"
TARGET = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
DRAFT = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
OTHER = "SmolLM2-135M-Instruct.Q4_1.gguf"


def snap(path: str, geom: QRect) -> None:
    crop = f"{geom.width()}x{geom.height()}+{geom.x()}+{geom.y()}"
    subprocess.run(["import", "-window", "root", "-crop", crop, path], check=True)


def main() -> int:
    out = sys.argv[1]
    shutil.rmtree(ROOT, ignore_errors=True)
    folder = ROOT / "models"
    folder.mkdir(parents=True)
    for name in (TARGET, DRAFT, OTHER):
        (folder / name).symlink_to(MODELS / name)
    app = QApplication(sys.argv)
    app.setApplicationName("localchat")
    parts = build_main_window(ROOT / "config", ROOT / "data", autoload=False)
    parts.settings.set("models_folder", str(folder))
    parts.settings.set("theme", sys.argv[2] if len(sys.argv) > 2 else "light")
    window = parts.window
    window.resize(1180, 760)
    window.move(0, 0)
    window.show()
    state = {"shot": False}

    def take() -> None:
        dialog = QApplication.activeModalWidget()
        if not isinstance(dialog, ModelManagerDialog):
            app.quit()
            return
        dialog.move(0, 0)
        dialog.local_table.selectRow(0)
        app.processEvents()
        snap(out + "-local.png", dialog.frameGeometry())
        dialog.tabs.setCurrentIndex(1)
        dialog.catalog_table.selectRow(0)
        app.processEvents()
        snap(out + "-catalog.png", dialog.frameGeometry())
        state["shot"] = True
        dialog.reject()
        QTimer.singleShot(200, window.close)
        QTimer.singleShot(400, app.quit)

    def on_loaded(_info: object) -> None:
        QTimer.singleShot(800, take)
        window.model_manager_requested.emit()  # the manager is modal: take() runs inside its loop

    parts.engine.state_changed.connect(lambda s: on_loaded(s.info) if s.ready else None)
    window.load_model(str(folder / TARGET), str(folder / DRAFT))
    QTimer.singleShot(180_000, app.quit)
    app.exec()
    parts.engine.shutdown()
    print("captured" if state["shot"] else "no capture")
    return 0 if state["shot"] else 1


if __name__ == "__main__":
    sys.exit(main())
