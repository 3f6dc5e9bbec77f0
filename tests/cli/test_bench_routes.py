"""``localchat bench --through-api`` and ``--link-latency``: the same prompts in a second place, one run,
as a user runs it (a real process, real models); every engine in a child process of the command, so a
killed benchmark process, a lost worker and Ctrl+C each end it with a sentence."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_generate_bench import count_prompt, localchat
from tests.cli.test_lost_worker import ABORT_WORDS, ROOT, lose_the_worker, read_until, start
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
    assert "through the API (tokens/s the OpenAI client saw) against the benchmark's own engine" in r.stdout
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



# Every engine of a routed run is in a child process: a crash or Ctrl+C ends the command with a sentence.


def _prompts(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "p.jsonl"
    path.write_text("".join(
        json.dumps({"id": f"p{i}", "category": "chat", "prompt": f"Count from {i} to {i + 40}."}) + "\n"
        for i in range(n)))
    return path


def _pids(log: Path, label: str) -> set[int]:
    """The processes that wrote ``label[PID]`` lines in the engine log (host/child.configure_logging)."""
    return {int(m) for m in re.findall(rf"{label}\[(\d+)\]", log.read_text(errors="replace"))}


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
def test_through_api_a_killed_benchmark_process_ends_the_run_with_a_sentence_and_keeps_the_records(
    tmp_path: Path, smollm2_path: Path
) -> None:
    report = tmp_path / "r.json"
    proc = start(["bench", "--model", str(smollm2_path), "--through-api",
                  "--prompts", str(_prompts(tmp_path, 8)), "--modes", "off", "--max-tokens", "32",
                  "--ctx", "512", "--threads", "1", "--json", str(report)], tmp_path)
    try:
        read_until(proc, b"[  2/")  # two records done
        log = tmp_path / "localchat" / "log" / "cli-engine.log"
        (bench,) = _pids(log, "bench")
        (api_engine,) = _pids(log, "engine")
        assert proc.pid not in (bench, api_engine)  # the models are in other processes than the command
        os.kill(bench, signal.SIGKILL)  # as llama.cpp's abort would end it
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
    assert proc.returncode == 1, stderr
    assert "The benchmark process stopped unexpectedly" in stderr and str(log) in stderr, stderr
    assert not [w for w in ABORT_WORDS if w in stdout + stderr], stdout + stderr
    assert "vs off" in stdout  # the summary of what was done
    data = json.loads(report.read_text())
    assert data["complete"] is False and 2 <= len(data["records"]) < 16
    assert _gone(api_engine)  # the API's engine process ended with the command


@pytest.mark.slow
def test_through_api_ctrl_c_ends_every_process_with_a_sentence(tmp_path: Path, smollm2_path: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}
    # A session of its own: Ctrl+C goes to the command's whole process group, as a terminal sends it.
    proc = subprocess.Popen(
        [sys.executable, "-m", "localchat", "bench", "--model", str(smollm2_path), "--through-api",
         "--prompts", str(_prompts(tmp_path, 8)), "--modes", "off", "--max-tokens", "32", "--ctx", "512",
         "--threads", "1"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        read_until(proc, b"[  1/")
        log = tmp_path / "localchat" / "log" / "cli-engine.log"
        children = _pids(log, "bench") | _pids(log, "engine")
        assert len(children) == 2 and proc.pid not in children
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    stderr = err.decode(errors="replace")
    assert proc.returncode == 130, stderr
    assert "stopped (Ctrl+C)" in stderr and "Traceback" not in stderr, stderr
    assert all(_gone(pid) for pid in children)


@pytest.mark.slow
def test_link_latency_names_the_lost_worker_and_keeps_the_finished_records(
    tmp_path: Path, smollm2_path: Path
) -> None:
    report = tmp_path / "r.json"
    prompts = _prompts(tmp_path, 8)
    _, stdout = lose_the_worker(
        lambda ep: ["bench", "--model", str(smollm2_path), "--rpc", str(ep), "--tensor-split", "0,1",
                    "--link-latency", "0", "--prompts", str(prompts), "--modes", "off", "--max-tokens",
                    "32", "--ctx", "512", "--threads", "1", "--json", str(report)],
        b"[  2/", tmp_path)
    assert "vs off" in stdout
    data = json.loads(report.read_text())
    assert data["complete"] is False and 2 <= len(data["records"]) < 16
    assert {rec["mode"] for rec in data["records"]} <= {"off", "off@rpc+0ms"}
