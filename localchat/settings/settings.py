"""The current values of every option, validated against the declaration in options.py.

``Settings`` is plain Python (no Qt, no file access): the services layer wraps
it with change signals, and ``toml_file`` reads and writes it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping

from localchat.settings.drafter_kind import DrafterKind
from localchat.settings.options import OPTIONS, Option, Value, option


def split_folders(text: str) -> list[str]:
    """A list of folders written as in PATH (os.pathsep between them), blanks dropped, each once."""
    return list(dict.fromkeys(part.strip() for part in text.split(os.pathsep) if part.strip()))


def join_folders(folders: Iterable[str]) -> str:
    """The text form of a list of folders that ``split_folders`` reads back."""
    return os.pathsep.join(dict.fromkeys(str(f).strip() for f in folders if str(f).strip()))


class OptionReader:
    """Typed read access to every option: ``settings.draft_tokens`` is an int, ``settings.drafter``
    a DrafterKind. Code reads options through these properties, so an option's name is spelt in
    options.py and here only, and mypy checks every use. Subclasses provide ``get``; a test keeps
    one property per declared option, of the option's type.
    """

    def get(self, name: str) -> Value:
        raise NotImplementedError

    def get_bool(self, name: str) -> bool:
        value = self.get(name)
        assert isinstance(value, bool), name
        return value

    def get_int(self, name: str) -> int:
        value = self.get(name)
        assert isinstance(value, int) and not isinstance(value, bool), name
        return value

    def get_float(self, name: str) -> float:
        value = self.get(name)
        assert isinstance(value, float), name
        return value

    def get_str(self, name: str) -> str:
        value = self.get(name)
        assert isinstance(value, str), name
        return value

    # Speculation
    @property
    def speculation(self) -> bool:
        return self.get_bool("speculation")

    @property
    def drafter(self) -> DrafterKind:
        return DrafterKind(self.get_str("drafter"))

    @property
    def draft_model_path(self) -> str:
        return self.get_str("draft_model_path")

    @property
    def draft_tokens(self) -> int:
        return self.get_int("draft_tokens")

    @property
    def adaptive(self) -> bool:
        return self.get_bool("adaptive")

    @property
    def exact_speculation(self) -> bool:
        return self.get_bool("exact_speculation")

    # Sampling
    @property
    def temperature(self) -> float:
        return self.get_float("temperature")

    @property
    def max_reply_tokens(self) -> int:
        return self.get_int("max_reply_tokens")

    @property
    def top_k(self) -> int:
        return self.get_int("top_k")

    @property
    def top_p(self) -> float:
        return self.get_float("top_p")

    @property
    def min_p(self) -> float:
        return self.get_float("min_p")

    @property
    def repeat_penalty(self) -> float:
        return self.get_float("repeat_penalty")

    # Engine
    @property
    def context_length(self) -> int:
        return self.get_int("context_length")

    @property
    def threads(self) -> int:
        return self.get_int("threads")

    @property
    def gpu_layers(self) -> int:
        return self.get_int("gpu_layers")

    @property
    def kv_cache_memory_mb(self) -> int:
        return self.get_int("kv_cache_memory_mb")

    @property
    def kv_cache_disk_mb(self) -> int:
        return self.get_int("kv_cache_disk_mb")

    @property
    def models_folder(self) -> str:
        return self.get_str("models_folder")

    @property
    def extra_model_folders(self) -> str:
        return self.get_str("extra_model_folders")

    def extra_model_folder_list(self) -> list[str]:
        """``extra_model_folders`` as a list: split on os.pathsep, blanks dropped, each named once."""
        return split_folders(self.extra_model_folders)

    # Workers
    @property
    def rpc_workers(self) -> str:
        return self.get_str("rpc_workers")

    # Appearance
    @property
    def server_enabled(self) -> bool:
        return self.get_bool("server_enabled")

    @property
    def server_port(self) -> int:
        return self.get_int("server_port")

    @property
    def server_api_key(self) -> str:
        return self.get_str("server_api_key")

    @property
    def server_loads_models(self) -> bool:
        """Whether an API request that names another local model loads it (LM Studio's JIT loading)."""
        return self.get_bool("server_loads_models")

    # Tools
    @property
    def tools_in_chats(self) -> bool:
        return self.get_bool("tools_in_chats")

    @property
    def tool_rounds_max(self) -> int:
        return self.get_int("tool_rounds_max")

    @property
    def tool_timeout_s(self) -> int:
        return self.get_int("tool_timeout_s")

    @property
    def tools_for_untrained_models(self) -> bool:
        return self.get_bool("tools_for_untrained_models")

    # Appearance
    @property
    def server_allowed_origins(self) -> str:
        """The origins of the web pages allowed to call the API, separated by commas ("": none)."""
        return self.get_str("server_allowed_origins")

    @property
    def colour_accepted_tokens(self) -> bool:
        return self.get_bool("colour_accepted_tokens")

    @property
    def theme(self) -> str:
        return self.get_str("theme")

    @property
    def remember_window(self) -> bool:
        return self.get_bool("remember_window")

    # State
    @property
    def last_model_path(self) -> str:
        return self.get_str("last_model_path")

    @property
    def last_draft_path(self) -> str:
        return self.get_str("last_draft_path")

    @property
    def window_geometry(self) -> str:
        return self.get_str("window_geometry")


class Settings(OptionReader):
    """Values for every declared option; unset options read as their defaults.

    ``extra`` holds entries of the settings file that no option here declares
    (written by a newer version, say). They are kept and written back
    unchanged so that opening the file with an older localchat loses nothing.
    """

    def __init__(
        self,
        values: Mapping[str, Value] | None = None,
        extra: Mapping[str, Mapping[str, Value]] | None = None,
    ) -> None:
        self._values: dict[str, Value] = {}
        self.extra: dict[str, dict[str, Value]] = {k: dict(v) for k, v in (extra or {}).items()}
        for name, value in (values or {}).items():
            self.set(name, value)

    def get(self, name: str) -> Value:
        opt = option(name)
        return self._values.get(name, opt.default)

    def set(self, name: str, value: object) -> Value:
        """Validate and store ``value``; returns the stored value.

        Raises KeyError for an unknown name and InvalidValueError for a bad value
        (the old value is kept).
        """
        opt = option(name)
        checked = opt.validate(value)
        if checked == opt.default and type(checked) is type(opt.default):
            self._values.pop(name, None)
        else:
            self._values[name] = checked
        return checked

    def reset(self, name: str) -> Value:
        """Return ``name`` to its default; returns the default."""
        opt = option(name)
        self._values.pop(name, None)
        return opt.default

    def is_default(self, name: str) -> bool:
        option(name)
        return name not in self._values

    def non_defaults(self) -> dict[str, Value]:
        """The values that differ from their defaults, in declaration order."""
        return {opt.name: self._values[opt.name] for opt in OPTIONS if opt.name in self._values}

    def as_dict(self) -> dict[str, Value]:
        return {opt.name: self.get(opt.name) for opt in OPTIONS}

    def copy(self) -> Settings:
        return Settings(self.non_defaults(), self.extra)

    def __iter__(self) -> Iterator[tuple[Option, Value]]:
        for opt in OPTIONS:
            yield opt, self.get(opt.name)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Settings):
            return NotImplemented
        return self.non_defaults() == other.non_defaults() and self.extra == other.extra

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Settings({self.non_defaults()!r})"
