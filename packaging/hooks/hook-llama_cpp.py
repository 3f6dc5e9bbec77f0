"""PyInstaller hook for llama-cpp-python: collect its shared libraries where it looks for them.

llama_cpp loads ``libllama``/``llama.dll`` (and ggml, ggml-base, ggml-cpu,
ggml-cuda/-metal, mtmd) with ctypes from ``<package>/lib``, a path it computes
from its own ``__file__``. PyInstaller's import analysis cannot see ctypes
loads, so without this hook the bundle fails at startup with "Shared library
with base name 'llama' not found". The libraries keep their ``llama_cpp/lib``
folder in the bundle, so llama_cpp's own lookup finds them unchanged, and their
$ORIGIN/@loader_path references to each other still resolve.

The logic is plain Python (no PyInstaller imports) so tests can run it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

# Shared libraries, Metal shader sources/libraries, and Windows import side files are all needed at run time.
_LIB_SUFFIXES = (".so", ".dylib", ".dll", ".metal", ".metallib")
_SONAME_RE = re.compile(r"\.so\.\d+$")
_LIB_DIR = "lib"  # relative to the llama_cpp package, as in llama_cpp.llama_cpp._base_path


def package_dir() -> Path:
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        raise ImportError("llama_cpp is not installed; install llama-cpp-python before building")
    return Path(spec.origin).parent


def _is_runtime_lib(path: Path) -> bool:
    name = path.name
    if not path.is_file():
        return False
    if name.endswith(_LIB_SUFFIXES):
        return True
    # ELF sonames (libggml.so.0) are what the libraries name as DT_NEEDED, so they must be
    # there; the fully versioned copies (libggml.so.0.25.3) are never looked up: left out.
    return _SONAME_RE.search(name) is not None


def find_llama_libs(pkg_dir: Path) -> list[tuple[str, str]]:
    """(source, destination folder) for every runtime library under ``pkg_dir/lib`` (recursively)."""
    lib_dir = pkg_dir / _LIB_DIR
    if not lib_dir.is_dir():
        return []
    out: list[tuple[str, str]] = []
    for path in sorted(lib_dir.rglob("*")):
        if _is_runtime_lib(path):
            rel_parent = path.parent.relative_to(pkg_dir)
            out.append((str(path), str(Path("llama_cpp") / rel_parent)))
    return out


def cuda_runtime_dlls(libs: list[tuple[str, str]], cuda_path: str | None) -> list[tuple[str, str]]:
    """Windows CUDA builds: the CUDA runtime and cuBLAS DLLs, placed beside ggml-cuda.dll.

    ctypes loads llama.dll with LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR, so ggml-cuda.dll's own
    dependencies are looked up in its folder (and in System32), not in the bundle's top folder
    where PyInstaller would put them; the user's machine has only the driver, not the toolkit.
    """
    if not cuda_path or not any(Path(src).name.lower().startswith("ggml-cuda") for src, _ in libs):
        return []
    dest = str(Path("llama_cpp") / _LIB_DIR)
    out: list[tuple[str, str]] = []
    for folder in (Path(cuda_path) / "bin", Path(cuda_path) / "bin" / "x64"):
        for pattern in ("cudart64_*.dll", "cublas64_*.dll", "cublasLt64_*.dll"):
            out += [(str(p), dest) for p in sorted(folder.glob(pattern))]
    return out


_pkg = package_dir()
binaries = find_llama_libs(_pkg)
if sys.platform == "win32":
    binaries += cuda_runtime_dlls(binaries, os.environ.get("CUDA_PATH"))
if not any(Path(src).name.removeprefix("lib").startswith("llama.") for src, _ in binaries):
    raise SystemExit(f"hook-llama_cpp: no llama library under {_pkg / _LIB_DIR}; reinstall llama-cpp-python")

# llama_chat_format renders chat templates with jinja2; imported lazily in places.
hiddenimports = ["jinja2", "llama_cpp.llama_chat_format", "llama_cpp._ctypes_extensions"]
# The OpenAI-compatible server pulls in fastapi/uvicorn/pydantic-settings; localchat never uses it.
excludedimports = ["llama_cpp.server"]
