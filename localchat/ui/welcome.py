"""First run with no models: the starter pair, the catalog, or a GGUF file already on disk.

The column is centred by stretches, not by a layout alignment: a widget placed
with an alignment gets its size hint's width and a height that ignores its
wrapped labels' heightForWidth, which clipped the texts mid-line. The page
scrolls when the window is too short for it.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

COLUMN_WIDTH = 520  # at most; narrower windows get a narrower column


class WelcomePanel(QWidget):
    starter_requested = Signal()
    catalog_requested = Signal()
    import_requested = Signal()

    def __init__(self, starter_description: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("welcome")
        title = QLabel("<h2>Welcome to localchat</h2>", self)
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        title.setWordWrap(True)
        intro = QLabel(
            "Chat with language models that run on this computer. A small drafter model "
            "proposes tokens and the main model checks them, so replies come faster.",
            self,
        )
        intro.setObjectName("welcome_intro")
        intro.setWordWrap(True)
        intro.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.starter_button = QPushButton("Get the starter models", self)
        self.starter_button.setObjectName("starter")
        self.starter_button.setDefault(True)
        starter_note = QLabel(starter_description, self)
        starter_note.setObjectName("starter_note")
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
        box = QWidget()
        box.setLayout(column)
        box.setMaximumWidth(COLUMN_WIDTH)
        box.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(box, 100)
        row.addStretch(1)
        page = QWidget()
        page.setObjectName("welcome_page")
        middle = QVBoxLayout(page)
        middle.addStretch(1)
        middle.addLayout(row)
        middle.addStretch(2)
        self.scroll_area = QScrollArea(self)
        self.scroll_area.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroll_area.setWidget(page)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self.scroll_area)
        self._connect_signals()

    def _connect_signals(self) -> None:
        self.starter_button.clicked.connect(self.starter_requested)
        self.catalog_button.clicked.connect(self.catalog_requested)
        self.import_button.clicked.connect(self.import_requested)

    def show_message(self, text: str) -> None:
        self.message.setText(text)
