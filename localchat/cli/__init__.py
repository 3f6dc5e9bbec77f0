"""Command line: ``localchat`` opens the app; subcommands run headless.

Each subcommand lives in its own module exposing ``register(subparsers)``,
which adds its parser and sets ``func`` (called with the parsed args, returning
an exit code). Modules are imported lazily so ``localchat --help`` stays fast
and a headless command never imports Qt.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Subcommand modules, in the order --help lists them.
COMMANDS: tuple[str, ...] = (
    "localchat.cli.generate",
    "localchat.cli.bench",
    "localchat.cli.serve",
    "localchat.cli.models",
    "localchat.cli.pull",
    "localchat.cli.worker",
    "localchat.cli.selftest",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="localchat",
        description="Chat with local language models, with speculative decoding on by default.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["--selftest"]:  # the spelling the bundles' docs use
        args_list[0] = "selftest"
    parser = build_parser()
    args = parser.parse_args(args_list)
    if args.command is None:
        from localchat.app import run_app

        return run_app(args_list)
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
