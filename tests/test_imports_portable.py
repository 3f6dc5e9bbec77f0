"""Every module of the package imports with the Unix-only standard modules hidden from it.

The bundles target Windows too, where ``resource``, ``fcntl``, ``termios``,
``pwd`` and the like do not exist: a top-level import of one in any localchat
module stops that module (and every command that reaches it) from starting
there. A fresh interpreter hides them from imports made by localchat's own code
(third-party packages pick their own per-platform modules and are left alone),
then imports every module of the package (an ``import`` statement inside a
function is fine: it runs only where that code path runs).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

UNIX_ONLY = ("resource", "fcntl", "termios", "pwd", "grp", "crypt", "tty", "pty", "readline", "syslog",
             "spwd", "nis", "ossaudiodev")

SCRIPT = textwrap.dedent(
    """
    import builtins, importlib, pkgutil, sys

    HIDDEN = set(sys.argv[1].split(","))
    PACKAGE = sys.argv[2]
    if len(sys.argv) > 3:
        sys.path.insert(0, sys.argv[3])

    real_import = builtins.__import__

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        importer = str((globals or {}).get("__name__", ""))
        if level == 0 and name.split(".")[0] in HIDDEN and importer.startswith("localchat"):
            raise ModuleNotFoundError(f"No module named {name!r} (Unix only), imported by {importer}",
                                      name=name)
        return real_import(name, globals, locals, fromlist, level)

    builtins.__import__ = guarded_import

    failures = []
    root = importlib.import_module(PACKAGE)
    names = [PACKAGE] + [m.name for m in pkgutil.walk_packages(getattr(root, "__path__", []), PACKAGE + ".")]
    names = [n for n in names if not n.endswith("__main__")]
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:
            failures.append(f"{name}: {type(exc).__name__}: {exc}")
    print(f"imported {len(names) - len(failures)} of {len(names)} modules")
    for line in failures:
        print("FAILED", line)
    sys.exit(1 if failures else 0)
    """
)


def _run(package: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRIPT, ",".join(UNIX_ONLY), package, *extra],
                          capture_output=True, text=True, timeout=600)


def test_every_module_imports_without_unix_only_modules() -> None:
    out = _run("localchat")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "imported" in out.stdout and "FAILED" not in out.stdout


def test_the_check_catches_a_top_level_unix_only_import(tmp_path: Path) -> None:
    pkg = tmp_path / "localchat_scratch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "fine.py").write_text("import os\n")
    (pkg / "bad.py").write_text("import resource\n")
    out = _run("localchat_scratch", str(tmp_path))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "FAILED localchat_scratch.bad" in out.stdout and "Unix only" in out.stdout
    assert "localchat_scratch.fine" not in out.stdout
