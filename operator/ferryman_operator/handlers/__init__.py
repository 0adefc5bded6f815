"""The kopf entry points, thin: each hands what kopf gives it to ``runs`` or ``workers``.

Built into a fresh registry by ``build`` (no module-level registration), so each operator
process, and each test, has its own.
"""

from __future__ import annotations

import kopf

from ferryman_operator.fleet import Fleet
from ferryman_operator.handlers import definitions, runs, startup
from ferryman_operator.metrics import OperatorMetrics
from ferryman_operator.runs import Runs
from ferryman_operator.settings import OperatorSettings


def build(
    settings: OperatorSettings, run_reconciler: Runs, metrics: OperatorMetrics, fleet: Fleet
) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    startup.register(registry, settings.request_timeout)
    runs.register(registry, run_reconciler, metrics, fleet)
    definitions.register(registry, run_reconciler)
    return registry
