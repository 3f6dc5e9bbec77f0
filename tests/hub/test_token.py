"""Gated models and the Hugging Face token, against the hub stand-in on 127.0.0.1.

The stand-in answers a gated repository as the real hub does: 401 without a
token, 403 with a token whose owner did not accept the licence, the file with
one that did; ``/api/whoami-v2`` knows the tokens in ``hub.accounts``.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path

import pytest

from localchat.cli import pull as pull_cmd
from localchat.hub import token as hub_token
from localchat.hub.download import DownloadItem, DownloadJob, is_verified
from localchat.hub.errors import AccessDeniedError, ConnectionLostError, DownloadError
from tests.hub.hubserver import HubServer

GOOD = "hf_granted0123456789"
OTHER = "hf_notgranted987654"
ITEM = DownloadItem("google/gemma-gated-GGUF", "gemma-q4_k_m.gguf")


@pytest.fixture
def gated(hub: HubServer) -> bytes:
    data = os.urandom(256 * 1024)
    hub.add(ITEM.repo, ITEM.filename, data)
    hub.grants[ITEM.repo] = {GOOD}
    hub.accounts.update({GOOD: "ada", OTHER: "bob"})
    return data


def test_without_a_token_the_sentence_says_where_to_paste_one(
    hub: HubServer, models: Path, gated: bytes
) -> None:
    with pytest.raises(AccessDeniedError) as info:
        DownloadJob([ITEM], models, endpoint=hub.url).run()
    msg = str(info.value)
    assert info.value.gated
    assert hub.requests[0].authorization is None
    assert msg.startswith(f"{ITEM.repo} is gated: open {hub.url}/{ITEM.repo}, sign in and accept its licence")
    assert "Settings → Hugging Face" in msg and "https://huggingface.co/settings/tokens" in msg
    assert "hf auth login" not in msg  # the bundles have no `hf` command
    assert not any(models.rglob("*.gguf"))


def test_a_token_without_the_licence_gets_403_in_words(hub: HubServer, models: Path, gated: bytes) -> None:
    with pytest.raises(AccessDeniedError, match=r"does not grant access to it \(403\).*accept its licence"):
        DownloadJob([ITEM], models, endpoint=hub.url, token=OTHER).run()
    assert hub.requests[0].authorization == f"Bearer {OTHER}"


def test_the_right_token_downloads(hub: HubServer, models: Path, gated: bytes) -> None:
    [path] = DownloadJob([ITEM], models, endpoint=hub.url, token=GOOD).run()
    assert path.read_bytes() == gated and is_verified(path)
    assert {r.authorization for r in hub.requests} == {f"Bearer {GOOD}"}


def test_a_saved_token_is_used_by_downloads_and_kept_where_hf_keeps_it(
    hub: HubServer, models: Path, gated: bytes
) -> None:
    from huggingface_hub import get_token

    hub_token.save_token(f"  {GOOD}\n")
    assert hub_token.stored_token() == GOOD
    assert get_token() == GOOD  # the same file `hf` and huggingface-hub read
    if sys.platform != "win32":
        assert stat.S_IMODE(hub_token.token_file().stat().st_mode) == 0o600
    [path] = DownloadJob([ITEM], models, endpoint=hub.url).run()  # no token passed: the saved one
    assert path.read_bytes() == gated
    hub_token.save_token("")
    assert not hub_token.token_file().exists() and hub_token.stored_token() == ""


def test_a_token_with_spaces_is_refused(hub: HubServer) -> None:
    with pytest.raises(DownloadError, match="no spaces"):
        hub_token.save_token("hf_abc def")
    assert not hub_token.token_file().exists()


def test_hf_token_in_the_environment_is_honoured(
    hub: HubServer, models: Path, gated: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", GOOD)
    assert hub_token.env_token() == GOOD
    [path] = DownloadJob([ITEM], models, endpoint=hub.url).run()
    assert path.read_bytes() == gated


def test_whoami_names_the_account_or_says_why_not(hub: HubServer, gated: bytes) -> None:
    assert hub_token.check_token(GOOD, endpoint=hub.url) == hub_token.Account("ada", "read")
    with pytest.raises(AccessDeniedError, match=r"did not accept this token \(401\).*settings/tokens"):
        hub_token.check_token("hf_typo", endpoint=hub.url)
    with pytest.raises(AccessDeniedError, match="No token was given"):
        hub_token.check_token("  ", endpoint=hub.url)


def test_whoami_on_an_unreachable_hub(hub: HubServer) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectionLostError, match=r"Cannot reach the hub .* to check the token"):
        hub_token.check_token(GOOD, endpoint=f"http://127.0.0.1:{port}")


def test_cli_pull_token(
    hub: HubServer, tmp_path: Path, gated: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = tmp_path / "drafters.toml"
    catalog.write_text(
        f"""
schema_version = 1

[[model]]
id = "gemma-gated"
display_name = "Gemma Gated"
family = "gemma"
params = "1M"
license = "gemma"

[[model.quant]]
quant = "Q4_K_M"
repo = "{ITEM.repo}"
filename = "{ITEM.filename}"
size = {len(gated)}

[[model.drafter]]
kind = "ngram"
"""
    )
    parser = argparse.ArgumentParser(prog="localchat")
    pull_cmd.register(parser.add_subparsers(dest="command"))
    base = ["pull", "gemma-gated", "--catalog", str(catalog), "--models-dir", str(tmp_path / "m")]
    base += ["--endpoint", hub.url]

    args = parser.parse_args(base)
    assert args.func(args) == 1
    err = capsys.readouterr().err
    assert "is gated" in err and "--token" in err and "hf auth login" not in err

    args = parser.parse_args([*base, "--token", GOOD])
    assert args.func(args) == 0, capsys.readouterr().err
    assert (tmp_path / "m" / ITEM.repo / ITEM.filename).read_bytes() == gated
