"""Check that a CUDA bundle carries the CUDA runtime libraries it loads.

    python packaging/check_cuda_libs.py dist/cuda/localchat

The build machines have no NVIDIA GPU, so the CUDA bundle's self-test cannot run there; this is
the check that can: the libraries llama.cpp's CUDA backend needs resolve to files inside the
bundle, not to the build machine's toolkit. Only the driver's ``libcuda.so.1`` / ``nvcuda.dll``
may come from outside (the user's NVIDIA driver provides it).

Linux: ``ldd`` on the bundled ``libggml-cuda.so`` with the bundle's folders on the library path
(as the frozen bootloader sets it); a "not found" or a CUDA library resolved outside the bundle fails.
Windows: the cudart / cuBLAS DLLs are in the bundle, beside ``ggml-cuda.dll``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DRIVER_LIBRARIES = ("libcuda.so.1", "libcuda.so")
CUDA_LIBRARY = re.compile(r"^lib(cudart|cublas|cublasLt)\.so")
WINDOWS_DLLS = ("cudart64_*.dll", "cublas64_*.dll", "cublasLt64_*.dll")


def ldd_problems(ldd_output: str, bundle: Path) -> list[str]:
    """What is wrong in ``ldd`` output: libraries not found, CUDA libraries taken from outside ``bundle``."""
    problems: list[str] = []
    root = bundle.resolve()
    for line in ldd_output.splitlines():
        m = re.match(r"\s*(\S+)\s+=>\s+(.*?)(\s+\(0x[0-9a-f]+\))?$", line)
        if m is None:
            continue
        name, where = m.group(1), m.group(2).strip()
        if where == "not found":
            if name not in DRIVER_LIBRARIES:
                problems.append(f"{name} not found")
        elif CUDA_LIBRARY.match(name) and not Path(os.path.realpath(where)).is_relative_to(root):
            problems.append(f"{name} resolves outside the bundle, to {where}")
    return problems


def missing_windows_dlls(bundle: Path) -> list[str]:
    """The CUDA DLLs missing beside ggml-cuda.dll (llama_cpp adds that folder to the DLL search path)."""
    found = sorted(bundle.rglob("ggml-cuda.dll"))
    if not found:
        return ["ggml-cuda.dll is not in the bundle (not a CUDA build?)"]
    folder = found[0].parent
    return [f"{glob} is not beside {found[0]}" for glob in WINDOWS_DLLS if not any(folder.glob(glob))]


def check_linux(bundle: Path) -> list[str]:
    found = sorted(bundle.rglob("libggml-cuda.so*"))
    if not found:
        return ["libggml-cuda.so is not in the bundle (not a CUDA build?)"]
    internal = bundle / "_internal"
    env = dict(os.environ, LD_LIBRARY_PATH=f"{internal}:{internal / 'llama_cpp' / 'lib'}")
    out = subprocess.run(["ldd", str(found[0])], env=env, capture_output=True, text=True, check=True).stdout
    print(out, end="")
    return ldd_problems(out, bundle)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    bundle = Path(args[0])
    problems = missing_windows_dlls(bundle) if sys.platform == "win32" else check_linux(bundle)
    for problem in problems:
        print(f"CUDA libraries: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"CUDA libraries: the bundle in {bundle} carries what the CUDA backend loads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
