"""Every option declared once (options.py), its values (settings.py), and settings.toml (toml_file.py).

Public API::

    from localchat.settings import OPTIONS, Option, Settings, SettingsFile

    result = SettingsFile().load()          # or SettingsFile(config_dir) in tests
    result.settings.draft_tokens            # typed properties, one per option (OptionReader)
    result.messages                         # sentences about ignored or bad values, possibly empty
    result.settings.set("temperature", 0.2) # validates; InvalidValueError on a bad value
    SettingsFile().save(result.settings)    # writes only non-defaults

No Qt here: services.SettingsService adds the ``changed`` signal.
"""

from localchat.settings.options import (
    OPTIONS,
    OPTIONS_BY_NAME,
    SECTIONS,
    InvalidValueError,
    Option,
    Value,
    option,
)
from localchat.settings.settings import OptionReader, Settings
from localchat.settings.toml_file import LoadResult, SettingsFile, default_config_dir

__all__ = [
    "OPTIONS",
    "OPTIONS_BY_NAME",
    "SECTIONS",
    "InvalidValueError",
    "LoadResult",
    "Option",
    "OptionReader",
    "Settings",
    "SettingsFile",
    "Value",
    "default_config_dir",
    "option",
]
