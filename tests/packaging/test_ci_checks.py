"""The bundle workflow's checks: CUDA libraries in the bundle, the self-test's --gpu-layers, the workflow."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import yaml

from localchat.cli import build_parser, selftest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "packaging" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


check = _load("check_cuda_libs")
build = _load("build")


def test_ldd_missing_library_fails_but_the_driver_may_be_missing(tmp_path: Path) -> None:
    lib = tmp_path / "_internal" / "llama_cpp" / "lib"
    lib.mkdir(parents=True)
    (lib / "libcudart.so.12").write_bytes(b"x")
    out = (
        "\tlinux-vdso.so.1 (0x00007ffd)\n"
        f"\tlibcudart.so.12 => {lib / 'libcudart.so.12'} (0x00007f01)\n"
        "\tlibcuda.so.1 => not found\n"
        "\tlibcublasLt.so.12 => not found\n"
        "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f02)\n"
    )
    assert check.ldd_problems(out, tmp_path) == ["libcublasLt.so.12 not found"]


def test_ldd_cuda_library_from_the_build_machine_fails(tmp_path: Path) -> None:
    out = "\tlibcublas.so.12 => /usr/local/cuda-12.4/targets/x86_64-linux/lib/libcublas.so.12 (0x00007f01)\n"
    problems = check.ldd_problems(out, tmp_path)
    assert len(problems) == 1 and "outside the bundle" in problems[0]


def test_windows_dlls_beside_ggml_cuda(tmp_path: Path) -> None:
    lib = tmp_path / "_internal" / "llama_cpp" / "lib"
    lib.mkdir(parents=True)
    assert check.missing_windows_dlls(tmp_path) == ["ggml-cuda.dll is not in the bundle (not a CUDA build?)"]
    (lib / "ggml-cuda.dll").write_bytes(b"x")
    (lib / "cudart64_12.dll").write_bytes(b"x")
    (tmp_path / "cublas64_12.dll").write_bytes(b"x")  # elsewhere in the bundle: not on the search path
    missing = check.missing_windows_dlls(tmp_path)
    assert [m.split()[0] for m in missing] == ["cublas64_*.dll", "cublasLt64_*.dll"]


def test_selftest_gpu_layers_reaches_the_engine_config() -> None:
    argv = ["selftest", "--model", "t.gguf", "--draft", "d.gguf", "--gpu-layers", "0"]
    args = build_parser().parse_args(argv)
    config = selftest._engine_config(args, Path("t.gguf"), Path("d.gguf"))
    assert config.gpu_layers == 0
    default = build_parser().parse_args(["selftest"])
    assert selftest._engine_config(default, Path("t.gguf"), Path("t.gguf")).gpu_layers == -1


def test_build_passes_the_gpu_layers_to_the_selftest() -> None:
    cmd = build.selftest_command(Path("app"), "t.gguf", None, 0)
    assert cmd == ["app", "--selftest", "--model", "t.gguf", "--draft", "t.gguf", "--gpu-layers", "0"]
    assert "--gpu-layers" not in build.selftest_command(Path("app"), None, None, None)


def _workflow() -> dict[str, object]:
    loaded = yaml.safe_load((ROOT / ".github" / "workflows" / "bundles.yml").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def test_workflow_rows_and_cuda_packages() -> None:
    wf = _workflow()
    assert "workflow_dispatch" in wf[True]  # type: ignore[operator]  # YAML 1.1 reads the key `on` as True
    job = wf["jobs"]["bundle"]  # type: ignore[index]
    rows = job["strategy"]["matrix"]["include"]
    mac = [r for r in rows if r["os-name"] == "macos"]
    assert [(r["runner"], r["backend"]) for r in mac] == [("macos-14", "metal")]
    steps = {s.get("name"): s for s in job["steps"]}
    linux = steps["CUDA toolkit (Linux)"]["with"]
    # The action installs apt packages cuda-<sub-package>-12-4 and <non-cuda-sub-package>-12-4.
    assert not {"cublas", "cublas_dev", "thrust"} & set(yaml.safe_load(linux["sub-packages"]))
    assert {"libcublas", "libcublas-dev"} <= set(yaml.safe_load(linux["non-cuda-sub-packages"]))
    windows = yaml.safe_load(steps["CUDA toolkit (Windows)"]["with"]["sub-packages"])
    assert {"cudart", "cublas", "cublas_dev", "thrust", "visual_studio_integration"} <= set(windows)
