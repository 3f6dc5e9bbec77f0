"""Build a localchat bundle for one backend, then run the frozen self-test in it.

    python packaging/build.py --backend cpu|cuda|metal [--skip-install] [--skip-selftest]
                              [--model TARGET.gguf --draft DRAFT.gguf] [--selftest-gpu-layers N]
                              [--archive]

Steps:

1. llama-cpp-python: if the installed build is not for ``--backend`` (or is
   missing), reinstall the version pinned in pyproject.toml from source with
   the matching CMake flags (GGML_CUDA / GGML_METAL; on x86-64 a portable CPU
   baseline of AVX2+FMA+F16C instead of -march=native, so the bundle runs on
   any PC from the last ten years). ``--skip-install`` never touches it.
2. PyInstaller with packaging/localchat.spec into dist/<backend>/.
3. The bundle's size, then ``<bundle> --selftest`` (a real model load and a
   speculative reply in the engine process, and the main window offscreen);
   its output, exit code and the window's cold-start time are printed.
4. ``--archive``: dist/localchat-<version>-<os>-<arch>-<backend>.tar.gz
   (.zip on Windows and macOS, made with ditto so the .app's symlinks survive).

Exit code: 0 when the build and (unless skipped) the self-test passed.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "packaging" / "localchat.spec"
BACKENDS = ("cpu", "cuda", "metal")
SELFTEST_TIMEOUT_S = 900


def log(msg: str) -> None:
    print(f"[build] {msg}", flush=True)


def pinned_llama_version() -> str:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    for dep in deps:
        m = re.fullmatch(r"\s*llama-cpp-python\s*==\s*([\w.]+)\s*", dep)
        if m:
            return m.group(1)
    raise SystemExit("pyproject.toml does not pin llama-cpp-python with ==")


def installed_llama_backend(python: str = sys.executable) -> str | None:
    """ "cuda", "metal" or "cpu" from the backend libraries llama_cpp ships; None if not installed.

    Read from the files, in a child interpreter, so this process never loads llama.cpp.
    """
    code = (
        "import importlib.util, pathlib\n"
        "s = importlib.util.find_spec('llama_cpp')\n"
        "d = pathlib.Path(s.origin).parent / 'lib' if s and s.origin else None\n"
        "print(' '.join(p.name for p in d.rglob('*')) if d and d.is_dir() else '-')\n"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False).stdout.strip()
    if not out or out == "-":
        return None
    names = out.lower()
    if "ggml-rpc" not in names:
        return "no-rpc"  # built without -DGGML_RPC=on: rebuilt, since bundles must reach workers
    if "ggml-cuda" in names:
        return "cuda"
    if "ggml-metal" in names:
        return "metal"
    return "cpu"


def cmake_args(backend: str, native: bool) -> str:
    # RPC: the bundles can use and be `localchat worker`s.
    args = ["-DGGML_RPC=on", f"-DGGML_CUDA={'on' if backend == 'cuda' else 'off'}"]
    args.append(f"-DGGML_METAL={'on' if backend == 'metal' else 'off'}")
    if not native and platform.machine().lower() in ("x86_64", "amd64"):
        # -march=native would tie the bundle to the build machine's CPU; AVX2 is the common baseline.
        args += ["-DGGML_NATIVE=off", "-DGGML_AVX=on", "-DGGML_AVX2=on", "-DGGML_FMA=on", "-DGGML_F16C=on"]
    if backend == "cuda":
        # Ship kernels for the common GPU generations (Pascal to Ada/Hopper) instead of the build machine's.
        args.append("-DCMAKE_CUDA_ARCHITECTURES=61;70;75;80;86;89;90")
    return " ".join(args)


def install_llama(backend: str, native: bool) -> None:
    version = pinned_llama_version()
    env = dict(os.environ, CMAKE_ARGS=cmake_args(backend, native), FORCE_CMAKE="1")
    log(f"installing llama-cpp-python=={version} for {backend} (CMAKE_ARGS={env['CMAKE_ARGS']})")
    # No wheel cache: pip's cache key ignores CMAKE_ARGS, so a cached CPU wheel would come back for CUDA.
    cmd = [sys.executable, "-m", "pip", "install", "--force-reinstall", "--no-deps", "--no-cache-dir",
           "--no-binary", "llama-cpp-python", f"llama-cpp-python=={version}"]  # fmt: skip
    subprocess.run(cmd, env=env, check=True)
    # --no-deps above keeps numpy & co. as they are; this adds whichever of its dependencies are missing.
    deps = [sys.executable, "-m", "pip", "install", f"llama-cpp-python=={version}"]
    subprocess.run(deps, env=env, check=True)


def ensure_pyinstaller() -> None:
    try:
        import PyInstaller  # noqa: F401
    except ImportError:
        log("installing PyInstaller (the 'package' extra)")
        subprocess.run([sys.executable, "-m", "pip", "install", "pyinstaller>=6.10"], check=True)


def bundle_paths(dist: Path) -> tuple[Path, Path]:
    """(the folder or .app to ship, the executable that runs the self-test)."""
    if sys.platform == "darwin":
        app = dist / "localchat.app"
        return app, app / "Contents" / "MacOS" / "localchat"
    folder = dist / "localchat"
    exe = folder / ("localchat-cli.exe" if sys.platform == "win32" else "localchat")
    return folder, exe


def tree_size(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        if p.is_file() and not p.is_symlink():
            total += p.stat().st_size
    return total


def run_pyinstaller(dist: Path, work: Path) -> None:
    cmd = [sys.executable, "-m", "PyInstaller", str(SPEC), "--noconfirm", "--log-level", "WARN",
           "--distpath", str(dist), "--workpath", str(work)]  # fmt: skip
    log(" ".join(cmd))
    t0 = time.monotonic()
    subprocess.run(cmd, cwd=ROOT, check=True)
    log(f"PyInstaller finished in {time.monotonic() - t0:.0f} s")


def selftest_command(exe: Path, model: str | None, draft: str | None, gpu_layers: int | None) -> list[str]:
    cmd = [str(exe), "--selftest"]
    if model:
        cmd += ["--model", model, "--draft", draft or model]
    if gpu_layers is not None:
        cmd += ["--gpu-layers", str(gpu_layers)]
    return cmd


def run_selftest(
    exe: Path, model: str | None, draft: str | None, gpu_layers: int | None = None
) -> tuple[int, float | None]:
    cmd = selftest_command(exe, model, draft, gpu_layers)
    log("self-test: " + " ".join(cmd))
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=SELFTEST_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        log(f"self-test: no answer within {SELFTEST_TIMEOUT_S} s")
        return 1, None
    print(proc.stdout, end="", flush=True)
    if proc.returncode != 0 and proc.stderr:
        print(proc.stderr[-4000:], end="", file=sys.stderr, flush=True)
    m = re.search(r"window shown ([\d.]+) s after start", proc.stdout)
    log(f"self-test exit code {proc.returncode} after {time.monotonic() - t0:.1f} s")
    return proc.returncode, float(m.group(1)) if m else None


def archive(bundle: Path, backend: str) -> Path:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    osname = {"win32": "windows", "darwin": "macos"}.get(sys.platform, "linux")
    arch = platform.machine().lower().replace("amd64", "x86_64").replace("aarch64", "arm64")
    base = ROOT / "dist" / f"localchat-{version}-{osname}-{arch}-{backend}"
    if sys.platform == "darwin":
        out = base.with_suffix(".zip")
        subprocess.run(
            ["ditto", "-c", "-k", "--sequesterRsrc", "--keepParent", str(bundle), str(out)], check=True
        )
    elif sys.platform == "win32":
        out = Path(shutil.make_archive(str(base), "zip", bundle.parent, bundle.name))
    else:
        out = base.with_name(base.name + ".tar.gz")
        with tarfile.open(out, "w:gz") as tar:  # keeps the executable bits that a zip upload would drop
            tar.add(bundle, arcname=bundle.name)
    log(f"archive: {out} ({out.stat().st_size / 1e6:.0f} MB)")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=BACKENDS, default="cpu")
    p.add_argument("--skip-install", action="store_true", help="use the installed llama-cpp-python as it is")
    p.add_argument("--native", action="store_true", help="compile llama.cpp for this machine's CPU only")
    p.add_argument(
        "--skip-selftest", action="store_true", help="build only (e.g. CUDA on a runner with no GPU)"
    )
    p.add_argument("--model", help="target GGUF for the self-test (default: the starter pair)")
    p.add_argument("--draft", help="draft GGUF for the self-test (default: --model itself)")
    p.add_argument(
        "--selftest-gpu-layers",
        type=int,
        metavar="N",
        help="layers the self-test offloads (default: all; 0 on hosted Mac runners, whose virtual GPU "
        "the Metal kernels cannot use)",
    )
    p.add_argument("--dist", type=Path, help="output folder (default dist/<backend>)")
    p.add_argument("--archive", action="store_true", help="also pack the bundle as .tar.gz / .zip")
    args = p.parse_args(argv)

    if args.backend == "metal" and sys.platform != "darwin":
        p.error("the metal backend is built on macOS only")
    if args.backend == "cuda" and sys.platform == "darwin":
        p.error("CUDA is not available on macOS; use --backend metal or cpu")

    installed = installed_llama_backend()
    if args.skip_install:
        log(f"llama-cpp-python installed for {installed or 'nothing (not installed)'}; --skip-install: kept")
        if installed is None:
            return 1
        if installed != args.backend:
            log(f"warning: building a {args.backend} bundle with a {installed} llama-cpp-python")
    elif installed != args.backend:
        install_llama(args.backend, args.native)
    else:
        log(f"llama-cpp-python is already built for {installed}; not reinstalled")
    ensure_pyinstaller()

    dist = (args.dist or ROOT / "dist" / args.backend).resolve()
    run_pyinstaller(dist, ROOT / "build" / f"pyinstaller-{args.backend}")
    bundle, exe = bundle_paths(dist)
    size_mb = tree_size(bundle) / 1e6
    log(f"bundle: {bundle}")
    log(f"bundle size: {size_mb:.0f} MB")

    code = 0
    if args.skip_selftest:
        log("self-test skipped")
    else:
        code, window_s = run_selftest(exe, args.model, args.draft, args.selftest_gpu_layers)
        if window_s is not None:
            log(f"cold start to a shown window (offscreen): {window_s:.2f} s")
    if args.archive:
        archive(bundle, args.backend)
    verdict = "skipped" if args.skip_selftest else ("passed" if code == 0 else "FAILED")
    log(f"summary: {args.backend} bundle {size_mb:.0f} MB, self-test {verdict}")
    return code


if __name__ == "__main__":
    sys.exit(main())
