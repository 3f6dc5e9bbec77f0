"""Draw localchat's icon with Qt and write it as PNG, Windows .ico and macOS .icns.

The icon is generated rather than drawn by hand so it can be rebuilt anywhere
PySide6 runs (no Pillow, no iconutil): both .ico and .icns may hold PNG images
directly, so the containers are written here with ``struct``.

    python packaging/make_icons.py        # rewrites packaging/icons/*
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QPointF, QRectF, Qt
from PySide6.QtGui import (
    QBrush,
    QColor,
    QGuiApplication,
    QImage,
    QLinearGradient,
    QPainter,
    QPainterPath,
    QPen,
)

ICON_DIR = Path(__file__).resolve().parent / "icons"
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
# icns OSTypes that hold PNG data, by pixel size.
ICNS_TYPES = {16: b"icp4", 32: b"icp5", 64: b"icp6", 128: b"ic07", 256: b"ic08", 512: b"ic09", 1024: b"ic10"}


def draw(size: int) -> QImage:
    """A rounded speech bubble with three dots: the last two lighter, like draft tokens."""
    img = QImage(size, size, QImage.Format.Format_ARGB32)
    img.fill(Qt.GlobalColor.transparent)
    p = QPainter(img)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    s = size / 64.0
    grad = QLinearGradient(QPointF(0, 0), QPointF(0, size))
    grad.setColorAt(0.0, QColor("#3b82f6"))
    grad.setColorAt(1.0, QColor("#1d4ed8"))
    bubble = QPainterPath()
    bubble.addRoundedRect(QRectF(4 * s, 6 * s, 56 * s, 40 * s), 12 * s, 12 * s)
    tail = QPainterPath()
    tail.moveTo(14 * s, 44 * s)
    tail.lineTo(12 * s, 58 * s)
    tail.lineTo(28 * s, 44 * s)
    tail.closeSubpath()
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(QBrush(grad))
    p.drawPath(bubble.united(tail))
    p.setPen(QPen(Qt.PenStyle.NoPen))
    for i, alpha in enumerate((255, 170, 110)):
        p.setBrush(QColor(255, 255, 255, alpha))
        p.drawEllipse(QPointF((18 + 14 * i) * s, 26 * s), 5 * s, 5 * s)
    p.end()
    return img


def png_bytes(img: QImage) -> bytes:
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    img.save(buf, "PNG")
    buf.close()
    return bytes(data.data())


def write_ico(path: Path, images: dict[int, bytes]) -> None:
    sizes = sorted(images)
    header = struct.pack("<HHH", 0, 1, len(sizes))
    offset = 6 + 16 * len(sizes)
    entries, blobs = b"", b""
    for sz in sizes:
        blob = images[sz]
        dim = 0 if sz >= 256 else sz  # 0 means 256 in an ICONDIRENTRY
        entries += struct.pack("<BBBBHHII", dim, dim, 0, 0, 1, 32, len(blob), offset + len(blobs))
        blobs += blob
    path.write_bytes(header + entries + blobs)


def write_icns(path: Path, images: dict[int, bytes]) -> None:
    body = b"".join(
        ICNS_TYPES[sz] + struct.pack(">I", 8 + len(blob)) + blob for sz, blob in sorted(images.items())
    )
    path.write_bytes(b"icns" + struct.pack(">I", 8 + len(body)) + body)


def main() -> int:
    _app = QGuiApplication(sys.argv[:1])
    ICON_DIR.mkdir(parents=True, exist_ok=True)
    pngs = {sz: png_bytes(draw(sz)) for sz in sorted(set(ICO_SIZES) | set(ICNS_TYPES))}
    (ICON_DIR / "localchat.png").write_bytes(pngs[256])
    write_ico(ICON_DIR / "localchat.ico", {sz: pngs[sz] for sz in ICO_SIZES})
    write_icns(ICON_DIR / "localchat.icns", {sz: pngs[sz] for sz in (16, 32, 128, 256, 512)})
    for name in ("localchat.png", "localchat.ico", "localchat.icns"):
        print(f"{ICON_DIR / name}: {(ICON_DIR / name).stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
