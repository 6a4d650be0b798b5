"""computegraph 0.1.0 as the book patches it: its own published test suite, run on the crate
that README's install prepared (``tenferro-harness/fixed/prepare.py`` unpacks the published
``.crate``, checks its sha256 against the lock and applies ``fixed/computegraph.diff``).

:func:`suite` runs ``cargo test --locked`` in that crate (its published ``Cargo.lock``; the
crate has no dependencies) as a child with a hard timeout and returns what cargo reported, so
a page and the slow tier show the same run.  Errors: :class:`PatchedError`, one line.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from ..runtime.timing import run_command

#: The prepared crate, inside the repository's ``tenferro-harness/build/`` (an editable
#: install: this file is ``src/trgad/harness/patched.py``).
PREPARED_CRATE = Path(__file__).resolve().parents[3] / "tenferro-harness" / "build" / "computegraph-0.1.0-fixed"
#: Hard timeout of the test run: a cold debug build of the crate takes well under a minute.
SUITE_TIMEOUT_SECONDS = 900.0
_RESULT = re.compile(r"test result: (\w+)\. (\d+) passed; (\d+) failed")
_OK = re.compile(r"^test (\S+) \.\.\. ok$", re.M)


class PatchedError(RuntimeError):
    """The prepared crate is missing or its tests could not be run; one line."""


def suite(timeout=SUITE_TIMEOUT_SECONDS):
    """``cargo test`` of the patched computegraph: a dict with ``passed`` and ``failed``
    (summed over cargo's test binaries and doctests), ``binaries`` (one ``[passed, failed]``
    per ``test result:`` line, in cargo's order), ``ours`` (names of the patch's own tests
    that passed, ``types::tests::...``) and ``seconds`` (wall time, build included).  Cargo
    builds into ``$CARGO_TARGET_DIR/computegraph-fixed-tests`` (or the crate's ``target/``),
    so a second run compiles nothing."""
    if not (PREPARED_CRATE / ".trgad-diff-sha256").is_file():
        raise PatchedError(f"{PREPARED_CRATE} is not prepared: pip install ./tenferro-harness "
                           f"(or python tenferro-harness/fixed/prepare.py)")
    cargo = shutil.which("cargo")
    if cargo is None:
        raise PatchedError("cargo is not on PATH (rustup.rs; export PATH=$HOME/.cargo/bin:$PATH)")
    target = os.environ.get("CARGO_TARGET_DIR")
    env_target = str(Path(target) / "computegraph-fixed-tests") if target else str(PREPARED_CRATE / "target")
    cmd = ["env", f"CARGO_TARGET_DIR={env_target}", cargo, "test", "--locked",
           "--ignore-rust-version", "--manifest-path", str(PREPARED_CRATE / "Cargo.toml")]
    result = run_command(cmd, timeout)
    if not result.returned:
        raise PatchedError(f"cargo test of {PREPARED_CRATE.name} did not finish within {timeout:g} s")
    binaries = [(int(p), int(f)) for _, p, f in _RESULT.findall(result.stdout)]
    if result.status != 0 or not binaries:
        raise PatchedError(f"cargo test of {PREPARED_CRATE.name} failed (exit {result.status}): "
                           f"{result.last_error or 'no message'}")
    ours = [name for name in _OK.findall(result.stdout) if name.startswith("types::tests::")]
    return {"passed": sum(p for p, _ in binaries), "failed": sum(f for _, f in binaries),
            "binaries": [list(b) for b in binaries], "ours": ours, "seconds": result.seconds}
