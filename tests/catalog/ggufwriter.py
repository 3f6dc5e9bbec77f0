"""A minimal GGUF writer for tests: headers with chosen metadata, tokens and tensor tables."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

_STRING, _ARRAY, _UINT32, _INT32, _FLOAT32, _BOOL = 8, 9, 4, 5, 6, 7


def _str(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


class RawValue(bytes):
    """A value's bytes as written (type id included), for headers no well-behaved writer makes."""


def nested_arrays(depth: int) -> RawValue:
    """An array of one array of one array ... ``depth`` levels deep, the innermost empty."""
    levels = struct.pack("<IQ", _ARRAY, 1) * depth
    return RawValue(struct.pack("<I", _ARRAY) + levels + struct.pack("<IQ", _UINT32, 0))


def _value(v: Any) -> bytes:
    if isinstance(v, RawValue):
        return bytes(v)
    if isinstance(v, bool):
        return struct.pack("<I?", _BOOL, v)
    if isinstance(v, int):
        return struct.pack("<Ii", _INT32, v) if v < 0 else struct.pack("<II", _UINT32, v)
    if isinstance(v, float):
        return struct.pack("<If", _FLOAT32, v)
    if isinstance(v, str):
        return struct.pack("<I", 8) + _str(v)
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return struct.pack("<IIQ", _ARRAY, _STRING, len(v)) + b"".join(_str(x) for x in v)
    if isinstance(v, list):
        return struct.pack("<IIQ", _ARRAY, _INT32, len(v)) + struct.pack(f"<{len(v)}i", *v)
    raise TypeError(v)


def write_gguf(
    path: Path,
    kv: dict[str, Any],
    tensors: list[tuple[str, list[int]]] = (),  # type: ignore[assignment]
    total_size: int | None = None,
    version: int = 3,
) -> Path:
    """Write a GGUF with F32 tensors of the given shapes; ``total_size`` makes a larger, sparse file."""
    header = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kv))
    body = b"".join(_str(k) + _value(v) for k, v in kv.items())
    infos = b""
    offset = 0
    for name, dims in tensors:
        infos += _str(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", 0, offset)
        n = 4
        for d in dims:
            n *= d
        offset += (n + 31) // 32 * 32
    head = header + body + infos
    data_start = (len(head) + 31) // 32 * 32
    with path.open("wb") as fh:
        fh.write(head)
        fh.truncate(max(data_start + offset, total_size or 0))
    return path


def vocab_kv(tokens: list[str], arch: str = "llama", **extra: Any) -> dict[str, Any]:
    kv: dict[str, Any] = {
        "general.architecture": arch,
        "general.name": extra.pop("name", "Test model"),
        "general.file_type": 15,
        f"{arch}.context_length": 4096,
        f"{arch}.block_count": 2,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.add_bos_token": False,
    }
    kv.update(extra)
    return kv
