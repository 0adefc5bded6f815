"""What the operator writes besides a run's status: Events, the worker Deployment's sizing."""
