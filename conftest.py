"""Shared by tests/ and checks/: each pytest-xdist worker runs on a CPU of its own."""
import os


def pytest_configure(config):
    """Each pytest-xdist worker runs on a CPU of its own (``trgad.runtime.compiled.pin_to_one_cpu``):
    workers whose XLA thread pools share the cores can slow each other down by a large factor."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and worker[2:].isdigit():
        from trgad.runtime import compiled

        compiled.pin_to_one_cpu(int(worker[2:]))
