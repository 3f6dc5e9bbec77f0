"""First run with no models: the starter pair, the catalog, or a GGUF file already on disk."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QPushButton, QVBoxLayout, QWidget


class WelcomePanel(QWidget):
    starter_requested = Signal()
    catalog_requested = Signal()
    import_requested = Signal()

    def __init__(self, starter_description: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("welcome")
        title = QLabel("<h2>Welcome to localchat</h2>", self)
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        intro = QLabel(
            "Chat with language models that run on this computer. A small drafter model "
            "proposes tokens and the main model checks them, so replies come faster.",
            self,
        )
        intro.setWordWrap(True)
        intro.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.starter_button = QPushButton("Get the starter models", self)
        self.starter_button.setObjectName("starter")
        self.starter_button.setDefault(True)
        starter_note = QLabel(starter_description, self)
        starter_note.setWordWrap(True)
        starter_note.setAlignment(Qt.AlignmentFlag.AlignCenter)
        starter_note.setEnabled(False)
        self.catalog_button = QPushButton("Browse the model catalog…", self)
        self.catalog_button.setObjectName("catalog")
        self.import_button = QPushButton("Use a GGUF file from this computer…", self)
        self.import_button.setObjectName("import")
        self.message = QLabel("", self)
        self.message.setObjectName("welcome_message")
        self.message.setWordWrap(True)
        self.message.setAlignment(Qt.AlignmentFlag.AlignCenter)

        column = QVBoxLayout()
        column.setSpacing(10)
        column.addWidget(title)
        column.addWidget(intro)
        column.addSpacing(12)
        column.addWidget(self.starter_button)
        column.addWidget(starter_note)
        column.addSpacing(6)
        column.addWidget(self.catalog_button)
        column.addWidget(self.import_button)
        column.addWidget(self.message)
        box = QWidget(self)
        box.setLayout(column)
        box.setMaximumWidth(520)
        outer = QVBoxLayout(self)
        outer.addStretch(1)
        outer.addWidget(box, 0, Qt.AlignmentFlag.AlignHCenter)
        outer.addStretch(2)
        self._connect_signals()

    def _connect_signals(self) -> None:
        self.starter_button.clicked.connect(self.starter_requested)
        self.catalog_button.clicked.connect(self.catalog_requested)
        self.import_button.clicked.connect(self.import_requested)

    def show_message(self, text: str) -> None:
        self.message.setText(text)
