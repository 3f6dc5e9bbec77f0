"""The app's name and its per-user folders: one place that asks platformdirs.

Every folder localchat writes to (chats, settings, caches, logs, downloaded
models, benchmark results, speculation profiles) is derived here, so they all land under the same
``localchat`` folder on every platform. ``appauthor=False`` matters on
Windows: without it platformdirs nests the folder under an author name
(``%LOCALAPPDATA%\\localchat\\localchat``), which put one of the copies this
module replaced in a different folder from the rest.

platformdirs is imported inside each function so importing this module (the
lowest layer, imported by almost everything) stays cheap.
"""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "localchat"


def data_dir() -> Path:
    """The user's data folder for localchat (e.g. ~/.local/share/localchat): chats, models, results."""
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def config_dir() -> Path:
    """The user's config folder for localchat (e.g. ~/.config/localchat): settings.toml."""
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def cache_dir() -> Path:
    """The user's cache folder for localchat (e.g. ~/.cache/localchat): what can be rebuilt."""
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def kv_state_dir() -> Path:
    """Where the engine keeps the last conversations' saved KV caches, so a restart need not
    read their history again (engine/state_cache.py)."""
    return cache_dir() / "kv-states"


def log_dir() -> Path:
    """The user's log folder for localchat (e.g. ~/.local/state/localchat/log)."""
    import platformdirs

    return Path(platformdirs.user_log_dir(APP_NAME, appauthor=False))


def machine_measure_path() -> Path:
    """What the engine last measured of this computer, for the starter choice (catalog/starter_choice.py)."""
    return data_dir() / "machine-measure.json"


def models_dir() -> Path:
    """Where downloaded models go when the ``models_folder`` setting is empty."""
    return data_dir() / "models"


# Set by the test suite (and usable by anyone who wants measured profiles kept elsewhere): every
# engine, child processes included, then reads and writes its profiles there.
PROFILES_ENV = "LOCALCHAT_PROFILES_DIR"


def profiles_dir() -> Path:
    """Where the engine keeps what it measured of a model pair on this machine (engine/profile.py)."""
    override = os.environ.get(PROFILES_ENV)
    return Path(override) if override else data_dir() / "profiles"


def folder_problem(folder: Path, mode: int = 0o777) -> str | None:
    """Make ``folder`` (and the folders above it) if need be: None when it is there to write in,
    else why not, as words that finish a sentence ("/home/me/.local/share is a file, not a folder").

    A file where a folder should be (``$XDG_DATA_HOME`` set to a file, a stray ``localchat`` file)
    stopped the app at start with a traceback; the caller now says this and carries on.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=mode)
    except OSError as exc:
        for part in (folder, *folder.parents):
            if part.exists() and not part.is_dir():
                return f"{part} is a file, not a folder"
        return f"{folder} cannot be made ({exc.strerror or exc})"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable by you"
    return None
