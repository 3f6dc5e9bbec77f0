"""A copy of a real GGUF with another chat template: the header is rewritten, the tensors copied.

Templates are code inside the model file, so the command line's handling of a template that raises,
reaches outside Jinja's sandbox or does not parse is tested on a real model carrying one.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import BinaryIO

_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9
TEMPLATE_KEY = "tokenizer.chat_template"


def _read(fh: BinaryIO, fmt: str) -> tuple[int, ...]:
    return struct.unpack(fmt, fh.read(struct.calcsize(fmt)))


def _skip_value(fh: BinaryIO, kind: int) -> None:
    if kind == _STRING:
        (n,) = _read(fh, "<Q")
        fh.seek(n, 1)
    elif kind == _ARRAY:
        inner, count = _read(fh, "<IQ")
        if inner in _SIZES:
            fh.seek(_SIZES[inner] * count, 1)
        else:
            for _ in range(count):
                _skip_value(fh, inner)
    else:
        fh.seek(_SIZES[kind], 1)


def with_chat_template(source: Path, dest: Path, template: str) -> Path:
    """Write ``dest``: ``source`` with ``template`` as its chat template (added if it had none)."""
    with source.open("rb") as fh:
        magic, version, n_tensors, n_kv = fh.read(4), *_read(fh, "<IQQ")
        assert magic == b"GGUF"
        kvs: list[bytes] = []
        alignment = 32
        for _ in range(n_kv):
            start = fh.tell()
            (key_len,) = _read(fh, "<Q")
            key = fh.read(key_len).decode()
            (kind,) = _read(fh, "<I")
            value_at = fh.tell()
            _skip_value(fh, kind)
            end = fh.tell()
            if key == "general.alignment":
                fh.seek(value_at)
                (alignment,) = _read(fh, "<I")
                fh.seek(end)
            if key != TEMPLATE_KEY:
                fh.seek(start)
                kvs.append(fh.read(end - start))
        infos_start = fh.tell()
        for _ in range(n_tensors):
            (name_len,) = _read(fh, "<Q")
            fh.seek(name_len, 1)
            (n_dims,) = _read(fh, "<I")
            fh.seek(8 * n_dims + 4 + 8, 1)
        infos_end = fh.tell()
        fh.seek(infos_start)
        infos = fh.read(infos_end - infos_start)
        data_start = (infos_end + alignment - 1) // alignment * alignment
        raw = template.encode()
        kvs.append(struct.pack("<Q", len(TEMPLATE_KEY)) + TEMPLATE_KEY.encode()
                   + struct.pack("<IQ", _STRING, len(raw)) + raw)
        head = magic + struct.pack("<IQQ", version, n_tensors, len(kvs)) + b"".join(kvs) + infos
        with dest.open("wb") as out:
            out.write(head)
            out.write(b"\0" * ((len(head) + alignment - 1) // alignment * alignment - len(head)))
            fh.seek(data_start)
            shutil.copyfileobj(fh, out, 16 * 1024 * 1024)
    return dest
