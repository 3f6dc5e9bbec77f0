"""``localchat pull ID``: target and drafter with a progress bar; errors as one sentence and exit 1."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from localchat.cli import pull as pull_cmd
from localchat.cli.pull import ProgressBar
from localchat.hub.download import DownloadProgress
from tests.catalog.ggufwriter import vocab_kv, write_gguf
from tests.hub.hubserver import HubServer

CATALOG = """
schema_version = 1

[[model]]
id = "tiny"
display_name = "Tiny Target"
family = "tiny"
params = "1M"
license = "mit"

[[model.quant]]
quant = "F32"
repo = "test/Tiny-GGUF"
filename = "tiny-target.gguf"
size = {target_size}

[[model.drafter]]
kind = "draft-model"
repo = "test/Tiny-GGUF"
filename = "tiny-draft.gguf"
size = {draft_size}
"""


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="localchat")
    pull_cmd.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return int(args.func(args))


@pytest.fixture
def setup(tmp_path: Path, hub: HubServer) -> tuple[Path, Path]:
    tokens = ["<unk>", "<s>", "</s>", *(f"t{i}" for i in range(20))]
    target = write_gguf(tmp_path / "tiny-target.gguf", vocab_kv(tokens), [("w", [256, 1024])])
    draft = write_gguf(tmp_path / "tiny-draft.gguf", vocab_kv(tokens), [("w", [16, 64])])
    hub.add("test/Tiny-GGUF", "tiny-target.gguf", target)
    hub.add("test/Tiny-GGUF", "tiny-draft.gguf", draft)
    catalog = tmp_path / "drafters.toml"
    catalog.write_text(CATALOG.format(target_size=target.stat().st_size, draft_size=draft.stat().st_size))
    return catalog, tmp_path / "models"


def test_pull_downloads_target_and_drafter(
    setup: tuple[Path, Path], hub: HubServer, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog, models = setup
    code = run(
        ["pull", "tiny", "--catalog", str(catalog), "--models-dir", str(models), "--endpoint", hub.url]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    target = models / "test" / "Tiny-GGUF" / "tiny-target.gguf"
    assert target.is_file() and (models / "test" / "Tiny-GGUF" / "tiny-draft.gguf").is_file()
    assert f"Tiny Target (F32): {target}" in out
    assert "tiny-draft.gguf drafts for Tiny Target, as the catalog recommends." in out
    assert "100%" in err and "tiny-target.gguf (1/2)" in err


def test_unknown_id(setup: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    catalog, models = setup
    assert run(["pull", "tinny", "--catalog", str(catalog), "--models-dir", str(models)]) == 1
    err = capsys.readouterr().err
    assert err == (
        "localchat: No catalog entry has the id 'tinny'; `localchat models` lists them. Did you mean tiny?\n"
    )


def test_errors_print_one_sentence(
    setup: tuple[Path, Path], hub: HubServer, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog, models = setup
    hub.gated.add("test/Tiny-GGUF")
    assert (
        run(["pull", "tiny", "--catalog", str(catalog), "--models-dir", str(models), "--endpoint", hub.url])
        == 1
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("localchat: test/Tiny-GGUF is gated:")


def test_offline_without_files(setup: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    catalog, models = setup
    assert run(["pull", "tiny", "--catalog", str(catalog), "--models-dir", str(models), "--offline"]) == 1
    assert "Offline mode is on" in capsys.readouterr().err


def test_progress_bar_text() -> None:
    out = io.StringIO()
    bar = ProgressBar(out)
    bar(DownloadProgress(0, 2_000_000, 0.0, None, "a.gguf", 1, 2))
    bar(DownloadProgress(1_000_000, 2_000_000, 500_000.0, 2.0, "a.gguf", 1, 2))
    bar(DownloadProgress(2_000_000, 2_000_000, 500_000.0, 0.0, "b.gguf", 2, 2, "done"))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[------------------------]   0% 0 B/2.0 MB ... ETA --:-- a.gguf (1/2)")
    assert lines[-1].startswith(
        "[########################] 100% 2.0 MB/2.0 MB 500.0 KB/s ETA 0:00 b.gguf (2/2)"
    )


def test_a_drafter_predicted_not_to_pay_is_said_before_the_download(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Asked for by name the pair is downloaded as asked; where the app measured this computer the
    command says first that the drafter is predicted not to pay, and how to leave it out."""
    from localchat.catalog import starter_choice
    from localchat.catalog.drafters import load_catalog
    from localchat.settings import folders

    kept = tmp_path / "machine-measure.json"
    monkeypatch.setattr(folders, "machine_measure_path", lambda: kept)
    starter = load_catalog().starter
    assert starter is not None
    assert pull_cmd._drafter_note(starter, None) == ""  # nothing measured yet
    starter_choice.save(kept, starter_choice.MachineMeasure(
        1_117_320_768, {1: 0.0574, 2: 0.0907, 4: 0.1082, 8: 0.1875, 16: 0.2169}, 0.0332,
        drafter_file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", drafter_bytes=491_400_064))
    note = pull_cmd._drafter_note(starter, None)
    assert note.startswith("On this computer the drafter Qwen2.5-Coder 0.5B Instruct · Q4_K_M is "
                           "predicted to run 0.8x plain speed with Qwen2.5-Coder 1.5B Instruct · Q4_K_M: it "
                           "costs more")
    assert "--no-drafter leaves it out" in note
    assert pull_cmd._drafter_note(load_catalog().get("qwen2.5-coder-7b-instruct"), None) == ""  # it pays
