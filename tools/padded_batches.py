"""What a verification batch padded to a faster size costs here, against the batch as it is.

    python tools/padded_batches.py --model T.gguf [--threads 2] [--pad 5:8,6:8] [--rounds 9]

For each ``N:M`` of ``--pad``, the target decodes, after a 64-token context: N tokens (logits for all
N, as a verification pass reads them), the same N padded to M with copies of the last token (what the
decode loop runs where ``CostModel.padded`` says M is faster, engine/costs.py; the padding's logits are
computed and never read), and M tokens; plus one token, the plain step. Every size is timed in turn in
each round (a CPU's single-token pass is bimodal when timed back to back on some machines), and the
median of the rounds is printed, in ms and against the plain step.
"""

from __future__ import annotations

import argparse
import statistics
import time


def pairs(text: str) -> list[tuple[int, int]]:
    out = []
    for item in text.split(","):
        n, _, m = item.partition(":")
        if not (n.strip().isdigit() and m.strip().isdigit()) or not 1 <= int(n) < int(m) <= 64:
            raise argparse.ArgumentTypeError(f"{item!r}: expected N:M with 1 <= N < M <= 64")
        out.append((int(n), int(m)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--pad", type=pairs, default=pairs("5:8,6:8,7:8"), help="N:M, comma-separated")
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()

    from localchat.engine.engine import Engine
    from localchat.engine.profile import CALIBRATION_TEXT
    from localchat.engine.types import EngineConfig

    cfg = EngineConfig(args.model, n_ctx=512, n_threads=args.threads, use_profile=False, calibrate=False)
    with Engine(cfg) as eng:
        ctx = eng.target
        tokens = eng.target_model.tokenize(CALIBRATION_TEXT * 3, add_special=True)
        ctx.clear()
        ctx.decode(tokens[:64])
        base = ctx.n_past
        runs = [("1", 1, 0)]
        for n, m in args.pad:
            runs += [(f"{n}", n, 0), (f"{n} padded to {m}", n, m - n), (f"{m}", m, 0)]
        seconds: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            for name, n, pad in runs:
                batch = [*tokens[64 : 64 + n], *[tokens[63 + n]] * pad]
                t0 = time.perf_counter()
                ctx.decode(batch, logits_for=n + pad)
                seconds.setdefault(name, []).append(time.perf_counter() - t0)
                ctx.truncate(base)
        plain = statistics.median(seconds["1"])
        threads = cfg.n_threads or "all physical"
        print(f"{eng.target_model.name}, {threads} threads; median of {args.rounds} rounds")
        for name, values in seconds.items():
            ms = statistics.median(values) * 1000
            print(f"  {name:18s} {ms:8.1f} ms  {ms / 1000 / plain:5.2f}x one token")


if __name__ == "__main__":
    main()
