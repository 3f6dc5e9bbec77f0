"""Adaptive speculation against the best fixed choice and plain decoding, on several cost curves.

    python tools/adaptive_matrix.py [--targets f16,q8_0,q4_k_m] [--threads 1,2] [--drafters q4_k_m]
        [--prompts heldout2] [--limit 2] [--max-tokens 64] [--fixed 1,2,3,4,5,6,7,8] [--saved]
        [--adaptive adaptive,adaptive-nofloor] [--json-dir DIR]

Each cell of the matrix (a target precision, a drafter precision, a thread count) is one run of
``python -m localchat bench --fresh`` in a child process (this checkout's localchat), with the modes
of ``--oracle`` (``off``, ``auto:1..8``, ``adaptive``) and ``adaptive-nofloor`` (the adaptive policy
before issue 27) measured side by side, prompt by prompt. The cost curves differ from cell to cell as
they do across users' computers: a thread count changes how memory-bound verification is, a target
precision the ratio of the drafter's cost to the target's and the shape of the verification curve.

Printed per cell and category, for each adaptive mode: adaptive / best fixed (the best fixed choice
per prompt in hindsight, as ``localchat bench --oracle`` prints it), adaptive / the best single fixed
mode over the category, adaptive / ``auto:4``, adaptive / plain, and how many replies were the same
text as plain decoding. ``--saved`` runs each cell a second time with the profile the first run left
(``--fresh`` neither reads nor writes one, so the tool saves one in a temporary profiles folder with a
warm-up run first).

Targets other than the cached F16 and Q4_K_M files are made locally with engine/quantize.requantize
from the F16 file (Q8_0), into ~/.cache/localchat/test-models; a Q8_0 drafter the same way from the
Q4_K_M drafter (its quality is the Q4 file's; its costs are Q8's, which is what a cell varies).
Timings on a shared machine are noisy: only the ratios inside one cell (modes interleaved per prompt)
count. Where the bench measured the machine's costs in the run, each cell is printed a second time
as ``CELL~model``: every run's steps (verification batches, drafter passes) timed on that one curve
(localchat/bench/modelled.py), which tells the policies apart from the machine's changes of speed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from localchat.bench.modes import ADAPTIVE_VARIANTS

MODELS = Path.home() / ".cache" / "localchat" / "test-models"
TARGET_FILES = {"f16": "qwen2.5-coder-1.5b-instruct-f16.gguf",
                "q8_0": "qwen2.5-coder-1.5b-instruct-q8_0.gguf",
                "q4_k_m": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"}
DRAFT_FILES = {"q4_k_m": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
               "q8_0": "qwen2.5-coder-0.5b-instruct-q8_0-from-q4.gguf"}
ADAPTIVE = ("adaptive", *ADAPTIVE_VARIANTS)
ROOT = Path(__file__).resolve().parent.parent


def model_file(kind: str, quant: str) -> Path:
    """The file for a target or drafter precision, made locally when missing."""
    from localchat.engine.quantize import requantize

    files = TARGET_FILES if kind == "target" else DRAFT_FILES
    path = MODELS / files[quant]
    if not path.exists():
        src = MODELS / (TARGET_FILES["f16"] if kind == "target" else DRAFT_FILES["q4_k_m"])
        print(f"making {path.name} from {src.name}", flush=True)
        requantize(src, path, quant)
    return path


def bench(target: Path, draft: Path, threads: int, args: argparse.Namespace, out: Path, fresh: bool,
          env: dict[str, str]) -> dict[str, Any]:
    modes = ",".join(["off", *(f"auto:{n}" for n in args.fixed), *args.adaptive])
    cmd = [sys.executable, "-m", "localchat", "bench", "--model", str(target), "--draft", str(draft),
           "--threads", str(threads), "--prompts", args.prompts, "--max-tokens", str(args.max_tokens),
           "--modes", modes, "--json", str(out)]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    for c in args.category or []:
        cmd += ["--category", c]
    if fresh:
        cmd.append("--fresh")
    if args.exact:
        cmd.append("--exact")
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=ROOT, env=env, check=True)
    data: dict[str, Any] = json.loads(out.read_text("utf-8"))
    return data


def seconds_per_token(recs: list[dict[str, Any]], key: str = "seconds") -> float:
    return float(sum(r[key] for r in recs) / max(1, sum(r["tokens"] for r in recs)))


def summarise(data: dict[str, Any], key: str = "seconds") -> list[tuple[str, str, float, float, float, float,
                                                                       str, str]]:
    """Per category (and all): (category, adaptive mode, / best fixed per prompt, / best single fixed,
    / auto:4, / plain, best single fixed mode, same text), on the records' ``key``: their measured
    seconds, or ``modelled_seconds`` (each run's steps on the curve measured in the run,
    localchat/bench/modelled.py)."""
    recs = [r for r in data["records"] if r["tokens"] > 0]
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in recs:
        by[(r["id"], r["mode"])].append(r)
    ids = list(dict.fromkeys(r["id"] for r in recs))
    cat_of = {r["id"]: r["category"] for r in recs}
    fixed = [m for m in dict.fromkeys(r["mode"] for r in recs) if m not in ADAPTIVE]
    out = []
    for cat in [*sorted(set(cat_of.values())), "all"]:
        mine = [i for i in ids if cat in ("all", cat_of[i])]
        # Each prompt weighs alike: mean seconds per token over the category's prompts.
        def cost(mode: str, mine: list[str] = mine) -> float:
            return sum(seconds_per_token(by[(i, mode)], key) for i in mine) / len(mine)
        oracle = sum(min(seconds_per_token(by[(i, m)], key) for m in fixed if by[(i, m)])
                     for i in mine) / len(mine)
        single = {m: cost(m) for m in fixed if all(by[(i, m)] for i in mine)}
        best = min(single, key=lambda m: single[m])
        for a in ADAPTIVE:
            if not all(by[(i, a)] for i in mine):
                continue
            c = cost(a)
            same = [r.get("matches_off") for i in mine for r in by[(i, a)]]
            out.append((cat, a, oracle / c, single[best] / c, single.get("auto:4", 0.0) / c,
                        single["off"] / c, best, f"{sum(1 for s in same if s)}/{len(same)}"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--targets", default="f16", help="comma-separated: f16, q8_0, q4_k_m")
    ap.add_argument("--drafters", default="q4_k_m", help="comma-separated: q4_k_m, q8_0")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--prompts", default="heldout2")
    ap.add_argument("--category", action="append")
    ap.add_argument("--limit", type=int, default=2, help="prompts per category (0: all)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--fixed", default="1,2,3,4,5,6,7,8", help="the fixed lengths measured (auto:N)")
    ap.add_argument("--exact", action="store_true", help="identical text with quantized targets (slower)")
    ap.add_argument("--saved", action="store_true", help="also each cell with a saved profile")
    ap.add_argument("--adaptive", default=",".join(ADAPTIVE),
                    help=f"adaptive modes (comma-separated: {', '.join(ADAPTIVE)})")
    ap.add_argument("--json-dir", type=Path, default=None, help="keep each cell's bench JSON here")
    args = ap.parse_args()
    args.fixed = [int(x) for x in args.fixed.split(",") if x.strip()]
    args.adaptive = [a for a in args.adaptive.split(",") if a in ADAPTIVE]
    json_dir = args.json_dir or Path(tempfile.mkdtemp(prefix="adaptive-matrix-"))
    json_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    rows: list[tuple[Any, ...]] = []
    for tq in args.targets.split(","):
        for dq in args.drafters.split(","):
            target, draft = model_file("target", tq), model_file("draft", dq)
            for th in [int(x) for x in args.threads.split(",")]:
                cells = [("fresh", True)]
                if args.saved:
                    cells.append(("saved", False))
                profiles = tempfile.mkdtemp(prefix="profiles-")  # never the user's profiles
                cell_env = dict(env, LOCALCHAT_PROFILES_DIR=profiles)
                for label, fresh in cells:
                    if not fresh:  # leave a profile for the saved run: one short run that saves it
                        warm = argparse.Namespace(**{**vars(args), "limit": 1, "category": ["code"]})
                        bench(target, draft, th, warm, json_dir / "warm.json", False, cell_env)
                    name = f"{tq}-{dq}-t{th}-{label}"
                    data = bench(target, draft, th, args, json_dir / f"{name}.json", fresh, cell_env)
                    for row in summarise(data):
                        rows.append((name, *row))
                    if "costs" in data:
                        for row in summarise(data, "modelled_seconds"):
                            rows.append((f"{name}~model", *row))
                    print_rows(rows)
    print(f"\nJSON per cell in {json_dir}")


def print_rows(rows: list[tuple[Any, ...]]) -> None:
    print(f"\n{'cell':26s} {'category':9s} {'mode':17s} {'/best':>6s} {'/1fix':>6s} {'/auto4':>7s} "
          f"{'/plain':>7s} {'best single':>11s} {'same':>6s}")
    for cell, cat, mode, oracle, single, a4, plain, best, same in rows:
        print(f"{cell:26s} {cat:9s} {mode:17s} {oracle:6.3f} {single:6.3f} {a4:7.3f} {plain:7.3f} "
              f"{best:>11s} {same:>6s}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
