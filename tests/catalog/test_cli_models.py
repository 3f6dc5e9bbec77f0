"""``localchat models``: catalog and local models with a fits-in-memory hint."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from localchat.cli import models as models_cmd
from localchat.cli.models import fits_in_memory


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="localchat")
    models_cmd.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return int(args.func(args))


def test_lists_catalog_and_local_models(
    tmp_path: Path, smollm2_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(models_cmd, "total_ram", lambda: 8 * 10**9)
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / smollm2_path.name).symlink_to(smollm2_path)
    (folder / "broken.gguf").write_bytes(b"nope")
    assert run(["models", "--models-dir", str(folder), "--no-hf-cache"]) == 0
    out = capsys.readouterr().out
    assert "qwen2.5-coder-1.5b-instruct" in out and "[starter]" in out
    assert "qwen2.5-72b-instruct" in out
    line_72b = next(line for line in out.splitlines() if "qwen2.5-72b-instruct" in line)
    assert " no " in line_72b  # 48 GB does not fit in 8 GB
    smol = next(line for line in out.splitlines() if smollm2_path.name in line)
    assert "llama" in smol and "Q4_1" in smol and "yes" in smol and "135M" in smol
    broken = next(line for line in out.splitlines() if "broken.gguf" in line)
    assert "not a GGUF file" in broken


def test_empty_models_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["models", "--models-dir", str(tmp_path / "none"), "--no-hf-cache"]) == 0
    assert "none yet: `localchat pull ID`" in capsys.readouterr().out


def test_broken_catalog_is_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "drafters.toml"
    bad.write_text("schema_version = 1\n[[model]]\nid = 'x'\n")
    assert run(["models", "--catalog", str(bad), "--models-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("localchat: ") and "entry 'x'" in err and len(err.splitlines()) == 1


def test_fits_in_memory() -> None:
    gb = 10**9
    assert fits_in_memory(2 * gb, 16 * gb).value == "yes"
    assert fits_in_memory(12 * gb, 16 * gb).value == "tight"
    assert fits_in_memory(20 * gb, 16 * gb).value == "no"
def test_malformed_headers_do_not_break_the_listing(
    tmp_path: Path, smollm2_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.catalog.test_library import malformed_headers

    folder = tmp_path / "models"
    bad = malformed_headers(folder)
    (folder / smollm2_path.name).symlink_to(smollm2_path)
    assert run(["models", "--models-dir", str(folder), "--no-hf-cache"]) == 0
    out = capsys.readouterr().out
    assert "Q4_1" in next(line for line in out.splitlines() if smollm2_path.name in line)
    for path in bad:
        assert "corrupt" in next(line for line in out.splitlines() if path.name in line)


def test_the_users_other_model_folders_are_listed(
    tmp_path: Path, smollm2_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from localchat.settings import Settings, SettingsFile
    from localchat.settings import folders as settings_folders

    config = tmp_path / "config"
    own, other = tmp_path / "own", tmp_path / "lmstudio"
    own.mkdir()
    (other / "pub" / "repo").mkdir(parents=True)
    (other / "pub" / "repo" / smollm2_path.name).symlink_to(smollm2_path)
    SettingsFile(config).save(Settings({"models_folder": str(own), "extra_model_folders": str(other)}))
    monkeypatch.setattr(settings_folders, "config_dir", lambda: config)
    assert run(["models", "--no-hf-cache"]) == 0
    out = capsys.readouterr().out
    assert f"Local models ({own}, {other})" in out
    assert any(smollm2_path.name in line for line in out.splitlines())


def test_the_starter_for_this_computer_is_named_once_the_app_measured_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from localchat.catalog import starter_choice
    from localchat.settings import folders

    monkeypatch.setattr(models_cmd, "total_ram", lambda: 64 * 10**9)
    monkeypatch.setattr(folders, "data_dir", lambda: tmp_path / "data")
    monkeypatch.setattr(models_cmd, "extra_model_folders", lambda: [])
    assert run(["models", "--no-hf-cache"]) == 0
    assert "For this computer" not in capsys.readouterr().out  # nothing measured yet
    gpu = starter_choice.MachineMeasure(1_117_320_768, {1: 0.006, 2: 0.0062, 4: 0.0065, 8: 0.007}, 0.003,
                                        backend="CUDA", measured_on="Qwen2.5-Coder 1.5B Instruct")
    starter_choice.save(folders.machine_measure_path(), gpu)
    assert run(["models", "--no-hf-cache"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "For this computer" in ln)
    assert "Qwen2.5-Coder 32B Instruct" in line and "`localchat pull qwen2.5-coder-32b-instruct`" in line
