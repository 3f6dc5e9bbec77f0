"""Reading and writing settings.toml: only non-default values, one table per section.

Reading never fails: an unknown key or a bad value gives a message and its
default while the rest of the file is used; a file that is not valid TOML is
moved aside to ``settings.toml.bad`` (``settings.toml.bad-2``, ``-3``... when
an earlier copy is there, so no broken file the user wrote is overwritten) and
the app starts with defaults. The messages are sentences for the user (the
services layer shows and logs them).

Saving edits the user's file in place through tomlkit, a round-trip TOML
library: comments, blank lines, unknown tables and entries, and entries whose
value is wrong but that the app did not change are all kept as written; only
the options whose value changed are rewritten (or removed when back at their
default). The file is replaced atomically, so a crash mid-save leaves the old
file, never half of a new one.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.items
from tomlkit.exceptions import TOMLKitError

from localchat.settings import folders
from localchat.settings.options import (
    OPTIONS,
    OPTIONS_BY_NAME,
    RETIRED_OPTIONS,
    InvalidValueError,
    Value,
    section_key,
)
from localchat.settings.settings import Settings

log = logging.getLogger(__name__)

FILE_NAME = "settings.toml"


def default_config_dir() -> Path:
    """The platform's config folder for localchat (e.g. ~/.config/localchat)."""
    return folders.config_dir()


@dataclass
class LoadResult:
    settings: Settings
    messages: list[str] = field(default_factory=list)  # sentences for the user, possibly empty


class SettingsFile:
    """settings.toml in ``config_dir`` (localchat's config folder by default)."""

    def __init__(self, config_dir: Path | str | None = None) -> None:
        self.dir = Path(config_dir) if config_dir is not None else default_config_dir()
        self.path = self.dir / FILE_NAME
        self.bad_path = self.dir / (FILE_NAME + ".bad")  # the copy set aside last (or the first name)

    def load(self) -> LoadResult:
        """Read the file; a missing file means defaults with no message."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return LoadResult(Settings())
        except OSError as exc:
            msg = f"The settings file {self.path} could not be read ({exc.strerror}); using the defaults."
            log.warning(msg)
            return LoadResult(Settings(), [msg])
        try:
            document = tomllib.loads(data.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            return LoadResult(Settings(), [self._set_aside(exc)])
        result = parse_document(document, str(self.path))
        for message in result.messages:
            log.warning(message)
        return result

    def save(self, settings: Settings) -> None:
        """Write the options that differ from their defaults into the user's file, keeping the rest."""
        self.dir.mkdir(parents=True, exist_ok=True)
        document = self._current_document()
        text = update_document(document, settings) if document is not None else dump(settings)
        fd, tmp = tempfile.mkstemp(prefix=".settings-", suffix=".toml", dir=self.dir)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _current_document(self) -> tomlkit.TOMLDocument | None:
        """The file as it is now, for an in-place edit; None when there is none (or it became unusable)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("settings file %s unreadable at save, set aside: %s", self.path, exc)
            self._set_aside(exc)
            return None
        try:
            return tomlkit.parse(text)
        except TOMLKitError as exc:  # edited by hand into invalid TOML while the app ran
            self._set_aside(exc)
            return None

    def _next_bad_path(self) -> Path:
        first = self.dir / (FILE_NAME + ".bad")
        if not first.exists():
            return first
        n = 2
        while (self.dir / f"{FILE_NAME}.bad-{n}").exists():
            n += 1
        return self.dir / f"{FILE_NAME}.bad-{n}"

    def _set_aside(self, exc: Exception) -> str:
        if isinstance(exc, tomllib.TOMLDecodeError | TOMLKitError):
            reason = str(exc)
        elif isinstance(exc, UnicodeDecodeError):
            reason = "it is not UTF-8 text"
        else:
            reason = str(exc)
        bad = self._next_bad_path()
        try:
            os.replace(self.path, bad)
            self.bad_path = bad
        except OSError as move_exc:
            msg = (
                f"The settings file {self.path} is not valid TOML ({reason}) and could not be "
                f"moved aside ({move_exc.strerror}); using the defaults."
            )
        else:
            msg = (
                f"The settings file {self.path} is not valid TOML ({reason}); it was saved as "
                f"{self.bad_path.name} and the defaults are used."
            )
        log.warning(msg)
        return msg


def parse_document(document: dict[str, object], source: str = FILE_NAME) -> LoadResult:
    """Turn a parsed TOML document into Settings plus messages about what was left out.

    Options are read from their section's table; a known option at the top level
    (or in another table) is accepted too, since people edit this file by hand.
    """
    values: dict[str, Value] = {}
    extra: dict[str, dict[str, Value]] = {}
    messages: list[str] = []

    def take(table: str, key: str, raw: object) -> None:
        where = f"[{table}] {key}" if table else key
        opt = OPTIONS_BY_NAME.get(key)
        if opt is None and key in RETIRED_OPTIONS:
            return
        if opt is None:
            if isinstance(raw, bool | int | float | str):
                extra.setdefault(table, {})[key] = raw
                messages.append(f"{source}: unknown setting {where} is ignored (kept in the file).")
            else:
                messages.append(f"{source}: unknown setting {where} is ignored.")
            return
        try:
            values[key] = opt.validate(raw)
        except InvalidValueError as exc:
            messages.append(f"{source}: {exc}; using the default {_show(opt.default)}.")

    for key, raw in document.items():
        if isinstance(raw, dict):
            for sub_key, sub_raw in raw.items():
                if isinstance(sub_raw, dict):
                    messages.append(f"{source}: unknown table [{key}.{sub_key}] is ignored.")
                else:
                    take(key, sub_key, sub_raw)
        else:
            take("", key, raw)
    return LoadResult(Settings(values, extra), messages)


def _locations(document: tomlkit.TOMLDocument) -> dict[str, list[Any]]:
    """Every table (the document itself for top-level keys) that holds each known option."""
    found: dict[str, list[Any]] = {}
    for key, item in document.items():
        if isinstance(item, dict):
            for sub_key in item:
                if sub_key in OPTIONS_BY_NAME:
                    found.setdefault(sub_key, []).append(item)
        elif key in OPTIONS_BY_NAME:
            found.setdefault(key, []).append(document)
    return found


def update_document(document: tomlkit.TOMLDocument, settings: Settings) -> str:
    """``document`` (the user's file) with ``settings`` applied, everything else as the user wrote it.

    Per place an option appears: a valid value equal to the current one is left untouched (its
    formatting and comments too); an invalid one is left while the option is at its default (the
    user's text is not the app's to drop, and the next load names it again); otherwise the value is
    rewritten, or removed when the option is back at its default. An option set away from its default
    that the file does not hold yet goes into its section's table.
    """
    non_defaults = settings.non_defaults()
    places = _locations(document)
    for opt in OPTIONS:
        current = non_defaults.get(opt.name)
        for table in places.get(opt.name, []):
            raw = table[opt.name]
            plain = raw.unwrap() if hasattr(raw, "unwrap") else raw
            try:
                valid: Value | None = opt.validate(plain)
            except InvalidValueError:
                valid = None
            if current is None:
                if valid is not None:
                    del table[opt.name]
            elif valid is None or valid != current or type(valid) is not type(current) or plain != valid:
                # (plain != valid: an earlier version's spelling, rewritten in today's words)
                table[opt.name] = current
        if current is not None and opt.name not in places:
            name = section_key(opt.section)
            section = document.get(name)
            if not isinstance(section, dict):
                section = tomlkit.table()
                document[name] = section
            section[opt.name] = current
    for table_name, entries in settings.extra.items():  # kept from an earlier file the user replaced
        target: Any = document
        if table_name:
            target = document.get(table_name)
            if not isinstance(target, dict):
                target = tomlkit.table()
                document[table_name] = target
        for key, value in entries.items():
            if key not in target:
                target[key] = value
    for table in [document, *(v for v in document.values() if isinstance(v, dict))]:
        for key in [k for k in table if k in RETIRED_OPTIONS]:
            del table[key]  # an entry earlier versions wrote themselves and nothing reads now
    for name in [k for k, v in document.items() if isinstance(v, tomlkit.items.Table) and not v]:
        if not document[name].trivia.comment and name in {section_key(o.section) for o in OPTIONS}:
            del document[name]  # an empty section the app emptied; the user's own tables stay
    return tomlkit.dumps(document)


def _show(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value) if value else "(empty)"
    return str(value)


def dump(settings: Settings) -> str:
    """TOML text for the non-default values, one table per section, in declaration order."""
    tables: dict[str, dict[str, Value]] = {}
    non_defaults = settings.non_defaults()
    for opt in OPTIONS:
        if opt.name in non_defaults:
            tables.setdefault(section_key(opt.section), {})[opt.name] = non_defaults[opt.name]
    top: dict[str, Value] = {}
    for table, entries in settings.extra.items():
        target = tables.setdefault(table, {}) if table else top
        for key, value in entries.items():
            target.setdefault(key, value)
    lines = ["# localchat settings: only values that differ from the defaults are written."]
    lines += [f"{_key(k)} = {_value(v)}" for k, v in top.items()]
    for table, entries in tables.items():
        if not entries:
            continue
        lines += ["", f"[{_key(table)}]"]
        lines += [f"{_key(k)} = {_value(v)}" for k, v in entries.items()]
    return "\n".join(lines) + "\n"


def _key(key: str) -> str:
    if key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key):
        return key
    return _string(key)


def _value(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)  # repr of a finite float is always valid TOML ("0.7", "1e-05")
    return _string(value)


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _string(text: str) -> str:
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
