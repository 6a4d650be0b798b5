"""tenferro-rs itself: the book's Rust programs against the published crates, run as children.

The programs live in ``tenferro-harness/`` (one binary, ``trgad-tenferro``, pinned to
tenferro-rs :data:`VERSION` by its committed ``Cargo.lock``; ``pip install -r
requirements.txt`` builds it with maturin).  Each call here runs it once as a child process
in a session of its own, with a hard timeout that kills its whole process group
(:func:`trgad.timing.run_command`), and returns the one JSON object it printed, plus
``returned`` (False when the timeout ended it: then only ``timeout_s`` and ``seconds``) and
``seconds`` (wall time of the child, start-up included).  Everything runs on tenferro-rs's
``CpuEngine::serial()`` (one thread), the source report's setting.

* :func:`whole` - lnZ/N of the TRG (same site tensor, normalisation, split and truncation
  schedule as :mod:`trgad.trg`; the schedule comes from :func:`trgad.trg.truncation_schedule`)
  as one traced graph: ``transform_ms`` (``ad.grad``, which lowers the primal graph again
  before it transforms it; ``primal_compile_ms`` is what lowering the primal alone took),
  ``drop_ms`` (``drop(g)`` of the gradient's handle, timed apart, as in the source report;
  the AdContext's transform cache and the primal graph are freed later, untimed),
  ``grad_ops`` (operations of the compiled gradient program), ``compile_ms``,
  ``prepare_ms``, ``run_ms``, ``grad`` = d(lnZ/N)/d beta, ``lnz_per_site``.  A run killed
  at its timeout has ``transform_started_ms``: when it entered ``ad.grad`` (the program
  says so on stderr before it does).  Times are one wall-clock sample each.
  ``eager=True``: the same graph in an eager session, ``backward()``: ``backward_ms``.
* :func:`chain` - y <- y**K / K to depth D: ``transform_ms``, ``drop_ms``, ``grad_ops``,
  ``grad``.
* :func:`staged` - one eager graph per TRG step on a fresh leaf, one VJP per step, the
  cotangent passed back by hand: ``lnz_per_site``, ``grad``, ``u``, ``first_ms`` (the first
  pass) and ``min_ms`` (the fastest of ``repeats`` after it).

Errors: :class:`trgad.validate.InputError` for a value out of range (checked here, before a
child starts); :class:`TenferroError` (one line) when the program is not built or fails.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import sysconfig
from pathlib import Path

from . import trg
from .timing import run_command
from .validate import (InputError, check_chain, check_chi, check_range, check_repeats,
                       check_steps, check_timeout)

#: The tenferro-rs release the harness is built against (its Cargo.toml pins ``=0.8.0``).
VERSION = "0.8.0"
#: The harness's program, installed beside this Python's scripts.
PROGRAM = "trgad-tenferro"
#: Range of beta the harness takes (it differentiates e^{-2 beta} directly, so beta > 0).
BETA_RANGE = (1e-3, 10.0)
#: Default hard timeout of one run, seconds.
TIMEOUT_SECONDS = 60.0


class TenferroError(RuntimeError):
    """The harness is missing or failed; the message is one line."""


def program():
    """Path of the ``trgad-tenferro`` program: ``$TRGAD_TENFERRO_BIN`` if set, else the one
    installed with this Python (its scripts folder), else the first on ``PATH``.  Raises
    TenferroError naming what to install when there is none."""
    named = os.environ.get("TRGAD_TENFERRO_BIN")
    if named:
        if not (os.path.isfile(named) and os.access(named, os.X_OK)):
            raise TenferroError(f"TRGAD_TENFERRO_BIN={named!r} is not an executable file")
        return named
    beside = Path(sysconfig.get_path("scripts")) / PROGRAM
    for candidate in (beside, Path(sys.executable).parent / PROGRAM):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(PROGRAM)
    if found:
        return found
    raise TenferroError(f"{PROGRAM} is not installed: it needs Rust's cargo (rustup) and is built by "
                        f"`pip install -r requirements.txt` (tenferro-harness/)")


def available():
    """Whether the harness program is installed (see :func:`program`)."""
    try:
        program()
    except TenferroError:
        return False
    return True


_STARTED = re.compile(r"ad\.grad started at ([0-9.]+) ms")


def _run(args, timeout):
    try:
        result = run_command([program(), *args], timeout)
    except OSError as e:
        raise TenferroError(f"{PROGRAM} could not be started: {e}") from None
    if not result.returned:
        out = {"returned": False, "timeout_s": timeout, "seconds": result.seconds}
        started = _STARTED.search(result.last_error)
        if started:
            out["transform_started_ms"] = float(started.group(1))
        return out
    if result.status != 0:
        raise TenferroError(f"{PROGRAM} {args[0]} failed (exit {result.status}): "
                            f"{result.last_error or 'no message'}")
    lines = result.stdout.strip().splitlines()
    try:
        out = json.loads(lines[-1]) if lines else None
    except ValueError:
        out = None
    if not isinstance(out, dict):
        raise TenferroError(f"{PROGRAM} {args[0]} printed no JSON object")
    out.update(returned=True, seconds=result.seconds)
    return out


def _beta(beta):
    return check_range("beta", beta, *BETA_RANGE, why="the harness differentiates e^(-2 beta), beta > 0")


def _schedule_arg(steps, beta, chi):
    steps, chi = check_steps(steps), check_chi(chi)
    return ",".join(map(str, trg.truncation_schedule(chi, steps, beta)))


def whole(steps, beta=0.3, chi=16, *, eager=False, keep=False, timeout=TIMEOUT_SECONDS):
    """``ad.grad`` (or, ``eager=True``, ``backward()``) of the whole TRG graph of ``steps``
    steps at ``beta`` (in :data:`BETA_RANGE`) and bond dimension ``chi``; see the module
    docstring for the keys.  ``keep=True``: the gradient graph is not dropped (``drop_ms``
    None; the child's exit frees it), where the drop would cost as much as the transform
    again.  A run past ``timeout`` seconds is killed: ``returned`` False."""
    beta, timeout = _beta(beta), check_timeout(timeout)
    if eager and keep:
        raise InputError("eager=True and keep=True: keep applies to ad.grad's graph only")
    args = ["whole", "--schedule", _schedule_arg(steps, beta, chi), "--beta", repr(beta)]
    return _run(args + (["--eager"] if eager else []) + (["--keep"] if keep else []), timeout)


def chain(depth, fanout=2, x0=2.0, *, timeout=TIMEOUT_SECONDS):
    """``ad.grad`` of the mul chain y <- y**fanout / fanout to ``depth`` at ``x0`` (2 is the
    fixed point of y*y/2: the gradient is 2**depth)."""
    depth, fanout = check_chain(depth, fanout)
    if depth > 64 or fanout > 8:
        raise InputError(f"depth={depth}, fanout={fanout}: the harness takes depth <= 64, fanout <= 8")
    x0, timeout = check_range("x0", x0, -1e6, 1e6), check_timeout(timeout)
    return _run(["chain", "--depth", str(depth), "--fanout", str(fanout), "--x0", repr(x0)], timeout)


def staged(steps=20, beta=0.3, chi=16, *, repeats=3, timeout=TIMEOUT_SECONDS):
    """The staged value and gradient (one VJP per step) of ``steps`` TRG steps: lnZ/N, u,
    the first pass's time and the fastest of ``repeats`` passes after it."""
    beta, timeout = _beta(beta), check_timeout(timeout)
    repeats = check_repeats(repeats)
    args = ["staged", "--schedule", _schedule_arg(steps, beta, chi), "--beta", repr(beta),
            "--repeats", str(repeats)]
    return _run(args, timeout)
