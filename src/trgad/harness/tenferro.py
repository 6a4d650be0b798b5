"""tenferro-rs itself: the book's Rust programs against the published crates, run as children.

The programs live in ``tenferro-harness/`` (one binary, ``trgad-tenferro``, pinned to
tenferro-rs :data:`VERSION` by its committed ``Cargo.lock``; ``pip install -r
requirements.txt`` builds it with setuptools-rust), and once more against the newest release
measured, :data:`NEWEST` (``trgad-tenferro-0-9-0``, ``tenferro-harness/v0.9.0/``, its own
lock; same source).  Each call here runs it once as a child process
in a session of its own, with a hard timeout that kills its whole process group
(:func:`trgad.runtime.timing.run_command`), and returns the one JSON object it printed, plus
``returned`` (False when the timeout ended it: then only ``timeout_s`` and ``seconds``) and
``seconds`` (wall time of the child, start-up included).  Everything runs on tenferro-rs's
``CpuEngine::serial()`` (one thread), the source report's setting.

* :func:`whole` - lnZ/N of the TRG (same site tensor, normalisation, split and truncation
  schedule as :mod:`trgad.physics.trg`; the schedule comes from :func:`trgad.physics.trg.truncation_schedule`)
  as one traced graph: ``transform_ms`` (``ad.grad``, which lowers the primal graph again
  before it transforms it; ``primal_compile_ms`` is what lowering the primal alone took),
  ``drop_ms`` (``drop(g)`` of the gradient's handle, timed apart, as in the source report;
  the AdContext's transform cache and the primal graph are freed later, untimed),
  ``grad_ops`` (operations of the compiled gradient program), ``compile_ms``,
  ``prepare_ms``, ``run_ms``, ``grad`` = d(lnZ/N)/d beta, ``lnz_per_site``.  A run killed
  at its timeout has ``transform_started_ms``: when it entered ``ad.grad`` (the program
  says so on stderr before it does).  Times are one wall-clock sample each.
  ``eager=True``: the same graph in an eager session, ``backward()``: ``backward_ms``.
  ``forward=True``: forward mode, tenferro-rs's own ``ad.jvp`` of the whole graph with
  tangent 1 (``mode`` "forward"), timed and run as ``ad.grad`` is (``transform_ms``, ...).
* :func:`chain` - y <- y**K / K to depth D: ``transform_ms``, ``drop_ms``, ``grad_ops``,
  ``grad``.
* :func:`count` - exact calls of computegraph's key equality during ``ad.grad`` alone and
  during the gradient's drop alone (``eager=True``: during the eager graph's ``backward()``),
  counted by valgrind's callgrind (see :func:`count`).
* :func:`staged` - the staged crate (``tenferro-harness/staged/``): one eager graph per TRG
  step on a fresh leaf, one VJP per step, the cotangent passed back by hand: ``lnz_per_site``, ``grad``, ``u``, ``first_ms`` (the first
  pass) and ``min_ms`` (the fastest of ``repeats`` after it).

Errors: :class:`trgad.runtime.validate.InputError` for a value out of range (checked here, before a
child starts); :class:`TenferroError` (one line) when the program is not built or fails.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import sysconfig
from pathlib import Path

from . import callgrind
from ..physics import trg
from ..runtime.timing import run_command
from ..runtime.validate import (InputError, check_beta, check_chain, check_chi, check_choice,
                                check_range, check_repeats, check_steps, check_timeout)

#: The tenferro-rs release the harness is built against (its Cargo.toml pins ``=0.8.0``).
VERSION = "0.8.0"
#: The newest tenferro-rs release on crates.io when it was last measured (:data:`NEWEST_SEEN`),
#: built by ``tenferro-harness/v0.9.0/`` (``=0.9.0``, its own Cargo.lock).
NEWEST = "0.9.0"
#: The day crates.io's index was read and :data:`NEWEST` was its newest tenferro-rs release.
NEWEST_SEEN = "2026-12-02"
#: Releases a call can name (``version=``).
VERSIONS = (VERSION, NEWEST)
#: Builds a call can name (``build=``): ``"stock"``, the crates as published, or
#: ``"fixed"``, tenferro-rs :data:`VERSION` against computegraph 0.1.0 patched by
#: ``tenferro-harness/fixed/computegraph.diff`` (key equality remembers what it proved, so a
#: comparison walks the key DAG as a DAG), program ``trgad-tenferro-fixed``.
BUILDS = ("stock", "fixed")
#: The harness's program, installed beside this Python's scripts (for :data:`VERSION`;
#: ``trgad-tenferro-0-9-0`` for 0.9.0).
PROGRAM = "trgad-tenferro"
#: Default hard timeout of one run, seconds.
TIMEOUT_SECONDS = 60.0


class TenferroError(RuntimeError):
    """The harness is missing or failed; the message is one line."""


def _name(version, build="stock"):
    """The program's name for ``version`` and ``build``: ``trgad-tenferro``,
    ``trgad-tenferro-0-9-0`` (cargo takes no dot in a program's name) or
    ``trgad-tenferro-fixed``."""
    if build == "fixed":
        return f"{PROGRAM}-fixed"
    return PROGRAM if version == VERSION else f"{PROGRAM}-{version.replace('.', '-')}"


def binary(version=VERSION, build="stock"):
    """Path of the harness program built against tenferro-rs ``version`` (``build``, one of
    :data:`BUILDS`): ``$TRGAD_TENFERRO_BIN`` if set (for :data:`VERSION` as published),
    else the one installed with this Python (its scripts folder), else the first on
    ``PATH``.  Raises TenferroError naming what to install when there is none."""
    name = _name(version, build)
    named = os.environ.get("TRGAD_TENFERRO_BIN") if (version, build) == (VERSION, "stock") else None
    if named:
        if not (os.path.isfile(named) and os.access(named, os.X_OK)):
            raise TenferroError(f"TRGAD_TENFERRO_BIN={named!r} is not an executable file")
        return named
    beside = Path(sysconfig.get_path("scripts")) / name
    for candidate in (beside, Path(sys.executable).parent / name):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    raise TenferroError(f"{name} is not installed: it needs Rust's cargo (rustup) and is built by "
                        f"`pip install -r requirements.txt` (tenferro-harness/)")


def available(version=VERSION, build="stock"):
    """Whether the harness program for ``version`` and ``build`` is installed (see
    :func:`binary`)."""
    try:
        binary(version, build)
    except TenferroError:
        return False
    return True


_STARTED = re.compile(r"ad\.(?:grad|jvp) started at ([0-9.]+) ms")


def _program(version, build):
    """``(version, build)``, checked: a release of :data:`VERSIONS`, a build of
    :data:`BUILDS`; the fixed build exists for :data:`VERSION` only."""
    if version not in VERSIONS:
        raise InputError(f"tenferro-rs release {version!r} is not one built here: {', '.join(VERSIONS)}")
    if build not in BUILDS:
        raise InputError(f"build {build!r} is not one of {', '.join(BUILDS)}")
    if build == "fixed" and version != VERSION:
        raise InputError(f"the fixed build is tenferro-rs {VERSION}'s; release {version} has none")
    return version, build


def _run(args, timeout, version=VERSION, build="stock"):
    try:
        result = run_command([binary(version, build), *args], timeout)
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


def _schedule(steps, beta, chi):
    """The --schedule argument (:func:`trgad.physics.trg.truncation_schedule`)."""
    return ",".join(map(str, trg.truncation_schedule_unchecked(chi, steps, beta)))


def whole(steps, beta=0.3, chi=16, *, eager=False, keep=False, forward=False, version=VERSION,
          build="stock", timeout=TIMEOUT_SECONDS):
    """``ad.grad`` (or, ``eager=True``, ``backward()``) of the whole TRG graph of ``steps``
    steps at ``beta`` and bond dimension ``chi`` (the ranges of
    :mod:`trgad.runtime.validate`); see the module docstring for the keys.  ``keep=True``:
    the gradient graph is not dropped (``drop_ms`` None; the child's exit frees it), where
    the drop would cost as much as the transform again.  ``forward=True``: ``ad.jvp``
    (forward mode) instead of ``ad.grad``.  ``version``: the tenferro-rs
    release (one of :data:`VERSIONS`), ``build`` (one of :data:`BUILDS`).  A run past
    ``timeout`` seconds is killed: ``returned`` False."""
    if sum(map(bool, (eager, keep, forward))) > 1:
        raise InputError(f"eager={eager}, keep={keep}, forward={forward}: at most one (keep applies "
                         f"to ad.grad's graph only)")
    version, build = _program(version, build)
    return whole_unchecked(check_steps(steps), check_beta(beta), check_chi(chi), eager=eager,
                           keep=keep, forward=forward, version=version, build=build,
                           timeout=check_timeout(timeout))


def whole_unchecked(steps, beta, chi, *, eager=False, keep=False, forward=False, version=VERSION,
                    build="stock", timeout=TIMEOUT_SECONDS):
    """:func:`whole` for a caller that checked its arguments."""
    args = ["whole", "--schedule", _schedule(steps, beta, chi), "--beta", repr(beta)]
    flags = [f"--{name}" for name, on in (("eager", eager), ("keep", keep), ("forward", forward)) if on]
    return _run(args + flags, timeout, version, build)


def _chain_args(depth, fanout, x0):
    """The chain's arguments, checked: the harness takes depth <= 64 and fanout <= 8."""
    depth, fanout = check_chain(depth, fanout)
    if depth > 64 or fanout > 8:
        raise InputError(f"depth={depth}, fanout={fanout}: the harness takes depth <= 64, fanout <= 8")
    x0 = check_range("x0", x0, -1e6, 1e6)
    return ["chain", "--depth", str(depth), "--fanout", str(fanout), "--x0", repr(x0)]


def chain(depth, fanout=2, x0=2.0, *, version=VERSION, build="stock", timeout=TIMEOUT_SECONDS):
    """``ad.grad`` of the mul chain y <- y**fanout / fanout to ``depth`` at ``x0`` (2 is the
    fixed point of y*y/2: the gradient is 2**depth), with tenferro-rs ``version``, ``build``."""
    return _run(_chain_args(depth, fanout, x0), check_timeout(timeout), *_program(version, build))


def staged(steps=20, beta=0.3, chi=16, *, repeats=3, build="stock", timeout=TIMEOUT_SECONDS):
    """The staged value and gradient (one VJP per step) of ``steps`` TRG steps with
    tenferro-rs :data:`VERSION` (``build``): lnZ/N, u, the first pass's time and the fastest
    of ``repeats`` passes after it."""
    _, build = _program(VERSION, build)
    return staged_unchecked(check_steps(steps), check_beta(beta), check_chi(chi),
                            repeats=check_repeats(repeats), build=build,
                            timeout=check_timeout(timeout))


def staged_unchecked(steps, beta, chi, *, repeats=3, build="stock", timeout=TIMEOUT_SECONDS):
    """:func:`staged` for a caller that checked its arguments."""
    args = ["staged", "--schedule", _schedule(steps, beta, chi), "--beta", repr(beta),
            "--repeats", str(repeats)]
    return _run(args, timeout, VERSION, build)


# ---- exact counts: callgrind ------------------------------------------------------------

#: The key equality counted (computegraph 0.1.0, ``src/types.rs``: ``impl PartialEq for
#: ValueKey``), as callgrind names it.
KEY_EQ = "<computegraph::types::ValueKey<Op> as core::cmp::PartialEq>::eq"
#: Where callgrind counts, one run each: the harness's ``ad.grad`` and its drop of the
#: gradient (never inlined, named for this), and, inside the transform, the library's
#: registration of the derivative graph's metadata in its process-wide registry
#: (tenferro-internal-ops ``src/ad/context.rs``); ``backward``: the eager graph's
#: ``backward()`` (``count(..., eager=True)``).
COUNTED = {"transform": "{crate}::transform", "drop": "{crate}::release",
           "registry": "tenferro_ops::ad::context::register_scoped_global_metadata_batch*",
           "backward": "{crate}::backward"}
#: Hard timeout of one callgrind run (the programs run ~50x slower under it), seconds.
COUNT_TIMEOUT_SECONDS = 300.0


def _valgrind():
    found = shutil.which("valgrind")
    if not found:
        raise TenferroError("count needs valgrind's callgrind, which is not installed "
                            "(Debian/Ubuntu: apt-get install valgrind)")
    return found


def _callgrind(args, where, version, build, timeout):
    """Calls of :data:`KEY_EQ` made inside ``where`` (a key of :data:`COUNTED`) in one run
    of the harness under callgrind: ``(outside, recursive, callers)`` (see
    :func:`trgad.harness.callgrind.calls_to`)."""
    import tempfile

    function = COUNTED[where].format(crate=_name(version, build).replace("-", "_"))
    with tempfile.TemporaryDirectory(prefix="trgad-callgrind-") as tmp:
        out = os.path.join(tmp, "callgrind.out")
        cmd = [_valgrind(), "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no",
               f"--toggle-collect={function}", binary(version, build), *args]
        try:
            result = run_command(cmd, timeout)
        except OSError as e:
            raise TenferroError(f"valgrind could not be started: {e}") from None
        if not result.returned:
            raise TenferroError(f"callgrind of {PROGRAM} {args[0]} did not return within "
                                f"{timeout:g} s (process group killed)")
        if result.status != 0 or not os.path.isfile(out):
            raise TenferroError(f"callgrind of {PROGRAM} {args[0]} failed (exit {result.status}): "
                                f"{result.last_error or 'no message'}")
        counts = callgrind.call_counts(out)
        if where != "registry" and not any(caller == function for caller, _ in counts):
            raise TenferroError(f"{binary(version, build)} has no function {function}: it was built "
                                f"from an older harness (reinstall: pip install -r requirements.txt)")
        return callgrind.calls_to(counts, KEY_EQ)


def _cached(parts, compute):
    """``compute()`` once per machine: the result is kept as JSON under the cache folder
    (:func:`trgad.runtime.cache.root`), keyed by a hash of ``parts``, which name the harness
    binary's content, valgrind's version and the arguments."""
    from ..runtime import cache

    root = cache.root()
    key = hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:24]
    path = None if root is None else Path(root) / "callgrind" / f"{key}.json"
    if path is not None and path.is_file():
        try:
            return json.loads(path.read_text())
        except ValueError:
            path.unlink(missing_ok=True)
    result = compute()
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(result))
            os.replace(tmp, path)
        except OSError:
            pass
    return result


def _file_hash(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def count(graph, *, depth=None, fanout=2, steps=None, beta=0.3, chi=16, eager=False, version=VERSION,
          build="stock", timeout=COUNT_TIMEOUT_SECONDS):
    """Exact calls of computegraph's key equality (:data:`KEY_EQ`) in tenferro-rs ``version``
    (``build``: ``"fixed"`` counts the patched equality, same name),
    counted by valgrind's callgrind, for ``graph="chain"`` (``depth``, ``fanout``; x0 = 1.1)
    or ``graph="trg"`` (``steps`` at ``beta``, ``chi``).

    Returns a dict: ``eq_calls_transform`` / ``eq_calls_drop`` (all calls made while
    ``ad.grad`` ran / while the gradient was dropped), ``eq_nested_transform`` /
    ``eq_nested_drop`` (the calls the equality made into itself: one per pair of sub-keys it
    compared, the walk), ``eq_nested_registry`` (of the transform's, those made while
    the derivative graph's metadata was registered), ``callers_transform`` /
    ``callers_drop`` (``[[function, calls], ...]`` of the calls from outside the equality).
    The nested counts are exact integers, the same in every run of one binary; the calls
    from outside vary by a few between runs (a std HashMap seeds its hash at random, and a
    chance match of its 7-bit tags costs one call that stops at the fingerprint).  Each
    result is computed once per machine (kept under the cache folder, keyed by the binary's
    content).  ``eager=True`` (``graph="trg"``): the eager graph differentiated by
    ``backward()`` instead, ``eq_calls_backward``, ``eq_nested_backward`` and
    ``callers_backward`` alone.  Needs valgrind: TenferroError in one line when it is missing."""
    graph = check_choice("graph", graph, ("chain", "trg"))
    (version, build), timeout = _program(version, build), check_timeout(timeout)
    if eager and graph != "trg":
        raise InputError("eager=True counts the TRG's backward(): it needs graph='trg'")
    if graph == "chain":
        args = _chain_args(depth, fanout, 1.1)
    else:
        beta = check_beta(beta)
        args = ["whole", "--schedule", _schedule(check_steps(steps), beta, check_chi(chi)),
                "--beta", repr(beta)]
    path = binary(version, build)
    args += ["--eager"] if eager else []
    parts = [_file_hash(path), _valgrind_version(), args, KEY_EQ, COUNTED]

    def compute():
        from concurrent.futures import ThreadPoolExecutor

        out = {"graph": graph, "version": version, "build": build, "args": args}
        wheres = ("backward",) if eager else ("transform", "drop", "registry")
        with ThreadPoolExecutor(len(wheres)) as pool:    # three children; the counts are exact
            runs = list(pool.map(lambda w: _callgrind(args, w, version, build, timeout), wheres))
        for where, (outside, nested, callers) in zip(wheres, runs):
            if where == "registry":
                out["eq_nested_registry"] = nested
                continue
            out[f"eq_calls_{where}"] = outside + nested
            out[f"eq_nested_{where}"] = nested
            out[f"callers_{where}"] = [[name, n] for name, n in callers]
        return out

    return _cached(parts, compute)


def _valgrind_version():
    result = run_command([_valgrind(), "--version"], 30.0)
    return result.stdout.strip()
