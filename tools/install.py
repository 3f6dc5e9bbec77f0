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
import hashlib
import os
import subprocess
import sys
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


def cmake_args() -> str:
    extra = os.environ.get("CMAKE_ARGS", "").split()
    flags = [RPC_FLAG] + [f for f in extra if not f.upper().startswith("-DGGML_RPC=")]
    return " ".join(flags)


def wheelhouse(version: str, flags: str) -> Path:
    key = hashlib.sha256(f"{version} {flags} {sys.version_info[:2]} {sys.platform}".encode()).hexdigest()[:16]
    base = Path(os.environ.get("LOCALCHAT_WHEELHOUSE", Path.home() / ".cache" / "localchat" / "wheels"))
    return base / key


def ensure_llama(rebuild: bool) -> None:
    version = pinned_llama_version()
    state = installed_state(version)
    if state == "ok" and not rebuild:
        say(f"llama-cpp-python {version} with the RPC backend is installed")
        return
    flags = cmake_args()
    house = wheelhouse(version, flags)
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rebuild", action="store_true", help="build llama-cpp-python again")
    p.add_argument("--extras", default="dev", help="pyproject extras to install (default: dev)")
    args = p.parse_args()
    ensure_llama(args.rebuild)
    target = f".[{args.extras}]" if args.extras else "."
    say(f"installing localchat ({target}) in editable mode")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", target], cwd=ROOT, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
