"""Helpers shared by the tests: the command line (in this process, and as a real process),
the book's 20-step schedule, and compiled results that several test files share.

Tiers: ``pytest`` runs the quick tier (``addopts = "-m 'not slow'"`` in pyproject.toml);
``pytest -m slow`` the heavy oracles (20 steps, second order beyond a few steps, every
method at full size, the book-build tests); ``.ci/run`` runs both.  A slow test that is the
only check of something has a quick twin that asserts the same oracle at a small size.
"""
import contextlib
import importlib
import os
import subprocess
import sys

import pytest


def assert_error(r, status, needle):
    """Exit ``status``, nothing on stdout, one stderr line holding ``needle``, no traceback."""
    assert r.returncode == status, (r.returncode, r.stderr)
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert lines[0].startswith("trgad: error:") and "Traceback" not in r.stderr


class Cli:
    """``cli("trg", "--steps", "2")`` runs ``trgad.cli.main(["trg", "--steps", "2"])`` in this
    process and returns a ``subprocess.CompletedProcess`` (returncode = main's exit status,
    stdout and stderr as captured).  What the command runs in a child process (the keyed
    whole graph, chain, probe) still runs in a real child process with its hard timeout.
    ``cwd`` is the working directory for the call and, as with ``python -m``, first on
    ``sys.path`` while it runs (the child inherits both)."""

    def __init__(self, capsys):
        self._capsys = capsys

    def __call__(self, *args, cwd=None):
        from trgad import cli as trgad_cli

        self._capsys.readouterr()                       # drop what came before
        saved_path, before = list(sys.path), set(sys.modules)
        if cwd is not None:                             # as `python -m` does: the working
            sys.path.insert(0, os.path.abspath(cwd))    # directory first on sys.path
            importlib.invalidate_caches()
        try:
            with contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext():
                try:
                    status = trgad_cli.main(list(args))
                except SystemExit as e:                 # --help
                    status = e.code
        finally:
            sys.path[:] = saved_path
            if cwd is not None:                         # forget the user's modules imported from cwd
                root = os.path.abspath(cwd) + os.sep
                for name in set(sys.modules) - before:
                    if (getattr(sys.modules[name], "__file__", None) or "").startswith(root):
                        del sys.modules[name]
        out = self._capsys.readouterr()
        return subprocess.CompletedProcess(["python", "-m", "trgad", *args], status, out.out, out.err)

    assert_error = staticmethod(assert_error)


class CliProcess:
    """``cli_process("trg", "--steps", "2")`` runs ``python -m trgad trg --steps 2`` in a
    subprocess (same interpreter and environment) and returns the CompletedProcess: the
    end-to-end check of a command (its real exit status, stdout and stderr)."""

    def __call__(self, *args, timeout=600, cwd=None):
        return subprocess.run([sys.executable, "-m", "trgad", *args], capture_output=True,
                              text=True, timeout=timeout, cwd=cwd)

    assert_error = staticmethod(assert_error)


@pytest.fixture
def cli(capsys):
    return Cli(capsys)


@pytest.fixture
def cli_process():
    return CliProcess()


@pytest.fixture(scope="session")
def schedule20():
    """The book's reference run: chi = 16, 20 steps at beta = 0.3 (lnZ/N 0.790559063800966)."""
    from trgad.physics import trg
    return trg.truncation_schedule(16, 20, 0.3)


@pytest.fixture(scope="session")
def staged20(schedule20):
    """(lnZ/N, d lnZ/N / d beta) of the staged pass at 20 steps, beta = 0.3, computed once
    for the session (test_staged, test_modes)."""
    from trgad.physics import staged
    return staged.value_and_grad_jax(0.3, schedule20)


@pytest.fixture(scope="session")
def whole20(schedule20):
    """(lnZ/N, d lnZ/N / d beta) of the whole graph's jax.value_and_grad at 20 steps,
    beta = 0.3, computed once for the session (test_staged, test_trg)."""
    from trgad.physics import whole
    return whole.value_and_grad(0.3, schedule20)


@pytest.fixture
def fresh_programs():
    """Empty caches of compiled programs for a test that measures first calls or counts
    what gets compiled; the programs compiled before it are put back afterwards, so the
    tests after it do not compile them again."""
    from trgad.runtime import compiled
    saved = compiled.snapshot()
    compiled.clear()
    yield
    compiled.restore(saved)
