"""tools/install.py: the flags of the llama-cpp-python build and the wheelhouse they key.

A native x86-64 build with ggml's AMX kernels crashed every multi-token batch on an AMX processor,
so README's install command keeps the compiler from assuming AMX; and a wheel built for one
processor must not be installed on another, so the wheelhouse is keyed by the processor too.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_install() -> ModuleType:
    spec = importlib.util.spec_from_file_location("localchat_install_script", ROOT / "tools" / "install.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def install(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    return load_install()


def test_a_native_x86_build_leaves_amx_out(install: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(sys, "platform", "linux")
    flags = install.cmake_args().split()
    assert "-DGGML_RPC=on" in flags
    assert "-DCMAKE_C_FLAGS=-mno-amx-int8" in flags and "-DCMAKE_CXX_FLAGS=-mno-amx-int8" in flags


@pytest.mark.parametrize("machine,plat", [("aarch64", "linux"), ("arm64", "darwin"), ("AMD64", "win32")])
def test_other_processors_and_msvc_get_no_x86_compiler_flag(
    install: ModuleType, monkeypatch: pytest.MonkeyPatch, machine: str, plat: str
) -> None:
    monkeypatch.setattr(install.platform, "machine", lambda: machine)
    monkeypatch.setattr(sys, "platform", plat)
    assert "amx" not in install.cmake_args()


@pytest.mark.parametrize(
    "user", ["-DGGML_NATIVE=off -DGGML_AVX2=on", "-DCMAKE_CXX_FLAGS=-O2", "-DGGML_AMX_INT8=on"]
)
def test_the_users_own_choice_of_instruction_sets_is_left_alone(
    install: ModuleType, monkeypatch: pytest.MonkeyPatch, user: str
) -> None:
    monkeypatch.setattr(install.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("CMAKE_ARGS", user)
    flags = install.cmake_args()
    assert "-mno-amx-int8" not in flags
    assert flags.startswith("-DGGML_RPC=on ") and flags.endswith(user)


def test_the_wheelhouse_is_keyed_by_flags_and_processor(
    install: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = install.wheelhouse("0.3.36", "-DGGML_RPC=on")
    assert a == install.wheelhouse("0.3.36", "-DGGML_RPC=on")
    assert a != install.wheelhouse("0.3.36", "-DGGML_RPC=on -DGGML_CUDA=on")
    monkeypatch.setattr(install, "processor", lambda: "x86_64 flags: sse2 avx2")
    b = install.wheelhouse("0.3.36", "-DGGML_RPC=on")
    monkeypatch.setattr(install, "processor", lambda: "x86_64 flags: sse2 avx2 avx512f amx_int8")
    assert b != install.wheelhouse("0.3.36", "-DGGML_RPC=on")


def test_under_pyenv_the_new_command_is_rehashed_onto_path(
    install: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """README's `python tools/install.py && localchat`: under pyenv the localchat console script is on
    PATH only after its shims are rehashed; without pyenv, a scripts folder off PATH is named."""
    ran: list[list[str]] = []
    monkeypatch.setattr(install.subprocess, "run", lambda cmd, **_kw: ran.append(cmd))
    found = {"pyenv": "/opt/pyenv/bin/pyenv", "localchat": None}
    monkeypatch.setattr(install.shutil, "which", lambda name: found.get(name))
    install.command_on_path()
    assert ran == [["/opt/pyenv/bin/pyenv", "rehash"]]
    ran.clear()
    found["pyenv"] = None
    install.command_on_path()
    assert ran == [] and "-m localchat" in capsys.readouterr().out
    found["localchat"] = "/usr/local/bin/localchat"
    install.command_on_path()
    assert ran == [] and capsys.readouterr().out == ""
