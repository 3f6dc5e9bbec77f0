"""server.model_shelf: the local models the API lists and may load, under the ids the servers give
them, and the config a load uses, the drafter paired as the window pairs it (real GGUF headers)."""

from __future__ import annotations

from pathlib import Path

from localchat.catalog.drafters import load_catalog
from localchat.catalog.library import Library
from localchat.engine.types import EngineConfig
from localchat.server.model_shelf import ModelShelf


def _shelf(folder: Path, **kw: object) -> ModelShelf:
    return ModelShelf(lambda: Library([folder]), load_catalog,
                      lambda target, draft: EngineConfig(target, draft, n_ctx=2048), lambda: True, **kw)  # type: ignore[arg-type]


def test_the_shelf_lists_usable_models_by_their_served_ids_and_pairs_as_the_window(
    tmp_path: Path, qwen_target_path: Path, qwen_draft_path: Path
) -> None:
    for path in (qwen_target_path, qwen_draft_path):
        (tmp_path / path.name).symlink_to(path)
    (tmp_path / "notes.gguf").write_text("not a model")  # unreadable: not listed
    shelf = _shelf(tmp_path)
    models = shelf.models()
    assert [m.id for m in models] == ["qwen2.5-coder-0.5b-instruct-q4_k_m", "qwen2.5-coder-1.5b-instruct"]
    target = shelf.find("QWEN2.5-coder-1.5b-instruct")  # names match regardless of case
    assert target is not None and shelf.find(qwen_target_path.name) == target  # the file name too
    assert shelf.find("nothing-like-it") is None
    config = shelf.config_for(target)
    # The catalog's drafter for the 1.5B target, found in the folder, as the model manager pairs it.
    assert config == EngineConfig(str(tmp_path / qwen_target_path.name), str(tmp_path / qwen_draft_path.name),
                                  n_ctx=2048)


def test_an_alias_lists_a_file_under_the_name_serve_was_given(tmp_path: Path, smollm2_path: Path) -> None:
    (tmp_path / smollm2_path.name).symlink_to(smollm2_path)
    shelf = _shelf(tmp_path, aliases={str(tmp_path / smollm2_path.name): "my-model"})
    assert [m.id for m in shelf.models()] == ["my-model"]
    assert shelf.find("my-model") is not None
