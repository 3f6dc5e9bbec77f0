"""Speculation over RPC workers: the speed-up with the target split over a worker, at several link latencies.

    python tools/bench_rpc.py --model T.gguf --draft D.gguf [--delays 0,1,5] [--modes off,draft,adaptive]

Same run, same prompts (``localchat bench``, greedy): the target on this
computer alone, then split half and half with one ``localchat worker`` on
127.0.0.1, reached through a relay that holds every chunk of bytes for DELAY
ms in each direction (a LAN is about 0.2-1 ms, Wi-Fi 2-5 ms each way). The
relay stands in for ``tc netem``, which needs the sch_netem kernel module (absent
on some CI kernels); it adds latency only, not a bandwidth limit, so the
figures are the latency part of a real link.

It prints tokens/s per mode and configuration, the speed-up of each mode over
plain decoding in the same configuration, and what theory predicts from the
measured round-trip cost and acceptance length: if plain decoding spends R
more seconds per target pass over the link, and speculation emits L tokens
per pass, then speculation at S tok/s locally becomes L / (L / S + R) over the
link, while plain decoding becomes 1 / (1 / S0 + R).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from localchat.engine.rpc_wire import Endpoint, ProbeStatus, probe


class DelayRelay:
    """A TCP relay 127.0.0.1:port -> target that delivers each chunk ``delay_s`` after it arrived."""

    def __init__(self, target: Endpoint, delay_s: float) -> None:
        self.target, self.delay = target, delay_s
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = int(self.sock.getsockname()[1])
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        self.sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            upstream = socket.create_connection((self.target.host, self.target.port))
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._pipe(client, upstream)
            self._pipe(upstream, client)

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        q: queue.Queue[tuple[float, bytes]] = queue.Queue()

        def read() -> None:
            while True:
                try:
                    data = src.recv(1 << 20)
                except OSError:
                    data = b""
                q.put((time.monotonic() + self.delay, data))
                if not data:
                    return

        def write() -> None:
            while True:
                due, data = q.get()
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if not data:
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)
                    return
                try:
                    dst.sendall(data)
                except OSError:
                    return

        threading.Thread(target=read, daemon=True).start()
        threading.Thread(target=write, daemon=True).start()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_worker(threads: int) -> tuple[subprocess.Popen[bytes], Endpoint]:
    ep = Endpoint("127.0.0.1", free_port())
    proc = subprocess.Popen([sys.executable, "-m", "localchat", "worker", "--port", str(ep.port),
                             "--threads", str(threads)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        if probe(ep, timeout=2).status is ProbeStatus.READY:
            return proc, ep
        time.sleep(0.2)
    proc.kill()
    raise SystemExit("the worker did not start")


def round_trip_ms(ep: Endpoint, n: int = 5) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        probe(ep)
        times.append(time.perf_counter() - t)
    return 1000 * sorted(times)[len(times) // 2]


def bench(args: argparse.Namespace, rpc: str | None, label: str) -> dict[str, dict[str, float]]:
    out = Path(tempfile.mkdtemp()) / "bench.json"
    cmd = [sys.executable, "-m", "localchat", "bench", "--model", args.model, "--draft", args.draft,
           "--modes", args.modes, "--max-tokens", str(args.max_tokens), "--json", str(out),
           "--threads", str(args.threads), "--ctx", "2048"]
    for c in args.category or []:
        cmd += ["--category", c]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    if rpc:
        cmd += ["--rpc", rpc, "--tensor-split", args.split]
    print(f"## {label}: {' '.join(cmd[3:])}", flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL if not args.verbose else None)
    data: dict[str, Any] = json.loads(out.read_text())
    rows: dict[str, dict[str, float]] = {}
    for rec in data["records"]:
        row = rows.setdefault(rec["mode"], {"tokens": 0.0, "seconds": 0.0, "passes": 0.0})
        tokens = float(rec["tokens"])
        row["tokens"] += tokens
        row["seconds"] += tokens / max(1e-9, float(rec["tokens_per_s"]))
        row["passes"] += tokens / max(1.0, float(rec.get("acceptance_length") or 1.0))
    for row in rows.values():
        row["tok_s"] = row["tokens"] / row["seconds"]
        row["acc_len"] = row["tokens"] / row["passes"] if row["passes"] else 1.0
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--draft", required=True)
    p.add_argument("--delays", default="0,1,5", help="one-way link delays in ms (default 0,1,5)")
    p.add_argument("--modes", default="off,draft,adaptive")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--category", action="append")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    p.add_argument("--split", default="1,1", help="--tensor-split for the split runs (default 1,1)")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()

    worker, ep = start_worker(args.threads)
    results: list[tuple[str, float, dict[str, dict[str, float]]]] = []
    try:
        results.append(("local", 0.0, bench(args, None, "target local")))
        for delay in [float(d) for d in args.delays.split(",")]:
            relay = DelayRelay(ep, delay / 1000)
            try:
                rtt = round_trip_ms(Endpoint("127.0.0.1", relay.port))
                label = f"local + 1 worker, {delay:g} ms each way"
                results.append((label, rtt, bench(args, f"127.0.0.1:{relay.port}", label)))
            finally:
                relay.close()
    finally:
        worker.kill()

    modes = [m.strip() for m in args.modes.split(",")]
    spec_modes = [m for m in modes if m != "off"]
    print()
    head = " | ".join(f"{m} tok/s | {m} x off | {m} acc.len" for m in spec_modes)
    print(f"| target | HELLO round trip ms | off tok/s | {head} |")
    print("|---" * (3 + 3 * len(spec_modes)) + "|")
    local = results[0][2]
    for label, rtt, rows in results:
        off = rows["off"]["tok_s"]
        cells = []
        for m in spec_modes:
            r = rows[m]
            cells.append(f"{r['tok_s']:.2f} | {r['tok_s'] / off:.2f}x | {r['acc_len']:.2f}")
        print(f"| {label} | {rtt:.1f} | {off:.2f} | " + " | ".join(cells) + " |")
    print()
    base = {m: local[m]["tok_s"] / local["off"]["tok_s"] for m in spec_modes}
    for label, _, rows in results[1:]:
        r_pass = 1 / rows["off"]["tok_s"] - 1 / local["off"]["tok_s"]  # extra seconds per target pass
        for m in spec_modes:
            length = rows[m]["acc_len"]
            predicted_spec = length / (length / local[m]["tok_s"] + r_pass)
            predicted = predicted_spec / rows["off"]["tok_s"]
            measured = rows[m]["tok_s"] / rows["off"]["tok_s"]
            print(f"{label}, {m}: speed-up {measured:.2f}x (local {base[m]:.2f}x, ratio "
                  f"{measured / base[m]:.2f}); theory from link cost {1000 * r_pass:.1f} ms/pass and "
                  f"acc.len {length:.2f}: {predicted:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
