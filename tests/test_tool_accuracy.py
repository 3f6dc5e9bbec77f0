"""tools/tool_accuracy.py's scoring (no model, no server): BFCL's rules as its docstring states them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "tool_accuracy.py"


@pytest.fixture(scope="module")
def acc() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tools_tool_accuracy", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _case(acc: ModuleType, category: str, *expected: tuple[str, dict[str, list[object]]]) -> object:
    calls = tuple(acc.ExpectedCall(name, args) for name, args in expected)
    return acc.Case("c", category, [], [], calls)


def _reply(acc: ModuleType, *calls: tuple[str, str], content: str = "", error: str = "") -> object:
    return acc.Outcome("c", tuple(acc.Call(n, a) for n, a in calls), content, "stop", 1.0, error)


def test_the_case_file_loads_with_every_category(acc: ModuleType) -> None:
    cases = acc.load_cases()
    assert {c.category for c in cases} == set(acc.CATEGORIES)
    assert all(not c.expected for c in cases if c.category == "irrelevance")
    assert all(len(c.expected) > 1 for c in cases if c.category == "parallel")
    assert all(len(c.tools) > 1 for c in cases if c.category == "multiple")


def test_strings_compare_loosely_numbers_by_value(acc: ModuleType) -> None:
    assert acc.value_matches("Paris, France", ["paris france"])
    assert acc.value_matches("  USD ", ["usd"])
    assert not acc.value_matches("Lyon", ["Paris"])
    assert acc.value_matches(70, [70.0]) and acc.value_matches(1.75, [1.75])
    assert not acc.value_matches("70", [70])  # a number written as a string is not the number
    assert not acc.value_matches(True, [1])
    assert not acc.value_matches("", [""])  # "" marks an optional parameter, it is no value


def test_a_simple_call_passes_or_says_why(acc: ModuleType) -> None:
    case = _case(acc, "simple", ("get_weather", {"location": ["Paris"], "unit": ["", "celsius"]}))
    assert acc.score(case, _reply(acc, ("get_weather", '{"location": "paris"}'))).passed
    assert acc.score(case, _reply(acc, ("get_weather", '{"location": "Paris", "unit": "celsius"}'))).passed
    wrong_value = acc.score(case, _reply(acc, ("get_weather", '{"location": "Paris", "unit": "kelvin"}')))
    assert not wrong_value.passed and "unit" in wrong_value.why
    extra = acc.score(case, _reply(acc, ("get_weather", '{"location": "Paris", "days": 3}')))
    assert not extra.passed and "unexpected argument days" in extra.why
    missing = acc.score(_case(acc, "simple", ("f", {"a": [1], "b": [2]})), _reply(acc, ("f", '{"a": 1}')))
    assert not missing.passed and "b missing" in missing.why
    wrong_tool = acc.score(case, _reply(acc, ("get_time", '{"location": "Paris"}')))
    assert wrong_tool.why.startswith("called get_time")
    assert acc.score(case, _reply(acc, content="It is sunny.")).why == "no call"
    assert not acc.score(case, _reply(acc, error="boom")).passed


def test_invalid_json_arguments_fail_and_are_counted(acc: ModuleType) -> None:
    case = _case(acc, "simple", ("f", {"a": [1]}))
    verdict = acc.score(case, _reply(acc, ("f", '{"a": 1')))
    assert not verdict.passed and verdict.calls == 1 and verdict.valid_json == 0
    assert acc.score(case, _reply(acc, ("f", "[1]"))).valid_json == 0  # JSON, but not an object


def test_parallel_calls_match_in_any_order_one_to_one(acc: ModuleType) -> None:
    case = _case(acc, "parallel", ("w", {"city": ["Tokyo"]}), ("w", {"city": ["London"]}))
    assert acc.score(case, _reply(acc, ("w", '{"city": "London"}'), ("w", '{"city": "Tokyo"}'))).passed
    twice = acc.score(case, _reply(acc, ("w", '{"city": "Tokyo"}'), ("w", '{"city": "Tokyo"}')))
    assert not twice.passed
    assert "1 calls, expected 2" in acc.score(case, _reply(acc, ("w", '{"city": "Tokyo"}'))).why


def test_irrelevance_passes_only_without_a_call(acc: ModuleType) -> None:
    case = _case(acc, "irrelevance")
    assert acc.score(case, _reply(acc, content="Canberra.")).passed
    assert not acc.score(case, _reply(acc, ("get_stock_price", '{"symbol": "AU"}'))).passed


def test_the_table_counts_per_category_and_validity(acc: ModuleType, tmp_path: Path) -> None:
    simple = acc.Case("s", "simple", [], [], (acc.ExpectedCall("f", {"a": [1]}),))
    irrelevant = acc.Case("i", "irrelevance", [], [], ())
    runs = {"A": [acc.Outcome("s", (acc.Call("f", '{"a": 1}'),)), acc.Outcome("i", content="no")],
            "B": [acc.Outcome("s", (acc.Call("f", '{"a": '),)), acc.Outcome("i", (acc.Call("f", "{}"),))]}
    path = tmp_path / "run.json"
    acc.save(path, runs, {})
    text = acc.table([simple, irrelevant], acc.load(path))
    assert "| simple | " in text and "1/1 (100%)" in text and "0/1 (0%)" in text
    assert "| arguments valid JSON (calls) | 1/1 | 1/2 |" in text
    assert "| requests whose calls all parse | 1/1 | 1/2 |" in text
    assert acc.differences([simple, irrelevant], runs)[0].startswith("s: A pass; B fail")


def test_same_replies_compares_calls_by_their_parsed_arguments(acc: ModuleType) -> None:
    a = [acc.Outcome("s", (acc.Call("f", '{"a": 1, "b": 2}'),)), acc.Outcome("i", content="Canberra.")]
    b = [acc.Outcome("s", (acc.Call("f", '{"b": 2,\n "a": 1}'),)), acc.Outcome("i", content="Sydney.")]
    assert acc.same_replies(a, b) == (1, 2)
    assert acc.same_replies(a, b[:1]) == (1, 1)
