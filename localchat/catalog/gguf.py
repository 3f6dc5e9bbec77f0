"""GGUF metadata, read from the file's header without loading any weights.

A pure-Python reader (no llama.cpp) so the library can list dozens of models,
and the UI can show their architecture, size and quantization, without paying
for a model load. The file is memory-mapped and only the header pages are
touched: the key/value metadata and the tensor table.

The vocabulary fingerprint is a SHA-256 over the tokenizer model name, the
BOS/EOS ids and add flags and every token text in id order. Trailing tokens
of type UNUSED (the ``[PAD151936]`` fillers converters append so a vocabulary
matches the embedding matrix) are left out: Qwen2.5-7B pads its 151,665-token
vocabulary to 152,064 entries while Qwen2.5-0.5B pads to 151,936, and the two
are still valid draft pairs (llama.cpp allows sizes to differ by up to 128).

Results are cached by resolved path, size and mtime in a small JSON file, so a
second listing of a large models folder costs one ``stat`` per file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import struct
import tempfile
import threading
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from localchat.catalog.errors import GgufError

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
TOKEN_TYPE_UNUSED = 5

# GGUF value types.
(
    _UINT8,
    _INT8,
    _UINT16,
    _INT16,
    _UINT32,
    _INT32,
    _FLOAT32,
    _BOOL,
    _STRING,
    _ARRAY,
    _UINT64,
    _INT64,
    _FLOAT64,
) = range(13)
_SCALAR_FORMATS: dict[int, str] = {
    _UINT8: "<B",
    _INT8: "<b",
    _UINT16: "<H",
    _INT16: "<h",
    _UINT32: "<I",
    _INT32: "<i",
    _FLOAT32: "<f",
    _BOOL: "<?",
    _UINT64: "<Q",
    _INT64: "<q",
    _FLOAT64: "<d",
}
_SCALAR_SIZES = {t: struct.calcsize(f) for t, f in _SCALAR_FORMATS.items()}

# llama_ftype (general.file_type) -> the name users see in file names.
FILE_TYPES: dict[int, str] = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
}

# ggml tensor type -> (elements per block, bytes per block), for the truncation check.
# Types missing here are skipped by that check rather than guessed.
_GGML_BLOCKS: dict[int, tuple[int, int]] = {
    0: (1, 4),
    1: (1, 2),
    2: (32, 18),
    3: (32, 20),
    6: (32, 22),
    7: (32, 24),
    8: (32, 34),
    9: (32, 36),
    10: (256, 84),
    11: (256, 110),
    12: (256, 144),
    13: (256, 176),
    14: (256, 210),
    15: (256, 292),
    16: (256, 66),
    17: (256, 74),
    18: (256, 98),
    19: (256, 50),
    20: (32, 18),
    21: (256, 110),
    22: (256, 82),
    23: (256, 136),
    24: (1, 1),
    25: (1, 2),
    26: (1, 4),
    27: (1, 8),
    28: (1, 8),
    29: (256, 56),
    30: (1, 2),
    34: (256, 54),
    35: (256, 66),
    39: (32, 17),
}

# Architectures whose state is recurrent (in whole or part): their KV cache cannot be
# rolled back token by token, so a separate draft model does not work for them as a target.
RECURRENT_ARCHITECTURES = frozenset(
    {
        "mamba",
        "mamba2",
        "rwkv6",
        "rwkv6qwen2",
        "rwkv7",
        "arwkv7",
        "jamba",
        "falcon-h1",
        "granitehybrid",
        "lfm2",
        "lfm2moe",
        "nemotron_h",
        "qwen3next",
        "plamo2",
    }
)


@dataclass(frozen=True)
class GgufMetadata:
    """What localchat needs to know about a GGUF file, read from its header."""

    path: str
    file_size: int
    version: int
    architecture: str
    name: str  # general.name, or "" when absent
    general_type: str  # "model", "mmproj", "adapter", ...; "model" when absent
    size_label: str  # general.size_label, else estimated from the tensor table ("1.5B", "135M")
    parameter_count: int  # elements in this file's tensors (0 for a shard of a split model)
    file_type: int | None
    quantization: str  # "Q4_K_M", ... or "" when unknown
    context_length: int | None
    block_count: int | None
    has_chat_template: bool
    vocab_type: str  # tokenizer.ggml.model ("gpt2", "llama", ...), "" without a vocabulary
    n_vocab: int
    bos_token_id: int | None
    eos_token_id: int | None
    add_bos: bool | None
    add_eos: bool | None
    fingerprint: str  # hex SHA-256 of the vocabulary, "" without a vocabulary
    split_count: int = 1

    @property
    def has_vocab(self) -> bool:
        return self.n_vocab > 0

    @property
    def is_projector(self) -> bool:
        """A multimodal projector (mmproj / clip), not a language model."""
        return self.general_type == "mmproj" or self.architecture == "clip"

    @property
    def is_recurrent(self) -> bool:
        return self.architecture in RECURRENT_ARCHITECTURES

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> GgufMetadata:
        """The metadata ``to_dict`` gave; TypeError unless ``data`` is a mapping whose every field has
        its declared type (the cache file is JSON anyone could have edited)."""
        if not isinstance(data, dict):
            raise TypeError(f"GGUF metadata must be a mapping, not {type(data).__name__}")
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        for f in fields(cls):
            if f.name in values and not _has_type(values[f.name], str(f.type)):
                raise TypeError(f"GGUF metadata field {f.name} is {values[f.name]!r}")
        return cls(**values)


def _has_type(value: object, annotation: str) -> bool:
    """Whether ``value`` is of a field's declared type: "int", "str", "bool", unions with None."""
    for part in (p.strip() for p in annotation.split("|")):
        if (
            (part == "None" and value is None)
            or (part == "bool" and isinstance(value, bool))
            or (part == "int" and isinstance(value, int) and not isinstance(value, bool))
            or (part == "str" and isinstance(value, str))
        ):
            return True
    return False


def format_params(n: int) -> str:
    """1_543_714_304 -> '1.5B'; 134_515_008 -> '135M'."""
    if n <= 0:
        return ""
    if n >= 1e9:
        value, unit = n / 1e9, "B"
    elif n >= 1e6:
        value, unit = n / 1e6, "M"
    else:
        value, unit = n / 1e3, "K"
    return f"{value:.1f}{unit}" if value < 10 else f"{value:.0f}{unit}"


class _Reader:
    """Sequential reads from a memory map; running past the end means the file is truncated."""

    def __init__(self, buf: mmap.mmap, path: Path) -> None:
        self.buf = buf
        self.pos = 0
        self.size = len(buf)
        self.path = path

    def need(self, n: int) -> None:
        if n < 0 or self.pos + n > self.size:
            raise GgufError(self.path, "the file is truncated (its header ends past the end of the file)")

    def scalar(self, vtype: int) -> Any:
        size = _SCALAR_SIZES[vtype]
        self.need(size)
        (value,) = struct.unpack_from(_SCALAR_FORMATS[vtype], self.buf, self.pos)
        self.pos += size
        return value

    def u32(self) -> int:
        return int(self.scalar(_UINT32))

    def u64(self) -> int:
        return int(self.scalar(_UINT64))

    def raw_string(self) -> bytes:
        n = self.u64()
        self.need(n)
        data = self.buf[self.pos : self.pos + n]
        self.pos += n
        return data

    def string(self) -> str:
        return self.raw_string().decode("utf-8", errors="replace")

    def skip_array(self, etype: int, count: int, depth: int = 0) -> None:
        # The depth limit turns arrays nested thousands deep (a few bytes each) into a sentence instead
        # of RecursionError; the minimum-size checks stop a forged count from looping for ages.
        if etype in _SCALAR_SIZES:
            n = _SCALAR_SIZES[etype] * count
            self.need(n)
            self.pos += n
        elif etype == _STRING:
            self.need(8 * count)
            for _ in range(count):
                n = self.u64()
                self.need(n)
                self.pos += n
        elif etype == _ARRAY:
            if depth >= MAX_ARRAY_DEPTH:
                raise GgufError(
                    self.path, f"the metadata is corrupt (arrays nested more than {MAX_ARRAY_DEPTH} deep)"
                )
            self.need(12 * count)
            for _ in range(count):
                inner, inner_count = self.u32(), self.u64()
                self.skip_array(inner, inner_count, depth + 1)
        else:
            raise GgufError(self.path, f"the metadata is corrupt (unknown array element type {etype})")


MAX_ARRAY_DEPTH = 16  # GGUF files in use nest arrays one level at most

# Keys whose array values are kept; every other array is skipped without decoding.
_TOKENS = "tokenizer.ggml.tokens"
_TOKEN_TYPES = "tokenizer.ggml.token_type"


def _parse(path: Path) -> GgufMetadata:
    try:
        st = path.stat()
    except FileNotFoundError:
        raise GgufError(path, "the file does not exist") from None
    except OSError as exc:
        raise GgufError(path, f"the file cannot be read ({exc.strerror or exc})") from None
    if not path.is_file():
        raise GgufError(path, "it is not a file")
    if st.st_size == 0:
        raise GgufError(path, "the file is empty (0 bytes)")
    if st.st_size < 24:
        with path.open("rb") as fh:
            head = fh.read(4)
        if head != GGUF_MAGIC:
            raise GgufError(path, "it is not a GGUF file (it does not start with the GGUF signature)")
        raise GgufError(path, f"the file is truncated (only {st.st_size} bytes)")
    try:
        with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return _parse_buffer(path, st.st_size, buf)
    except OSError as exc:
        raise GgufError(path, f"the file cannot be read ({exc.strerror or exc})") from None
    except (ValueError, OverflowError, RecursionError, MemoryError, struct.error) as exc:
        # Whatever a hostile header still finds: one bad file is reported, never raised past the library.
        raise GgufError(path, f"the header is corrupt ({type(exc).__name__})") from None


def _parse_buffer(path: Path, file_size: int, buf: mmap.mmap) -> GgufMetadata:
    r = _Reader(buf, path)
    if buf[:4] != GGUF_MAGIC:
        raise GgufError(path, "it is not a GGUF file (it does not start with the GGUF signature)")
    r.pos = 4
    version = r.u32()
    if version not in SUPPORTED_VERSIONS:
        raise GgufError(path, f"GGUF version {version} is not supported (versions 2 and 3 are)")
    n_tensors = r.u64()
    n_kv = r.u64()
    # Each entry takes at least 8+4 bytes; absurd counts mean a corrupt or truncated header.
    if n_kv * 12 > file_size or n_tensors * 24 > file_size:
        raise GgufError(path, "the header is corrupt (impossible key or tensor count)")

    kv: dict[str, Any] = {}
    tokens: list[bytes] = []
    token_types: tuple[int, ...] = ()
    for _ in range(n_kv):
        key = r.string()
        vtype = r.u32()
        if vtype in _SCALAR_FORMATS:
            kv[key] = r.scalar(vtype)
        elif vtype == _STRING:
            kv[key] = r.string()
        elif vtype == _ARRAY:
            etype, count = r.u32(), r.u64()
            if key == _TOKENS and etype == _STRING:
                tokens = [r.raw_string() for _ in range(count)]
            elif key == _TOKEN_TYPES and etype in (_INT32, _UINT32):
                r.need(4 * count)
                token_types = struct.unpack_from(f"<{count}i", buf, r.pos)
                r.pos += 4 * count
            else:
                r.skip_array(etype, count)
            kv[key] = count  # arrays: only their length is kept
        else:
            raise GgufError(path, f"the metadata is corrupt (unknown value type {vtype} at key {key!r})")

    n_params = 0
    data_end = 0
    tensor_infos: list[tuple[int, int, int]] = []  # (ggml type, elements, offset)
    for _ in range(n_tensors):
        r.string()  # name
        n_dims = r.u32()
        if n_dims > 8:
            raise GgufError(path, f"the tensor table is corrupt ({n_dims} dimensions)")
        elements = 1
        for _ in range(n_dims):
            elements *= r.u64()
        ttype = r.u32()
        offset = r.u64()
        n_params += elements
        tensor_infos.append((ttype, elements, offset))

    def header_int(key: str, default: int) -> int:
        # A string or float where llama.cpp expects an integer: llama.cpp refuses the file, so do we.
        v = kv.get(key, default)
        if not isinstance(v, int) or isinstance(v, bool):
            raise GgufError(path, f"the metadata is corrupt ({key} is {type(v).__name__}, not a number)")
        return v

    alignment = header_int("general.alignment", DEFAULT_ALIGNMENT) or DEFAULT_ALIGNMENT
    if alignment < 0 or alignment & (alignment - 1):
        raise GgufError(path, f"the metadata is corrupt (general.alignment {alignment} is not a power of 2)")
    data_start = (r.pos + alignment - 1) // alignment * alignment
    for ttype, elements, offset in tensor_infos:
        block = _GGML_BLOCKS.get(ttype)
        nbytes = elements // block[0] * block[1] if block else 0
        data_end = max(data_end, data_start + offset + nbytes)
    if data_end > file_size:
        raise GgufError(
            path,
            f"the file is truncated (its tensors need {data_end:,} bytes but the file has {file_size:,})",
        )

    arch = str(kv.get("general.architecture", ""))
    if not arch:
        raise GgufError(path, "the GGUF header has no general.architecture")
    split_count = max(header_int("split.count", 1), 1)
    file_type = header_int("general.file_type", -1) if "general.file_type" in kv else None

    def opt_int(key: str) -> int | None:
        v = kv.get(key)
        return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    def opt_bool(key: str) -> bool | None:
        v = kv.get(key)
        return bool(v) if v is not None else None

    vocab_type = str(kv.get("tokenizer.ggml.model", "")) if tokens else ""
    bos, eos = opt_int("tokenizer.ggml.bos_token_id"), opt_int("tokenizer.ggml.eos_token_id")
    add_bos, add_eos = opt_bool("tokenizer.ggml.add_bos_token"), opt_bool("tokenizer.ggml.add_eos_token")
    fingerprint = ""
    if tokens:
        fingerprint = vocab_fingerprint(tokens, token_types, vocab_type, bos, eos, add_bos, add_eos)

    return GgufMetadata(
        path=str(path),
        file_size=file_size,
        version=version,
        architecture=arch,
        name=str(kv.get("general.name", "")),
        general_type=str(kv.get("general.type", "model")),
        size_label=str(kv.get("general.size_label", ""))
        or (format_params(n_params) if split_count == 1 else ""),
        parameter_count=n_params if split_count == 1 else 0,
        file_type=file_type,
        quantization=FILE_TYPES.get(file_type, "") if file_type is not None else "",
        context_length=opt_int(f"{arch}.context_length"),
        block_count=opt_int(f"{arch}.block_count"),
        has_chat_template="tokenizer.chat_template" in kv,
        vocab_type=vocab_type,
        n_vocab=len(tokens),
        bos_token_id=bos,
        eos_token_id=eos,
        add_bos=add_bos,
        add_eos=add_eos,
        fingerprint=fingerprint,
        split_count=split_count,
    )


def vocab_fingerprint(
    tokens: list[bytes],
    token_types: tuple[int, ...],
    vocab_type: str,
    bos: int | None,
    eos: int | None,
    add_bos: bool | None,
    add_eos: bool | None,
) -> str:
    """SHA-256 over the vocabulary's identity; see the module docstring for what is left out."""
    n = len(tokens)
    if len(token_types) == n:
        while n > 0 and token_types[n - 1] == TOKEN_TYPE_UNUSED:
            n -= 1
    digest = hashlib.sha256()
    head = json.dumps([vocab_type, bos, eos, add_bos, add_eos, n], separators=(",", ":"))
    digest.update(head.encode())
    for tok in tokens[:n]:
        digest.update(struct.pack("<I", len(tok)))
        digest.update(tok)
    return digest.hexdigest()


class MetadataCache:
    """GGUF metadata (and read errors) keyed by resolved path, size and mtime, in one JSON file."""

    VERSION = 1
    FILENAME = "gguf-metadata.json"

    def __init__(self, cache_dir: Path | None) -> None:
        """``cache_dir=None`` keeps the cache in memory only."""
        self.file = cache_dir / self.FILENAME if cache_dir is not None else None
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, Any]] | None = None

    def _load(self) -> dict[str, dict[str, Any]]:
        if self._entries is None:
            self._entries = {}
            if self.file is not None:
                with contextlib.suppress(OSError, ValueError):
                    data = json.loads(self.file.read_text(encoding="utf-8"))
                    if isinstance(data, dict) and data.get("version") == self.VERSION:
                        entries = data.get("entries")
                        if isinstance(entries, dict):
                            self._entries = entries
        return self._entries

    def get(self, key: str, size: int, mtime_ns: int) -> GgufMetadata | GgufError | None:
        with self._lock:
            entry = self._load().get(key)
        # An entry of another shape (a string, a list, fields of the wrong type) is a miss: the header
        # is read again and the entry replaced, where it stopped the listing with a traceback.
        if not isinstance(entry, dict) or entry.get("size") != size or entry.get("mtime_ns") != mtime_ns:
            return None
        if "error" in entry:
            problem = entry["error"]
            return GgufError(key, problem) if isinstance(problem, str) else None
        try:
            return GgufMetadata.from_dict(entry.get("meta"))
        except TypeError:
            return None

    def put(self, key: str, size: int, mtime_ns: int, value: GgufMetadata | GgufError) -> None:
        record: dict[str, Any] = {"size": size, "mtime_ns": mtime_ns}
        if isinstance(value, GgufError):
            record["error"] = value.problem
        else:
            record["meta"] = value.to_dict()
        with self._lock:
            entries = self._load()
            entries[key] = record
            # Forget files that are gone so the cache does not grow without bound.
            for stale in [k for k in entries if not os.path.exists(k)]:
                del entries[stale]
            self._save(entries)

    def _save(self, entries: dict[str, dict[str, Any]]) -> None:
        if self.file is None:
            return
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.file.parent, prefix=".gguf-metadata-", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"version": self.VERSION, "entries": entries}, fh)
            os.replace(tmp, self.file)
        except OSError:
            # A cache that cannot be written only costs a re-read next time.
            with contextlib.suppress(OSError, UnboundLocalError):
                os.unlink(tmp)


_default_cache: MetadataCache | None = None
_default_lock = threading.Lock()


def default_cache() -> MetadataCache:
    """The per-user cache under localchat's cache folder (settings.folders)."""
    global _default_cache
    with _default_lock:
        if _default_cache is None:
            from localchat.settings.folders import cache_dir

            _default_cache = MetadataCache(cache_dir())
        return _default_cache


def read_metadata(path: str | os.PathLike[str], cache: MetadataCache | None = None) -> GgufMetadata:
    """Read ``path``'s GGUF header; raise GgufError with a sentence if it is not a usable GGUF.

    ``cache`` defaults to the per-user cache; pass ``MetadataCache(None)`` for none on disk.
    """
    p = Path(path)
    try:
        resolved = p.resolve()
        st = resolved.stat()
    except OSError:
        return _parse(p)  # raises the right sentence for a missing or unreadable file
    cache = cache if cache is not None else default_cache()
    key = str(resolved)
    hit = cache.get(key, st.st_size, st.st_mtime_ns)
    if isinstance(hit, GgufError):
        raise GgufError(p, hit.problem)
    if hit is not None:
        return replace(hit, path=str(p))
    try:
        meta = _parse(resolved)
    except GgufError as exc:
        cache.put(key, st.st_size, st.st_mtime_ns, exc)
        raise GgufError(p, exc.problem) from None
    cache.put(key, st.st_size, st.st_mtime_ns, meta)
    return replace(meta, path=str(p))


def read_chat_template(path: str | os.PathLike[str]) -> str:
    """The file's chat template (``tokenizer.chat_template``, Jinja text), "" when it has none.

    Read from the header on demand (the metadata cache keeps only whether there is one): the API's
    model description shows it (Ollama's ``/api/show``). GgufError with a sentence for a bad file."""
    p = Path(path)
    try:
        with p.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            r = _Reader(buf, p)
            if buf[:4] != GGUF_MAGIC:
                raise GgufError(p, "it is not a GGUF file (it does not start with the GGUF signature)")
            r.pos = 8
            r.u64()  # tensors
            for _ in range(r.u64()):
                key, vtype = r.string(), r.u32()
                if vtype == _STRING:
                    value = r.string()
                    if key == "tokenizer.chat_template":
                        return value
                elif vtype in _SCALAR_FORMATS:
                    r.scalar(vtype)
                elif vtype == _ARRAY:
                    etype, count = r.u32(), r.u64()
                    r.skip_array(etype, count)
                else:
                    raise GgufError(p, f"the metadata is corrupt (unknown value type {vtype} at key {key!r})")
    except OSError as exc:
        raise GgufError(p, f"the file cannot be read ({exc.strerror or exc})") from None
    except (ValueError, OverflowError, struct.error) as exc:
        raise GgufError(p, f"the header is corrupt ({type(exc).__name__})") from None
    return ""
