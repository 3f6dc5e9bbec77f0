"""drafters.toml: the shipped catalog, and a clear message for each kind of mistake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localchat.catalog.drafters import load_catalog, parse_catalog
from localchat.catalog.errors import CatalogError
from localchat.settings.drafter_kind import DrafterKind

ROOT = Path(__file__).resolve().parents[2]

GOOD = """
schema_version = 1

[[model]]
id = "big"
display_name = "Big 7B"
family = "big"
params = "7B"
license = "mit"

[[model.quant]]
quant = "Q4_K_M"
repo = "org/Big-GGUF"
filename = "big-q4_k_m.gguf"
size = 4000

[[model.drafter]]
kind = "draft-model"
repo = "org/Small-GGUF"
filename = "small-q8_0.gguf"
size = 500
draft_tokens = 5

[[model.drafter]]
kind = "ngram"
"""


def test_shipped_catalog_loads_and_covers_the_pairs_people_run() -> None:
    catalog = load_catalog()
    families = {e.family for e in catalog.entries}
    assert len(families) >= 12
    for family in (
        "qwen2.5-coder",
        "qwen2.5",
        "qwen3",
        "llama-3.1",
        "llama-3.3",
        "gemma-3",
        "gemma-4",
        "deepseek-r1-distill-qwen",
        "mistral-small-3.1",
    ):
        assert family in families
    assert len({e.id for e in catalog.entries}) == len(catalog.entries)
    for entry in catalog.entries:
        assert entry.quants and entry.drafters
        for d in entry.drafters:
            assert d.kind in (DrafterKind.MODEL, DrafterKind.NGRAM, DrafterKind.MTP)
            if d.kind == DrafterKind.MTP:
                assert d.experimental


def test_starter_pair_is_offered_from_the_hub_and_from_pypi() -> None:
    catalog = load_catalog()
    starter = catalog.starter
    assert starter is not None and starter.id == "qwen2.5-coder-1.5b-instruct"
    quant = starter.default_quant
    assert (quant.repo, quant.filename) == (
        "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    )
    drafter = starter.model_drafter
    assert drafter is not None
    assert (drafter.repo, drafter.filename) == (
        "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    )
    assert catalog.pypi_file(quant.pypi).size == quant.size
    assert catalog.pypi_file(drafter.pypi).size == drafter.size


def test_packaged_copy_is_identical_to_the_repository_file() -> None:
    packaged = ROOT / "localchat" / "data" / "drafters.toml"
    assert packaged.read_bytes() == (ROOT / "drafters.toml").read_bytes(), (
        "localchat/data/drafters.toml differs from drafters.toml: copy the root file over it"
    )


def test_good_example_parses() -> None:
    catalog = parse_catalog(GOOD, "test.toml")
    entry = catalog.get("big")
    assert entry.quants[0].license == "mit"  # inherited from the entry
    assert entry.model_drafter is not None and entry.model_drafter.draft_tokens == 5
    assert entry.drafters[1].draft_tokens == 4
    assert catalog.find_target_file("/some/where/BIG-Q4_K_M.gguf") == (entry, entry.quants[0])


def test_load_from_a_path(tmp_path: Path) -> None:
    p = tmp_path / "drafters.toml"
    p.write_text(GOOD)
    assert load_catalog(p).source == str(p)
    with pytest.raises(CatalogError, match="cannot be read"):
        load_catalog(tmp_path / "missing.toml")


@pytest.mark.parametrize(
    ("old", "new", "entry", "field", "problem"),
    [
        ('license = "mit"', 'license = "mit"\ncolour = "blue"', "big", "colour", "unknown key"),
        ('params = "7B"\n', "", "big", "params", "required field is missing"),
        ("size = 4000", 'size = "4 GB"', "big", "quant[0].size", "expected an integer"),
        ('kind = "ngram"', 'kind = "eagle"', "big", "drafter[1].kind", "unknown kind 'eagle'"),
        ("size = 500", "size = 9000", "big", "drafter[0].size", "not smaller than its target"),
        (
            'filename = "small-q8_0.gguf"',
            'filename = "../../escape.gguf"',
            "big",
            "drafter[0].filename",
            "relative path",
        ),
        ('repo = "org/Big-GGUF"', 'repo = "not a repo"', "big", "quant[0].repo", "owner/name"),
        ("draft_tokens = 5", "draft_tokens = 40", "big", "drafter[0].draft_tokens", "between 1 and 16"),
        (
            'kind = "draft-model"\nrepo',
            'kind = "draft-model"\npypi = "nowhere"\nrepo',
            "big",
            "drafter[0].pypi",
            "no [[pypi]] entry",
        ),
        ("schema_version = 1", "schema_version = 7", None, "schema_version", "not supported"),
    ],
)
def test_malformed_catalog_messages(old: str, new: str, entry: str | None, field: str, problem: str) -> None:
    assert old in GOOD
    with pytest.raises(CatalogError) as info:
        parse_catalog(GOOD.replace(old, new, 1), "bad.toml")
    err = info.value
    assert (err.entry, err.field) == (entry, field)
    assert problem in str(err)
    assert str(err).startswith("bad.toml")
    if entry:
        assert f"entry '{entry}'" in str(err)
    assert f"field '{field}'" in str(err)


def test_duplicate_ids() -> None:
    text = GOOD + GOOD.split("schema_version = 1", 1)[1]
    with pytest.raises(CatalogError, match="entry 'big', field 'id': the same id appears twice"):
        parse_catalog(text, "dup.toml")


def test_invalid_toml_names_the_file() -> None:
    with pytest.raises(CatalogError, match=r"^broken.toml: it is not valid TOML"):
        parse_catalog("schema_version = = 1", "broken.toml")


def test_missing_drafters_and_quants() -> None:
    no_drafters = GOOD.split("[[model.drafter]]")[0]
    with pytest.raises(CatalogError, match="field 'drafter'"):
        parse_catalog(no_drafters, "x.toml")


def test_mtp_must_stay_experimental() -> None:
    text = GOOD.replace('kind = "ngram"', 'kind = "mtp"\nexperimental = false')
    with pytest.raises(CatalogError, match=r"drafter\[1\].experimental"):
        parse_catalog(text, "x.toml")


def test_pypi_entries_expand_their_parts() -> None:
    text = (
        GOOD
        + """
[[pypi]]
key = "split"
filename = "big-q4_k_m.gguf"
package_prefix = "big-part"
count = 3
version = "1.0"
member = "big_part{n}/data/big.gguf.part{i:02d}"
sha256 = "%s"
size = 4000
"""
        % ("ab" * 32)
    )
    catalog = parse_catalog(text.replace("size = 4000\n", 'size = 4000\npypi = "split"\n', 1), "x.toml")
    parts = catalog.pypi_file("split").parts
    assert [p.package for p in parts] == ["big-part1", "big-part2", "big-part3"]
    assert parts[2].member == "big_part3/data/big.gguf.part02"
    renamed = text.replace(
        'filename = "big-q4_k_m.gguf"\npackage_prefix', 'filename = "other.gguf"\npackage_prefix'
    )
    with pytest.raises(CatalogError, match=r"quant\[0\].pypi.*same name"):
        parse_catalog(renamed.replace("size = 4000\n", 'size = 4000\npypi = "split"\n', 1), "x.toml")


PYPI_SPLIT = """
[[pypi]]
key = "split"
filename = "big-q4_k_m.gguf"
package_prefix = "big-part"
count = 3
version = "1.0"
member = "big_part{n}/data/big.gguf.part{i:02d}"
sha256 = "%s"
size = 4000
""" % ("ab" * 32)

PYPI_ONE = """
[[pypi]]
key = "one"
filename = "big-q4_k_m.gguf"
package = "big-model"
version = "1.0"
member = "big_model/big.gguf"
sha256 = "%s"
size = 4000
""" % ("cd" * 32)


@pytest.mark.parametrize(
    ("old", "new", "entry", "field", "problem"),
    [
        ("part{i:02d}", "part{n.real.foo}", "split", "member", "placeholder"),
        ("part{i:02d}", "part{n[0]}", "split", "member", "placeholder"),
        ("part{i:02d}", "part{n!r:>5}", "split", "member", "placeholder"),
        ("part{i:02d}", "part{i:>999999999}", "split", "member", "placeholder"),
        ("part{i:02d}", "part{n.__class__}", "split", "member", "placeholder"),
        ("count = 3", "count = 3000000", "split", "count", "at most"),
        ('package_prefix = "big-part"', 'package_prefix = "-big-part"', "split", "package_prefix", "package"),
        ('package_prefix = "big-part"', 'package_prefix = "big part"', "split", "package_prefix", "package"),
        ('version = "1.0"', 'version = "1.0 --index-url http://x"', "split", "version", "version"),
        ('key = "split"', 'key = "sp\\nlit"', "pypi #1", "key", "line break"),
        ('filename = "big-q4_k_m.gguf"', 'filename = "big\\nq4_k_m.gguf"', "split", "filename", "line break"),
        ('big.gguf.part', 'big.gguf\\npart', "split", "member", "line break"),
    ],
)
def test_malformed_pypi_entries(old: str, new: str, entry: str, field: str, problem: str) -> None:
    """Each mistake in a [[pypi]] entry is one sentence naming the entry and field, found at once
    (placeholders other than {n} and {i} raised, and a count of millions took over a minute)."""
    import time

    assert old in PYPI_SPLIT
    started = time.monotonic()
    with pytest.raises(CatalogError) as info:
        parse_catalog(GOOD + PYPI_SPLIT.replace(old, new, 1), "bad.toml")
    assert time.monotonic() - started < 5
    assert (info.value.entry, info.value.field) == (entry, field), str(info.value)
    assert problem in str(info.value)
    assert f"field '{field}'" in str(info.value)


@pytest.mark.parametrize(
    "package", ["-r/etc/passwd", "--index-url=http://evil", "big model", "big\nmodel", "", "big-"]
)
def test_a_package_name_pip_would_not_read_as_one_is_refused(package: str) -> None:
    text = GOOD + PYPI_ONE.replace('"big-model"', json.dumps(package))  # a TOML basic string too
    with pytest.raises(CatalogError) as info:
        parse_catalog(text, "bad.toml")
    assert (info.value.entry, info.value.field) == ("one", "package"), str(info.value)


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('id = "big"', "id"),
        ('display_name = "Big 7B"', "display_name"),
        ('family = "big"', "family"),
        ('params = "7B"', "params"),
        ('license = "mit"', "license"),
        ('quant = "Q4_K_M"', "quant[0].quant"),
    ],
)
def test_names_with_line_breaks_are_refused(line: str, field: str) -> None:
    assert line in GOOD
    with pytest.raises(CatalogError) as info:
        parse_catalog(GOOD.replace(line, line[:-1] + '\\nsecond line"', 1), "bad.toml")
    assert info.value.field == field, str(info.value)
    assert info.value.entry in ("big", "#1"), str(info.value)  # a name that is not one line is not used


def test_a_good_single_package_entry_still_parses() -> None:
    catalog = parse_catalog(GOOD + PYPI_ONE, "good.toml")
    assert [p.package for p in catalog.pypi_file("one").parts] == ["big-model"]
