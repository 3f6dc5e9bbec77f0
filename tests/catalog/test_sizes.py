"""catalog.sizes: one byte base and one fits-in-memory rule for the CLI and the app."""

from __future__ import annotations

from localchat.catalog.drafters import load_catalog
from localchat.catalog.sizes import Fit, fits_in_memory, format_bytes
from localchat.cli import models as cli_models
from localchat.ui import formatting


def test_format_bytes_is_decimal() -> None:
    assert format_bytes(0) == "0 B"
    assert format_bytes(999) == "999 B"
    assert format_bytes(1000) == "1.0 KB"
    assert format_bytes(1_500_000) == "1.5 MB"
    assert format_bytes(2 * 10**12) == "2.0 TB"
    assert format_bytes(5 * 10**15) == "5000.0 TB"
    assert format_bytes(None) == "?"
    assert format_bytes(-1) == "?"


def test_starter_pair_reads_the_same_in_the_cli_and_the_window() -> None:
    starter = load_catalog().starter
    assert starter is not None and starter.model_drafter is not None
    size = starter.default_quant.size + starter.model_drafter.size
    assert cli_models.format_bytes(size) == formatting.format_bytes(size) == "1.6 GB"


def test_fits_in_memory_one_rule() -> None:
    gb = 10**9
    assert fits_in_memory(2 * gb, 16 * gb) is Fit.YES
    assert fits_in_memory(12 * gb, 16 * gb) is Fit.TIGHT
    assert fits_in_memory(20 * gb, 16 * gb) is Fit.NO
    assert fits_in_memory(1, None) is Fit.UNKNOWN
    assert [f.label for f in Fit] == ["Yes", "Tight", "No", "?"]


def test_memory_needed_is_the_amount_the_fit_rule_compares() -> None:
    from localchat.catalog.sizes import OVERHEAD_BYTES, memory_needed

    gb = 10**9
    assert memory_needed(2 * gb) == int(2 * gb * 1.15) + OVERHEAD_BYTES
    need = memory_needed(2 * gb)
    assert fits_in_memory(2 * gb, need) is Fit.TIGHT  # exactly the total: fits, with nothing else running
    assert fits_in_memory(2 * gb, need - 1) is Fit.NO
    assert fits_in_memory(2 * gb, int(need / 0.75) + 1) is Fit.YES
