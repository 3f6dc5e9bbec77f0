"""Thin, typed wrappers over llama.cpp's C API (through llama-cpp-python's ctypes bindings).

The engine owns its batches and reads logits only for the positions it asks
for: no ``logits_all``, no n_ctx x n_vocab buffers (llama-cpp-python's built-in
draft path keeps one of those, about 20 GB for a Qwen vocabulary at 32k).
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import psutil

from localchat.catalog import integrity
from localchat.engine import devices
from localchat.engine.errors import GenerationError, ModelLoadError
from localchat.engine.placement import Placement

log = logging.getLogger("localchat.engine.llama")
# llama.cpp's warnings and errors go to the engine process's log file when it has one; never to a
# terminal by way of logging's last-resort handler (the CLI prints its own sentence).
log.addHandler(logging.NullHandler())

GGUF_MAGIC = b"GGUF"

_init_lock = threading.Lock()
_initialised = False
_recent_log: deque[str] = deque(maxlen=40)
_log_callback: Any = None


def _llama() -> Any:
    import llama_cpp

    return llama_cpp


def init_backend() -> None:
    """Initialise llama.cpp once per process and route its log into Python logging."""
    global _initialised, _log_callback
    with _init_lock:
        if _initialised:
            return
        lc = _llama()

        @lc.llama_log_callback  # type: ignore[untyped-decorator]
        def _cb(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
            msg = text.decode("utf-8", errors="replace").rstrip()
            if msg:
                _recent_log.append(msg)
                # ggml's levels: 3 warning, 4 error (the reason of a failed load); the rest is chatter.
                log.log(logging.ERROR if level == 4 else logging.WARNING if level == 3 else logging.DEBUG,
                        "%s", msg)

        _log_callback = _cb  # keep a reference: llama.cpp calls it from C
        lc.llama_log_set(_cb, ctypes.c_void_p(0))
        lc.llama_backend_init()
        _initialised = True


def recent_llama_log() -> list[str]:
    return list(_recent_log)


def backend_name() -> str:
    """The accelerator llama.cpp will use: "CUDA", "Metal", "Vulkan" or "CPU"."""
    lc = _llama()
    info = lc.llama_print_system_info().decode("utf-8", errors="replace")
    for name in ("CUDA", "Metal", "Vulkan", "ROCm", "SYCL"):
        if f"{name} :" in info or f"{name}:" in info:
            return name
    if devices.has_local_accelerator():
        return "GPU"
    return "CPU"


def system_info() -> str:
    """llama.cpp's own line about this build and CPU (its features: AVX2, NEON, ...)."""
    return str(_llama().llama_print_system_info().decode("utf-8", errors="replace"))


def llama_version() -> str:
    return str(getattr(_llama(), "__version__", "unknown"))


def physical_cores() -> int:
    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


def check_gguf_file(path: Path) -> None:
    """Refuse what is obviously not a loadable GGUF before handing it to llama.cpp."""
    name = path.name
    if not path.exists():
        raise ModelLoadError(f"The model file {path} does not exist.")
    if path.is_dir():
        raise ModelLoadError(f"{path} is a folder, not a GGUF model file.")
    size = path.stat().st_size
    if size == 0:
        raise ModelLoadError(f"The model file {name} is empty (0 bytes); download it again.")
    with path.open("rb") as fh:
        head = fh.read(24)
    if head[:4] != GGUF_MAGIC:
        raise ModelLoadError(
            f"{name} is not a GGUF model file (it does not start with the GGUF signature)."
        )
    if len(head) < 24:
        raise ModelLoadError(f"The model file {name} is truncated ({size} bytes); download it again.")
    try:
        # A downloaded model is hashed again only when its size or mtime changed since it was verified.
        integrity.check_before_use(path)
    except integrity.ModelChangedError as exc:
        raise ModelLoadError(str(exc)) from None


def _explain_load_failure(path: Path) -> str:
    lines = recent_llama_log()
    joined = " ".join(lines[-12:]).lower()
    name = path.name
    if "not within the file bounds" in joined or "truncated" in joined or "failed to read" in joined:
        return f"The model file {name} is incomplete or truncated; download it again."
    if "unknown model architecture" in joined:
        arch = next((ln for ln in lines if "unknown model architecture" in ln), "")
        return f"This version of llama.cpp does not support {name}'s architecture ({arch.strip()})."
    if "out of memory" in joined or "failed to allocate" in joined:
        return f"Not enough memory to load {name}."
    detail = next((ln for ln in reversed(lines) if "error" in ln.lower() or "failed" in ln.lower()), "")
    suffix = f" ({detail.strip()})" if detail else ""
    return f"llama.cpp could not load {name}{suffix}."


def _ubyte_view(blob: bytearray) -> Any:
    """A ``uint8_t *`` over ``blob``'s own memory (no copy), for llama.cpp's state functions."""
    return (ctypes.c_uint8 * len(blob)).from_buffer(blob)


class DecodeAborted(GenerationError):
    """A decode stopped part-way because the abort callback asked it to."""

    def __init__(self) -> None:
        super().__init__("Cancelled.")


class Model:
    """A loaded GGUF model and its vocabulary."""

    def __init__(
        self,
        path: Path,
        gpu_layers: int = -1,
        vocab_only: bool = False,
        placement: Placement | None = None,
        repack: bool = True,
    ) -> None:
        """``placement`` None: llama.cpp's choice (every local accelerator); else exactly those devices.
        ``repack`` False keeps CPU weights as stored (no faster layout whose batched passes round
        differently from single-token ones; see EngineConfig.exact)."""
        init_backend()
        check_gguf_file(path)
        lc = _llama()
        self.path = path
        params = lc.llama_model_default_params()
        if placement is None and devices.workers_registered():
            # llama.cpp's default device list includes every registered worker: say "local" explicitly.
            local = devices.local_accelerators()
            placement = Placement(local, (), 999 if local else 0, "local")
        if placement is not None:
            # Kept on self: llama.cpp reads both arrays during the load.
            self._devices = devices.device_array(placement.devices)
            params.devices = ctypes.cast(self._devices, ctypes.c_void_p)
            if placement.tensor_split:
                self._split = (ctypes.c_float * int(lc.llama_max_devices()))(*placement.tensor_split)
                params.tensor_split = self._split
            params.n_gpu_layers = placement.gpu_layers if gpu_layers < 0 else gpu_layers
        elif gpu_layers < 0:
            # Not llama_supports_gpu_offload(): it is also true for a CPU build with the RPC backend.
            params.n_gpu_layers = 999 if devices.has_local_accelerator() else 0
        else:
            params.n_gpu_layers = gpu_layers
        params.vocab_only = vocab_only
        params.use_extra_bufts = repack
        self.gpu_layers = int(params.n_gpu_layers)
        _recent_log.clear()
        handle = lc.llama_model_load_from_file(os.fsencode(path), params)  # the name as the OS has it
        if not handle:
            raise ModelLoadError(_explain_load_failure(path))
        self.handle = handle
        self.vocab = lc.llama_model_get_vocab(handle)
        self.n_vocab = int(lc.llama_vocab_n_tokens(self.vocab))
        self._piece_buf = ctypes.create_string_buffer(256)

    # -- metadata ----------------------------------------------------------
    def meta(self, key: str) -> str | None:
        lc = _llama()
        buf = ctypes.create_string_buffer(4096)
        n = lc.llama_model_meta_val_str(self.handle, key.encode(), buf, len(buf))
        if n < 0:
            return None
        return buf.value.decode("utf-8", errors="replace")

    @property
    def architecture(self) -> str:
        return self.meta("general.architecture") or "unknown"

    @property
    def name(self) -> str:
        return self.meta("general.name") or self.path.stem

    @property
    def n_params(self) -> int:
        return int(_llama().llama_model_n_params(self.handle))

    @property
    def size_bytes(self) -> int:
        return int(_llama().llama_model_size(self.handle))

    @property
    def n_ctx_train(self) -> int:
        return int(_llama().llama_model_n_ctx_train(self.handle))

    @property
    def chat_template(self) -> str | None:
        raw = _llama().llama_model_chat_template(self.handle, None)
        return raw.decode("utf-8", errors="replace") if raw else None

    @property
    def is_recurrent(self) -> bool:
        lc = _llama()
        return bool(lc.llama_model_is_recurrent(self.handle) or lc.llama_model_is_hybrid(self.handle))

    # -- vocabulary ----------------------------------------------------------
    def vocab_type(self) -> int:
        return int(_llama().llama_vocab_type(self.vocab))

    def bos(self) -> int:
        return int(_llama().llama_vocab_bos(self.vocab))

    def eos(self) -> int:
        return int(_llama().llama_vocab_eos(self.vocab))

    def add_bos(self) -> bool:
        return bool(_llama().llama_vocab_get_add_bos(self.vocab))

    def add_eos(self) -> bool:
        return bool(_llama().llama_vocab_get_add_eos(self.vocab))

    def fim_tokens(self) -> tuple[str, str, str] | None:
        """The texts of the fill-in-the-middle tokens (prefix, suffix, middle), or None when the model
        has none (only code models trained for infilling, such as Qwen2.5-Coder, do)."""
        lc = _llama()
        tokens = (lc.llama_vocab_fim_pre(self.vocab), lc.llama_vocab_fim_suf(self.vocab),
                  lc.llama_vocab_fim_mid(self.vocab))
        if any(t < 0 for t in tokens):
            return None
        pre, suf, mid = (self.token_text(t).decode("utf-8", "replace") for t in tokens)
        return pre, suf, mid

    def token_text(self, token: int) -> bytes:
        raw = _llama().llama_vocab_get_text(self.vocab, token)
        return bytes(raw) if raw is not None else b""

    def is_special(self, token: int) -> bool:
        """A control token, or a user-defined ``<...>`` one: what llguidance's llama.cpp tokenizer
        marks as special (a grammar names it as a token, not as text)."""
        lc = _llama()
        attr = int(lc.llama_vocab_get_attr(self.vocab, token))
        if attr & int(lc.LLAMA_TOKEN_ATTR_CONTROL):
            return True
        if not attr & int(lc.LLAMA_TOKEN_ATTR_USER_DEFINED):
            return False
        text = self.piece(token, special=True)
        return text.startswith(b"<") and text.endswith(b">")

    def is_eog(self, token: int) -> bool:
        return bool(_llama().llama_vocab_is_eog(self.vocab, token))

    def tokenize(self, text: str, add_special: bool, parse_special: bool = True) -> list[int]:
        lc = _llama()
        data = text.encode("utf-8")
        cap = len(data) + 16
        buf = (lc.llama_token * cap)()
        n = lc.llama_tokenize(self.vocab, data, len(data), buf, cap, add_special, parse_special)
        if n < 0:
            cap = -n
            buf = (lc.llama_token * cap)()
            n = lc.llama_tokenize(self.vocab, data, len(data), buf, cap, add_special, parse_special)
        return list(buf[:n])

    def piece(self, token: int, special: bool = False) -> bytes:
        lc = _llama()
        n = lc.llama_token_to_piece(self.vocab, token, self._piece_buf, len(self._piece_buf), 0, special)
        if n < 0:
            big = ctypes.create_string_buffer(-n)
            n = lc.llama_token_to_piece(self.vocab, token, big, len(big), 0, special)
            return big.raw[:n]
        return self._piece_buf.raw[:n]

    def close(self) -> None:
        if self.handle:
            _llama().llama_model_free(self.handle)
            self.handle = None


class Context:
    """A llama.cpp context on one sequence, with the token list that its KV cache holds.

    ``tokens`` mirrors the KV cache exactly: position i holds tokens[i]. Every
    change to the cache goes through ``decode`` and ``truncate`` so the mirror
    never drifts.

    ``read_grid`` (0: none) and ``fresh`` serve prompts read as from scratch
    (``draft_sources.read_prompt``, EngineConfig.exact): llama.cpp's kernels depend
    on how many tokens one decode holds, so a cell is the one a read from scratch
    computes only when it was read in the same chunk, one of ``read_grid`` tokens
    starting at a multiple of it. ``fresh`` counts the leading cells read that way;
    ``truncate``, ``clear`` and ``load_state`` keep it true, and only the prompt
    reader raises it.
    """

    def __init__(self, model: Model, n_ctx: int, n_threads: int, n_batch: int = 512) -> None:
        lc = _llama()
        self.model = model
        params = lc.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = n_batch
        params.n_ubatch = n_batch
        params.n_threads = n_threads
        params.n_threads_batch = n_threads
        params.no_perf = True
        handle = lc.llama_init_from_model(model.handle, params)
        if not handle:
            raise ModelLoadError(
                f"Could not create a context of {n_ctx} tokens for {model.path.name}"
                " (not enough memory?); try a smaller context length."
            )
        self.handle = handle
        self.n_ctx = int(lc.llama_n_ctx(handle))
        # llama.cpp lowers the batch to the requested context (n_ctx=64 gives batches of 64 in a cache
        # rounded up to 256) and asserts, aborting the process, on a larger decode: use what it chose.
        self.n_batch = min(n_batch, int(lc.llama_n_batch(handle)), int(lc.llama_n_ubatch(handle)))
        self.n_vocab = model.n_vocab
        self.memory = lc.llama_get_memory(handle)
        self.batch = lc.llama_batch_init(self.n_batch, 0, 1)
        self.tokens: list[int] = []
        self.read_grid = 0
        self.fresh = 0
        self._first_out = 0
        self._abort_cb: Any = None

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    def set_abort(self, should_abort: Callable[[], bool] | None) -> None:
        """Let llama.cpp stop a long decode (a prompt batch) part-way when ``should_abort()`` is true.

        Only set around prompt processing: the callback runs between graph
        nodes, far too often to pay for on every generation step.
        """
        lc = _llama()
        if should_abort is None:
            self._abort_cb = None
            lc.llama_set_abort_callback(self.handle, lc.ggml_abort_callback(0), None)
            return

        def _cb(_data: ctypes.c_void_p) -> bool:
            try:
                return bool(should_abort())
            except Exception:  # never let an exception cross into C
                return False

        self._abort_cb = lc.ggml_abort_callback(_cb)  # keep a reference while llama.cpp holds it
        lc.llama_set_abort_callback(self.handle, self._abort_cb, None)

    def truncate(self, n_keep: int) -> None:
        """Drop every cached position from ``n_keep`` on."""
        if n_keep >= len(self.tokens):
            return
        lc = _llama()
        ok = lc.llama_memory_seq_rm(self.memory, 0, n_keep, -1)
        if not ok:
            # Some caches (recurrent, sliding-window) cannot drop a partial
            # sequence: start over, the caller re-evaluates what it needs.
            lc.llama_memory_clear(self.memory, True)
            self.tokens = []
            self.fresh = 0
            return
        del self.tokens[n_keep:]
        self.fresh = min(self.fresh, n_keep)

    def clear(self) -> None:
        _llama().llama_memory_clear(self.memory, True)
        self.tokens = []
        self.fresh = 0

    def save_state(self) -> bytearray:
        """The KV cache of the sequence as llama.cpp serialises it (its cells only, no logits)."""
        lc = _llama()
        size = int(lc.llama_state_seq_get_size(self.handle, 0))
        blob = bytearray(size)
        if size == 0:
            return blob
        written = int(lc.llama_state_seq_get_data(self.handle, _ubyte_view(blob), size, 0))
        del blob[written:]
        return blob

    def load_state(self, blob: bytearray, tokens: Sequence[int], fresh: bool = False) -> bool:
        """Replace the cache by ``blob`` (from ``save_state``) holding ``tokens``; False if refused.

        llama.cpp checks the blob's layout against this context (layers, cache types, room)
        and clears the sequence when it does not fit; the position count is checked here
        too, so a blob saved for other tokens never leaves the mirror out of step.
        ``fresh``: every cell of the blob was read as from scratch (see the class).
        """
        lc = _llama()
        self.clear()
        if not blob or not tokens:
            return False
        read = int(lc.llama_state_seq_set_data(self.handle, _ubyte_view(blob), len(blob), 0))
        if read == 0 or int(lc.llama_memory_seq_pos_max(self.memory, 0)) != len(tokens) - 1:
            self.clear()
            return False
        self.tokens = list(tokens)
        self.fresh = len(tokens) if fresh else 0
        return True

    def decode(self, tokens: Sequence[int], logits_for: str | int = "last") -> int:
        """Append ``tokens`` to the cache in one batch (``len <= n_batch``).

        ``logits_for``: "last" (only the final position), "all" (every position
        of this batch) or an int k (the last k positions). Returns the number of
        output rows; row i of the result is read with ``logits(i)``.
        """
        n = len(tokens)
        if n == 0:
            return 0
        if n > self.n_batch:
            raise ValueError("batch larger than n_batch")
        if self.n_past + n > self.n_ctx:
            raise GenerationError("The context window is full.")
        if logits_for == "all":
            first_out = 0
        elif logits_for == "last":
            first_out = n - 1
        else:
            first_out = n - int(logits_for)
        b = self.batch
        base = self.n_past
        for i, tok in enumerate(tokens):
            b.token[i] = tok
            b.pos[i] = base + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = 1 if i >= first_out else 0
        b.n_tokens = n
        rc = _llama().llama_decode(self.handle, b)
        if rc == 2:  # aborted through set_abort: what was computed stays, the mirror follows
            self._resync()
            raise DecodeAborted()
        if rc != 0:
            # On failure llama.cpp may have kept some ubatches: resync the mirror.
            self._resync()
            raise GenerationError(f"llama.cpp failed to decode a batch (code {rc}).")
        self.tokens.extend(tokens)
        self._first_out = first_out
        return n - first_out

    def _resync(self) -> None:
        """After a failed or aborted decode, drop whatever part of the batch reached the cache."""
        _llama().llama_memory_seq_rm(self.memory, 0, len(self.tokens), -1)

    def logits(self, row: int) -> npt.NDArray[np.float32]:
        """Logits of output row ``row`` of the last decode (a view, valid until the next decode)."""
        # llama_get_logits_ith takes the index in the batch, not in the outputs.
        ptr = _llama().llama_get_logits_ith(self.handle, self._first_out + row)
        if not ptr:
            raise GenerationError("llama.cpp returned no logits for that position.")
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def close(self) -> None:
        lc = _llama()
        if self.handle:
            lc.llama_batch_free(self.batch)
            lc.llama_free(self.handle)
            self.handle = None
