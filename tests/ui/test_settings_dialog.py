from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QSpinBox

from localchat.settings import OPTIONS, Settings
from localchat.ui.settings_dialog import PathField, SettingsDialog


def test_every_visible_option_gets_an_editor_of_its_type(qtbot) -> None:
    settings = Settings()
    dialog = SettingsDialog(OPTIONS, settings.as_dict())
    qtbot.addWidget(dialog)
    visible = [o for o in OPTIONS if o.visible]
    assert set(dialog.editors) == {o.name for o in visible}
    for option in visible:
        editor = dialog.editors[option.name]
        if option.type is bool:
            assert isinstance(editor, QCheckBox)
        elif option.type is int:
            assert isinstance(editor, QSpinBox)
            assert editor.minimum() == option.minimum and editor.maximum() == option.maximum
        elif option.type is float:
            assert isinstance(editor, QDoubleSpinBox)
        elif option.choices:
            assert isinstance(editor, QComboBox)
        elif option.path_kind:
            assert isinstance(editor, PathField)
    assert dialog.values() == {o.name: o.default for o in visible}
    assert dialog.changed_values() == {}


def test_changed_values_and_restore_defaults(qtbot) -> None:
    settings = Settings()
    settings.set("draft_tokens", 8)
    dialog = SettingsDialog(OPTIONS, settings.as_dict())
    qtbot.addWidget(dialog)
    assert dialog.values()["draft_tokens"] == 8
    dialog.set_value("temperature", 0.2)
    dialog.set_value("drafter", "ngram")
    assert dialog.changed_values() == {"temperature": 0.2, "drafter": "ngram"}
    for spec in settings:
        option, value = spec
        assert option.validate(dialog.values().get(option.name, value)) is not None
    dialog._on_restore_defaults_clicked()
    assert dialog.values()["draft_tokens"] == 4


def test_an_empty_models_folder_shows_the_real_folder_not_default(
    qtbot, tmp_path, monkeypatch
) -> None:
    """It showed "Default", which told nobody where the models go."""
    from localchat.settings import folders

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    settings = Settings()
    dialog = SettingsDialog(OPTIONS, settings.as_dict())
    qtbot.addWidget(dialog)
    field = dialog.editors["models_folder"]
    assert field.edit.text() == ""
    assert field.edit.placeholderText() == str(folders.models_dir())
    assert field.edit.placeholderText().startswith(str(tmp_path / "data"))
    assert dialog.editors["draft_model_path"].edit.placeholderText() != "Default"
