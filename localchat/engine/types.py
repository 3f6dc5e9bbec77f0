"""Data that crosses layer and process boundaries: frozen, picklable, no native handles.

Everything here is plain Python so the host process can send it over a pipe and
the UI can read it without importing llama.cpp.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Literal, get_args

from localchat.engine.stats import GenerationStats
from localchat.settings.drafter_kind import DrafterKind as DrafterKind  # re-exported: crosses processes
from localchat.settings.options import DRAFT_TOKENS_DEFAULT, DRAFT_TOKENS_MAX, DRAFT_TOKENS_MIN


class FinishReason(enum.Enum):
    STOP = "stop"  # end-of-generation token or a stop string
    LENGTH = "length"  # max_tokens reached
    CONTEXT = "context"  # the context window is full
    CANCELLED = "cancelled"
    TOOL_CALLS = "tool_calls"  # the reply ends in one or more tool calls


@dataclass(frozen=True)
class ToolCall:
    """One call the model made: ``arguments`` is the JSON text of an object."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatMessage:
    role: str  # "system" | "user" | "assistant" | "tool"
    content: str
    tool_calls: tuple[ToolCall, ...] = ()  # assistant: the calls it made
    tool_call_id: str = ""  # tool: the call this message is the result of
    name: str = ""  # tool: the function's name
    reasoning: str = ""  # assistant: its thinking, kept apart from ``content``


@dataclass(frozen=True)
class Tool:
    """A function the model may call; ``parameters`` is the JSON text of its JSON Schema."""

    name: str
    description: str = ""
    parameters: str = '{"type": "object", "properties": {}}'


class ToolChoiceMode(enum.Enum):
    AUTO = "auto"  # the model decides; the call's grammar starts at its trigger
    NONE = "none"  # no call (the tools are still described to the model)
    REQUIRED = "required"  # at least one call: the whole reply is constrained
    FUNCTION = "function"  # a call of ``ToolChoice.name``


@dataclass(frozen=True)
class ToolChoice:
    mode: ToolChoiceMode = ToolChoiceMode.AUTO
    name: str = ""  # FUNCTION: the tool to call


class ConstraintKind(enum.Enum):
    JSON_SCHEMA = "json_schema"  # ``text`` is a JSON Schema
    JSON_OBJECT = "json_object"  # any JSON object
    LARK = "lark"  # ``text`` is a Lark grammar (llguidance's dialect)
    GBNF = "gbnf"  # ``text`` is a llama.cpp GBNF grammar
    REGEX = "regex"  # ``text`` is a regular expression


@dataclass(frozen=True)
class OutputConstraint:
    """Structured output: what the whole reply must match (engine/grammar.py compiles it).

    With a ``trigger`` (LARK only) the constraint is lazy: the reply is free text until the trigger
    appears, and ``text``'s start rule matches what follows the trigger (the trigger excluded);
    a reply that never writes the trigger is free text.
    """

    kind: ConstraintKind
    text: str = ""
    strict: bool = True  # json_schema: no properties beyond the schema's
    trigger: str = ""  # lark: the grammar starts after this text (tool calls with tool_choice "auto")


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings; temperature 0 means greedy."""

    temperature: float = 0.0
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    seed: int | None = None

    def __post_init__(self) -> None:
        # Checked here, as SpeculationConfig checks its own, so the command line, the API and the app
        # all refuse what the sampler cannot use: a NaN compares false with every bound and passed
        # through, and a repeat penalty of 0 divides the logits by zero.
        def finite_in(name: str, value: float, lo: float, hi: float = math.inf) -> None:
            if not (math.isfinite(value) and lo <= value <= hi):
                bound = f"at least {lo:g}" if hi == math.inf else f"between {lo:g} and {hi:g}"
                raise ValueError(f"{name} must be a finite number {bound}, got {value}")

        finite_in("temperature", self.temperature, 0.0)
        finite_in("top_p", self.top_p, 0.0, 1.0)
        finite_in("min_p", self.min_p, 0.0, 1.0)
        if not (math.isfinite(self.repeat_penalty) and self.repeat_penalty > 0.0):
            raise ValueError(
                f"repeat_penalty must be a finite number above 0 (1 turns it off), got {self.repeat_penalty}"
            )
        if self.top_k < 0:
            raise ValueError(f"top_k must be at least 0 (0 turns it off), got {self.top_k}")
        if self.repeat_last_n < 0:
            raise ValueError(f"repeat_last_n must be at least 0, got {self.repeat_last_n}")

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


# Which clear losses in a reply's first steps pause adaptive speculation at once
# (``AdaptivePolicy.early_pause``).
EarlyPause = Literal["skips", "cost", "always", "never"]


@dataclass(frozen=True)
class AdaptiveVariant:
    """Which version of the adaptive policy drafts: the default (every field at its default), or one
    kept to measure side by side with it (``localchat bench --modes adaptive-nofloor`` and the other
    ``bench.modes.ADAPTIVE_VARIANTS``). The policy's own settings are mapped by
    ``AdaptivePolicy.for_variant`` (engine/adaptive.py); ``learnt_curve`` is the engine's choice of
    drafter (``Engine._choose_drafter``)."""

    # Never draft shorter than the fixed length the conversation's own verdicts prove fastest
    # (``AdaptivePolicy.floor``). False: the policy before issue 27 (``adaptive-nofloor``).
    floor: bool = True
    # The policy as an earlier release had it: no probe ending a pause, no short first pause, no
    # catch-up batch charged to a step (``adaptive-previous``).
    previous: bool = False
    # Opt-in: a pause that listens to the target (``AdaptivePolicy.listen``; ``adaptive-listen``). Not
    # the default: measured no better on every cost curve.
    listen: bool = False
    # Skipped looks end only when the average of recent looks pays, not at a look that pays, as
    # before (``AdaptivePolicy.sticky_skip``; ``adaptive-stickyskip``).
    sticky_skip: bool = False
    # Which clear losses in a reply's first steps pause speculation at once (``AdaptivePolicy.
    # early_pause``): "skips" (until the measured costs show that the drafter can pay well; past that,
    # such a loss is the text and skipped looks sit it out, until a look still loses after the longest
    # skips), "cost" (skipped looks sit it out to the warm-up's end; ``adaptive-earlycost``), "always"
    # (pause at once wherever; ``adaptive-earlyalways``), "never" (``adaptive-earlynever``).
    early: EarlyPause = "skips"
    # Whether the draft model gives way to lookup alone (where its best case is under
    # ``adaptive.DRAFT_MODEL_MIN_BEST``) on a cost curve learnt in the replies too, once known
    # (``CostModel.curve_known``), or only on one calibrated at load or saved, as before
    # (``adaptive-calibratedonly``).
    learnt_curve: bool = True
    # A pause after a measured loss ends by looking back on what drafting would have got over its last
    # tokens, and probes only where that pays (``AdaptivePolicy.look_back``); False: it always ends
    # with a probe, as before (``adaptive-probeonly``).
    look_back: bool = True
    # The tokens after a draft's first are priced with a calibration offset of their own, learned from
    # their verdicts (``ConversationCalibration.later``; ``adaptive-later``).
    later: bool = False
    # A reply that drafts by lookup alone (the draft model pays little on this machine) hands over to
    # the draft model within the reply where a look back over its first tokens says drafting them
    # would have paid (``adaptive.SwitchingPolicy``); False: lookup alone for the whole reply, as
    # before (``adaptive-lookuponly``).
    model_look: bool = True
    # While the draft model's policy pauses, lookup alone drafts instead of plain steps
    # (``adaptive.SwitchingPolicy``; ``adaptive-pauselookup``).
    lookup_in_pause: bool = False
    # A pause's look back only where the target was sure of the pause's tokens (``AdaptivePolicy.
    # sure_look``); False: every pause ends with its look, as before (``adaptive-alwayslook``).
    sure_look: bool = True
    # The choice between the draft model and lookup alone goes on from the one a saved profile kept
    # (``adaptive.DrafterChoice``); False: each process chooses afresh, as before (``adaptive-rechoose``).
    keep_choice: bool = True
    # A lookup draft made beside the draft model (``draft_sources.CombinedDrafter``) is cut where its
    # verification costs more than its tokens are likely to earn (``CostStopRule.plan_lookup``); False:
    # kept whole at lookup's own length, as before (``adaptive-freelookup``).
    plan_lookup: bool = True
    # A choice of lookup alone made on a first estimate of the draft model's best case (its surest tokens
    # not yet judged often enough) is made afresh at the line by the next reply, not held to the higher
    # line of the way back (``adaptive.DrafterChoice``); False: held as any choice, as before
    # (``adaptive-lockfirst``).
    provisional_choice: bool = True

    def __post_init__(self) -> None:
        if self.early not in get_args(EarlyPause):
            allowed = ", ".join(get_args(EarlyPause))
            raise ValueError(f"the early pause rule must be one of {allowed}, not {self.early!r}")


@dataclass(frozen=True)
class SpeculationConfig:
    """How to speculate for one request. ``enabled`` is the user's toggle and always wins."""

    enabled: bool = True
    drafter: DrafterKind = DrafterKind.AUTO
    draft_tokens: int = DRAFT_TOKENS_DEFAULT  # starting (or fixed) draft length
    adaptive: bool = True  # adapt the draft length and pause speculation when it loses
    p_min: float = 0.5  # the draft model stops drafting when its top probability falls below this
    # The user has just turned speculation back on: a conversation that paused it tries again now.
    resume: bool = False
    # Under an output constraint: the tokens the grammar forces (a JSON key after its quote) enter
    # the next verification batch without being drafted or chosen, with speculation on or off.
    fast_forward: bool = True
    # Adaptive only: the policy's version, the default or one to measure beside it (``AdaptiveVariant``).
    adaptive_variant: AdaptiveVariant = AdaptiveVariant()

    def __post_init__(self) -> None:
        if not DRAFT_TOKENS_MIN <= self.draft_tokens <= DRAFT_TOKENS_MAX:
            raise ValueError(
                f"draft_tokens must be between {DRAFT_TOKENS_MIN} and {DRAFT_TOKENS_MAX}, "
                f"got {self.draft_tokens}"
            )
        if not 0.0 <= self.p_min < 1.0:
            raise ValueError(f"p_min must be in [0, 1), got {self.p_min}")


@dataclass(frozen=True)
class GenerationRequest:
    """One reply to produce. Either ``messages`` (chat) or ``prompt`` (raw text) is set."""

    messages: tuple[ChatMessage, ...] = ()
    prompt: str | None = None
    max_tokens: int = 512
    sampling: SamplingParams = field(default_factory=SamplingParams)
    speculation: SpeculationConfig = field(default_factory=SpeculationConfig)
    stop: tuple[str, ...] = ()
    # Adaptive speculation learns per conversation: requests of one chat share this key.
    session: str = ""
    tools: tuple[Tool, ...] = ()
    tool_choice: ToolChoice = field(default_factory=ToolChoice)
    parallel_tool_calls: bool = True
    constraint: OutputConstraint | None = None
    # A thinking model's <think> block goes to ``reasoning`` instead of the text (always so with
    # tools). False keeps the window's replies as they were: the thinking is part of the text.
    separate_reasoning: bool = False
    # Only count the prompt: the result has no text, and ``stats.prompt_tokens`` is the length of the
    # whole rendered prompt (tools included, nothing dropped to fit), read by no model pass.
    count_only: bool = False

    def __post_init__(self) -> None:
        if self.max_tokens < 1:  # 0 still generated one token
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}")


@dataclass(frozen=True)
class SpeculationState:
    """What the status bar says about speculation: whether it runs, with what, and why not."""

    active: bool
    drafter: str  # "Qwen2.5-Coder-0.5B", "n-gram", "off"
    reason: str = ""  # why it is off or paused, in words
    draft_tokens: int = 0  # most tokens the next draft may hold
    paused: bool = False  # adaptive auto-off in force
    speedup: float = 0.0  # when paused: the measured speed against plain decoding that paused it (0: unknown)


@dataclass(frozen=True)
class TokenEvent:
    """A batch of new text, streamed while a reply is generated."""

    text: str
    n_tokens: int
    drafted_accepted: int  # how many of these tokens were accepted draft tokens
    stats: GenerationStats
    speculation: SpeculationState
    # Which characters of ``text`` came from accepted draft tokens (see engine.textruns).
    drafted_runs: tuple[int, ...] = ()
    # While the prompt is read (before any text): (tokens read, tokens to read, seconds so far).
    prompt_progress: tuple[int, int, float] | None = None
    reasoning: str = ""  # new thinking text (``text`` holds only the reply's content)
    tool_deltas: tuple[ToolCallDelta, ...] = ()  # new parts of the reply's tool calls


@dataclass(frozen=True)
class ToolCallDelta:
    """A streamed piece of tool call ``index``: its id and name once, then argument fragments."""

    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass(frozen=True)
class GenerationResult:
    text: str
    finish_reason: FinishReason
    stats: GenerationStats
    speculation: SpeculationState
    token_ids: tuple[int, ...] = ()
    dropped_messages: int = 0  # oldest chat messages left out to fit the context
    notice: str = ""  # a sentence for the user, e.g. about dropped messages
    drafted_runs: tuple[int, ...] = ()  # which characters of ``text`` came from accepted drafts
    tool_calls: tuple[ToolCall, ...] = ()  # finish_reason TOOL_CALLS: the calls, in order
    reasoning: str = ""  # the model's thinking, apart from ``text``
    stop_sequence: str = ""  # the request's stop string that ended the reply ("": none did)


@dataclass(frozen=True)
class ModelInfo:
    path: str
    name: str
    architecture: str
    n_params: int
    size_bytes: int
    n_ctx_train: int
    n_vocab: int
    has_chat_template: bool
    # Fill-in-the-middle token texts (prefix, suffix, middle) for code completion; None without them.
    fim: tuple[str, str, str] | None = None
    # Tool calls (engine/tooluse): the format the model's calls are read in ("hermes", "llama3",
    # "mistral", "granite", or "generic" where the template does not render tools and the tools are
    # described in a system message); ``tool_use``: the template renders tools itself (the model was
    # trained for them). Every chat model takes tools; these say how well it knows them.
    tool_format: str = "generic"
    tool_use: bool = False
    reasoning: bool = False  # the model thinks in <think> blocks before answering


@dataclass(frozen=True)
class MeasuredCosts:
    """What the engine measured of the loaded pair on this computer (its calibration at load, or the
    pair's saved profile): seconds of one verification pass by batch size, and of the drafter per
    token. The app predicts other targets' speeds from it (catalog/starter_choice.py)."""

    verify_s: tuple[tuple[int, float], ...]
    draft_token_s: float | None
    accelerator_bytes: int | None = None  # memory of the GPUs the target runs on (None: on the CPU)


@dataclass(frozen=True)
class EngineInfo:
    """What was loaded, on what, and the state of speculation."""

    backend: str  # "CPU", "CUDA", "Metal", "Vulkan"
    target: ModelInfo
    draft: ModelInfo | None
    n_ctx: int
    n_threads: int
    gpu_layers: int
    speculation: SpeculationState
    placement: str = "local"  # where the target runs: "local", "local + 2 workers", "1 worker"
    measured: MeasuredCosts | None = None  # None until the pair's costs are known (see MeasuredCosts)


@dataclass(frozen=True)
class EngineConfig:
    """What to load. ``gpu_layers=-1`` offloads every layer when llama.cpp has a GPU backend."""

    target_path: str
    draft_path: str | None = None
    n_ctx: int = 4096
    n_threads: int | None = None  # None: physical cores
    gpu_layers: int = -1
    n_batch: int = 512
    # RPC workers ("host:port") the target's layers spread over; the drafter stays local.
    rpc_servers: tuple[str, ...] = ()
    # Shares of the target: this machine first, then each worker (empty: by free memory).
    tensor_split: tuple[float, ...] = ()
    # Saved KV caches (engine/state_cache.py), so a conversation taken up again is not read again:
    # bytes of recent prompts' states kept in memory (0: none), and a folder for the last
    # conversations' states across restarts ("": none; the app's is folders.kv_state_dir()).
    state_memory_bytes: int = 1_000_000_000
    state_folder: str = ""
    state_disk_bytes: int = 2_000_000_000
    # Start adaptive speculation from this pair's saved profile on this machine, and save what was
    # measured at close (engine/profile.py). False: neither read nor write it (``bench --fresh``).
    use_profile: bool = True
    # Without a profile, time verification and drafter passes at load (about six target passes),
    # so the first reply drafts the right length; False: learn it while generating.
    calibrate: bool = True
    # Identical text under speculation, also for quantized weights on a CPU: llama.cpp rearranges
    # those weights for faster kernels (its "extra buffers"), whose passes over one token and over
    # several round differently, so at a near-tie speculation can pick the other word. True keeps
    # the weights as stored: one kernel for every pass, slower (docs/BENCHMARKS.md, "Identical text").
    # It also reads prompts as from scratch (draft_sources.read_prompt): a conversation taken up
    # again, from its context or a saved state, gets the reply its history read again would get,
    # and reads its last reply again (docs/SPECULATION.md, "Identical text").
    exact: bool = False
