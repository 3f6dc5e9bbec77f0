"""GGUF header reading on the real test models and on broken files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from localchat.catalog import gguf
from localchat.catalog.errors import GgufError
from localchat.catalog.gguf import MetadataCache, read_metadata
from localchat.catalog.library import Library
from tests.catalog.ggufwriter import vocab_kv, write_gguf


@pytest.fixture
def cache(tmp_path: Path) -> MetadataCache:
    return MetadataCache(tmp_path / "cache")


def test_smollm2_metadata(smollm2_path: Path, cache: MetadataCache) -> None:
    meta = read_metadata(smollm2_path, cache)
    assert meta.architecture == "llama"
    assert meta.quantization == "Q4_1"
    assert meta.n_vocab == 49152
    assert meta.block_count == 30
    assert meta.context_length == 8192
    assert meta.has_chat_template
    assert meta.size_label == "135M"
    assert 130e6 < meta.parameter_count < 140e6
    assert meta.vocab_type == "gpt2"
    assert (meta.bos_token_id, meta.eos_token_id) == (1, 2)
    assert meta.file_size == smollm2_path.stat().st_size
    assert len(meta.fingerprint) == 64
    assert not meta.is_projector and not meta.is_recurrent


def test_fingerprints_tell_vocabularies_apart(
    smollm2_path: Path, gemma3_path: Path, qwen_target_path: Path, qwen_draft_path: Path, cache: MetadataCache
) -> None:
    smol, gemma = read_metadata(smollm2_path, cache), read_metadata(gemma3_path, cache)
    target, draft = read_metadata(qwen_target_path, cache), read_metadata(qwen_draft_path, cache)
    assert target.fingerprint == draft.fingerprint
    assert target.n_vocab == draft.n_vocab == 151936
    assert len({smol.fingerprint, gemma.fingerprint, target.fingerprint}) == 3
    assert gemma.architecture == "gemma3" and gemma.n_vocab == 262144
    assert target.architecture == "qwen2" and target.block_count == 28 and target.quantization == "Q4_K_M"


def test_zero_byte_file(tmp_path: Path, cache: MetadataCache) -> None:
    p = tmp_path / "empty.gguf"
    p.touch()
    with pytest.raises(GgufError, match=r"empty \(0 bytes\)") as info:
        read_metadata(p, cache)
    assert str(p) in str(info.value) and str(info.value).endswith(".")


def test_not_a_gguf(tmp_path: Path, cache: MetadataCache) -> None:
    p = tmp_path / "notes.gguf"
    p.write_text("this is a text file, not a model\n" * 4)
    with pytest.raises(GgufError, match="not a GGUF file"):
        read_metadata(p, cache)


def test_missing_file(tmp_path: Path, cache: MetadataCache) -> None:
    with pytest.raises(GgufError, match="does not exist"):
        read_metadata(tmp_path / "nope.gguf", cache)


def test_truncated_header_of_a_real_model(smollm2_path: Path, tmp_path: Path, cache: MetadataCache) -> None:
    p = tmp_path / "cut.gguf"
    with smollm2_path.open("rb") as src, p.open("wb") as dst:
        dst.write(src.read(300_000))  # inside the vocabulary
    with pytest.raises(GgufError, match="truncated"):
        read_metadata(p, cache)


def test_truncated_tensor_data(smollm2_path: Path, tmp_path: Path, cache: MetadataCache) -> None:
    p = tmp_path / "short.gguf"
    with smollm2_path.open("rb") as src, p.open("wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
        dst.truncate(smollm2_path.stat().st_size - 4096)
    with pytest.raises(GgufError, match="tensors need"):
        read_metadata(p, cache)


def test_unsupported_version(tmp_path: Path, cache: MetadataCache) -> None:
    p = write_gguf(tmp_path / "v1.gguf", vocab_kv(["a", "b", "c"]), version=1)
    with pytest.raises(GgufError, match="version 1 is not supported"):
        read_metadata(p, cache)


def test_padding_tokens_do_not_change_the_fingerprint(tmp_path: Path, cache: MetadataCache) -> None:
    tokens = ["<unk>", "<s>", "</s>", "hello", "world"]
    plain = write_gguf(
        tmp_path / "plain.gguf", vocab_kv(tokens, **{"tokenizer.ggml.token_type": [2, 3, 3, 1, 1]})
    )
    padded_tokens = [*tokens, "[PAD5]", "[PAD6]"]
    padded = write_gguf(
        tmp_path / "padded.gguf",
        vocab_kv(padded_tokens, **{"tokenizer.ggml.token_type": [2, 3, 3, 1, 1, 5, 5]}),
    )
    other = write_gguf(tmp_path / "other.gguf", vocab_kv([*tokens[:4], "World"]))
    a, b, c = (read_metadata(p, cache) for p in (plain, padded, other))
    assert a.fingerprint == b.fingerprint
    assert (a.n_vocab, b.n_vocab) == (5, 7)
    assert c.fingerprint != a.fingerprint


def test_special_ids_are_part_of_the_fingerprint(tmp_path: Path, cache: MetadataCache) -> None:
    tokens = ["a", "b", "c"]
    one = write_gguf(tmp_path / "one.gguf", vocab_kv(tokens))
    two = write_gguf(tmp_path / "two.gguf", vocab_kv(tokens, **{"tokenizer.ggml.eos_token_id": 0}))
    assert read_metadata(one, cache).fingerprint != read_metadata(two, cache).fingerprint


def test_cache_hit_and_invalidation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache_dir = tmp_path / "cache"
    p = write_gguf(tmp_path / "m.gguf", vocab_kv(["a", "b", "c"]), [("w", [8, 4])])
    first = read_metadata(p, MetadataCache(cache_dir))
    assert (cache_dir / MetadataCache.FILENAME).is_file()

    def boom(path: Path) -> None:
        raise AssertionError("the header was read again")

    real_parse = gguf._parse
    monkeypatch.setattr(gguf, "_parse", boom)
    again = read_metadata(p, MetadataCache(cache_dir))  # a fresh object reads the JSON file
    assert again == first

    st = p.stat()
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 10_000_000))
    with pytest.raises(AssertionError, match="read again"):
        read_metadata(p, MetadataCache(cache_dir))
    monkeypatch.setattr(gguf, "_parse", real_parse)
    assert read_metadata(p, MetadataCache(cache_dir)).parameter_count == 32


def test_errors_are_cached_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = MetadataCache(tmp_path / "cache")
    p = tmp_path / "bad.gguf"
    p.write_bytes(b"not a model at all, sorry")
    with pytest.raises(GgufError):
        read_metadata(p, cache)
    monkeypatch.setattr(gguf, "_parse", lambda path: (_ for _ in ()).throw(AssertionError("re-read")))
    with pytest.raises(GgufError, match="not a GGUF file"):
        read_metadata(p, MetadataCache(tmp_path / "cache"))


def test_multimodal_projector_and_recurrent_flags(tmp_path: Path, cache: MetadataCache) -> None:
    proj = write_gguf(tmp_path / "mmproj.gguf", {"general.architecture": "clip", "general.type": "mmproj"})
    meta = read_metadata(proj, cache)
    assert meta.is_projector and not meta.has_vocab and meta.fingerprint == ""
    mamba = write_gguf(tmp_path / "mamba.gguf", vocab_kv(["a", "b"], arch="mamba"))
    assert read_metadata(mamba, cache).is_recurrent


def test_corrupt_cache_file_is_ignored(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    (cache_dir / MetadataCache.FILENAME).write_text("{not json")
    p = write_gguf(tmp_path / "m.gguf", vocab_kv(["a", "b", "c"]))
    assert read_metadata(p, MetadataCache(cache_dir)).n_vocab == 3



_BAD_ENTRIES: dict[str, object] = {
    "string": "a string",
    "list": ["a", "list"],
    "number": 17,
    "null": None,
    "meta string": {"size": "SIZE", "mtime_ns": "MTIME", "meta": "a string"},
    "meta list": {"size": "SIZE", "mtime_ns": "MTIME", "meta": ["a", "list"]},
    "fields missing": {"size": "SIZE", "mtime_ns": "MTIME", "meta": {"path": "x"}},
    "n_vocab a string": {"size": "SIZE", "mtime_ns": "MTIME", "meta": "GOOD", "n_vocab": "many"},
    "file_size null": {"size": "SIZE", "mtime_ns": "MTIME", "meta": "GOOD", "file_size": None},
    "context a list": {"size": "SIZE", "mtime_ns": "MTIME", "meta": "GOOD", "context_length": [4096]},
    "flag a string": {"size": "SIZE", "mtime_ns": "MTIME", "meta": "GOOD", "has_chat_template": "yes"},
    "error a list": {"size": "SIZE", "mtime_ns": "MTIME", "error": ["not", "a", "sentence"]},
}


@pytest.mark.parametrize("bad", _BAD_ENTRIES.values(), ids=_BAD_ENTRIES.keys())
def test_a_cache_entry_of_the_wrong_shape_is_read_again(tmp_path: Path, bad: object) -> None:
    """A cache entry that is not the mapping it should be (a string, a list, fields of the wrong type)
    stopped `localchat models` and the model manager; it is ignored and the header read again."""
    import json

    cache_dir = tmp_path / "cache"
    p = write_gguf(tmp_path / "m.gguf", vocab_kv(["a", "b", "c"]), [("w", [8, 4])])
    good = read_metadata(p, MetadataCache(cache_dir))
    file = cache_dir / MetadataCache.FILENAME
    data = json.loads(file.read_text())
    (key,) = data["entries"]
    st = p.stat()
    if isinstance(bad, dict):
        entry = {k: v for k, v in bad.items() if k in ("size", "mtime_ns", "meta", "error")}
        entry["size"], entry["mtime_ns"] = st.st_size, st.st_mtime_ns
        if entry.get("meta") == "GOOD":
            entry["meta"] = {**good.to_dict(), **{k: v for k, v in bad.items() if k not in entry}}
        bad = entry
    data["entries"][key] = bad
    file.write_text(json.dumps(data))
    assert read_metadata(p, MetadataCache(cache_dir)) == good
    file.write_text(json.dumps(data))  # read_metadata put the good entry back: spoil it again
    (model,) = Library([tmp_path], cache=MetadataCache(cache_dir)).refresh()
    assert model.metadata == good and model.error == ""

def test_catalog_and_hub_import_neither_qt_nor_llama_cpp() -> None:
    import subprocess
    import sys

    code = (
        "import sys, localchat.catalog.gguf, localchat.catalog.library, localchat.catalog.drafters, "
        "localchat.hub.download, localchat.hub.pull; "
        "bad = [m for m in ('llama_cpp', 'PySide6', 'huggingface_hub') if m in sys.modules]; "
        "sys.exit(', '.join(bad) or None)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, (
        proc.stderr
    )  # huggingface_hub too: it is imported only when a download starts
