"""The small dialogs of the main window: where to export a chat, how much to delete, where the log
folder is, that the history was set aside. Each returns the user's answer (or a sentence, or the
dialog), so the window stays layout and slots."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from localchat.chat import export
from localchat.settings import folders


def ask_export_path(parent: QWidget, title: str, kind: str) -> Path | None:
    """Where to write the chat ``title`` as ``kind`` (its suffix added when the user left it out)."""
    filter_text = "Markdown (*.md)" if kind == "markdown" else "JSON (*.json)"
    offered = str(Path.home() / export.file_name(title, kind))
    path, _ = QFileDialog.getSaveFileName(parent, "Export chat", offered, f"{filter_text};;All files (*)")
    if not path:
        return None
    target = Path(path)
    return target if target.suffix else target.with_suffix(export.suffix(kind))


def ask_model_file(parent: QWidget) -> str:
    """A GGUF file the user picks to load ("" when they cancel)."""
    path, _ = QFileDialog.getOpenFileName(parent, "Open a GGUF model", str(Path.home()),
                                          "GGUF models (*.gguf);;All files (*)")
    return path


def ask_attachments(parent: QWidget) -> list[str]:
    """Files the user picks to attach to the message (none when they cancel)."""
    paths, _ = QFileDialog.getOpenFileNames(
        parent, "Attach files", str(Path.home()),
        "Text, code and PDF files (*.txt *.md *.py *.js *.ts *.json *.toml *.yaml *.yml *.csv *.log "
        "*.html *.css *.c *.h *.cpp *.rs *.go *.java *.sh *.sql *.xml *.pdf);;All files (*)")
    return paths


def ask_delete_following(parent: QWidget) -> bool | None:
    """Delete one of the user's messages only (False), or everything after it too (True); None: neither."""
    box = QMessageBox(QMessageBox.Icon.Question, "Delete message",
                      "Delete this message only, or also everything after it?", parent=parent)
    box.setObjectName("delete_message_dialog")
    box.setInformativeText("The replies after it answered it; this cannot be undone.")
    following = box.addButton("Delete it and what follows", QMessageBox.ButtonRole.DestructiveRole)
    only = box.addButton("Delete this message only", QMessageBox.ButtonRole.AcceptRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.exec()
    clicked = box.clickedButton()
    return None if clicked not in (following, only) else clicked is following


def open_log_folder() -> str:
    """Open the log folder in the file manager; "" when done, else a sentence saying where it is."""
    folder = folders.log_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"The log folder {folder} cannot be created ({exc.strerror or exc})."
    if not QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder))):
        return f"The log folder is {folder} (no file manager could open it)."
    return ""


def history_recovered_dialog(parent: QWidget, headline: str, details: str) -> QMessageBox:
    """The chat history was set aside: where it went, in a dialog that does not block (shown now)."""
    box = QMessageBox(QMessageBox.Icon.Warning, "Chat history set aside", headline, parent=parent)
    box.setInformativeText(details)
    box.setObjectName("history_dialog")
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    box.open()
    return box
