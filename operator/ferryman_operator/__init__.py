"""ferryman's Kubernetes operator (kopf). Reaches the database only through
``ferryman_worker.contract``."""

__version__ = "0.1.0"
