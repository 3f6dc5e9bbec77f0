"""Per-model presets: a system prompt, sampling and context length kept for one model, in presets.toml.

A preset is keyed by the model's id as the API names it (``catalog.names.served_id``: the catalog's
id whichever quantization is loaded, else the file name without ``.gguf``), so a model keeps its
preset when another quantization of it is downloaded. It holds values of a few options
(PRESET_OPTIONS, validated by their declaration in options.py) and a system prompt; what it does not
hold comes from the app's settings. ``PresetReader`` is the overlay the engine's request and load are
built from: the preset's value where it has one, the setting's elsewhere.

The file, beside settings.toml::

    [models."qwen2.5-coder-1.5b-instruct"]
    system_prompt = "Answer with code first."
    temperature = 0.2
    context_length = 8192

Reading never fails: a bad value is a sentence and is left out of that preset (the app's setting is
used), an unknown key a sentence; a file that is not valid TOML is moved aside to
``presets.toml.bad`` (``-2``, ``-3``... beside an earlier copy) with a sentence, and the app starts
with no presets. Saving edits the file in place through tomlkit (comments, other models' tables and
their wrong values stay as written) and replaces it atomically.
"""

from __future__ import annotations

import logging
import os
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import tomlkit
from tomlkit.exceptions import TOMLKitError

from localchat.settings.options import OPTIONS_BY_NAME, InvalidValueError, Value
from localchat.settings.settings import OptionReader

log = logging.getLogger(__name__)

FILE_NAME = "presets.toml"
TABLE = "models"
SYSTEM_PROMPT = "system_prompt"
# The options a preset may hold, in the order its summary names them.
PRESET_OPTIONS = (
    "temperature", "top_p", "top_k", "min_p", "repeat_penalty", "max_reply_tokens", "context_length",
)
_HEADER = ("# Per-model presets of localchat: applied when the model loads (Models > Save settings as this\n"
           "# model's preset). Keys: system_prompt and " + ", ".join(PRESET_OPTIONS) + ".\n")


@dataclass(frozen=True)
class ModelPreset:
    """One model's preset: option values (validated) and a system prompt ("" when it has none)."""

    values: Mapping[str, Value] = field(default_factory=lambda: MappingProxyType({}))
    system_prompt: str = ""

    def __post_init__(self) -> None:
        checked = {}
        for name, value in self.values.items():
            if name not in PRESET_OPTIONS:
                raise InvalidValueError(f"{name} is not a setting a model's preset can hold")
            checked[name] = OPTIONS_BY_NAME[name].validate(value)
        object.__setattr__(self, "values", MappingProxyType(checked))

    @property
    def empty(self) -> bool:
        return not self.values and not self.system_prompt.strip()

    def summary(self) -> str:
        """What the preset sets, in words ("temperature 0.2, context 8,192 tokens, a system prompt")."""
        words = []
        for name in PRESET_OPTIONS:
            if name in self.values:
                value = self.values[name]
                label = OPTIONS_BY_NAME[name].label.lower()
                words.append(f"{label} {value:,}" if isinstance(value, int) else f"{label} {value:g}"
                             if isinstance(value, float) else f"{label} {value}")
        if self.system_prompt.strip():
            words.append("a system prompt")
        return ", ".join(words) if words else "nothing"


class PresetReader(OptionReader):
    """The settings as a model with ``preset`` sees them: the preset's values over ``base``'s."""

    def __init__(self, base: OptionReader, preset: ModelPreset | None) -> None:
        self._base = base
        self._preset = preset

    def get(self, name: str) -> Value:
        if self._preset is not None and name in self._preset.values:
            return self._preset.values[name]
        return self._base.get(name)


@dataclass
class PresetsLoad:
    presets: dict[str, ModelPreset]
    messages: list[str] = field(default_factory=list)  # sentences for the user, possibly empty


class PresetsFile:
    """presets.toml in ``config_dir`` (the folder of settings.toml)."""

    def __init__(self, config_dir: Path | str) -> None:
        self.dir = Path(config_dir)
        self.path = self.dir / FILE_NAME
        self.bad_path: Path | None = None  # where a broken file was set aside, once it was

    def load(self) -> PresetsLoad:
        """Every model's preset; a missing file is none, with no message."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return PresetsLoad({})
        except OSError as exc:
            msg = f"The presets file {self.path} could not be read ({exc.strerror}); no model presets apply."
            log.warning(msg)
            return PresetsLoad({}, [msg])
        try:
            document = tomllib.loads(data.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            return PresetsLoad({}, [self._set_aside(exc)])
        result = parse_presets(document, FILE_NAME)
        for message in result.messages:
            log.warning(message)
        return result

    def save(self, model_id: str, preset: ModelPreset | None) -> None:
        """Write ``model_id``'s preset (None or an empty one: remove it), keeping the rest of the file.
        OSError when the file cannot be written (the caller says so)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        document = self._current_document()
        models = document.get(TABLE)
        if not isinstance(models, dict):
            models = tomlkit.table(is_super_table=True)
            document[TABLE] = models
        if preset is None or preset.empty:
            models.pop(model_id, None)
        else:
            table = tomlkit.table()
            if preset.system_prompt.strip():
                table[SYSTEM_PROMPT] = preset.system_prompt
            for name in PRESET_OPTIONS:
                if name in preset.values:
                    table[name] = preset.values[name]
            models[model_id] = table
        fd, tmp = tempfile.mkstemp(prefix=".presets-", suffix=".toml", dir=self.dir)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(tomlkit.dumps(document))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _current_document(self) -> tomlkit.TOMLDocument:
        try:
            return tomlkit.parse(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            pass
        except (OSError, UnicodeDecodeError, TOMLKitError) as exc:  # broken since it was read
            self._set_aside(exc)
        return tomlkit.parse(_HEADER)

    def _set_aside(self, exc: Exception) -> str:
        reason = "it is not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else str(exc)
        bad = self.dir / (FILE_NAME + ".bad")
        n = 2
        while bad.exists():
            bad = self.dir / f"{FILE_NAME}.bad-{n}"
            n += 1
        try:
            os.replace(self.path, bad)
        except OSError as move_exc:
            msg = (f"The presets file {self.path} is not valid TOML ({reason}) and could not be moved "
                   f"aside ({move_exc.strerror}); no model presets apply.")
        else:
            self.bad_path = bad
            msg = (f"The presets file {self.path} is not valid TOML ({reason}); it was saved as {bad.name} "
                   "and no model presets apply.")
        log.warning(msg)
        return msg


def parse_presets(document: Mapping[str, object], source: str = FILE_NAME) -> PresetsLoad:
    """The presets of a parsed presets.toml, with a sentence for each value left out."""
    presets: dict[str, ModelPreset] = {}
    messages: list[str] = []
    models = document.get(TABLE, {})
    if not isinstance(models, dict):
        return PresetsLoad({}, [f"{source}: [{TABLE}] is not a table of models; no model presets apply."])
    for key in document:
        if key != TABLE:
            messages.append(f"{source}: {key} is not a model's preset (those are [{TABLE}.\"<id>\"]); "
                            "ignored.")
    for model_id, table in models.items():
        if not isinstance(table, dict):
            messages.append(f"{source}: [{TABLE}] {model_id} is not a table; ignored.")
            continue
        values: dict[str, Value] = {}
        prompt = ""
        for name, raw in table.items():
            where = f"[{TABLE}.\"{model_id}\"] {name}"
            if name == SYSTEM_PROMPT:
                if isinstance(raw, str):
                    prompt = raw
                else:
                    messages.append(f"{source}: {where} must be text; the chat's own system prompt is used.")
            elif name in PRESET_OPTIONS:
                try:
                    values[name] = OPTIONS_BY_NAME[name].validate(raw)
                except InvalidValueError as exc:
                    messages.append(f"{source}: {where}: {exc}; the app's setting is used.")
            else:
                messages.append(f"{source}: {where} is not something a preset holds; ignored.")
        presets[str(model_id)] = ModelPreset(values, prompt)
    return PresetsLoad(presets, messages)
