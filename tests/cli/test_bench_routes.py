"""``localchat bench --through-api`` and ``--link-latency``: the same prompts in a second place, one run,
as a user runs it (a real process, real models)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_generate_bench import count_prompt, localchat
from tests.engine.rpc_workers import require_rpc, start_worker


def test_through_api_sets_the_client_seen_figures_beside_the_engines(
    tmp_path: Path, smollm2_path: Path
) -> None:
    out = tmp_path / "r.json"
    r = localchat("bench", "--model", str(smollm2_path), "--draft", str(smollm2_path), "--through-api",
                  "--prompts", "heldout", "--category", "code", "--limit", "1", "--modes", "off,draft",
                  "--max-tokens", "12", "--ctx", "512", "--json", str(out))
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert [p["id"] for p in data["prompts"]] == ["ho-code-lru"]  # the held-out set, by name
    recs = {rec["mode"]: rec for rec in data["records"]}
    assert set(recs) == {"off", "draft", "off@api", "draft@api"}
    assert all(rec["tokens"] == 12 and rec["tokens_per_s"] > 0 for rec in recs.values())
    # Through the API the draft model drafted (the server's timings) and is compared with the API's off.
    assert recs["draft@api"]["acceptance_length"] > 1.0
    assert isinstance(recs["draft@api"]["matches_off"], bool) and recs["off@api"]["matches_off"] is None
    assert recs["off@api"]["speedup_vs_off"] == pytest.approx(1.0)
    (api,) = data["routes"]
    assert api["route"] == "api" and api["client"] == "openai"
    assert api["first_turn_ttft_ms"] > 0 and api["follow_up_ttft_ms"] > 0
    assert api["server_tokens_per_s"]["off"] > 0 and api["server_tokens_per_s"]["draft"] > 0
    assert "through the API (tokens/s the OpenAI client saw) against the engine in this process" in r.stdout
    assert "time to first token through the API" in r.stdout


def test_route_options_are_checked_before_anything_loads(tmp_path: Path) -> None:
    never = str(tmp_path / "never-loaded.gguf")
    for args, sentence in (
        (["--link-latency", "5"], "--link-latency needs --rpc HOST:PORT"),
        (["--rpc", "127.0.0.1:1", "--link-latency", "5,x"], "--link-latency takes milliseconds"),
        (["--rpc", "127.0.0.1:1", "--link-latency", "-1"], "from 0 to 10000"),
        (["--through-api", "--oracle"], "--oracle compares fixed lengths on one engine"),
        (["--through-api", "--rpc", "127.0.0.1:1", "--link-latency", "1"], "choose one of --through-api"),
        (["--through-api", "--rpc", "127.0.0.1:1"], "run it without --rpc"),
        (["--prompts", "no-such-set"], "Cannot read the prompts file no-such-set"),
    ):
        r = localchat("bench", "--model", never, *args)
        assert r.returncode == 1 and sentence in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


@pytest.mark.slow
def test_link_latency_measures_the_target_here_and_split_at_each_delay(
    tmp_path: Path, smollm2_path: Path
) -> None:
    require_rpc()
    worker, ep = start_worker()
    try:
        out = tmp_path / "r.json"
        r = localchat("bench", "--model", str(smollm2_path), "--draft", str(smollm2_path), "--rpc", str(ep),
                      "--tensor-split", "1,1", "--link-latency", "0,20",
                      "--prompts", str(count_prompt(tmp_path)), "--modes", "off,draft", "--max-tokens", "16",
                      "--ctx", "512", "--threads", "1", "--json", str(out))
    finally:
        worker.kill()
        worker.wait(10)
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    rows = {row["mode"]: row for row in data["summary"] if row["category"] == "all"}
    assert set(rows) == {"off", "draft", "off@rpc+0ms", "draft@rpc+0ms", "off@rpc+20ms", "draft@rpc+20ms"}
    # 20 ms each way is paid on every target pass: plain decoding over it is slower than over 0 ms.
    assert rows["off@rpc+20ms"]["tokens_per_s"] < rows["off@rpc+0ms"]["tokens_per_s"]
    links = {fact["route"]: fact for fact in data["routes"]}
    assert links["rpc+20ms"]["delay_ms"] == 20 and links["rpc+20ms"]["round_trip_ms"] >= 40
    assert links["rpc+0ms"]["round_trip_ms"] < 40
    assert "split: target on local + 1 worker" in r.stdout and "theory from the link's cost" in r.stdout

