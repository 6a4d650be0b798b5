"""Helpers shared by the tests: the command line as a fixture."""
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
