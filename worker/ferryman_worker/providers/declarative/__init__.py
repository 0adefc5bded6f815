"""Declarative providers: a YAML document (``spec``) instead of Python code.

``loading.load_file`` reads and checks one; a bad document raises ConfigurationError with one
line per problem, each naming the field by its YAML path and what to do.
``provider.DeclaredProvider`` is the provider the engine walks: its kinds' record models are
built from the declared fields (``records``), its requests from the declared templates. This
module only re-exports them.
"""

from __future__ import annotations

from ferryman_worker.providers.declarative.loading import (
    check,
    from_definition,
    load_file,
    parse,
    problem,
)
from ferryman_worker.providers.declarative.provider import DeclaredProvider, fill
from ferryman_worker.providers.declarative.records import SCALARS

__all__ = [
    "SCALARS",
    "DeclaredProvider",
    "check",
    "fill",
    "from_definition",
    "load_file",
    "parse",
    "problem",
]
