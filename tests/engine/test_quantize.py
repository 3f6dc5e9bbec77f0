"""engine/quantize.requantize: a real GGUF rewritten at another precision keeps its vocabulary and
says its new type; a file llama.cpp cannot read is a ModelLoadError and leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from localchat.catalog.gguf import MetadataCache, read_metadata
from localchat.engine.errors import ModelLoadError
from localchat.engine.quantize import requantize


def test_a_model_rewritten_as_q8_0_keeps_its_vocabulary(tmp_path: Path, smollm2_path: Path) -> None:
    dst = requantize(smollm2_path, tmp_path / "smol-q8.gguf", "q8_0", threads=2)
    src_meta = read_metadata(smollm2_path, MetadataCache(None))
    meta = read_metadata(dst, MetadataCache(None))
    assert meta.quantization == "Q8_0" and src_meta.quantization != "Q8_0"
    assert meta.fingerprint == src_meta.fingerprint and meta.n_vocab == src_meta.n_vocab
    assert not list(tmp_path.glob("*.tmp"))


def test_a_file_that_is_no_gguf_is_a_load_error_and_leaves_nothing(tmp_path: Path) -> None:
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"not a model" * 100)
    with pytest.raises(ModelLoadError, match=r"Could not convert fake\.gguf to f16"):
        requantize(fake, tmp_path / "out.gguf")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake.gguf"]
