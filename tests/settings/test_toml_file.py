from __future__ import annotations

import tomllib
from pathlib import Path

from localchat.settings import OPTIONS, Settings, SettingsFile
from localchat.settings.toml_file import dump


def test_missing_file_means_defaults_and_no_message(tmp_path: Path) -> None:
    result = SettingsFile(tmp_path / "cfg").load()
    assert result.settings == Settings()
    assert result.messages == []


def test_round_trip_stores_only_non_defaults(tmp_path: Path) -> None:
    f = SettingsFile(tmp_path)
    s = Settings()
    s.set("draft_tokens", 8)
    s.set("temperature", 0.0)
    s.set("speculation", False)
    s.set("models_folder", 'C:\\Users\\ana\\"models"\n')
    s.set("window_geometry", "AdnQywADAAA=")
    f.save(s)
    document = tomllib.loads(f.path.read_text(encoding="utf-8"))
    assert document == {
        "speculation": {"speculation": False, "draft_tokens": 8},
        "sampling": {"temperature": 0.0},
        "engine": {"models_folder": 'C:\\Users\\ana\\"models"\n'},
        "state": {"window_geometry": "AdnQywADAAA="},
    }
    result = f.load()
    assert result.messages == []
    assert result.settings == s


def test_every_option_round_trips_with_a_non_default_value(tmp_path: Path) -> None:
    s = Settings()
    for opt in OPTIONS:
        if opt.type is bool:
            s.set(opt.name, not opt.default)
        elif opt.choices:
            other = [v for v in opt.choice_values if v != opt.default]
            s.set(opt.name, other[0])
        elif opt.type is str:
            s.set(opt.name, f"value of {opt.name} é ✓")
        else:
            assert opt.maximum is not None
            s.set(opt.name, opt.type(opt.maximum))
    assert len(s.non_defaults()) == len(OPTIONS)
    f = SettingsFile(tmp_path)
    f.save(s)
    assert f.load() == type(f.load())(s, [])


def test_defaults_write_an_empty_file(tmp_path: Path) -> None:
    f = SettingsFile(tmp_path)
    f.save(Settings())
    assert tomllib.loads(f.path.read_text()) == {}


def test_bad_and_unknown_values_keep_the_rest(tmp_path: Path) -> None:
    f = SettingsFile(tmp_path)
    f.path.write_text(
        """
top_level_unknown = 1
temperature = 0.3

[speculation]
draft_tokens = 40
drafter = "ngram"
speculation = "yes"
future_option = "x"

[sampling]
top_k = 10
top_p = [1, 2]

[engine.deeper]
a = 1
""",
        encoding="utf-8",
    )
    result = f.load()
    s = result.settings
    assert s.get("temperature") == 0.3
    assert s.get("drafter") == "ngram"
    assert s.get("top_k") == 10
    assert s.get("draft_tokens") == 4
    assert s.get("speculation") is True
    assert s.get("top_p") == 0.95
    text = "\n".join(result.messages)
    assert len(result.messages) == 6, text
    assert "draft_tokens must be at most 16, not 40; using the default 4" in text
    assert "speculation must be true or false" in text
    assert "[speculation] future_option" in text
    assert "top_level_unknown" in text
    assert "top_p must be a number" in text
    assert "[engine.deeper]" in text
    # Unknown scalar entries survive a save (a newer version's settings are not lost).
    f.save(s)
    document = tomllib.loads(f.path.read_text())
    assert document["speculation"]["future_option"] == "x"
    assert document["top_level_unknown"] == 1
    # Wrong values the app did not change stay as the user wrote them (they used to be dropped).
    assert document["speculation"]["draft_tokens"] == 40
    assert document["speculation"]["speculation"] == "yes"
    assert document["sampling"]["top_p"] == [1, 2]
    assert document["engine"]["deeper"] == {"a": 1}
    # Once the user sets one of them in the app, the new value replaces the wrong one.
    s.set("draft_tokens", 8)
    f.save(s)
    document = tomllib.loads(f.path.read_text())
    assert document["speculation"]["draft_tokens"] == 8
    assert document["speculation"]["speculation"] == "yes"


def test_malformed_file_is_set_aside(tmp_path: Path) -> None:
    f = SettingsFile(tmp_path)
    broken = "[speculation\ndraft_tokens = = 3\n"
    f.path.write_text(broken, encoding="utf-8")
    result = f.load()
    assert result.settings == Settings()
    assert len(result.messages) == 1
    assert "settings.toml.bad" in result.messages[0]
    assert "not valid TOML" in result.messages[0]
    assert not f.path.exists()
    assert f.bad_path.read_text(encoding="utf-8") == broken
    # The app carries on: the next save writes a fresh file.
    s = Settings()
    s.set("adaptive", False)
    f.save(s)
    assert f.load().settings == s


def test_saving_keeps_comments_layout_and_unknown_tables(tmp_path: Path) -> None:
    f = SettingsFile(tmp_path)
    original = """# my settings: tuned for the laptop
temperature = 0.3  # warmer than the default

[speculation]
# fewer drafts on battery
draft_tokens = 6

[my_scripts]  # read by my own tools
path = "~/bin"
nested = { a = 1, b = [1, 2] }
"""
    f.path.write_text(original, encoding="utf-8")
    s = f.load().settings
    f.save(s)
    assert f.path.read_text(encoding="utf-8") == original  # nothing changed, nothing rewritten
    s.set("draft_tokens", 7)
    s.set("top_k", 12)
    s.reset("temperature")
    f.save(s)
    text = f.path.read_text(encoding="utf-8")
    assert "# my settings: tuned for the laptop" in text and "# fewer drafts on battery" in text
    assert "# read by my own tools" in text and "warmer" not in text
    document = tomllib.loads(text)
    assert document["speculation"] == {"draft_tokens": 7}
    assert document["sampling"] == {"top_k": 12}
    assert document["my_scripts"] == {"path": "~/bin", "nested": {"a": 1, "b": [1, 2]}}
    assert "temperature" not in document
    assert f.load().settings == s


def test_a_second_broken_file_does_not_overwrite_the_first_copy(tmp_path: Path) -> None:
    f = SettingsFile(tmp_path)
    copies = []
    for n in range(3):
        f.path.write_text(f"broken {n} = = =\n", encoding="utf-8")
        result = f.load()
        assert f.bad_path.name in result.messages[0]
        copies.append(f.bad_path)
    assert [p.name for p in copies] == ["settings.toml.bad", "settings.toml.bad-2", "settings.toml.bad-3"]
    assert [p.read_text(encoding="utf-8") for p in copies] == [f"broken {n} = = =\n" for n in range(3)]


def test_non_utf8_file_is_set_aside(tmp_path: Path) -> None:
    f = SettingsFile(tmp_path)
    f.path.write_bytes(b"temperature = 0.5 # \xff\xfe\n")
    result = f.load()
    assert result.settings == Settings()
    assert f.bad_path.exists()
    assert "UTF-8" in result.messages[0]


def test_dump_is_valid_toml_for_awkward_strings() -> None:
    s = Settings()
    s.set("last_model_path", 'tab\there \x01 \x7f quote" back\\slash 日本')
    assert tomllib.loads(dump(s))["state"]["last_model_path"] == s.get("last_model_path")


def test_files_from_earlier_versions_still_load(tmp_path: Path) -> None:
    f = SettingsFile(tmp_path)
    old = '[speculation]\ndrafter = "model"\n\n[state]\nwindow_state = "AAAA"\n'
    f.path.write_text(old, encoding="utf-8")
    result = f.load()
    assert result.messages == []
    assert result.settings.get("drafter") == "draft-model"
    f.save(result.settings)
    document = tomllib.loads(f.path.read_text())
    assert document == {"speculation": {"drafter": "draft-model"}}
