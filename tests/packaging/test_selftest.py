"""``localchat selftest`` in this process on SmolLM2 as its own drafter (real engine process, window)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from localchat.cli import build_parser, main, selftest
from localchat.settings.folders import PROFILES_ENV


@pytest.fixture
def user_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the app's settings, history and logs at a temporary home (platformdirs reads XDG_* on Linux)."""
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    return tmp_path


def test_top_level_flag_is_the_subcommand() -> None:
    args = build_parser().parse_args(["selftest", "--model", "t.gguf", "--draft", "d.gguf"])
    assert args.command == "selftest"
    assert args.tokens == 32


def test_no_pair_is_a_clear_failure(
    user_dirs: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("localchat.cli.selftest.default_pair", lambda: None)
    assert main(["--selftest"]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("selftest FAILED: the starter pair is not in the models folder")
    assert "--model" in out[-1]


def test_missing_file_fails(user_dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["selftest", "--model", str(user_dirs / "none.gguf"), "--draft", str(user_dirs / "none.gguf")])
        == 1
    )
    assert "does not exist" in capsys.readouterr().out


def _users_settings() -> Path:
    """A user's settings.toml with a saved window size and last model (what the selftest overwrote)."""
    from localchat.settings import SettingsFile

    file = SettingsFile()
    settings = file.load().settings
    settings.set("window_geometry", "AdnQywADAAAAAAAAAAAAAAAAAyAAAAJYAAAAAAAAAAAAAAMgAAACWAAAAAACAAAHgA==")
    settings.set("last_model_path", "/models/the-users-own.gguf")
    settings.set("last_draft_path", "/models/the-users-drafter.gguf")
    file.save(settings)
    return file.path


@pytest.mark.slow
def test_selftest_passes_on_smollm2_drafting_for_itself(
    user_dirs: Path, smollm2_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = _users_settings()
    written = settings.read_bytes()
    profiles = os.environ[PROFILES_ENV]
    code = main(["--selftest", "--model", str(smollm2_path), "--draft", str(smollm2_path), "--tokens", "16"])
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.strip().splitlines()
    assert lines[-1].startswith("selftest passed: backend CPU"), out
    assert "acceptance length" in lines[-1]
    assert "window shown" in lines[-1]
    assert any(line.startswith("selftest: backend: CPU") for line in lines)
    # The user's settings (window size, last model) and state are as they were: the window ran on a
    # temporary copy, removed at the end, and the engine's profiles went there too.
    assert settings.read_bytes() == written
    assert not list(user_dirs.rglob("chats.sqlite3"))
    assert os.environ[PROFILES_ENV] == profiles and not list(Path(profiles).rglob("*"))
    assert any(line.startswith("selftest: structured output: ") and "matches the schema" in line
               for line in lines)


@pytest.mark.slow
def test_selftest_in_process_engine_without_window(
    user_dirs: Path, smollm2_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["selftest", "--model", str(smollm2_path), "--draft", str(smollm2_path), "--tokens", "8",
                 "--no-window"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.strip().splitlines()[-1].startswith("selftest passed: backend CPU")


def test_scratch_folders_carry_the_users_settings_and_leave_them_alone(user_dirs: Path) -> None:
    settings = _users_settings()
    written = settings.read_bytes()
    with selftest.scratch_folders() as (config, data):
        copy = config / settings.name
        assert copy.read_bytes() == written  # the window runs as the user has it set...
        copy.write_text("changed by the window\n")  # ...and what it saves lands in the copy
        assert os.environ[PROFILES_ENV].startswith(str(config.parent))
        data.mkdir()
        (data / "chats.sqlite3").write_bytes(b"")
    assert settings.read_bytes() == written
    assert not config.exists() and not data.exists()
