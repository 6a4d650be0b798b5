"""Helpers shared by the tests: the command line and the book's 20-step schedule as fixtures."""
import subprocess
import sys

import pytest


class Cli:
    """``cli("trg", "--steps", "2")`` runs ``python -m trgad trg --steps 2`` in a subprocess
    (same interpreter and environment) and returns the CompletedProcess."""

    def __call__(self, *args, timeout=600, cwd=None):
        return subprocess.run([sys.executable, "-m", "trgad", *args], capture_output=True,
                              text=True, timeout=timeout, cwd=cwd)

    @staticmethod
    def assert_error(r, status, needle):
        """Exit ``status``, nothing on stdout, one stderr line holding ``needle``, no traceback."""
        assert r.returncode == status, (r.returncode, r.stderr)
        assert r.stdout == ""
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], r.stderr
        assert lines[0].startswith("trgad: error:") and "Traceback" not in r.stderr


@pytest.fixture
def cli():
    return Cli()


@pytest.fixture(scope="session")
def schedule20():
    """The book's reference run: chi = 16, 20 steps at beta = 0.3 (lnZ/N 0.790559063800966)."""
    from trgad import trg
    return trg.truncation_schedule(16, 20, 0.3)
