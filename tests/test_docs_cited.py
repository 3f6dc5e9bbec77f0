"""Every document the code, the tests or the catalog cite is in the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITATION = re.compile(r"\b(?:docs/)?[A-Z][A-Z-]+\.md\b")


def _cited() -> dict[str, set[str]]:
    cited: dict[str, set[str]] = {}
    files = [*ROOT.joinpath("localchat").rglob("*.py"), *ROOT.joinpath("tests").rglob("*.py")]
    files += [ROOT / "drafters.toml", ROOT / "localchat" / "data" / "drafters.toml"]
    for path in files:
        for name in CITATION.findall(path.read_text(encoding="utf-8")):
            cited.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return cited


def test_cited_documents_exist() -> None:
    cited = _cited()
    assert "docs/TEST-MODELS.md" in cited
    missing = {name: sorted(where) for name, where in cited.items() if not (ROOT / name).is_file()}
    assert not missing, missing


def test_test_models_doc_lists_every_shipped_record() -> None:
    from localchat.catalog.drafters import load_catalog

    text = (ROOT / "docs/TEST-MODELS.md").read_text(encoding="utf-8")
    for record in load_catalog().pypi:
        assert f"`{record.key}`" in text and record.sha256 in text and f"{record.size:,}" in text
