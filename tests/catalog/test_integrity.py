"""Lazy re-verification: a verified model is hashed again only when its size or mtime changed."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from localchat.catalog import integrity


@pytest.fixture
def hash_calls(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    calls: list[Path] = []
    real = integrity.sha256_file

    def counting(path: Path, *args: object, **kwargs: object) -> str:
        calls.append(path)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(integrity, "sha256_file", counting)
    return calls


@pytest.fixture
def model(tmp_path: Path) -> tuple[Path, str]:
    data = os.urandom(3 * 1024 * 1024)
    path = tmp_path / "org" / "Repo-GGUF" / "model-q4_k_m.gguf"
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    integrity.write_record(path, sha)
    return path, sha


def test_an_unchanged_file_is_not_hashed_again(model: tuple[Path, str], hash_calls: list[Path]) -> None:
    path, sha = model
    for _start in range(5):
        assert integrity.verified_sha256(path) == sha
        integrity.check_before_use(path)
    assert hash_calls == []
    assert integrity.state(path) is integrity.State.VERIFIED
    # The marker keeps the bare digest, as earlier versions wrote and read it.
    assert integrity.marker_path(path).read_text() == sha


def test_a_new_mtime_with_the_same_bytes_is_hashed_once_then_trusted(
    model: tuple[Path, str], hash_calls: list[Path]
) -> None:
    path, sha = model
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    assert integrity.state(path) is integrity.State.NEEDS_CHECK
    assert integrity.verified_sha256(path) == sha
    assert hash_calls == [path]
    assert integrity.verified_sha256(path) == sha  # the new mtime is recorded: no second hash
    assert hash_calls == [path]
    assert integrity.state(path) is integrity.State.VERIFIED


def test_changed_bytes_are_refused_and_stay_refused(model: tuple[Path, str], hash_calls: list[Path]) -> None:
    path, _sha = model
    with path.open("r+b") as fh:
        fh.seek(1_000_000)
        fh.write(b"\x00garbage\x00")
    for _try in range(2):
        with pytest.raises(integrity.ModelChangedError, match=r"changed on disk.*Download it again"):
            integrity.check_before_use(path)
    assert len(hash_calls) == 2  # still changed, so still checked: the marker was not rewritten


def test_a_new_size_is_hashed_again(model: tuple[Path, str], hash_calls: list[Path]) -> None:
    path, _sha = model
    st = path.stat()
    with path.open("ab") as fh:
        fh.write(b"tail")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime: the size alone is enough
    with pytest.raises(integrity.ModelChangedError):
        integrity.check_before_use(path)
    assert hash_calls == [path]


def test_a_marker_from_an_earlier_version_is_checked_once(
    model: tuple[Path, str], hash_calls: list[Path]
) -> None:
    path, sha = model
    integrity.record_path(path).unlink()  # what earlier versions left: the digest only
    assert integrity.state(path) is integrity.State.NEEDS_CHECK
    assert integrity.verified_sha256(path) == sha
    assert integrity.verified_sha256(path) == sha
    assert hash_calls == [path]


def test_a_marker_rewritten_for_another_digest_is_checked(
    model: tuple[Path, str], hash_calls: list[Path]
) -> None:
    path, _sha = model
    integrity.marker_path(path).write_text("0" * 64)  # an earlier version re-verified against another file
    with pytest.raises(integrity.ModelChangedError):
        integrity.check_before_use(path)
    assert hash_calls == [path]


def test_files_without_a_marker_are_not_checked(tmp_path: Path, hash_calls: list[Path]) -> None:
    path = tmp_path / "mine.gguf"
    path.write_bytes(b"GGUF" + os.urandom(1000))
    integrity.check_before_use(path)
    assert integrity.verified_sha256(path) is None
    assert integrity.state(path) is integrity.State.UNVERIFIED
    assert hash_calls == []


def test_loading_a_real_model_whose_bytes_changed_is_refused_in_words(
    smollm2_path: Path, tmp_path: Path
) -> None:
    from localchat.engine.backend import Model
    from localchat.engine.errors import ModelLoadError

    copy = tmp_path / smollm2_path.name
    shutil.copyfile(smollm2_path, copy)
    integrity.write_record(copy, integrity.sha256_file(smollm2_path))
    model = Model(copy, gpu_layers=0, vocab_only=True)  # verified and unchanged: loads
    model.close()
    size = copy.stat().st_size
    with copy.open("r+b") as fh:
        fh.seek(size - 4096)
        fh.write(os.urandom(64))  # tensor bytes: the header still parses, the weights are garbage
    with pytest.raises(ModelLoadError, match="no longer the file that was downloaded"):
        Model(copy, gpu_layers=0, vocab_only=True)


def test_a_folder_that_cannot_be_written_does_not_stop_a_good_file(
    model: tuple[Path, str], hash_calls: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, sha = model
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(integrity, "write_record", refuse)
    assert integrity.verified_sha256(path) == sha  # checked and good; only the record is missing
    integrity.check_before_use(path)
    assert len(hash_calls) == 2  # not recorded, so checked again: slower, never wrong
