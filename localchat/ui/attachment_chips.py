"""The files attached to the message being written, as chips under the message box: each names its
file and size, with a button that removes it. The window keeps the files (chat.attachments reads
them); this row shows them and says which one the user removed."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QWidget

from localchat.chat.attachments import Attachment
from localchat.services.qt_signals import emit


class AttachmentChips(QWidget):
    removed = Signal(int)  # the index of the chip whose × was clicked

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachment_chips")
        self._layout = QHBoxLayout(self)
        self._layout.setContentsMargins(0, 2, 0, 2)
        self._layout.setSpacing(6)
        self._layout.addStretch(1)
        self.chips: list[QFrame] = []
        self.hide()

    def set_attachments(self, attachments: Sequence[Attachment]) -> None:
        """Show one chip for each file (none: the row is hidden)."""
        for chip in self.chips:
            self._layout.removeWidget(chip)
            chip.deleteLater()
        self.chips = [self._chip(i, a) for i, a in enumerate(attachments)]
        for i, chip in enumerate(self.chips):
            self._layout.insertWidget(i, chip)
        self.setVisible(bool(self.chips))

    def names(self) -> list[str]:
        return [chip.findChild(QLabel, "chip_name").text() for chip in self.chips]  # type: ignore[union-attr]

    def _chip(self, index: int, attachment: Attachment) -> QFrame:
        chip = QFrame(self)
        chip.setObjectName("attachment_chip")
        chip.setFrameShape(QFrame.Shape.StyledPanel)
        chip.setToolTip(f"{attachment.path}\n{attachment.size_words}: sent with the message, "
                        "inlined after your text")
        row = QHBoxLayout(chip)
        row.setContentsMargins(8, 1, 2, 1)
        row.setSpacing(4)
        name = QLabel(attachment.name, chip)
        name.setObjectName("chip_name")
        size = QLabel(attachment.size_words, chip)
        size.setObjectName("chip_size")
        size.setEnabled(False)  # the palette's quieter colour, in light and dark themes alike
        remove = QToolButton(chip)
        remove.setObjectName("chip_remove")
        remove.setText("×")
        remove.setAutoRaise(True)
        remove.setToolTip(f"Remove {attachment.name}")
        remove.clicked.connect(lambda: emit(self.removed, index))
        row.addWidget(name)
        row.addWidget(size)
        row.addWidget(remove)
        return chip
