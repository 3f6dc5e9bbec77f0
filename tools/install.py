"""Install localchat from this checkout, with llama-cpp-python built with the RPC backend.

    python tools/install.py            # what README's set-up command runs
    python tools/install.py --rebuild  # rebuild llama-cpp-python (e.g. after changing CMAKE_ARGS)

Why a script and not a plain ``pip install -e``: llama-cpp-python compiles
llama.cpp from source, and its build flags come from the CMAKE_ARGS
environment variable, which pip's wheel cache does not key on. A wheel built
once without ``-DGGML_RPC=on`` would be reused silently, and workers would
not work. So the wheel is built with ``--no-cache-dir`` into a wheelhouse of
its own, keyed by the flags (``~/.cache/localchat/wheels/<key>``), installed
from there, and checked: the installed library must report RPC support.
Extra flags (``-DGGML_CUDA=on``, ...) go in CMAKE_ARGS as usual and become
part of the key. Everything else installs with pip as usual (``.[dev]``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "packaging"))
from build import pinned_llama_version  # noqa: E402  (one reader of the pin, shared with the bundles)

RPC_FLAG = "-DGGML_RPC=on"


def say(msg: str) -> None:
    print(f"[install] {msg}", flush=True)


def installed_state(version: str) -> str:
    """'ok' (that version, with RPC), 'no-rpc', 'other-version' or 'missing'; read in a child interpreter."""
    code = (
        "import importlib.metadata as md, sys\n"
        "try:\n    v = md.version('llama-cpp-python')\nexcept md.PackageNotFoundError:\n"
        "    print('missing'); sys.exit()\n"
        f"if v != {version!r}:\n    print('other-version'); sys.exit()\n"
        "import llama_cpp\nprint('ok' if llama_cpp.llama_supports_rpc() else 'no-rpc')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "missing"


# llama.cpp builds for this computer's processor (-march=native). On a processor with Intel AMX
# (Xeon Sapphire Rapids and later) that compiles ggml's AMX matrix kernels in, and on such a machine
# every multi-token batch of a Q4 model crashed the process inside ggml_backend_amx_mul_mat (seen
# with llama-cpp-python 0.3.36 on a virtual machine). __AMX_INT8__ is what switches those kernels on:
# keeping the compiler from assuming AMX leaves every other native instruction set in place.
NO_AMX_FLAGS = ["-DCMAKE_C_FLAGS=-mno-amx-int8", "-DCMAKE_CXX_FLAGS=-mno-amx-int8"]


def native_x86_gcc_like(extra: list[str]) -> bool:
    """A native build for an x86-64 processor with GCC or Clang (not MSVC), compiler flags left alone."""
    upper = " ".join(extra).upper()
    if any(word in upper for word in ("-DGGML_NATIVE=OFF", "CMAKE_C_FLAGS", "CMAKE_CXX_FLAGS", "AMX")):
        return False
    return platform.machine().lower() in ("x86_64", "amd64") and sys.platform != "win32"


def cmake_args() -> str:
    extra = os.environ.get("CMAKE_ARGS", "").split()
    flags = [RPC_FLAG] + [f for f in extra if not f.upper().startswith("-DGGML_RPC=")]
    if native_x86_gcc_like(extra):
        flags += NO_AMX_FLAGS
    return " ".join(flags)


def processor() -> str:
    """What a native build depends on: the machine and, on Linux, the processor's model and
    instruction sets, so a wheel built for one processor is not installed on another."""
    text = ""
    with contextlib.suppress(OSError):
        lines = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines()
        wanted = ("model name", "flags", "features", "cpu part")
        text = "\n".join(sorted({ln.strip() for ln in lines if ln.lower().startswith(wanted)}))
    return f"{platform.machine()} {text}"


def wheelhouse(version: str, flags: str) -> Path:
    facts = f"{version} {flags} {sys.version_info[:2]} {sys.platform} {processor()}"
    key = hashlib.sha256(facts.encode()).hexdigest()[:16]
    base = Path(os.environ.get("LOCALCHAT_WHEELHOUSE", Path.home() / ".cache" / "localchat" / "wheels"))
    return base / key


def installed_marker() -> Path:
    """Which wheelhouse this interpreter's llama-cpp-python came from (one file per interpreter)."""
    digest = hashlib.sha256(sys.prefix.encode()).hexdigest()[:12]
    base = Path(os.environ.get("LOCALCHAT_WHEELHOUSE", Path.home() / ".cache" / "localchat" / "wheels"))
    return base / f"installed-{digest}.txt"


def ensure_llama(rebuild: bool) -> None:
    version = pinned_llama_version()
    state = installed_state(version)
    flags = cmake_args()
    house = wheelhouse(version, flags)
    marker = installed_marker()
    recorded = marker.read_text(encoding="utf-8").strip() if marker.is_file() else ""
    if state == "ok" and not rebuild and recorded == house.name:
        say(f"llama-cpp-python {version} with the RPC backend is installed (build {house.name})")
        return
    if state == "ok" and not rebuild:
        # Installed by hand, or by an older version of this script with other flags (a native build
        # with AMX kernels crashed on AMX processors): installed again from this script's build.
        state = "built with other flags" if recorded else "installed without this script"
    wheels = sorted(house.glob(f"llama_cpp_python-{version}-*.whl")) if house.is_dir() else []
    if rebuild or not wheels:
        say(f"building llama-cpp-python {version} with CMAKE_ARGS={flags!r} (about 8 minutes on two cores)")
        house.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, CMAKE_ARGS=flags, FORCE_CMAKE="1")
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "--no-binary",
               "llama-cpp-python", "-w", str(house), f"llama-cpp-python=={version}"]
        subprocess.run(cmd, env=env, check=True)
        wheels = sorted(house.glob(f"llama_cpp_python-{version}-*.whl"))
        if not wheels:
            raise SystemExit(f"the llama-cpp-python build left no wheel in {house}")
    say(f"installing {wheels[-1].name} from {house} ({state} before)")
    cmd = [sys.executable, "-m", "pip", "install", "--force-reinstall", "--no-deps", str(wheels[-1])]
    subprocess.run(cmd, check=True)
    # --no-deps above leaves numpy & co. as they are; this adds whichever of its dependencies are missing.
    subprocess.run([sys.executable, "-m", "pip", "install", str(wheels[-1])], check=True)
    after = installed_state(version)
    if after != "ok":
        raise SystemExit(f"llama-cpp-python {version} is installed but has no RPC backend ({after}); "
                         f"delete {house} and run `python tools/install.py --rebuild`")
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(house.name + "\n", encoding="utf-8")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rebuild", action="store_true", help="build llama-cpp-python again")
    p.add_argument("--extras", default="dev", help="pyproject extras to install (default: dev)")
    args = p.parse_args()
    ensure_llama(args.rebuild)
    target = f".[{args.extras}]" if args.extras else "."
    say(f"installing localchat ({target}) in editable mode")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", target], cwd=ROOT, check=True)
    command_on_path()
    return 0


def command_on_path() -> None:
    """Make the ``localchat`` command just installed reachable, as README's ``&& localchat`` expects:
    under pyenv a new console script is not on PATH until its shims are rehashed (inside this process,
    started through a shim, PATH already holds the interpreter's own folder, so it cannot tell);
    elsewhere, where the scripts folder is not on PATH, say how to start it."""
    pyenv = shutil.which("pyenv")
    if pyenv:
        subprocess.run([pyenv, "rehash"], check=False)
        return
    if not shutil.which("localchat"):
        say(f"the localchat command is in {sysconfig.get_path('scripts')}, which is not on PATH: add it, "
            f"or start localchat with `{Path(sys.executable).name} -m localchat`")


if __name__ == "__main__":
    sys.exit(main())
