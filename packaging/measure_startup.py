"""Time a bundle's cold start to a visible window on X11 (Linux), as a user sees it.

    python packaging/measure_startup.py dist/cpu/localchat/localchat [--runs 3] [--screenshot out.png]
                                        [--twice] [--as-user nobody]

Starts Xvfb when there is no DISPLAY. Each run starts the app with fresh,
empty user folders (XDG_CONFIG_HOME, XDG_DATA_HOME, ... in a temporary
folder: a first start, welcome panel included) and polls the X server until a
window titled "localchat" is mapped and viewable; the time from starting the
process to that moment is the cold start. The first run is reported apart:
it is the only one whose files may not be in the page cache yet (the script
drops the page cache first when it is allowed to, and says whether it could).

``--twice`` starts a second copy while the first is open and checks that both
show their window (two instances share the user's folders). The app is ended
with SIGTERM, as a session logout would, so exit codes read -15.
``--as-user USER`` runs the app as another account, for which the bundle's
folder is read-only (root ignores file permissions, so this is how a root
shell tests a read-only install folder).

Needs: Xvfb and xwininfo (Debian: xvfb x11-utils), ImageMagick's ``import``
for --screenshot, and Qt's xcb dependencies (libxcb-cursor0, libxkbcommon-x11-0,
libxcb-icccm4, libxcb-keysyms1).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pwd
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

POLL_S = 0.02
TIMEOUT_S = 60.0
_WINDOW_RE = re.compile(r"^\s*(0x[0-9a-f]+) \"([^\"]*)\"", re.MULTILINE)


@contextlib.contextmanager
def x_display() -> Iterator[str]:
    if os.environ.get("DISPLAY"):
        yield os.environ["DISPLAY"]
        return
    for n in range(90, 120):
        if not Path(f"/tmp/.X11-unix/X{n}").exists() and not Path(f"/tmp/.X{n}-lock").exists():
            break
    display = f":{n}"
    # -noreset: without it the server resets each time its last client leaves, which the polling
    # below (a short xwininfo every 20 ms) makes happen all the time, and an app connecting then can
    # be turned away. -ac: the app may run as another account (--as-user); the server is local only
    # (no TCP) and lives for this measurement.
    xvfb = subprocess.Popen(
        ["Xvfb", display, "-screen", "0", "1600x1000x24", "-nolisten", "tcp", "-noreset", "-ac"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            ok = subprocess.run(["xdpyinfo", "-display", display], capture_output=True, check=False)
            if ok.returncode == 0:
                break
            time.sleep(0.05)
        else:
            raise SystemExit("Xvfb did not start")
        yield display
    finally:
        xvfb.terminate()
        xvfb.wait(5)


def viewable_windows(display: str, title: str) -> list[str]:
    env = dict(os.environ, DISPLAY=display)
    tree = subprocess.run(
        ["xwininfo", "-root", "-tree"], capture_output=True, text=True, env=env, check=False
    )
    ids = [wid for wid, name in _WINDOW_RE.findall(tree.stdout) if title.lower() in name.lower()]
    out = []
    for wid in ids:
        info = subprocess.run(["xwininfo", "-id", wid], capture_output=True, text=True, env=env, check=False)
        if "IsViewable" in info.stdout:
            out.append(wid)
    return out


def x_answers(display: str, as_user: str | None) -> str:
    """Whether xdpyinfo reaches the display, as this account and as the app's."""
    env = dict(os.environ, DISPLAY=display)
    cmds = {"this account": ["xdpyinfo"]}
    if as_user:
        cmds[as_user] = [*as_account(as_user), "xdpyinfo"]
    said = []
    for who, cmd in cmds.items():
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        said.append(f"xdpyinfo as {who}: {'reached it' if r.returncode == 0 else r.stderr.strip()[:200]}")
    return "; ".join(said)


def drop_page_cache() -> bool:
    try:
        subprocess.run(["sync"], check=False)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def app_env(display: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QT_", "XDG_"))}
    env.update(
        DISPLAY=display,
        QT_QPA_PLATFORM="xcb",
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
        XDG_STATE_HOME=str(home / "state"),
        XDG_CACHE_HOME=str(home / "cache"),
        XDG_RUNTIME_DIR=str(home / "runtime"),
    )
    (home / "runtime").mkdir(parents=True, exist_ok=True)
    (home / "runtime").chmod(0o700)
    return env


def as_account(user: str) -> list[str]:
    """The command prefix that runs what follows as this account."""
    pw = pwd.getpwnam(user)
    return ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups"]


def start(exe: Path, env: dict[str, str], as_user: str | None) -> subprocess.Popen[bytes]:
    cmd = [*as_account(as_user), str(exe)] if as_user else [str(exe)]
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )


def wait_for_window(proc: subprocess.Popen[bytes], display: str, known: set[str]) -> tuple[float | None, str]:
    t0 = time.monotonic()
    while time.monotonic() - t0 < TIMEOUT_S:
        new = [w for w in viewable_windows(display, "localchat") if w not in known]
        if new:
            return time.monotonic() - t0, new[0]
        if proc.poll() is not None:
            return None, ""
        time.sleep(POLL_S)
    return None, ""


def stop(proc: subprocess.Popen[bytes]) -> tuple[int | None, str]:
    """Close the app as a window manager would (SIGTERM to its group), then read what it printed."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
    out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
    return proc.returncode, out


def fresh_home(as_user: str | None) -> Path:
    home = Path(tempfile.mkdtemp(prefix="localchat-start-"))
    if as_user:
        pw = pwd.getpwnam(as_user)
        os.chown(home, pw.pw_uid, pw.pw_gid)
        home.chmod(0o700)
    return home


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("exe", type=Path, help="the bundle's executable")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--screenshot", type=Path, help="save the screen of the first run here (PNG)")
    p.add_argument("--twice", action="store_true", help="also run two copies at once")
    p.add_argument(
        "--as-user", help="run the app as this account (the bundle folder is then read-only to it)"
    )
    args = p.parse_args(argv)
    exe = args.exe.resolve()
    if not exe.is_file():
        raise SystemExit(f"{exe} does not exist")
    failures = 0
    with x_display() as display:
        times: list[float] = []
        for i in range(args.runs):
            dropped = drop_page_cache() if i == 0 else False
            home = fresh_home(args.as_user)
            proc = start(exe, app_env(display, home), args.as_user)
            elapsed, wid = wait_for_window(proc, display, set())
            if elapsed is None:
                code, out = stop(proc)
                if "could not connect to display" in out:
                    # The X server, not the app: say what the server answers now and try once more.
                    answers = x_answers(display, args.as_user)
                    print(f"run {i + 1}: the app could not reach {display} ({answers}); trying once more")
                    proc = start(exe, app_env(display, home), args.as_user)
                    elapsed, wid = wait_for_window(proc, display, set())
                    if elapsed is None:
                        code, out = stop(proc)
            if elapsed is None:
                print(f"run {i + 1}: no window (exit code {code}, waited up to {TIMEOUT_S:.0f} s)")
                print(out[-3000:])
                failures += 1
                continue
            times.append(elapsed)
            cache = (
                " (page cache dropped first)" if dropped else (" (page cache not dropped)" if i == 0 else "")
            )
            print(f"run {i + 1}: window {wid} visible after {elapsed:.2f} s{cache}", flush=True)
            if i == 0 and args.screenshot:
                time.sleep(1.0)
                env = dict(os.environ, DISPLAY=display)
                subprocess.run(["import", "-window", "root", str(args.screenshot)], env=env, check=False)
                print(f"screenshot: {args.screenshot}")
            code, out = stop(proc)
            noisy = [ln for ln in out.splitlines() if "Traceback" in ln or "Error" in ln]
            if noisy:
                print(f"run {i + 1}: the app printed errors:\n{out[-3000:]}")
                failures += 1
            shutil.rmtree(home, ignore_errors=True)
        if times:
            rest = times[1:] or times
            median = statistics.median(rest)
            print(f"cold start to a visible window: first {times[0]:.2f} s, then median {median:.2f} s")
        if args.twice:
            home = fresh_home(args.as_user)
            env = app_env(display, home)
            first = start(exe, env, args.as_user)
            t1, w1 = wait_for_window(first, display, set())
            # One localchat per chat history (services/single_instance.py): the second copy brings the
            # first window to the front and ends, with a line that says so, and opens no window.
            second = start(exe, env, args.as_user)
            t2, _ = wait_for_window(second, display, {w1})
            c2, out2 = stop(second)
            c1, out1 = stop(first)
            handed_over = t2 is None and c2 == 0 and "already running" in out2
            ok = t1 is not None and handed_over
            print(
                f"two at once: first window {'shown' if t1 else 'MISSING'}, second copy "
                f"{'handed over to the first' if handed_over else 'did not hand over'}; "
                f"exit codes {c1}, {c2}"
            )
            if not ok:
                print(out1[-2000:], out2[-2000:])
                failures += 1
            shutil.rmtree(home, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
