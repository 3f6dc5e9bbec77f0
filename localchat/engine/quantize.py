"""Rewrite a GGUF at another precision with llama.cpp's quantize API.

Used to make a bandwidth-bound F16 target from a quantized file (the cost ratio
of a 7B-32B target to a 0.5B drafter on a desktop) without any download.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

from localchat.engine.errors import ModelLoadError

FTYPES = {"f16": 1, "q8_0": 7, "q4_k_m": 15}  # llama_ftype values


def requantize(src: Path, dst: Path, ftype: str = "f16", threads: int | None = None) -> Path:
    """Write ``src`` as ``ftype`` to ``dst`` (atomically); returns ``dst``."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[ftype]
    params.allow_requantize = True
    params.nthread = threads or os.cpu_count() or 1
    tmp = dst.with_name(dst.name + ".tmp")
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(tmp).encode(), ctypes.byref(params))
    if rc != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        raise ModelLoadError(f"Could not convert {src.name} to {ftype} (llama.cpp returned {rc}).")
    os.replace(tmp, dst)
    return dst
