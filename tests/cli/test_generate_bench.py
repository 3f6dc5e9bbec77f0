"""The headless commands, run as a user runs them (a real process, real models)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from localchat.bench.prompts import BenchError, builtin_prompts, parse_prompts


def localchat(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "localchat", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_generate_streams_a_reply_and_prints_stats(smollm2_path: Path) -> None:
    r = localchat("generate", "--model", str(smollm2_path), "--draft", str(smollm2_path),
                  "--max-tokens", "24", "--ctx", "512", "Name three animals.")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()
    assert "tok/s" in r.stderr and "acceptance length" in r.stderr


def test_generate_reports_a_bad_model_in_one_sentence(tmp_path: Path) -> None:
    bad = tmp_path / "fake.gguf"
    bad.write_text("hello")
    r = localchat("generate", "--model", str(bad), "hi")
    assert r.returncode == 1
    assert "not a GGUF model file" in r.stderr
    assert "Traceback" not in r.stderr


def test_generate_refuses_a_prompt_longer_than_the_context(smollm2_path: Path) -> None:
    r = localchat("generate", "--model", str(smollm2_path), "--no-spec", "--ctx", "256",
                  "--max-tokens", "8", "word " * 400)
    assert r.returncode == 1
    assert "context window holds 256" in r.stderr


def test_bench_runs_every_mode_and_writes_json(tmp_path: Path, smollm2_path: Path) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(
        '{"id": "a", "category": "code", "prompt": "Write a Python function that adds two numbers."}\n'
        '{"id": "b", "category": "chat", "prompt": "What is the capital of France?"}\n'
    )
    out = tmp_path / "r.json"
    r = localchat("bench", "--model", str(smollm2_path), "--draft", str(smollm2_path), "--prompts",
                  str(prompts), "--modes", "off,draft,ngram,adaptive", "--max-tokens", "16", "--ctx", "512",
                  "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert "peak RSS" in r.stdout and "vs off" in r.stdout
    data = json.loads(out.read_text())
    recs = data["records"]
    assert len(recs) == 8
    keys = {"id", "category", "mode", "tokens", "seconds", "tokens_per_s", "acceptance_length",
            "acceptance_rate", "matches_off"}
    assert all(keys <= set(rec) for rec in recs)
    assert {rec["mode"] for rec in recs} == {"off", "draft", "ngram", "adaptive"}
    assert all(rec["tokens_per_s"] > 0 for rec in recs)
    assert all(rec["matches_off"] is None for rec in recs if rec["mode"] == "off")
    assert all(isinstance(rec["matches_off"], bool) for rec in recs if rec["mode"] != "off")
    draft = [rec for rec in recs if rec["mode"] == "draft"]
    assert all(rec["acceptance_length"] > 1.0 for rec in draft)
    summary = data["summary"]
    assert {"category", "mode", "tokens_per_s", "speedup_vs_off", "acceptance_length"} <= set(summary[0])
    off_rows = [s for s in summary if s["mode"] == "off"]
    assert all(s["speedup_vs_off"] == pytest.approx(1.0) for s in off_rows)
    assert data["peak_rss_mb"] > 50
    # The one report schema, the same keys as the app writes.
    assert data["schema"] == "localchat-bench/1" and data["complete"] is True
    assert {"created", "target", "draft", "backend", "threads", "max_tokens", "modes", "prompts"} <= set(data)
    assert all("speedup_vs_off" in rec for rec in recs)


def count_prompt(tmp_path: Path) -> Path:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "a", "category": "code", "prompt": "Count from 1 to 10."}\n')
    return prompts


def bench_one_prompt(tmp_path: Path, model: Path, *args: str) -> dict:
    """``localchat bench`` on one short prompt with ``model`` as target and drafter; its JSON report."""
    out = tmp_path / "r.json"
    r = localchat("bench", "--model", str(model), "--draft", str(model), "--prompts",
                  str(count_prompt(tmp_path)), "--max-tokens", "12", "--ctx", "512", "--json", str(out),
                  *args)
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text())


def test_bench_sweep_labels_each_length(tmp_path: Path, smollm2_path: Path) -> None:
    report = bench_one_prompt(tmp_path, smollm2_path, "--modes", "off,draft", "--draft-tokens", "2,6")
    modes = [rec["mode"] for rec in report["records"]]
    assert modes == ["off", "draft:2", "draft:6"]


def test_bench_repeat_runs_each_prompt_and_mode_again_and_pools_them(
    tmp_path: Path, smollm2_path: Path
) -> None:
    report = bench_one_prompt(tmp_path, smollm2_path, "--modes", "off,adaptive", "--repeat", "2")
    assert sorted(rec["mode"] for rec in report["records"]) == ["adaptive", "adaptive", "off", "off"]
    row = next(x for x in report["summary"] if x["category"] == "code" and x["mode"] == "off")
    off = [rec for rec in report["records"] if rec["mode"] == "off"]
    pooled = sum(rec["tokens"] for rec in off) / sum(rec["seconds"] for rec in off)
    assert row["tokens_per_s"] == pytest.approx(pooled, rel=0.02)
    bad = localchat("bench", "--model", str(smollm2_path), "--prompts", str(count_prompt(tmp_path)),
                    "--repeat", "0")
    assert bad.returncode == 1 and "--repeat must be 1 or more" in bad.stderr


def test_prompts_file_errors_name_the_line() -> None:
    with pytest.raises(BenchError, match="line 2: not valid JSON"):
        parse_prompts('{"prompt": "a"}\n{oops\n', "mine.jsonl")
    with pytest.raises(BenchError, match='line 1: expected an object with a non-empty "prompt"'):
        parse_prompts('{"id": "x"}\n', "mine.jsonl")
    with pytest.raises(BenchError, match="used twice"):
        parse_prompts('{"id": "x", "prompt": "a"}\n{"id": "x", "prompt": "b"}\n', "mine.jsonl")
    with pytest.raises(BenchError, match="holds no prompts"):
        parse_prompts("\n\n", "mine.jsonl")
    with pytest.raises(BenchError, match='line 1: "schema" must be a JSON object'):
        parse_prompts('{"prompt": "a", "schema": [1]}\n', "mine.jsonl")


def test_builtin_set_has_three_categories_of_five() -> None:
    prompts = builtin_prompts()
    counts: dict[str, int] = {}
    for p in prompts:
        counts[p.category] = counts.get(p.category, 0) + 1
    assert len([c for c, n in counts.items() if n >= 5]) >= 3
    assert {"code", "chat", "creative"} <= set(counts)


def test_cli_bad_inputs_are_sentences_not_tracebacks(tmp_path: Path, smollm2_path: Path) -> None:
    """--seed -1 (llama.cpp's "random"), a non-UTF-8 prompt, --json into a missing folder."""
    seeded = localchat("generate", "--model", str(smollm2_path), "--seed", "-1", "--temp", "0.7",
                       "--max-tokens", "4", "--no-spec", "Hello")
    assert seeded.returncode == 0, seeded.stderr
    assert "Traceback" not in seeded.stderr
    bad = subprocess.run([sys.executable, "-m", "localchat", "generate", "--model", str(smollm2_path),
                          b"hi \xff".decode("utf-8", "surrogateescape")], capture_output=True, text=True,
                         timeout=600)
    assert bad.returncode == 1 and "not valid UTF-8" in bad.stderr and "Traceback" not in bad.stderr
    missing = tmp_path / "nowhere" / "out.json"
    res = localchat("bench", "--model", str(smollm2_path), "--modes", "off", "--limit", "1",
                    "--max-tokens", "4", "--json", str(missing))
    assert res.returncode == 1 and "does not exist" in res.stderr and "Traceback" not in res.stderr
    assert "tok/s" not in res.stdout  # refused before the run, not after it


def test_bench_skips_a_prompt_longer_than_the_context_and_goes_on(tmp_path: Path, smollm2_path: Path) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(
        json.dumps({"id": "huge", "category": "code", "prompt": "word " * 3000}) + "\n"
        + json.dumps({"id": "fine", "category": "code", "prompt": "Say hi."}) + "\n"
    )
    out = tmp_path / "r.json"
    res = localchat("bench", "--model", str(smollm2_path), "--ctx", "512", "--prompts", str(prompts),
                    "--modes", "off", "--max-tokens", "4", "--json", str(out))
    assert res.returncode == 0, res.stderr
    assert "skipped prompt huge" in res.stderr and "Traceback" not in res.stderr
    data = json.loads(out.read_text())
    assert [r["id"] for r in data["records"]] == ["fine"]
    assert data["skipped"][0]["id"] == "huge"


@pytest.mark.skipif(sys.platform == "win32", reason="file names are Unicode on Windows")
def test_a_model_path_that_is_not_utf8_loads(tmp_path: Path, smollm2_path: Path) -> None:
    odd = os.fsdecode(os.fsencode(tmp_path) + b"/model-\xff.gguf")
    os.symlink(smollm2_path, odd)
    res = subprocess.run([sys.executable, "-m", "localchat", "generate", "--model", odd, "--no-spec",
                          "--max-tokens", "3", "Hello"], capture_output=True, text=True, timeout=600,
                         errors="replace")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert "3 tokens" in res.stdout or "3 tokens" in res.stderr


def test_bench_fresh_neither_reads_nor_writes_the_saved_profile(tmp_path: Path, smollm2_path: Path) -> None:
    """A profile of the pair lies in the profiles folder (tests/conftest.py gives each test its own):
    `bench --fresh` leaves it as it is; a plain `bench` loads it and saves it again at the end."""
    from localchat.engine import profile
    from localchat.engine.backend import physical_cores

    pair = profile.profile_for(smollm2_path, smollm2_path, "CPU", physical_cores(), 0, "local", "x", True)
    curve = {1: (0.004, 3), 2: (0.005, 3), 4: (0.006, 3), 8: (0.008, 3), 16: (0.012, 3)}
    profile.save(pair.path, pair.key, pair.machine,
                 profile.Measured(curve, 0.002, 0.002, [0.0] * 20, [0.0] * 20))
    before = pair.path.read_text()
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "a", "category": "code", "prompt": "Add two numbers in Python."}\n')
    args = ["bench", "--model", str(smollm2_path), "--draft", str(smollm2_path), "--prompts", str(prompts),
            "--modes", "adaptive", "--max-tokens", "8", "--ctx", "512"]
    r = localchat(*args, "--fresh")
    assert r.returncode == 0, r.stderr
    assert pair.path.read_text() == before
    r = localchat(*args)
    assert r.returncode == 0, r.stderr
    assert json.loads(pair.path.read_text()) != json.loads(before)  # loaded, measured on, saved again


def test_bench_refuses_an_unknown_mode_or_length_in_a_sentence(tmp_path: Path) -> None:
    """The modes are read before any model loads (engine/speculation_modes.py names them)."""
    never = str(tmp_path / "never-loaded.gguf")
    for modes, sentence in (
        ("off,warp", "'warp' is not a speculation mode; use one of off, draft, ngram, auto, adaptive."),
        ("draft:x", "the draft length in 'draft:x' must be a whole number, not 'x'"),
        ("draft:40", "draft_tokens must be between 1 and 16, got 40"),
    ):
        r = localchat("bench", "--model", never, "--modes", modes)
        assert r.returncode == 1 and sentence in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_generate_under_a_json_schema_writes_json_that_matches_it(tmp_path: Path, smollm2_path: Path) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "legs": {"type": "integer"}},
              "required": ["name", "legs"]}
    path = tmp_path / "animal.json"
    path.write_text(json.dumps(schema))
    r = localchat("generate", "--model", str(smollm2_path), "--draft", str(smollm2_path), "--ctx", "512",
                  "--max-tokens", "48", "--json-schema", str(path), "Describe a cat as JSON.")
    assert r.returncode == 0, r.stderr
    reply = json.loads(r.stdout)
    assert set(reply) == {"name", "legs"} and isinstance(reply["legs"], int)
    assert "tokens forced" in r.stderr and "finish: stop" in r.stderr
    bad = localchat("generate", "--model", str(smollm2_path), "--no-spec", "--json-schema",
                    '{"type": "integer", "minimum": 3, "maximum": 1}', "Hi")
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert "The JSON schema cannot be used: Unsatisfiable schema" in bad.stderr
    lost = localchat("generate", "--model", str(smollm2_path), "--trigger", "<x>", "Hi")
    assert lost.returncode == 1 and "--trigger needs --grammar" in lost.stderr


def test_bench_answers_schema_prompts_under_their_schema_with_and_without_fast_forward(
    tmp_path: Path, smollm2_path: Path
) -> None:
    prompts = tmp_path / "p.jsonl"
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
              "required": ["city", "country"]}
    line = {"id": "j", "category": "json", "prompt": "Paris as JSON.", "schema": schema}
    prompts.write_text(json.dumps(line))
    out = tmp_path / "r.json"
    r = localchat("bench", "--model", str(smollm2_path), "--draft", str(smollm2_path), "--prompts",
                  str(prompts), "--modes", "off,off-ff,draft-ff", "--max-tokens", "24", "--ctx", "512",
                  "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert "forced" in r.stdout and "grammar" in r.stdout
    recs = {rec["mode"]: rec for rec in json.loads(out.read_text())["records"]}
    assert recs["off"]["forced_tokens"] > 0 and recs["off-ff"]["forced_tokens"] == 0
    assert recs["off-ff"]["grammar_seconds"] > 0
    assert isinstance(recs["draft-ff"]["matches_off"], bool)  # compared with off-ff, its own setting
    assert recs["off-ff"]["matches_off"] is None


def test_tools_prompts_carry_their_tools_and_bad_ones_name_the_line() -> None:
    tools = [p for p in builtin_prompts() if p.category == "tools"]
    assert len(tools) >= 4 and all(p.tools for p in tools)
    assert {p.tool_choice.mode.value for p in tools} == {"auto", "required", "function"}
    for line, words in [
        ('{"prompt": "a", "tools": {"name": "f"}}', '"tools" must be a list'),
        ('{"prompt": "a", "tools": [{"name": "f", "parameters": 3}]}', 'the "parameters" of the tool "f"'),
        ('{"prompt": "a", "tools": [{"name": "f"}], "tool_choice": "g"}',
         '"tool_choice" names "g", which is not'),
    ]:
        with pytest.raises(BenchError, match=f"mine.jsonl, line 1: {words}"):
            parse_prompts(line + "\n", "mine.jsonl")


def test_bench_answers_tools_prompts_under_the_tool_grammar(tmp_path: Path, smollm2_path: Path) -> None:
    prompts = tmp_path / "p.jsonl"
    city = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    tool = {"name": "get_weather", "parameters": city}
    line = {"id": "t", "category": "tools", "prompt": "Weather in Paris?", "tools": [tool],
            "tool_choice": "required"}
    prompts.write_text(json.dumps(line))
    out = tmp_path / "r.json"
    r = localchat("bench", "--model", str(smollm2_path), "--draft", str(smollm2_path), "--prompts",
                  str(prompts), "--modes", "off,draft", "--max-tokens", "40", "--ctx", "1024",
                  "--json", str(out))
    assert r.returncode == 0, r.stderr
    recs = {rec["mode"]: rec for rec in json.loads(out.read_text())["records"]}
    # SmolLM2 has no native format: the generic <tool_call> block, forced from the first token
    assert recs["off"]["forced_tokens"] > 0 and recs["off"]["grammar_seconds"] > 0
    assert recs["draft"]["matches_off"] is True
