"""Every user option, declared once: name, type, default, bounds or choices, description.

The settings dialog is generated from ``OPTIONS``; the TOML file, the services
and the request builder all look options up here by name, so adding an option
means adding one ``Option`` below and nothing else. ``section`` groups options
in the dialog and names the TOML table they are written to.

Option names are flat and unique across sections (``draft_tokens``, not
``speculation.draft_tokens``) so code can say ``settings.draft_tokens``
without knowing where the dialog shows it; code outside this package reads them
through the typed properties of ``settings.OptionReader`` (``settings.draft_tokens``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Literal

from localchat.settings.drafter_kind import DrafterKind

Value = bool | int | float | str
PathKind = Literal["", "file", "folder", "folders"]  # "folders": several, separated by os.pathsep


class InvalidValueError(ValueError):
    """A value does not fit its option; the message is one sentence for the user."""


@dataclass(frozen=True)
class Option:
    """One setting.

    ``type`` is one of bool, int, float, str. ``minimum``/``maximum`` bound numbers
    (inclusive); ``choices`` lists the allowed strings with a label for each.
    ``needs_restart`` means the new value takes effect when the engine next loads
    a model (the UI says so). ``visible`` is False for state the app remembers by
    itself (last model, window geometry), which the dialog does not show.
    ``path_kind`` tells the dialog to offer a file or folder chooser ("folders": each choice is added
    to a list separated by ``os.pathsep``, as in PATH).
    """

    name: str
    type: type[bool] | type[int] | type[float] | type[str]
    default: Value
    label: str
    description: str
    section: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[tuple[str, str], ...] = ()  # (value, label)
    step: float | None = None  # for spin boxes
    needs_restart: bool = False
    visible: bool = True
    path_kind: PathKind = ""
    # Spellings earlier versions stored, read as today's value (old -> new), so their files still load.
    legacy_values: tuple[tuple[str, str], ...] = ()
    secret: bool = False  # the dialog masks it (an API key)

    @property
    def choice_values(self) -> tuple[str, ...]:
        return tuple(value for value, _ in self.choices)

    def validate(self, value: object) -> Value:
        """Return ``value`` converted to this option's type, or raise InvalidValueError.

        Integers are accepted for float options (TOML writes ``1`` for ``1.0``);
        nothing else is converted, so a quoted number in the file is an error
        the user hears about rather than a silent guess.
        """
        checked: Value
        if self.type is bool:
            if not isinstance(value, bool):
                raise InvalidValueError(f"{self.name} must be true or false, not {value!r}")
            checked = value
        elif self.type is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidValueError(f"{self.name} must be a whole number, not {value!r}")
            checked = value
        elif self.type is float:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidValueError(f"{self.name} must be a number, not {value!r}")
            checked = float(value)
            if not math.isfinite(checked):
                raise InvalidValueError(f"{self.name} must be a finite number, not {value!r}")
        else:
            if not isinstance(value, str):
                raise InvalidValueError(f"{self.name} must be text, not {value!r}")
            checked = dict(self.legacy_values).get(value, value)
            if self.choices and checked not in self.choice_values:
                allowed = ", ".join(self.choice_values)
                raise InvalidValueError(f"{self.name} must be one of {allowed}, not {value!r}")
        if isinstance(checked, int | float) and not isinstance(checked, bool):
            if self.minimum is not None and checked < self.minimum:
                raise InvalidValueError(
                    f"{self.name} must be at least {_fmt(self.minimum)}, not {_fmt(checked)}"
                )
            if self.maximum is not None and checked > self.maximum:
                raise InvalidValueError(
                    f"{self.name} must be at most {_fmt(self.maximum)}, not {_fmt(checked)}"
                )
        return checked


def _fmt(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


# The draft length's bounds and default, read from here by the engine, the catalog, the CLI and
# the benchmark dialog (the settings layer is the lowest, so every layer may import it).
DRAFT_TOKENS_MIN = 1
DRAFT_TOKENS_MAX = 16
DRAFT_TOKENS_DEFAULT = 4
# The longest reply, in tokens; a chat may ask for its own (its "Chat settings").
REPLY_TOKENS_MIN = 16
REPLY_TOKENS_MAX = 32768
REPLY_TOKENS_DEFAULT = 1024

SPECULATION = "Speculation"
SAMPLING = "Sampling"
ENGINE = "Engine"
WORKERS = "Workers"
SERVER = "Server"
TOOLS = "Tools"
APPEARANCE = "Appearance"
STATE = "State"

OPTIONS: tuple[Option, ...] = (
    # Speculation
    Option(
        "speculation",
        bool,
        True,
        "Speculative decoding",
        "Let a small drafter propose tokens that the model checks in one pass: usually faster, and "
        "the reply keeps the model's own choice of words.",
        SPECULATION,
    ),
    Option(
        "drafter",
        str,
        DrafterKind.AUTO.value,
        "Drafter",
        "Where draft tokens come from: automatic (the paired draft model, or n-gram lookup "
        "when the chat repeats itself; lookup alone where the draft model costs more than it "
        "saves on this computer), a draft model, n-gram lookup only, or none.",
        SPECULATION,
        choices=(
            (DrafterKind.AUTO.value, "Automatic"),
            (DrafterKind.MODEL.value, "Draft model"),
            (DrafterKind.NGRAM.value, "N-gram lookup (no model)"),
            (DrafterKind.NONE.value, "None"),
        ),
        needs_restart=True,
        legacy_values=(("model", DrafterKind.MODEL.value),),  # before 0.2 the setting said "model"
    ),
    Option(
        "draft_model_path",
        str,
        "",
        "Draft model file",
        "A specific draft model (GGUF) to use; empty means the drafter paired with the model in the catalog.",
        SPECULATION,
        needs_restart=True,
        path_kind="file",
    ),
    Option(
        "draft_tokens",
        int,
        DRAFT_TOKENS_DEFAULT,
        "Draft tokens",
        "How many tokens the drafter proposes per step. With adaptive speculation the draft model "
        "decides token by token instead, and this is the first length for n-gram lookup.",
        SPECULATION,
        minimum=DRAFT_TOKENS_MIN,
        maximum=DRAFT_TOKENS_MAX,
        step=1,
    ),
    Option(
        "adaptive",
        bool,
        True,
        "Adaptive speculation",
        "Draft each token only while it is likely enough to be accepted to pay for its cost "
        "(measured on this computer), and pause speculation while it is slower than plain decoding.",
        SPECULATION,
    ),
    Option(
        "exact_speculation",
        bool,
        False,
        "Identical text with quantized models",
        "On many processors llama.cpp rearranges a quantized model's weights for speed; a pass over "
        "several tokens then rounds differently from a pass over one, and where two words are almost "
        "equally likely a reply with speculation can take the other. This keeps the weights as "
        "stored: replies are identical with and without speculation, and every reply is slower "
        "(by a quarter with a Q4_K_M model on one CPU), though the model takes less memory. It also "
        "reads a conversation taken up again as if from scratch, so a saved state never changes a "
        "reply (any model): each turn reads the previous reply again. Takes effect when a model is "
        "next loaded.",
        SPECULATION,
        needs_restart=True,
    ),
    # Sampling
    Option(
        "temperature",
        float,
        0.7,
        "Temperature",
        "Randomness of the reply; 0 always picks the most likely token.",
        SAMPLING,
        minimum=0.0,
        maximum=2.0,
        step=0.05,
    ),
    Option(
        "max_reply_tokens",
        int,
        REPLY_TOKENS_DEFAULT,
        "Reply length",
        "The most tokens one reply may have; a reply that reaches it ends with \"Cut off at the "
        "length limit\". A chat can set its own in Chat → Chat settings.",
        SAMPLING,
        minimum=REPLY_TOKENS_MIN,
        maximum=REPLY_TOKENS_MAX,
        step=64,
    ),
    Option(
        "top_k",
        int,
        40,
        "Top-k",
        "Sample only from the k most likely tokens; 0 turns this off.",
        SAMPLING,
        minimum=0,
        maximum=1000,
        step=1,
    ),
    Option(
        "top_p",
        float,
        0.95,
        "Top-p",
        "Sample only from the most likely tokens whose probabilities add up to p; 1 turns this off.",
        SAMPLING,
        minimum=0.0,
        maximum=1.0,
        step=0.01,
    ),
    Option(
        "min_p",
        float,
        0.05,
        "Min-p",
        "Leave out tokens less likely than this share of the most likely one; 0 turns this off.",
        SAMPLING,
        minimum=0.0,
        maximum=1.0,
        step=0.01,
    ),
    Option(
        "repeat_penalty",
        float,
        1.0,
        "Repeat penalty",
        "Make recently used tokens less likely; 1 turns this off.",
        SAMPLING,
        minimum=1.0,
        maximum=2.0,
        step=0.01,
    ),
    # Engine
    Option(
        "context_length",
        int,
        4096,
        "Context length",
        "How many tokens of the conversation the model sees; longer uses more memory.",
        ENGINE,
        minimum=512,
        maximum=131072,
        step=512,
        needs_restart=True,
    ),
    Option(
        "threads",
        int,
        0,
        "Threads",
        "CPU threads for inference; 0 uses one per physical core.",
        ENGINE,
        minimum=0,
        maximum=256,
        step=1,
        needs_restart=True,
    ),
    Option(
        "gpu_layers",
        int,
        -1,
        "GPU layers",
        "Model layers to run on the GPU when there is one; -1 offloads all of them, 0 none.",
        ENGINE,
        minimum=-1,
        maximum=1000,
        step=1,
        needs_restart=True,
    ),
    Option(
        "kv_cache_memory_mb",
        int,
        1000,
        "Kept conversations in memory (MB)",
        "Memory that keeps what the model has read of recent conversations, so switching back to "
        "one answers at once instead of reading its history again; 0 turns this off.",
        ENGINE,
        minimum=0,
        maximum=1_000_000,
        step=100,
        needs_restart=True,
    ),
    Option(
        "kv_cache_disk_mb",
        int,
        2000,
        "Kept conversations on disk (MB)",
        "Space in the cache folder that keeps what the model has read of the last conversations, "
        "so continuing one after a restart answers at once; 0 turns this off.",
        ENGINE,
        minimum=0,
        maximum=1_000_000,
        step=100,
        needs_restart=True,
    ),
    Option(
        "models_folder",
        str,
        "",
        "Models folder",
        "Where downloaded and imported models are kept; empty means the app's data folder.",
        ENGINE,
        path_kind="folder",
    ),
    Option(
        "extra_model_folders",
        str,
        "",
        "Other model folders",
        "Folders where other apps keep GGUF models, such as LM Studio's (~/.lmstudio/models), "
        f"separated by {os.pathsep!r}. localchat lists and loads the models there where they are; "
        "it never copies, moves or deletes anything in them.",
        ENGINE,
        path_kind="folders",
    ),
    # Workers
    Option(
        "rpc_workers",
        str,
        "",
        "Workers",
        "Other computers running \"localchat worker\" that share the model with this one, as "
        "host:port separated by commas (e.g. 192.168.1.20:50052). The drafter stays on this computer. "
        "The connection is not encrypted or authenticated: use only on a network you trust.",
        WORKERS,
        needs_restart=True,
    ),
    # Server
    Option(
        "server_enabled",
        bool,
        False,
        "Serve the loaded model to other apps (OpenAI, Anthropic and Ollama APIs)",
        "IDE assistants and agents (Claude Code, Codex, Continue, Cline, Zed, aider, Open WebUI) use the "
        "model loaded here through http://127.0.0.1:PORT (OpenAI's and Anthropic's APIs under /v1, "
        "Ollama's under /api), with speculation. They share this window's engine and "
        "model (no second copy in memory); their requests and your replies take turns. Only programs "
        "on this computer can reach it.",
        SERVER,
    ),
    Option(
        "server_port",
        int,
        11435,
        "Port",
        "The TCP port of the API (11435 by default, next to Ollama's 11434; LM Studio uses 1234, "
        "Jan 1337, llama-server 8080).",
        SERVER,
        minimum=1024,
        maximum=65535,
    ),
    Option(
        "server_api_key",
        str,
        "",
        "API key",
        "If set, clients must send it (Authorization: Bearer KEY, the \"API key\" field of most "
        "clients). Leave empty to accept every program on this computer.",
        SERVER,
        secret=True,
    ),
    Option(
        "server_loads_models",
        bool,
        True,
        "Let API requests load other models",
        "A request that names another model of your folders (GET /v1/models lists them) loads it in "
        "place of the one loaded here, after the reply being written, as LM Studio and Ollama do; the "
        "window says so and follows. Off: such a request gets an error that names this setting.",
        SERVER,
    ),
    Option(
        "server_allowed_origins",
        str,
        "",
        "Allowed web pages",
        "Web pages may not use the API: a page you visit could otherwise make the model write, fill "
        "the queue, or start a tool. To let a browser app in, list its origin here (e.g. "
        "http://localhost:3000), separated by commas; * allows every page.",
        SERVER,
    ),
    # Tools (the tool servers themselves are listed in mcp.json, on the same page)
    Option(
        "tools_in_chats",
        bool,
        True,
        "Offer tools in chats",
        "Send the tools of the switched-on tool servers to the model with each message. A chat can "
        "turn them off for itself with the Tools button under the message box.",
        TOOLS,
    ),
    Option(
        "tool_rounds_max",
        int,
        5,
        "Tool rounds per message",
        "The most times one message may go to the tools and back to the model; a request for tools "
        "after that is not run, and the reply says so.",
        TOOLS,
        minimum=1,
        maximum=50,
        step=1,
    ),
    Option(
        "tool_timeout_s",
        int,
        60,
        "Tool time-out (seconds)",
        "How long a tool may take to answer (and a tool server to start) before it is stopped and "
        "the reply goes on without it.",
        TOOLS,
        minimum=1,
        maximum=3600,
        step=5,
    ),
    Option(
        "tools_for_untrained_models",
        bool,
        False,
        "Offer tools to models not trained for them",
        "A model whose chat template has no tools gets them described in its system prompt instead; "
        "small models often call them wrongly, so tools are off for such models unless this is on.",
        TOOLS,
    ),
    # Appearance
    Option(
        "colour_accepted_tokens",
        bool,
        False,
        "Colour accepted draft tokens",
        "Show the tokens that came from accepted drafts in a different colour.",
        APPEARANCE,
    ),
    Option(
        "theme",
        str,
        "system",
        "Theme",
        "Follow the system's light or dark appearance, or always use one of them.",
        APPEARANCE,
        choices=(("system", "Follow the system"), ("light", "Light"), ("dark", "Dark")),
    ),
    Option(
        "remember_window",
        bool,
        True,
        "Remember the window's size and position",
        "Open the window where and as large as it was when the app was last closed.",
        APPEARANCE,
    ),
    # Remembered by the app, not shown in the dialog
    Option(
        "last_model_path",
        str,
        "",
        "Last model",
        "The model loaded last time, loaded again at start.",
        STATE,
        visible=False,
        path_kind="file",
    ),
    Option(
        "last_draft_path",
        str,
        "",
        "Last draft model",
        "The draft model loaded last time with the last model.",
        STATE,
        visible=False,
        path_kind="file",
    ),
    Option(
        "window_geometry",
        str,
        "",
        "Window geometry",
        "The main window's size and position (Qt's saveGeometry, base64).",
        STATE,
        visible=False,
    ),
)

OPTIONS_BY_NAME: dict[str, Option] = {option.name: option for option in OPTIONS}

# Options earlier versions declared and this one dropped: read silently and not written back.
RETIRED_OPTIONS = frozenset({"window_state"})

SECTIONS: tuple[str, ...] = tuple(dict.fromkeys(option.section for option in OPTIONS))


def option(name: str) -> Option:
    """The option called ``name``; KeyError names it when there is none."""
    try:
        return OPTIONS_BY_NAME[name]
    except KeyError:
        raise KeyError(f"no setting called {name!r}") from None


def section_key(section: str) -> str:
    """The TOML table name for a section ("Speculation" -> "speculation")."""
    return section.lower().replace(" ", "_")
