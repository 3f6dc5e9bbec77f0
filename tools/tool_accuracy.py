"""Tool-call accuracy of localchat's API against llama-server's, on the same small BFCL-shaped cases.

The cases (tools/data/tool_cases.jsonl; written before any run, never tuned on: see its header) are
in four categories, as the Berkeley Function-Calling Leaderboard has them: ``simple`` (one tool, one
call), ``multiple`` (several tools, one call of the right one), ``parallel`` (several calls in one
reply) and ``irrelevance`` (no tool fits: the right answer is no call). Each case is sent once per
server through the ``openai`` client (temperature 0, tool_choice auto, the server's default
speculation) and scored as BFCL scores its AST categories:

- the reply's calls and the expected calls pair up one to one (in any order for parallel cases), with
  the same function name;
- every argument the model gave is an expected parameter, with one of the acceptable values
  (strings case-, blank- and punctuation-insensitive; numbers by value, an integer for a number);
- every expected parameter without ``""`` among its values is given;
- an irrelevance case passes when the reply makes no call.

Beside the score: whether each call's ``arguments`` is a JSON object (per call and per request).

The servers are started here one after the other (never both at once: they would share the CPU),
or named by URL (``--localchat-url``, ``--llama-url``). llama-server is llama.cpp's own, built from
the sources vendored in the llama-cpp-python sdist as tools/compare_native.py's docstring says, with
``--target llama-server``; it is started as ``llama-server --jinja -m MODEL --port P --host 127.0.0.1
-c 4096 -t THREADS``. localchat as ``python -m localchat serve --model MODEL --draft DRAFT``.

    python tools/tool_accuracy.py --model T.gguf --draft D.gguf \\
        --llama-server /tmp/native-build/bin/llama-server --json accuracy.json

``--load accuracy.json`` prints the tables of a saved run again (``--load`` twice: both merged, for
a server run on its own).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import permutations
from pathlib import Path
from typing import Any, cast

CASES = Path(__file__).resolve().parent / "data" / "tool_cases.jsonl"
CATEGORIES = ("simple", "multiple", "parallel", "irrelevance")
OMITTED = ""  # among a parameter's acceptable values: it may be left out
_PUNCTUATION = re.compile(r"[\s,./\-_*^'\"!?:;()]")


@dataclass(frozen=True)
class ExpectedCall:
    name: str
    arguments: Mapping[str, Sequence[Any]]  # parameter -> acceptable values


@dataclass(frozen=True)
class Case:
    id: str
    category: str
    tools: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    expected: tuple[ExpectedCall, ...]  # empty: no call is the right answer


@dataclass(frozen=True)
class Call:
    name: str
    arguments: str  # as the server sent it: JSON text, if the server wrote it right


@dataclass(frozen=True)
class Outcome:
    """One case's reply from one server."""

    case: str
    calls: tuple[Call, ...] = ()
    content: str = ""
    finish_reason: str = ""
    seconds: float = 0.0
    error: str = ""  # the request failed (the case scores as failed)


@dataclass
class Verdict:
    passed: bool
    why: str = ""
    calls: int = 0
    valid_json: int = 0  # calls whose arguments are a JSON object


def load_cases(path: Path = CASES) -> list[Case]:
    """The cases of a JSONL file (lines starting with ``#`` are its header)."""
    cases = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            raw = json.loads(line)
            expected = tuple(ExpectedCall(c["name"], c["arguments"]) for c in raw["expected"])
            case = Case(raw["id"], raw["category"], raw["tools"], raw["messages"], expected)
        except (ValueError, KeyError, TypeError) as e:
            raise SystemExit(f"{path}, line {number}: not a case ({e})") from e
        if case.category not in CATEGORIES:
            raise SystemExit(f"{path}, line {number}: category {case.category!r} is not one of {CATEGORIES}")
        cases.append(case)
    ids = [c.id for c in cases]
    if len(set(ids)) != len(ids):
        raise SystemExit(f"{path}: case ids repeat")
    return cases


# -- scoring ---------------------------------------------------------------------------------------


def _norm(text: str) -> str:
    return _PUNCTUATION.sub("", text).lower()


def value_matches(given: Any, acceptable: Iterable[Any]) -> bool:
    """Whether ``given`` is one of the acceptable values (BFCL's comparison, see the docstring)."""
    for want in acceptable:
        if isinstance(want, bool) or isinstance(given, bool):
            if given is want:
                return True
        elif isinstance(want, (int, float)):
            if isinstance(given, (int, float)) and math.isclose(given, want, rel_tol=1e-9, abs_tol=1e-12):
                return True
        elif isinstance(want, str):
            if isinstance(given, str) and want != OMITTED and _norm(given) == _norm(want):
                return True
        elif isinstance(want, list) and isinstance(given, list):
            pairs = zip(given, want, strict=True) if len(want) == len(given) else None
            if pairs is not None and all(value_matches(g, [w]) for g, w in pairs):
                return True
        elif given == want:
            return True
    return False


def call_problem(call: Mapping[str, Any] | None, expected: ExpectedCall, name: str) -> str:
    """Why a call (its name and parsed arguments; None: not a JSON object) does not match; "" if it does."""
    if name != expected.name:
        return f"called {name}, expected {expected.name}"
    if call is None:
        return f"{name}: arguments are not a JSON object"
    for key, value in call.items():
        if key not in expected.arguments:
            return f"{name}: unexpected argument {key}"
        if not value_matches(value, expected.arguments[key]):
            return f"{name}: {key}={json.dumps(value)} not in {json.dumps(list(expected.arguments[key]))}"
    for key, values in expected.arguments.items():
        if key not in call and OMITTED not in values:
            return f"{name}: {key} missing"
    return ""


def parse_arguments(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def score(case: Case, outcome: Outcome) -> Verdict:
    parsed = [parse_arguments(c.arguments) for c in outcome.calls]
    verdict = Verdict(False, calls=len(parsed), valid_json=sum(p is not None for p in parsed))
    if outcome.error:
        verdict.why = f"error: {outcome.error}"
        return verdict
    if not case.expected:
        verdict.passed = not outcome.calls
        verdict.why = "" if verdict.passed else f"called {', '.join(c.name for c in outcome.calls)}"
        return verdict
    if not outcome.calls:
        verdict.why = "no call"
        return verdict
    if len(outcome.calls) != len(case.expected):
        verdict.why = f"{len(outcome.calls)} calls, expected {len(case.expected)}"
        return verdict
    first_problem = ""
    for order in permutations(range(len(case.expected))):
        problems = [call_problem(parsed[i], case.expected[j], outcome.calls[i].name)
                    for i, j in enumerate(order)]
        if not any(problems):
            verdict.passed = True
            return verdict
        first_problem = first_problem or next(p for p in problems if p)
    verdict.why = first_problem
    return verdict


# -- the servers -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return bool(r.status == 200)
    except OSError:
        return False


class Server:
    """A server process started for the run (its output to a log file), ended when the run is done."""

    def __init__(self, name: str, cmd: list[str], health: str, base_url: str, log: Path) -> None:
        self.name, self.base_url = name, base_url
        self._log = log.open("w")
        print(f"starting {name}: {' '.join(cmd)} (log: {log})", flush=True)
        self._proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 600
        while not _ready(health):
            if self._proc.poll() is not None:
                code = self._proc.returncode
                raise SystemExit(f"{name} ended with code {code} before it served; see {log}")
            if time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"{name} did not answer {health} within 10 minutes; see {log}")
            time.sleep(1)

    def stop(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._log.close()


def start_localchat(args: argparse.Namespace, log_dir: Path) -> Server:
    port = free_port()
    cmd = [sys.executable, "-m", "localchat", "serve", "--model", args.model, "--port", str(port),
           "--host", "127.0.0.1", "--ctx", str(args.ctx), "--threads", str(args.threads)]
    cmd += ["--draft", args.draft] if args.draft else ["--no-spec"]
    url = f"http://127.0.0.1:{port}"
    return Server("localchat", cmd, f"{url}/health", f"{url}/v1", log_dir / "localchat-serve.log")


def start_llama_server(args: argparse.Namespace, log_dir: Path) -> Server:
    port = free_port()
    cmd = [args.llama_server, "--jinja", "-m", args.model, "--port", str(port), "--host", "127.0.0.1",
           "-c", str(args.ctx), "-t", str(args.threads)]
    url = f"http://127.0.0.1:{port}"
    return Server("llama-server", cmd, f"{url}/health", f"{url}/v1", log_dir / "llama-server.log")


def ask(base_url: str, case: Case, max_tokens: int, extra: Mapping[str, Any], timeout: float) -> Outcome:
    """One case through the openai client."""
    from openai import OpenAI, OpenAIError  # only a run needs it, not --load or the tests

    client = OpenAI(base_url=base_url, api_key="none", timeout=timeout, max_retries=0)
    start = time.monotonic()
    try:
        # the cases' tools and messages are plain JSON, which the client's typed overloads do not name
        reply = cast(Any, client.chat.completions).create(
            model=client.models.list().data[0].id, messages=case.messages, tools=case.tools,
            tool_choice="auto", temperature=0, max_tokens=max_tokens, extra_body=dict(extra) or None,
        )
    except OpenAIError as e:
        return Outcome(case.id, error=str(e)[:300], seconds=time.monotonic() - start)
    choice = reply.choices[0]
    calls = tuple(Call(c.function.name, c.function.arguments)
                  for c in choice.message.tool_calls or () if c.type == "function")
    return Outcome(case.id, calls, choice.message.content or "", choice.finish_reason or "",
                   time.monotonic() - start)


def run_server(name: str, base_url: str, cases: Sequence[Case], args: argparse.Namespace) -> list[Outcome]:
    extra: dict[str, Any] = {}
    if name.startswith("localchat") and args.localchat_mode:
        extra["speculative"] = {"mode": args.localchat_mode}
    outcomes = []
    for case in cases:
        outcome = ask(base_url, case, args.max_tokens, extra, args.timeout)
        verdict = score(case, outcome)
        shown = "; ".join(f"{c.name}({' '.join(c.arguments.split())})" for c in outcome.calls)
        shown = shown or repr(outcome.content[:60])
        print(f"  {name:12} {case.id:24} {'pass' if verdict.passed else 'FAIL'} {outcome.seconds:6.1f}s  "
              f"{shown}{'  <- ' + verdict.why if verdict.why else ''}", flush=True)
        outcomes.append(outcome)
    return outcomes


# -- the report ------------------------------------------------------------------------------------


@dataclass
class Tally:
    passed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    total: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    calls: int = 0
    valid_calls: int = 0
    requests_with_calls: int = 0
    valid_requests: int = 0
    errors: int = 0


def tally(cases: Sequence[Case], outcomes: Sequence[Outcome]) -> Tally:
    by_id = {o.case: o for o in outcomes}
    t = Tally()
    for case in cases:
        outcome = by_id.get(case.id)
        if outcome is None:
            continue
        verdict = score(case, outcome)
        t.total[case.category] += 1
        t.passed[case.category] += verdict.passed
        t.errors += bool(outcome.error)
        t.calls += verdict.calls
        t.valid_calls += verdict.valid_json
        if verdict.calls:
            t.requests_with_calls += 1
            t.valid_requests += verdict.valid_json == verdict.calls
    return t


def table(cases: Sequence[Case], runs: Mapping[str, Sequence[Outcome]]) -> str:
    """The per-category table, one column per server, and the JSON-argument validity."""
    tallies = {name: tally(cases, outcomes) for name, outcomes in runs.items()}
    names = list(tallies)
    width = max(14, *(len(n) + 2 for n in names))
    lines = ["| category | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]

    def cell(passed: int, total: int) -> str:
        return f"{passed}/{total} ({100 * passed / total:.0f}%)" if total else "-"

    for category in (*CATEGORIES, "all"):
        cells = []
        for n in names:
            t = tallies[n]
            if category == "all":
                cells.append(cell(sum(t.passed.values()), sum(t.total.values())))
            else:
                cells.append(cell(t.passed[category], t.total[category]))
        lines.append(f"| {category} | " + " | ".join(c.rjust(width - 2) for c in cells) + " |")
    lines.append("| arguments valid JSON (calls) | "
                 + " | ".join(f"{tallies[n].valid_calls}/{tallies[n].calls}" for n in names) + " |")
    parsed = (f"{tallies[n].valid_requests}/{tallies[n].requests_with_calls}" for n in names)
    lines.append("| requests whose calls all parse | " + " | ".join(parsed) + " |")
    lines.append("| failed requests | " + " | ".join(str(tallies[n].errors) for n in names) + " |")
    return "\n".join(lines)


def differences(cases: Sequence[Case], runs: Mapping[str, Sequence[Outcome]]) -> list[str]:
    """The cases the servers scored differently, with why each failed one failed."""
    names = list(runs)
    by = {n: {o.case: o for o in runs[n]} for n in names}
    lines = []
    for case in cases:
        verdicts = {n: score(case, by[n][case.id]) for n in names if case.id in by[n]}
        if len({v.passed for v in verdicts.values()}) > 1:
            lines.append(f"{case.id}: " + "; ".join(
                f"{n} {'pass' if v.passed else 'fail (' + v.why + ')'}" for n, v in verdicts.items()))
    return lines


def same_replies(a: Sequence[Outcome], b: Sequence[Outcome]) -> tuple[int, int]:
    """(cases whose replies are the same in both runs, cases in both): the same calls, names and
    arguments (parsed where they parse), and the same content."""
    def key(o: Outcome) -> tuple[object, ...]:
        calls = tuple((c.name, json.dumps(parse_arguments(c.arguments), sort_keys=True)
                       if parse_arguments(c.arguments) is not None else c.arguments) for c in o.calls)
        return calls, o.content.strip(), o.error

    by_b = {o.case: o for o in b}
    both = [(o, by_b[o.case]) for o in a if o.case in by_b]
    return sum(key(x) == key(y) for x, y in both), len(both)


def save(path: Path, runs: Mapping[str, Sequence[Outcome]], meta: Mapping[str, Any]) -> None:
    data = {"meta": dict(meta), "runs": {n: [asdict(o) for o in outs] for n, outs in runs.items()}}
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")


def load(path: Path) -> dict[str, list[Outcome]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return {n: [Outcome(o["case"], tuple(Call(**c) for c in o["calls"]), o["content"], o["finish_reason"],
                        o["seconds"], o["error"]) for o in outs] for n, outs in data["runs"].items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=Path, default=CASES)
    ap.add_argument("--model", help="target GGUF (both servers)")
    ap.add_argument("--draft", help="draft GGUF for localchat (left out: --no-spec)")
    ap.add_argument("--llama-server", help="llama-server binary to start")
    ap.add_argument("--localchat-url", help="a running localchat's base URL (http://127.0.0.1:P/v1)")
    ap.add_argument("--llama-url", help="a running llama-server's base URL (http://127.0.0.1:P/v1)")
    ap.add_argument("--servers", default="localchat,llama-server", help="which to run, in this order")
    ap.add_argument("--localchat-mode", default="",
                    help="speculation mode asked of localchat per request (off, adaptive; default: its own)")
    ap.add_argument("--label", default="", help="a suffix for localchat's column (e.g. ' off')")
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one request may take")
    ap.add_argument("--limit", type=int, default=0, help="the first N cases only (0: all)")
    ap.add_argument("--case", action="append", default=[], help="only this case id (repeatable)")
    ap.add_argument("--log-dir", type=Path, default=Path("."), help="where started servers log")
    ap.add_argument("--json", type=Path, help="save the replies here")
    ap.add_argument("--load", type=Path, action="append", default=[], help="print a saved run's tables")
    args = ap.parse_args()
    cases = load_cases(args.cases)
    if args.case:
        unknown = set(args.case) - {c.id for c in cases}
        if unknown:
            raise SystemExit(f"--case: no case {', '.join(sorted(unknown))} in {args.cases}")
        cases = [c for c in cases if c.id in args.case]
    if args.limit:
        cases = cases[: args.limit]
    runs: dict[str, list[Outcome]] = {}
    for path in args.load:
        runs.update(load(path))
    if not args.load:
        for name in [s.strip() for s in args.servers.split(",") if s.strip()]:
            column = name + (args.label if name == "localchat" else "")
            url = {"localchat": args.localchat_url, "llama-server": args.llama_url}.get(name)
            if name not in ("localchat", "llama-server"):
                raise SystemExit(f"--servers: {name!r} is neither localchat nor llama-server")
            if url:
                runs[column] = run_server(column, url, cases, args)
                continue
            if not args.model or (name == "llama-server" and not args.llama_server):
                raise SystemExit(f"{name}: give its URL, or --model (and --llama-server) to start it")
            server = (start_localchat if name == "localchat" else start_llama_server)(args, args.log_dir)
            try:
                runs[column] = run_server(column, server.base_url, cases, args)
            finally:
                server.stop()
        if args.json:
            meta = {"model": args.model, "draft": args.draft,
                    "localchat_mode": args.localchat_mode or "default", "max_tokens": args.max_tokens,
                    "threads": args.threads, "ctx": args.ctx, "cases": str(args.cases),
                    "time": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "pid": os.getpid()}
            save(args.json, runs, meta)
    print()
    print(table(cases, runs))
    names = list(runs)
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            same, both = same_replies(runs[first], runs[second])
            print(f"same replies, {first} and {second}: {same}/{both}")
    diff = differences(cases, runs)
    if diff:
        print("\nScored differently:")
        print("\n".join(diff))
    return 0


if __name__ == "__main__":
    sys.exit(main())
