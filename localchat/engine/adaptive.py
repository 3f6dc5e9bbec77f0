"""How many tokens to draft next: a fixed length, or one that follows what speculation earns.

``FixedPolicy`` drafts the same length every step (for benchmarks and users
who want it). ``AdaptivePolicy`` is the default; see its docstring.
"""

from __future__ import annotations

from typing import Protocol


class DraftPolicy(Protocol):
    def draft_length(self) -> int:
        """Tokens to draft for the next step; 0 means a plain decoding step."""
        ...

    def observe(self, drafted: int, accepted: int, draft_s: float, verify_s: float, source: str) -> None:
        """Feed back one verification pass."""
        ...

    @property
    def paused(self) -> bool: ...

    @property
    def reason(self) -> str: ...


class FixedPolicy:
    def __init__(self, n: int) -> None:
        self.n = n

    def draft_length(self) -> int:
        return self.n

    def observe(self, drafted: int, accepted: int, draft_s: float, verify_s: float, source: str) -> None:
        pass

    @property
    def paused(self) -> bool:
        return False

    @property
    def reason(self) -> str:
        return ""
