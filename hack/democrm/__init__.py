"""democrm: a deterministic demo CRM API for ferryman's tests, demo and benchmarks.

Standard library only. Records are computed from (seed, kind, index) on demand, so any size serves
with flat memory. See README.md for the API and ``python hack/democrm --help`` for the options.
"""

__version__ = "0.1.0"
