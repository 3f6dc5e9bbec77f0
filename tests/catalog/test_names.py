"""Model names from the catalog: display name and quantization, never the GGUF's general.name."""

from __future__ import annotations

from localchat.catalog.drafters import load_catalog
from localchat.catalog.names import file_stem, model_name, quant_of, shipped_model_name


def test_a_target_is_named_by_its_entry_and_quantization() -> None:
    catalog = load_catalog()
    assert model_name("/m/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", catalog) == (
        "Qwen2.5-Coder 1.5B Instruct · Q4_K_M"
    )
    assert model_name(r"C:\models\QWEN2.5-CODER-1.5B-INSTRUCT-Q4_K_M.gguf", catalog) == (
        "Qwen2.5-Coder 1.5B Instruct · Q4_K_M"
    )


def test_a_drafter_is_named_from_its_repo_in_the_same_style() -> None:
    # The file's own general.name says "Qwen2.5 Coder 0.5B Instruct AWQ" although it is a Q4_K_M.
    assert shipped_model_name("/m/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf") == (
        "Qwen2.5-Coder 0.5B Instruct · Q4_K_M"
    )
    assert shipped_model_name("/m/Qwen3-0.6B-Q8_0.gguf") == "Qwen3 0.6B · Q8_0"
    assert shipped_model_name("/m/gemma-3-1b-it-q4_0.gguf") == "gemma-3 1b it qat · Q4_0"


def test_a_file_the_catalog_does_not_list_keeps_its_file_name() -> None:
    assert shipped_model_name("/home/me/models/my-finetune.gguf") == "my-finetune.gguf"
    assert model_name("/m/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", None) == (
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    )


def test_quantization_from_the_file_name() -> None:
    assert quant_of("x-q4_k_m.gguf") == "Q4_K_M"
    assert quant_of("SmolLM2-135M-Instruct.Q4_1.gguf") == "Q4_1"
    assert quant_of("model-IQ4_XS.gguf") == "IQ4_XS"
    assert quant_of("model.f16.gguf") == "F16"
    assert quant_of("model.gguf") == ""


def test_the_api_model_id_is_the_file_name_without_its_gguf_ending() -> None:
    assert file_stem("/m/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf") == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert file_stem(r"C:\models\My-Model.Q8_0.GGUF") == "My-Model.Q8_0"
    assert file_stem("/m/notes.txt") == "notes.txt"
    assert quant_of(r"C:\models\My-Model.Q8_0.GGUF") == "Q8_0"


def test_the_api_id_is_the_catalog_id_for_any_of_its_files_else_the_file_stem() -> None:
    """One id for a file on both servers and in the README (the app's said the file stem, `serve` the
    catalog id)."""
    from localchat.catalog.drafters import load_catalog
    from localchat.catalog.names import served_id, shipped_served_id

    catalog = load_catalog()
    starter = "/models/Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert served_id(starter, catalog) == "qwen2.5-coder-1.5b-instruct"
    assert shipped_served_id(starter.upper().replace("/MODELS", "/models")) == "qwen2.5-coder-1.5b-instruct"
    entry = catalog.get("qwen2.5-coder-1.5b-instruct")
    for quant in entry.quants:  # whichever quantization is loaded
        assert served_id(f"C:\\models\\{quant.filename}", catalog) == entry.id
    assert served_id("/m/SmolLM2-135M-Instruct.Q4_1.gguf", catalog) == "SmolLM2-135M-Instruct.Q4_1"
    assert served_id("/m/mine.GGUF", None) == "mine"
