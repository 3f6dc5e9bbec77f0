"""Which characters of a reply came from accepted draft tokens, as run lengths.

A reply's marking is a tuple of character counts that alternate between
"from the target" and "from an accepted draft", always starting with a
target run (which may be 0): ``(3, 5, 2)`` means 3 target characters, 5 draft
characters, 2 target characters. It is small enough to stream with every
token batch and to keep with a saved message.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Runs = tuple[int, ...]


def runs_from_flags(flags: Iterable[bool]) -> Runs:
    """Run lengths for per-character flags (True: from an accepted draft)."""
    runs: list[int] = [0]
    drafted = False
    for flag in flags:
        if flag != drafted:
            runs.append(0)
            drafted = flag
        runs[-1] += 1
    return tuple(runs) if runs != [0] else ()


def flags_from_runs(runs: Sequence[int]) -> list[bool]:
    flags: list[bool] = []
    for i, count in enumerate(runs):
        flags.extend([i % 2 == 1] * max(0, int(count)))
    return flags


def concat_runs(first: Sequence[int], second: Sequence[int]) -> Runs:
    """The marking of two texts joined, ``first`` then ``second``."""
    if not first:
        return tuple(second)
    if not second:
        return tuple(first)
    # ``first`` ends on a draft run when it has an even number of entries.
    if len(first) % 2 == 1:  # ends on a target run, and ``second`` starts with one
        return (*first[:-1], first[-1] + second[0], *second[1:])
    if second[0] == 0:  # ends on a draft run; ``second`` has no leading target run
        if len(second) == 1:
            return tuple(first)
        return (*first[:-1], first[-1] + second[1], *second[2:])
    return (*first, *second)


def valid_runs(value: object) -> Runs:
    """Runs read back from storage: a list of non-negative ints, else nothing."""
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and v >= 0 for v in value):
        return tuple(value)
    return ()
