"""Speculation through the API with the real Qwen2.5-Coder pair (1.5B target, 0.5B drafter)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.server.served import serve

pytestmark = pytest.mark.slow

EDIT = "Rename the function f to area and return the full code:\n\ndef f(w, h):\n    return w * h\n"


def test_modes_give_the_same_greedy_text_and_report_drafts(
    qwen_target_path: Path, qwen_draft_path: Path
) -> None:
    with serve(qwen_target_path, qwen_draft_path, ctx=1024) as s:
        client = s.client(timeout=300)
        replies = {}
        for mode in ("off", "draft", "auto", "adaptive"):
            replies[mode] = client.chat.completions.create(
                model="test-model", messages=[{"role": "user", "content": EDIT}], max_tokens=32,
                temperature=0, extra_body={"speculative": {"mode": mode}},
            )
        texts = {m: r.choices[0].message.content for m, r in replies.items()}
        assert texts["draft"] == texts["off"] and texts["adaptive"] == texts["off"], texts
        assert texts["auto"] == texts["off"], texts
        timings = {m: (r.model_extra or {})["timings"] for m, r in replies.items()}
        assert timings["off"]["draft_n"] == 0
        assert timings["draft"]["draft_n"] > 0 and timings["draft"]["draft_n_accepted"] > 0
        # "auto" (the draft model plus lookup, a fixed length) is the bench's and the CLI's mode too.
        assert (replies["auto"].model_extra or {})["speculative"]["mode"] == "auto"
        assert timings["auto"]["draft_n"] > 0 and timings["auto"]["draft_n_accepted"] > 0
        usage = replies["draft"].usage
        assert usage is not None and usage.completion_tokens_details is not None
        accepted = usage.completion_tokens_details.accepted_prediction_tokens
        assert accepted == timings["draft"]["draft_n_accepted"]

        # Fill in the middle (code completion): OpenAI's "suffix" and llama.cpp's /infill (what
        # Continue's llama.cpp provider sends) ask the same question with the model's FIM tokens.
        prefix, suffix = "def add(a, b):\n    return ", "\n\n\nprint(add(2, 3))\n"
        fim = client.completions.create(model="test-model", prompt=prefix, suffix=suffix, max_tokens=8,
                                        temperature=0)
        middle = fim.choices[0].text
        assert "a + b" in middle and "def add" not in middle
        with s.http() as http:
            r = http.post("/infill", json={"input_prefix": prefix, "input_suffix": suffix, "n_predict": 8,
                                           "temperature": 0})
        assert r.status_code == 200 and r.json()["content"] == middle


def test_cli_refuses_a_public_address_without_a_key() -> None:
    cmd = [sys.executable, "-m", "localchat", "serve", "--model", "x.gguf", "--host", "0.0.0.0"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "--api-key" in out.stderr and "Traceback" not in out.stderr


def test_cli_prints_one_url_line_once_loaded(smollm2_path: Path) -> None:
    cmd = [sys.executable, "-m", "localchat", "serve", "--model", str(smollm2_path),
           "--port", "0", "--ctx", "512"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("localchat serving SmolLM2") and "http://127.0.0.1:" in line
        import httpx

        url = line.split(" at ")[1].split()[0]
        assert httpx.get(url + "/models", timeout=10).json()["data"][0]["id"].startswith("SmolLM2")
    finally:
        proc.terminate()
        proc.wait(20)
