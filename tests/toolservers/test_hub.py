"""The tool hub on real MCP servers written with the SDK (tests/toolservers/mcp_servers.py), over stdio
and streamable HTTP: tools listed and called, each fault a sentence, and no server left running."""

from __future__ import annotations

import queue
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from localchat.toolservers.config import ServerConfig
from localchat.toolservers.hub import CallOutcome, CallStatus, Phase, Ready, Report, ServerState, ToolHub
from tests.toolservers.conftest import HttpServer, stdio_server

WAIT_S = 60


class Hub:
    """A hub whose reports land in a queue the test reads."""

    def __init__(self, log_dir: Path, start_timeout_s: float = 30.0) -> None:
        self.reports: queue.Queue[Report] = queue.Queue()
        self.tickets = 0
        self.hub = ToolHub(self.reports.put, log_dir=log_dir, start_timeout_s=start_timeout_s)

    def states(self, servers: list[ServerConfig]) -> dict[str, ServerState]:
        self.tickets += 1
        self.hub.ensure(servers, self.tickets)
        while True:
            report = self.reports.get(timeout=WAIT_S)
            if isinstance(report, Ready) and report.ticket == self.tickets:
                assert [s.name for s in report.states] == [s.name for s in servers]
                return {s.name: s for s in report.states}

    def call(self, server: str, tool: str, arguments: dict[str, object] | None = None, *,
             timeout_s: float = 20, max_chars: int = 1000, cancel_after: float | None = None) -> CallOutcome:
        call_id = f"call-{time.monotonic_ns()}"
        self.hub.call(call_id, server, tool, arguments or {}, timeout_s=timeout_s, max_chars=max_chars)
        if cancel_after is not None:
            time.sleep(cancel_after)
            self.hub.cancel(call_id)
        while True:
            report = self.reports.get(timeout=WAIT_S)
            if isinstance(report, CallOutcome) and report.call_id == call_id:
                return report


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Hub]:
    made = Hub(tmp_path / "log")
    yield made
    made.hub.close()


def test_a_calculator_and_a_confined_file_lister_over_stdio(hub: Hub, tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("hi")
    (tmp_path / "secret.txt").write_text("not for the model")
    states = hub.states([stdio_server("calc", "calc"), stdio_server("files", "files", str(root))])
    calc = states["calc"]
    assert [t.name for t in states["files"].tools] == ["list_files"]
    assert calc.phase is Phase.RUNNING and [t.name for t in calc.tools] == ["add", "multiply"]
    assert calc.tools[0].description == "Add two numbers and return the sum."
    assert '"required": ["a", "b"]' in calc.tools[0].schema
    assert calc.pid is not None and psutil.pid_exists(calc.pid)
    done = hub.call("calc", "multiply", {"a": 6, "b": 7})
    assert (done.status, done.text, done.note) == (CallStatus.DONE, "42", "")
    listed = hub.call("files", "list_files", {"path": "."})
    assert listed.status is CallStatus.DONE and listed.text == '["README.md", "src"]'
    outside = hub.call("files", "list_files", {"path": ".."})
    assert outside.status is CallStatus.ERROR and "outside the folder" in outside.note
    # a second ensure finds them running: no new processes
    again = hub.states([stdio_server("calc", "calc"), stdio_server("files", "files", str(root))])
    assert again["calc"].pid == calc.pid


def test_faults_of_a_stdio_server_are_sentences(hub: Hub, tmp_path: Path) -> None:
    missing_command = ServerConfig("missing", "no-such-command-localchat")
    states = hub.states([stdio_server("faulty", "faulty"), missing_command])
    missing, faulty = states["missing"], states["faulty"]
    assert missing.phase is Phase.FAILED
    assert missing.problem == ("The tool server 'missing' could not start: the command "
                               "'no-such-command-localchat' was not found. Check its command in "
                               "Settings → Tools.")
    assert [t.name for t in faulty.tools] == ["wait", "crash", "fail", "big", "echo"]
    assert faulty.left_out == ("The tool 'broken' of the tool server 'faulty' was left out: its input "
                               "schema is not valid JSON Schema ('no-such-type' is not valid under any of "
                               "the given schemas at properties/x/type).",)

    error = hub.call("faulty", "fail")
    assert error.status is CallStatus.ERROR and error.text == "The fail tool always fails: no such record."
    assert error.note == "'fail' returned an error: The fail tool always fails: no such record."

    started = time.monotonic()
    big = hub.call("faulty", "big", max_chars=2000)
    assert big.status is CallStatus.DONE and big.text == "0123456789" * 200
    assert big.size > 50_000_000
    assert big.note == "'big' returned 50.0 MB; only the first 2,000 characters went to the model."
    assert time.monotonic() - started < 15  # the SDK's own reader took 35 s here

    hung = hub.call("faulty", "wait", timeout_s=1.5)
    assert hung.status is CallStatus.TIMED_OUT and 1.4 < hung.seconds < 10
    assert hung.note.startswith("'wait' did not answer within 2 s")
    stopped = hub.call("faulty", "wait", timeout_s=60, cancel_after=0.3)
    assert stopped.status is CallStatus.CANCELLED and stopped.seconds < 10
    assert hub.call("faulty", "echo", {"text": "still here"}).text == "still here"  # the server answers on

    pid = hub.states([stdio_server("faulty", "faulty")])["faulty"].pid
    crashed = hub.call("faulty", "crash")
    assert crashed.status is CallStatus.FAILED
    assert crashed.note.startswith("The tool server 'faulty' stopped while running 'crash' (exit code 3).")
    assert "It last wrote: “the crash tool was called: exiting with code 3”" in crashed.note
    assert str(tmp_path / "log" / "tool-servers" / "faulty.log") in crashed.note
    # the next message starts it again
    again = hub.states([stdio_server("faulty", "faulty")])["faulty"]
    assert again.phase is Phase.RUNNING and again.pid != pid
    assert hub.call("faulty", "echo", {"text": "back"}).text == "back"


def test_a_server_that_does_not_answer_at_start_is_stopped(tmp_path: Path) -> None:
    slow = Hub(tmp_path, start_timeout_s=1.0)
    try:
        silent = ServerConfig("silent", "python3", ("-c", "import time; time.sleep(60)"))
        state = slow.states([silent])["silent"]
        assert state.phase is Phase.FAILED
        assert state.problem == (
            "The tool server 'silent' did not answer within 1 s of starting, so it was stopped.")
    finally:
        slow.hub.close()
    children = psutil.Process().children(recursive=True)
    assert not [p for p in children if "time.sleep(60)" in " ".join(p.cmdline())]


def test_a_server_that_exits_at_start_says_what_it_wrote(hub: Hub) -> None:
    script = "import sys; sys.stderr.write('bad config\\n'); sys.exit(2)"
    dying = ServerConfig("dying", "python3", ("-c", script))
    state = hub.states([dying])["dying"]
    assert state.phase is Phase.FAILED
    assert "stopped while starting (exit code 2)" in state.problem and "“bad config”" in state.problem


def test_the_http_test_server_answers_as_soon_as_it_tells_its_port(http_faulty: HttpServer) -> None:
    # It printed its port while uvicorn was still starting, before the socket listened: a hub that
    # connected at once was refused now and then on a busy machine ("nothing answers at that address").
    port = int(http_faulty.url.split(":")[2].split("/")[0])
    socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_http_server_tools_faults_and_its_disappearance(hub: Hub, http_faulty: HttpServer) -> None:
    web = ServerConfig("web", url=http_faulty.url, headers={"X-Test": "1"})
    nowhere = ServerConfig("nowhere", url="http://127.0.0.1:9/mcp")
    states = hub.states([web, nowhere])
    assert states["web"].phase is Phase.RUNNING and len(states["web"].tools) == 5
    assert states["nowhere"].problem == ("The tool server 'nowhere' at http://127.0.0.1:9/mcp could not be "
                                         "reached: nothing answers at that address.")
    assert hub.call("web", "echo", {"text": "over http"}).text == "over http"
    assert hub.call("web", "fail").status is CallStatus.ERROR
    assert hub.call("web", "wait", timeout_s=1.0).status is CallStatus.TIMED_OUT
    big = hub.call("web", "big", max_chars=100)
    assert big.text == "0123456789" * 10 and "returned 50,000,000 characters" in big.note
    crashed = hub.call("web", "crash")
    assert crashed.status is CallStatus.FAILED and "stopped while running 'crash'" in crashed.note


def test_close_stops_every_server_process(tmp_path: Path) -> None:
    made = Hub(tmp_path)
    states = made.states([stdio_server("a", "calc"), stdio_server("b", "calc")])
    pids = [s.pid for s in states.values()]
    assert all(pid is not None and psutil.pid_exists(pid) for pid in pids)
    started = time.monotonic()
    made.hub.close()
    assert time.monotonic() - started < 10
    for pid in pids:
        assert pid is not None
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not made.hub.running


APP = """
import queue, sys
from pathlib import Path
from localchat.toolservers.hub import Ready, ToolHub
from tests.toolservers.conftest import stdio_server
reports = queue.Queue()
hub = ToolHub(reports.put, log_dir=Path(sys.argv[1]))
hub.ensure([stdio_server("a", "calc"), stdio_server("b", "faulty")], 1)
while not isinstance(report := reports.get(timeout=60), Ready):
    pass
print(" ".join(str(s.pid) for s in report.states), flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and zombies are POSIX words")
def test_servers_end_when_the_app_is_killed(tmp_path: Path) -> None:
    # An app killed outright runs no close(): its servers must still end (their stdin closes, and an
    # MCP server ends at the end of its input), not be left running with no one to stop them.
    root = Path(__file__).resolve().parents[2]
    app = subprocess.Popen([sys.executable, "-c", APP, str(tmp_path)], cwd=root, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    try:
        assert app.stdout is not None
        pids = [int(p) for p in app.stdout.readline().split()]
        assert len(pids) == 2 and all(psutil.pid_exists(pid) for pid in pids)
    finally:
        app.kill()
        app.wait(10)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in pids)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
