"""Bad files and incompatible drafters get a sentence, never a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from localchat.engine.backend import Model
from localchat.engine.compat import check_compatible
from localchat.engine.engine import Engine
from localchat.engine.errors import IncompatibleDraftError, ModelLoadError
from localchat.engine.types import DrafterKind, EngineConfig, SpeculationConfig


def test_zero_byte_file(tmp_path: Path) -> None:
    f = tmp_path / "empty.gguf"
    f.write_bytes(b"")
    with pytest.raises(ModelLoadError, match="empty"):
        Model(f)


def test_not_a_gguf(tmp_path: Path) -> None:
    f = tmp_path / "notes.gguf"
    f.write_text("this is a text file, not a model\n" * 10)
    with pytest.raises(ModelLoadError, match="not a GGUF"):
        Model(f)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="does not exist"):
        Model(tmp_path / "nope.gguf")


def test_truncated_gguf(tmp_path: Path, smollm2_path: Path) -> None:
    f = tmp_path / "truncated.gguf"
    with smollm2_path.open("rb") as src:
        f.write_bytes(src.read(5_000_000))
    with pytest.raises(ModelLoadError, match=r"truncated|incomplete") as info:
        Model(f)
    assert "truncated.gguf" in str(info.value)


def test_truncated_header(tmp_path: Path, smollm2_path: Path) -> None:
    f = tmp_path / "header.gguf"
    with smollm2_path.open("rb") as src:
        f.write_bytes(src.read(2000))
    with pytest.raises(ModelLoadError):
        Model(f)


def test_incompatible_vocabularies_name_the_rule(
    smollm2_path: Path, qwen_draft_path: Path, gemma3_path: Path
) -> None:
    smol = Model(smollm2_path, vocab_only=True)
    qwen = Model(qwen_draft_path, vocab_only=True)
    gemma = Model(gemma3_path, vocab_only=True)
    try:
        with pytest.raises(IncompatibleDraftError) as e1:
            check_compatible(smol, qwen)
        with pytest.raises(IncompatibleDraftError) as e2:
            check_compatible(gemma, qwen)
        for err in (e1.value, e2.value):
            assert err.rule in {"vocabulary type", "BOS token id", "EOS token id", "add-BOS flag",
                                "add-EOS flag", "vocabulary size"} or err.rule.startswith("text of token")
            assert str(err.target_value) in str(err) and str(err.draft_value) in str(err)
        check_compatible(qwen, qwen)  # a model always drafts for itself
    finally:
        for m in (smol, qwen, gemma):
            m.close()


def test_compatible_real_pair(qwen_target_path: Path, qwen_draft_path: Path) -> None:
    t = Model(qwen_target_path, vocab_only=True)
    d = Model(qwen_draft_path, vocab_only=True)
    try:
        check_compatible(t, d)
    finally:
        t.close()
        d.close()


def test_engine_with_incompatible_drafter_decodes_plainly_and_says_why(
    smollm2_path: Path, qwen_draft_path: Path
) -> None:
    with Engine(EngineConfig(str(smollm2_path), draft_path=str(qwen_draft_path), n_ctx=512)) as eng:
        assert eng.info.draft is None
        assert "not compatible" in eng.draft_problem
        state = eng.speculation_state(SpeculationConfig(drafter=DrafterKind.MODEL))
        assert not state.active and "not compatible" in state.reason
        auto = eng.speculation_state(SpeculationConfig(drafter=DrafterKind.AUTO))
        assert auto.drafter == "n-gram" and "not compatible" in auto.reason


def test_engine_with_broken_drafter_file(tmp_path: Path, smollm2_path: Path) -> None:
    bad = tmp_path / "draft.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 100)
    with Engine(EngineConfig(str(smollm2_path), draft_path=str(bad), n_ctx=512)) as eng:
        assert eng.info.draft is None
        assert "could not be loaded" in eng.draft_problem
