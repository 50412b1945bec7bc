"""Fixtures of the tests that need neither a database nor a service: the container files,
parsed once per module."""

from tests.container_files import compose, final, load_worker, services, stages, worker_stages

__all__ = ["compose", "final", "load_worker", "services", "stages", "worker_stages"]
