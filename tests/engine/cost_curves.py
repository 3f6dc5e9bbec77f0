"""Cost curves for the unit tests of engine/costs.py, engine/stop_rule.py and engine/adaptive.py.

Measured on this project's 2-core machine at load (docs/BENCHMARKS.md, "Cost curve"): verification
ms by batch and the 0.5B Q4_K_M drafter's ms per drafted token.
"""

from __future__ import annotations

from localchat.engine.costs import CostModel

Q4_CURVE = {1: 27.7, 2: 55.0, 4: 91.5, 8: 144.4, 16: 172.0}


F16_CURVE = {1: 60.0, 2: 94.0, 4: 111.0, 8: 159.0, 16: 219.0}


DRAFTER_MS = 15.6


def calibrated(curve: dict[int, float], drafter_ms: float = DRAFTER_MS, source: str = "draft") -> CostModel:
    cost = CostModel()
    for size, ms in curve.items():
        cost.observe_verify(size, ms / 1000)
    cost.draft_token_s[source] = drafter_ms / 1000
    cost.calibrated = True
    return cost
