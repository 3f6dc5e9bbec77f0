"""The local library and automatic drafter pairing, on the real test models."""

from __future__ import annotations

from pathlib import Path

import pytest

from localchat.catalog.drafters import load_catalog, parse_catalog
from localchat.catalog.gguf import MetadataCache
from localchat.catalog.library import Library, pair_drafter
from localchat.settings.drafter_kind import DrafterKind
from tests.catalog.ggufwriter import nested_arrays, vocab_kv, write_gguf


@pytest.fixture
def cache(tmp_path: Path) -> MetadataCache:
    return MetadataCache(tmp_path / "cache")


def link(folder: Path, name: str, target: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.symlink_to(target)
    return p


def test_library_lists_models_skips_partials_and_explains_broken_files(
    tmp_path: Path, smollm2_path: Path, cache: MetadataCache
) -> None:
    models = tmp_path / "models"
    link(models / "HuggingFaceTB" / "SmolLM2", smollm2_path.name, smollm2_path)
    (models / "x.gguf.part").write_bytes(b"GGUF partial")
    (models / ".fetch-123").mkdir()
    (models / ".fetch-123" / "tmp.gguf").write_bytes(b"GGUF")
    (models / "broken.gguf").write_bytes(b"")
    extra = write_gguf(tmp_path / "elsewhere.gguf", vocab_kv(["a", "b", "c"]))

    lib = Library([models, tmp_path / "does-not-exist"], [extra], cache)
    found = {m.name: m for m in lib.refresh()}
    assert set(found) == {"broken.gguf", smollm2_path.name, "elsewhere.gguf"}
    assert not found["broken.gguf"].usable and "empty" in found["broken.gguf"].error
    smol = found[smollm2_path.name]
    assert smol.usable and smol.metadata is not None and smol.metadata.architecture == "llama"
    assert smol.size == smollm2_path.stat().st_size
    assert lib.find_file(smollm2_path.name, "HuggingFaceTB/SmolLM2") == smol
    assert lib.find_file("nothing.gguf") is None


def test_split_models_are_listed_once_with_their_total_size(tmp_path: Path, cache: MetadataCache) -> None:
    kv = vocab_kv(["a", "b", "c"], **{"split.count": 2})
    (tmp_path / "m").mkdir()
    first = write_gguf(tmp_path / "m" / "big-00001-of-00002.gguf", kv)
    (tmp_path / "m" / "big-00002-of-00002.gguf").write_bytes(b"x" * 1000)
    [model] = Library([tmp_path / "m"], cache=cache).refresh()
    assert model.name == "big-00001-of-00002.gguf"
    assert model.size == first.stat().st_size + 1000


def test_catalog_drafter_is_chosen_when_present(
    tmp_path: Path, qwen_target_path: Path, qwen_draft_path: Path, smollm2_path: Path, cache: MetadataCache
) -> None:
    models = tmp_path / "models"
    target = link(
        models / "Qwen" / "Qwen2.5-Coder-1.5B-Instruct-GGUF", qwen_target_path.name, qwen_target_path
    )
    link(models / "Qwen" / "Qwen2.5-Coder-0.5B-Instruct-GGUF", qwen_draft_path.name, qwen_draft_path)
    link(models, smollm2_path.name, smollm2_path)
    pairing = pair_drafter(target, load_catalog(), Library([models], cache=cache))
    assert pairing.kind == DrafterKind.MODEL and pairing.source == "catalog"
    assert pairing.draft_path is not None and pairing.draft_path.name == qwen_draft_path.name
    assert "as the catalog recommends" in pairing.reason


def test_pairing_by_fingerprint_for_a_target_not_in_the_table(
    tmp_path: Path,
    qwen_target_path: Path,
    qwen_draft_path: Path,
    smollm2_path: Path,
    gemma3_path: Path,
    cache: MetadataCache,
) -> None:
    models = tmp_path / "models"
    target = link(models, "my-own-qwen-finetune.gguf", qwen_target_path)
    link(models, "tiny-helper.gguf", qwen_draft_path)
    link(models, smollm2_path.name, smollm2_path)
    link(models, gemma3_path.name, gemma3_path)
    catalog, lib = load_catalog(), Library([models], cache=cache)
    assert catalog.find_target_file(target.name) is None

    # The 0.5B is 44% of the 1.5B, beyond the eighth that usually pays: it is tried (the engine's
    # measurement at load keeps it or drafts by lookup), not refused, and the reason says so.
    default = pair_drafter(target, catalog, lib)
    assert default.kind == DrafterKind.MODEL and default.draft_path == models / "tiny-helper.gguf"
    assert default.trial and default.source == "fingerprint"
    shares = "tiny-helper.gguf shares my-own-qwen-finetune.gguf's vocabulary and is 44% of its size"
    assert shares in default.reason
    assert "more than the 12.5% that usually pays: it is tried" in default.reason

    relaxed = pair_drafter(target, catalog, lib, max_ratio=0.5)
    assert relaxed.kind == DrafterKind.MODEL and relaxed.source == "fingerprint" and not relaxed.trial
    assert relaxed.draft_path == models / "tiny-helper.gguf"
    assert f"{shares}, so it drafts" in relaxed.reason


def test_the_f16_target_pairs_with_the_half_billion_drafter(
    tmp_path: Path, qwen_target_f16_path: Path, qwen_draft_path: Path, cache: MetadataCache
) -> None:
    """Issue 30: the F16 1.5B with the 0.5B (14% of it) ran 1.37x plain paired by hand, yet the
    eighth rule refused it and drafted by lookup. It is tried now, for the measurement to decide."""
    models = tmp_path / "models"
    target = link(models, qwen_target_f16_path.name, qwen_target_f16_path)
    link(models, qwen_draft_path.name, qwen_draft_path)
    catalog = load_catalog()
    assert catalog.find_target_file(target.name) is None  # not the catalog's: paired by vocabulary
    pairing = pair_drafter(target, catalog, Library([models], cache=cache))
    assert pairing.kind == DrafterKind.MODEL and pairing.draft_path == models / qwen_draft_path.name
    assert pairing.trial and "14% of its size" in pairing.reason and "it is tried" in pairing.reason


def test_a_model_not_smaller_than_the_target_is_refused_and_says_why(
    tmp_path: Path, qwen_target_path: Path, qwen_draft_path: Path, cache: MetadataCache
) -> None:
    models = tmp_path / "models"
    target = link(models, "small-target.gguf", qwen_draft_path)
    link(models, "big-one.gguf", qwen_target_path)
    pairing = pair_drafter(target, load_catalog(), Library([models], cache=cache))
    assert pairing.kind == DrafterKind.NGRAM and pairing.draft_path is None
    assert "big-one.gguf shares its vocabulary but is not smaller than small-target.gguf" in pairing.reason
    assert pairing.refused


def test_no_model_shares_the_vocabulary(
    tmp_path: Path, smollm2_path: Path, gemma3_path: Path, qwen_draft_path: Path, cache: MetadataCache
) -> None:
    models = tmp_path / "models"
    target = link(models, "smol-target.gguf", smollm2_path)
    link(models, gemma3_path.name, gemma3_path)
    link(models, qwen_draft_path.name, qwen_draft_path)
    pairing = pair_drafter(target, load_catalog(), Library([models], cache=cache))
    assert pairing.kind == DrafterKind.NGRAM and not pairing.refused  # nothing was there to take
    assert pairing.reason.startswith("No local model shares smol-target.gguf's vocabulary.")


def test_the_eighth_is_a_preference_on_synthetic_models(tmp_path: Path, cache: MetadataCache) -> None:
    tokens = ["<unk>", "<s>", "</s>", *(f"tok{i}" for i in range(50))]
    models = tmp_path / "models"
    models.mkdir()
    target = write_gguf(models / "target.gguf", vocab_kv(tokens), total_size=80_000_000)
    write_gguf(models / "small.gguf", vocab_kv(tokens), total_size=9_000_000)
    write_gguf(models / "smaller.gguf", vocab_kv(tokens), total_size=2_000_000)
    write_gguf(models / "too-big.gguf", vocab_kv(tokens), total_size=30_000_000)
    write_gguf(models / "other-vocab.gguf", vocab_kv([*tokens[:-1], "different"]), total_size=5_000_000)
    pairing = pair_drafter(
        target, parse_catalog("schema_version = 1", "empty.toml"), Library([models], cache=cache)
    )
    # The largest same-vocabulary model within an eighth of the target drafts best.
    assert pairing.kind == DrafterKind.MODEL and pairing.draft_path == models / "small.gguf"
    assert not pairing.trial
    # Without one within an eighth, the smallest beyond it is tried.
    (models / "small.gguf").unlink()
    (models / "smaller.gguf").unlink()
    tried = pair_drafter(
        target, parse_catalog("schema_version = 1", "empty.toml"), Library([models], cache=cache)
    )
    assert tried.kind == DrafterKind.MODEL and tried.draft_path == models / "too-big.gguf" and tried.trial


def test_catalog_drafter_missing_falls_back_and_says_so(tmp_path: Path, cache: MetadataCache) -> None:
    catalog = parse_catalog(
        """
schema_version = 1
[[model]]
id = "t"
display_name = "Target T"
family = "t"
params = "7B"
license = "mit"
[[model.quant]]
quant = "Q4_K_M"
repo = "o/T-GGUF"
filename = "t-q4_k_m.gguf"
size = 80000000
[[model.drafter]]
kind = "draft-model"
repo = "o/D-GGUF"
filename = "d-q8_0.gguf"
size = 5000000
""",
        "c.toml",
    )
    tokens = ["a", "b", "c", "d"]
    models = tmp_path / "models"
    models.mkdir()
    target = write_gguf(models / "t-q4_k_m.gguf", vocab_kv(tokens), total_size=80_000_000)
    pairing = pair_drafter(target, catalog, Library([models], cache=cache))
    assert pairing.kind == DrafterKind.NGRAM
    assert pairing.missing_drafter is not None and pairing.missing_drafter.filename == "d-q8_0.gguf"
    assert "is not downloaded" in pairing.reason and "Download d-q8_0.gguf" in pairing.reason
    assert pairing.refused  # the window says it as the model loads

    write_gguf(models / "d-q8_0.gguf", vocab_kv(["a", "b", "x", "d"]), total_size=5_000_000)
    mismatch = pair_drafter(target, catalog, Library([models], cache=cache))
    assert mismatch.kind == DrafterKind.NGRAM and "does not share the target's vocabulary" in mismatch.reason
    assert mismatch.refused


def test_catalog_can_prefer_ngram(tmp_path: Path, cache: MetadataCache) -> None:
    target = write_gguf(tmp_path / "phi-4-Q4_K_M.gguf", vocab_kv(["a", "b", "c"]))
    pairing = pair_drafter(target, load_catalog(), Library([tmp_path], cache=cache))
    assert pairing.kind == DrafterKind.NGRAM and pairing.source == "catalog"
    assert pairing.reason.startswith("The catalog recommends n-gram prompt lookup for Phi-4")


def test_recurrent_and_unreadable_targets(tmp_path: Path, cache: MetadataCache) -> None:
    mamba = write_gguf(tmp_path / "mamba.gguf", vocab_kv(["a", "b"], arch="mamba"))
    lib = Library([tmp_path], cache=cache)
    pairing = pair_drafter(mamba, load_catalog(), lib)
    assert pairing.kind == DrafterKind.NONE and "recurrent" in pairing.reason
    empty = tmp_path / "empty.gguf"
    empty.touch()
    assert pair_drafter(empty, load_catalog(), lib).kind == DrafterKind.NONE
def malformed_headers(folder: Path) -> list[Path]:
    """Four headers that used to raise ValueError/RecursionError out of the reader."""
    folder.mkdir(parents=True, exist_ok=True)
    tokens = ["<unk>", "<s>", "</s>", "hi"]
    return [
        write_gguf(folder / "bad-split.gguf", vocab_kv(tokens, **{"split.count": "two"})),
        write_gguf(folder / "bad-alignment.gguf", vocab_kv(tokens, **{"general.alignment": "32"})),
        write_gguf(folder / "bad-filetype.gguf", vocab_kv(tokens, **{"general.file_type": "Q4_K_M"})),
        write_gguf(folder / "deep-arrays.gguf", vocab_kv(tokens, **{"x.nested": nested_arrays(100_000)})),
    ]


def test_one_malformed_header_is_listed_as_bad_and_the_rest_work(
    tmp_path: Path, qwen_target_path: Path, qwen_draft_path: Path, cache: MetadataCache
) -> None:
    models = tmp_path / "models"
    target = link(models, "my-own-qwen-finetune.gguf", qwen_target_path)
    link(models, "tiny-helper.gguf", qwen_draft_path)
    bad = malformed_headers(models)
    lib = Library([models], cache=cache)
    listed = {m.name: m for m in lib.refresh()}
    for path in bad:
        assert not listed[path.name].usable
        assert "corrupt" in (listed[path.name].error or ""), listed[path.name].error
    assert "split.count is str, not a number" in (listed["bad-split.gguf"].error or "")
    assert "nested more than" in (listed["deep-arrays.gguf"].error or "")
    assert listed[target.name].usable and listed["tiny-helper.gguf"].usable

    paired = pair_drafter(target, load_catalog(), lib, max_ratio=0.5)
    assert paired.kind == DrafterKind.MODEL and paired.draft_path == models / "tiny-helper.gguf"
