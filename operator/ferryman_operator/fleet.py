"""The one refresh of every live run: every status interval, the live runs of kopf's ``live``
index are read from the database together, in a fixed number of statements however many they
are (``Runs.refresh``), and each run's status is patched where it changed. A finished run is in
no index of live runs, so it costs nothing here.

It begins once kopf has listed every run: kopf calls no handler before its indexes are full,
so the first handler call hands the indexes over (``listed``); a refresh of half-listed indexes
could admit a run ahead of an older one not listed yet.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping

from ferryman_operator.metrics import OperatorMetrics
from ferryman_operator.reconcile.admission import Candidate
from ferryman_operator.reconcile.refresh import Live
from ferryman_operator.runs import Runs

log = logging.getLogger("ferryman.operator.fleet")

Waiting = Mapping[str, Iterable[Candidate]]
"""kopf's ``waiting`` index: every run by workspace."""


class Fleet:
    def __init__(self, runs: Runs, interval: float, metrics: OperatorMetrics) -> None:
        self._runs, self._interval, self._metrics = runs, interval, metrics
        self._indexes: tuple[Live, Waiting] | None = None
        self._listed = asyncio.Event()

    @property
    def listed(self) -> bool:
        """Whether kopf has listed every run (and handed its indexes over)."""
        return self._listed.is_set()

    def list_done(self, live: Live, waiting: Waiting) -> None:
        """kopf has listed every run (it called a handler): refresh from these indexes, which
        kopf keeps up to date."""
        self._indexes = (live, waiting)
        self._metrics.runs.follow(waiting)  # counted at scrape time from kopf's live index
        self._listed.set()

    async def run(self) -> None:
        """Refresh every ``interval`` seconds (from the start of one to the next), forever."""
        await self._listed.wait()
        loop = asyncio.get_running_loop()
        while True:
            began = loop.time()
            try:
                await self.refresh()
            except Exception:  # the next refresh starts from what is
                log.exception("the refresh of the live runs failed")
            await asyncio.sleep(max(0.0, began + self._interval - loop.time()))

    async def refresh(self) -> None:
        """One refresh of every live run."""
        if self._indexes is None:
            return
        live, waiting = self._indexes
        self._metrics.refreshes.inc()
        await self._runs.refresh(live, waiting)
