"""Cheap checks of the PyInstaller spec and hook (the bundle itself is built by packaging/ci_bundle.sh)."""

from __future__ import annotations

import ast
import importlib.util
import re
import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "packaging" / "localchat.spec"
HOOK = ROOT / "packaging" / "hooks" / "hook-llama_cpp.py"


def _hook_module() -> dict[str, object]:
    return runpy.run_path(str(HOOK))


def test_hook_collects_the_llama_library_where_llama_cpp_looks_for_it() -> None:
    pytest.importorskip("llama_cpp")
    hook = _hook_module()
    binaries = hook["binaries"]
    assert isinstance(binaries, list)
    names = {Path(src).name: dest for src, dest in binaries}
    lib = {"linux": "libllama.so", "darwin": "libllama.dylib", "win32": "llama.dll"}.get(
        sys.platform, "libllama.so"
    )
    assert lib in names, f"the hook did not find {lib}: {sorted(names)}"
    # llama_cpp computes its library folder from its own __file__: <package>/lib (LLAMA_CPP_LIB_PATH unset).
    import llama_cpp.llama_cpp as bindings

    pkg_dir = Path(importlib.util.find_spec("llama_cpp").origin).parent  # type: ignore[union-attr,arg-type]
    rel = Path(bindings._base_path).relative_to(pkg_dir)
    assert Path(names[lib]) == Path("llama_cpp") / rel
    assert "llama_cpp.server" in hook["excludedimports"]  # type: ignore[operator]


def test_hook_keeps_libraries_and_sonames_and_drops_the_rest(tmp_path: Path) -> None:
    find = _hook_module()["find_llama_libs"]
    lib = tmp_path / "lib"
    (lib / "cmake").mkdir(parents=True)
    for name in (
        "libllama.so", "libllama.so.0", "libllama.so.0.5.0", "libggml-cuda.so", "llama.dll", "ggml.dll",
        "libggml-metal.dylib", "default.metallib", "ggml-metal.metal", "llama.lib", "llama.h",
        "cmake/llama-config.cmake",
    ):  # fmt: skip
        (lib / name).write_bytes(b"x")
    got = {Path(src).name: dest for src, dest in find(tmp_path)}  # type: ignore[operator]
    assert set(got) == {
        "libllama.so", "libllama.so.0", "libggml-cuda.so", "llama.dll", "ggml.dll",
        "libggml-metal.dylib", "default.metallib", "ggml-metal.metal",
    }  # fmt: skip
    assert set(got.values()) == {str(Path("llama_cpp") / "lib")}
    assert find(tmp_path / "missing") == []  # type: ignore[operator]


def test_windows_cuda_runtime_goes_beside_ggml_cuda(tmp_path: Path) -> None:
    dlls = _hook_module()["cuda_runtime_dlls"]
    (tmp_path / "bin").mkdir()
    for name in ("cudart64_12.dll", "cublas64_12.dll", "cublasLt64_12.dll", "nvcc.exe", "cufft64_11.dll"):
        (tmp_path / "bin" / name).write_bytes(b"x")
    cuda_build = [("x/lib/ggml-cuda.dll", "llama_cpp/lib"), ("x/lib/llama.dll", "llama_cpp/lib")]
    got = dlls(cuda_build, str(tmp_path))  # type: ignore[operator]
    assert sorted(Path(src).name for src, _ in got) == [
        "cublas64_12.dll",
        "cublasLt64_12.dll",
        "cudart64_12.dll",
    ]
    assert {dest for _, dest in got} == {str(Path("llama_cpp") / "lib")}
    assert dlls(cuda_build[1:], str(tmp_path)) == []  # type: ignore[operator]
    assert dlls(cuda_build, None) == []  # type: ignore[operator]


def _spec_list(name: str) -> list[str]:
    tree = ast.parse(SPEC.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"{name} not found in the spec")


def test_spec_is_valid_python() -> None:
    compile(SPEC.read_text(encoding="utf-8"), str(SPEC), "exec")


def test_spec_excludes_no_qt_module_that_localchat_imports() -> None:
    excluded = set(_spec_list("QT_UNUSED"))
    used: dict[str, str] = {}
    for path in (ROOT / "localchat").rglob("*.py"):
        for mod in re.findall(r"PySide6\.(Qt\w+)", path.read_text(encoding="utf-8")):
            used.setdefault(mod, str(path.relative_to(ROOT)))
    assert {"QtCore", "QtGui", "QtWidgets"} <= set(used)
    wrongly = {m: used[m] for m in used if m in excluded}
    assert not wrongly, f"the spec leaves out Qt modules that localchat imports: {wrongly}"


def test_spec_drop_list_spares_the_qt_libraries_the_app_needs() -> None:
    drop = _spec_list("QT_DROP_PARTS")
    needed = [
        "PySide6/Qt/lib/libQt6Widgets.so.6",
        "PySide6/Qt/lib/libQt6Gui.so.6",
        "PySide6/Qt/lib/libQt6Core.so.6",
        "PySide6/Qt/lib/libQt6DBus.so.6",
        "PySide6/Qt/lib/libQt6XcbQpa.so.6",
        "PySide6/Qt/plugins/platforms/libqxcb.so",
        "PySide6/Qt/plugins/platforms/libqoffscreen.so",
        "PySide6/Qt6Widgets.dll",
    ]
    for dest in needed:
        assert not any(part in "/" + dest for part in drop), dest


def test_entry_point_calls_freeze_support_before_the_cli() -> None:
    text = (ROOT / "packaging" / "entry.py").read_text(encoding="utf-8")
    assert text.index("multiprocessing.freeze_support()") < text.index("from localchat.cli import main")


def test_icons_exist_in_every_format_the_spec_names() -> None:
    for name in ("localchat.ico", "localchat.icns", "localchat.png"):
        data = (ROOT / "packaging" / "icons" / name).read_bytes()
        assert data[:4] in (b"\x00\x00\x01\x00", b"icns", b"\x89PNG"), name


def test_spec_bundles_the_api_server_stack() -> None:
    """localchat serve needs starlette and uvicorn in the bundle, with uvicorn's by-name imports."""
    text = SPEC.read_text(encoding="utf-8")
    excludes = text[text.index("EXCLUDES = "):text.index("# Qt libraries, plugins")]
    assert not [m for m in ("uvicorn", "starlette", "anyio", "h11") if f'"{m}"' in excludes]
    hidden = set(_spec_list("UVICORN_MODULES"))
    assert {"uvicorn.loops.asyncio", "uvicorn.protocols.http.h11_impl", "uvicorn.lifespan.off"} <= hidden


def test_spec_bundles_pypdf_for_attached_pdfs() -> None:
    """chat/attachments.py imports pypdf when a PDF is attached; the bundle must carry it."""
    text = SPEC.read_text(encoding="utf-8")
    excludes = text[text.index("EXCLUDES = "):text.index("# Qt libraries, plugins")]
    assert '"pypdf"' not in excludes
    assert '+ ["pypdf"]' in text[text.index("hiddenimports="):]


def test_spec_bundles_llguidance_and_the_mcp_sdk_with_what_they_import() -> None:
    """Structured output needs llguidance's compiled module; tool servers need the MCP SDK, which
    imports pydantic, cryptography, click and sse_starlette: none of those may be excluded."""
    import importlib
    import subprocess
    import sys

    hidden = _spec_list("LLGUIDANCE_MODULES") + _spec_list("MCP_MODULES")
    assert {"llguidance._lib", "llguidance.llamacpp", "mcp.client.stdio"} <= set(hidden)
    for name in hidden:
        importlib.import_module(name)  # every name is a module that exists
    text = SPEC.read_text(encoding="utf-8")
    block = text[text.index("EXCLUDES = "):text.index("# Qt libraries, plugins")]
    excludes = set(re.findall(r'"([\w.]+)"', block))
    assert "mypy" in excludes  # the block was read
    probe = ("import sys, llguidance.llamacpp, llguidance.gbnf_to_lark, localchat.toolservers.hub, "
             "localchat.toolservers.stdio_pipe; print(' '.join(sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                            cwd=ROOT).stdout.split()
    assert not [m for m in loaded if m in excludes or m.split(".")[0] in excludes]
