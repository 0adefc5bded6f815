"""The mutable state of one server: runtime settings, budgets, fault generator and counters.

The dataset (and so the ``Source``) is fixed for the process; ``reconfigure`` swaps the frozen
``Runtime`` in one assignment, so each request sees either the old settings or the new.
"""

import threading
from collections.abc import Mapping
from typing import Any

from democrm import auth, budget, changes, data, drift, faults, oauth, stats
from democrm.settings import Runtime

BUDGET_SETTINGS = frozenset({"budget_capacity", "budget_refill_per_s"})


class State:
    def __init__(
        self,
        source: data.Source,
        runtime: Runtime,
        access: auth.Auth | None = None,
        oauth_client: oauth.Client | None = None,
    ) -> None:
        self.source = source
        self.runtime = runtime
        self.auth = access or auth.Auth()
        """Who may call ``/v1``: the auth style, the accepted API keys (an empty set: any
        non-empty key, each with its own budget, unless OAuth is on: then only the access
        tokens it issued, and these keys) or the basic user."""
        self.oauth = oauth.OAuth(oauth_client) if oauth_client else None
        self.budgets = budget.Budgets(runtime.budget_capacity, runtime.budget_refill_per_s)
        self.throttle = budget.Throttle()
        self.faults = faults.Faults(source.dataset.seed)
        self.stats = stats.Stats()
        self.changes = changes.Changes()
        """Edits, additions and deletions since the server started (off until asked for)."""
        self.drift = drift.Drift()
        """Records deleted and created mid-walk, and cursors expired (``POST /_drift``)."""
        self._lock = threading.Lock()

    def reconfigure(self, changes: Mapping[str, Any]) -> Runtime:
        """Apply runtime changes (SettingsError if invalid). Naming a budget setting, even with its
        current value, refills every key's bucket; naming ``throttle_first`` counts every key's
        first calls again."""
        with self._lock:
            runtime = self.runtime.updated(changes)
            if BUDGET_SETTINGS & set(changes):
                self.budgets.configure(runtime.budget_capacity, runtime.budget_refill_per_s)
            if "throttle_first" in changes:
                self.throttle.restart()
            self.runtime = runtime
            return runtime
