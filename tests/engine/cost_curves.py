"""Cost curves for the unit tests of engine/costs.py, engine/stop_rule.py and engine/adaptive.py.

Measured on this project's 2-core machine at load (docs/BENCHMARKS.md, "Cost curve"): verification
ms by batch and the 0.5B Q4_K_M drafter's ms per drafted token.
"""

from __future__ import annotations

from localchat.engine.costs import CostModel

Q4_CURVE = {1: 27.7, 2: 55.0, 4: 91.5, 8: 144.4, 16: 172.0}


F16_CURVE = {1: 60.0, 2: 94.0, 4: 111.0, 8: 159.0, 16: 219.0}


DRAFTER_MS = 15.6


# A steep curve: the rebuilt Zen 4 EPYC table's Q8_0 target with 2 threads at the sizes a calibration
# measures (tools/recordings/zen4-rebuilt/curve-q8_t2.json): two tokens cost 1.65x one, sixteen 5.2x.
ZEN4_Q8_CURVE = {1: 68.0, 2: 112.2, 4: 130.56, 8: 244.12, 16: 356.124}
ZEN4_Q8_DRAFTER_MS = 22.44


def calibrated(curve: dict[int, float], drafter_ms: float = DRAFTER_MS, source: str = "draft") -> CostModel:
    cost = CostModel()
    for size, ms in curve.items():
        cost.observe_verify(size, ms / 1000)
    cost.draft_token_s[source] = drafter_ms / 1000
    cost.calibrated = True
    return cost
