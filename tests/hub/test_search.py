"""Searching the hub for GGUF models through huggingface-hub's API, against the suite's 127.0.0.1 hub
(never the real one): repositories most downloaded first, a repository's quantizations with sizes,
split parts and vision projectors left out, and a failure as a sentence."""

from __future__ import annotations

import socket

import pytest

from localchat.catalog.sizes import Fit
from localchat.hub.search import HubFile, HubRepo, SearchError, gguf_files, repo_files, search
from tests.hub.hubserver import HubServer


@pytest.fixture
def listed(hub: HubServer) -> HubServer:
    hub.add("bartowski/Tiny-Coder-GGUF", "Tiny-Coder-Q8_0.gguf", b"G" * 3000)
    hub.add("bartowski/Tiny-Coder-GGUF", "Tiny-Coder-Q4_K_M.gguf", b"G" * 1500)
    hub.add("bartowski/Tiny-Coder-GGUF", "README.md", b"# Tiny coder")
    hub.add("bartowski/Tiny-Coder-GGUF", "mmproj-Tiny-Coder-f16.gguf", b"G" * 500)
    hub.add("bartowski/Tiny-Coder-GGUF", "Q8_0/Tiny-Coder-Q8_0-00001-of-00002.gguf", b"G" * 100)
    hub.add("other/Tiny-Coder-GGUF", "tiny-coder-q4_0.gguf", b"G" * 1400)
    hub.add("other/Tiny-Coder-safetensors", "model.safetensors", b"S" * 10)
    hub.add("other/Big-Chat-GGUF", "big-chat-Q4_K_M.gguf", b"G" * 10)
    hub.stats = {"bartowski/Tiny-Coder-GGUF": (5000, 40), "other/Tiny-Coder-GGUF": (9000, 3)}
    hub.gated.add("other/Tiny-Coder-GGUF")
    return hub


def test_search_lists_gguf_repositories_matching_the_words_most_downloaded_first(listed: HubServer) -> None:
    found = search("tiny-coder", endpoint=listed.url)
    assert found == [HubRepo("other/Tiny-Coder-GGUF", 9000, 3, True),
                     HubRepo("bartowski/Tiny-Coder-GGUF", 5000, 40, False)]
    request = [r for r in listed.requests if r.path == "/api/models"]
    assert len(request) == 1


def test_a_repositorys_quantizations_come_with_their_sizes(listed: HubServer) -> None:
    files = repo_files("bartowski/Tiny-Coder-GGUF", endpoint=listed.url)
    assert files == [HubFile("bartowski/Tiny-Coder-GGUF", "Tiny-Coder-Q4_K_M.gguf", 1500, "Q4_K_M"),
                     HubFile("bartowski/Tiny-Coder-GGUF", "Tiny-Coder-Q8_0.gguf", 3000, "Q8_0")]
    assert files[0].fit(total_ram=16 * 10**9) is Fit.YES
    assert HubFile("r/x", "x.gguf", 0, "").fit(16 * 10**9) is Fit.UNKNOWN


def test_a_gated_repository_lists_its_files_a_missing_one_and_no_hub_are_sentences(
        listed: HubServer) -> None:
    assert [f.filename for f in repo_files("other/Tiny-Coder-GGUF", endpoint=listed.url)] == [
        "tiny-coder-q4_0.gguf"]  # as on the hub: listed to anyone, the file itself needs the licence
    with pytest.raises(SearchError, match="no such repository"):
        repo_files("nobody/Nothing-GGUF", endpoint=listed.url)
    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(SearchError, match="cannot be reached"):
        search("tiny", endpoint=f"http://127.0.0.1:{port}")


def test_split_parts_and_projectors_are_left_out_and_unsized_files_go_last() -> None:
    files = gguf_files("r/m", [("m-Q4_0.gguf", None), ("m-IQ2_XS.gguf", 10), ("m-00001-of-00003.gguf", 5),
                               ("mmproj-m-f16.gguf", 3), ("notes.txt", 1)])
    assert [(f.filename, f.quant) for f in files] == [("m-IQ2_XS.gguf", "IQ2_XS"), ("m-Q4_0.gguf", "Q4_0")]


def test_offline_mode_is_said_at_once(listed: HubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(SearchError, match="offline mode is on"):
        search("tiny", endpoint=listed.url)
    assert not [r for r in listed.requests if r.path.startswith("/api/models")]
