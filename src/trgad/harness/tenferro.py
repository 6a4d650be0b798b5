"""tenferro-rs itself: the book's Rust programs against the published crates, run as children.

The programs live in ``tenferro-harness/`` (one binary, ``trgad-tenferro``, pinned to
tenferro-rs :data:`VERSION` by its committed ``Cargo.lock``; ``pip install -r
requirements.txt`` builds it with setuptools-rust), and once more against the newest release
measured, :data:`NEWEST` (``trgad-tenferro-0-9-0``, ``tenferro-harness/v0.9.0/``, its own
lock; same source).  Each call here runs it once as a child process
in a session of its own, with a hard timeout that kills its whole process group
(:func:`trgad.runtime.children.run_command`), and returns the one JSON object it printed, plus
``returned`` (False when the timeout ended it: then only ``timeout_s``, ``seconds`` and
``peak_rss_mib``), ``seconds`` (wall time of the child, start-up included) and
``peak_rss_mib`` (the child's peak resident memory, MiB, from its rusage).  Everything runs on tenferro-rs's
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
child starts; the chain's ranges :data:`CHAIN_RANGES` are the program's own); :class:`TenferroError`
(one line) when the program is not built or not executable, fails, is killed by a signal
(named) or prints an answer that is not its own (:func:`trgad.harness.answers.program_answer`:
every field of its mode typed and in range, the arguments echoed).
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

from . import answers, callgrind
from ..physics import trg
from ..runtime.children import run_command
from ..runtime.validate import (InputError, check_beta, check_chi, check_choice, check_int, check_point,
                                X0_MIN, check_repeats, check_steps, check_timeout, format_bound, checked)

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
#: The chain's ranges (:func:`chain`), the program's too (``tenferro-harness/src/main.rs``
#: refuses a value outside them with the same words): depth in [1, CHAIN_DEPTH_MAX] (the
#: transform doubles with every layer: 2**64 is past any timeout), fanout in [1,
#: CHAIN_FANOUT_MAX], x0 0 or a finite number with |x0| in [X0_MIN, CHAIN_X0_MAX] (y**K / K
#: stays finite for |x0| <= 1e6 at depth 1; beyond it the result is an overflow, not a point).
CHAIN_DEPTH_MAX, CHAIN_FANOUT_MAX, CHAIN_X0_MAX = 64, 8, 1e6
#: The chain's ranges as the help and the messages say them.
CHAIN_RANGES = {"depth": f"in [1, {CHAIN_DEPTH_MAX}]", "fanout": f"in [1, {CHAIN_FANOUT_MAX}]",
                "x0": f"0 or a finite number with {X0_MIN!r} <= |x0| <= {format_bound(CHAIN_X0_MAX)}"}


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
    for candidate in (beside, Path(sys.executable).parent / name):
        if candidate.is_file():
            raise TenferroError(f"{candidate} is installed but not executable (its execute bit is off: "
                                f"chmod +x it, or reinstall with pip install -r requirements.txt)")
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


def _run(args, timeout, version=VERSION, build="stock", given=None):
    """One run of the program with ``args``; its answer checked against ``given``, the
    arguments it must echo (:func:`trgad.harness.answers.program_answer`)."""
    try:
        result = run_command([binary(version, build), *args], timeout)
    except OSError as e:
        raise TenferroError(f"{PROGRAM} could not be started: {e}") from None
    if not result.returned:
        out = {"returned": False, "timeout_s": timeout, "seconds": result.seconds,
               "peak_rss_mib": result.peak_rss_mib}
        started = _STARTED.search(result.last_error)
        if started:
            out["transform_started_ms"] = float(started.group(1))
        return out
    if result.status != 0:
        raise TenferroError(f"{PROGRAM} {args[0]} {callgrind.failure(result)}")
    lines = result.stdout.strip().splitlines()
    mode = next((m for m in ("eager", "forward") if f"--{m}" in args), args[0])
    try:
        if not lines:
            raise answers.BadAnswer("it printed nothing")
        out = answers.program_answer(lines[-1], mode, given or {})
    except answers.BadAnswer as e:
        raise TenferroError(f"{PROGRAM} {args[0]} gave no answer of its own: {e}") from None
    out.update(returned=True, seconds=result.seconds, peak_rss_mib=result.peak_rss_mib)
    return out


def _schedule(steps, beta, chi):
    """The --schedule argument (:func:`trgad.physics.trg.truncation_schedule`)."""
    return ",".join(map(str, trg.truncation_schedule.trusted(chi, steps, beta)))


def _one_mode(eager, keep, forward):
    """Refuse more than one of eager, keep and forward."""
    if sum(map(bool, (eager, keep, forward))) > 1:
        raise InputError(f"eager={eager}, keep={keep}, forward={forward}: at most one (keep applies "
                         f"to ad.grad's graph only)")


def _release(version, build):
    """``version`` and ``build``, checked (:func:`_program`)."""
    return dict(zip(("version", "build"), _program(version, build)))


@checked(_one_mode, _release, steps=check_steps, beta=check_beta, chi=check_chi, timeout=check_timeout)
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
    args = ["whole", "--schedule", _schedule(steps, beta, chi), "--beta", repr(beta)]
    flags = [f"--{name}" for name, on in (("eager", eager), ("keep", keep), ("forward", forward)) if on]
    return _run(args + flags, timeout, version, build, _lattice(args, steps, beta))


def _lattice(args, steps, beta):
    """What a run of ``whole`` or ``staged`` with ``args`` must echo."""
    return {"steps": steps, "schedule": [int(k) for k in args[2].split(",")], "beta": beta}


def _chain_args(depth, fanout, x0):
    """The chain's arguments, checked against :data:`CHAIN_RANGES` (the program's own)."""
    depth = check_int("depth", depth, 1, CHAIN_DEPTH_MAX)
    fanout = check_int("fanout", fanout, 1, CHAIN_FANOUT_MAX)
    x0 = check_point("x0", x0, CHAIN_X0_MAX)
    return ["chain", "--depth", str(depth), "--fanout", str(fanout), "--x0", repr(x0)]


def chain(depth, fanout=2, x0=2.0, *, version=VERSION, build="stock", timeout=TIMEOUT_SECONDS):
    """``ad.grad`` of the mul chain y <- y**fanout / fanout to ``depth`` at ``x0`` (2 is the
    fixed point of y*y/2: the gradient is 2**depth), with tenferro-rs ``version``, ``build``
    (ranges: :data:`CHAIN_RANGES`)."""
    args = _chain_args(depth, fanout, x0)
    given = {"depth": int(args[2]), "fanout": int(args[4]), "x0": float(args[6])}
    return _run(args, check_timeout(timeout), *_program(version, build), given)


def _stock_release(build):
    """``build`` of :data:`VERSION`, the release the staged program exists for."""
    return _program(VERSION, build)[1]


@checked(steps=check_steps, beta=check_beta, chi=check_chi, repeats=check_repeats, timeout=check_timeout,
         build=_stock_release)
def staged(steps=20, beta=0.3, chi=16, *, repeats=3, build="stock", timeout=TIMEOUT_SECONDS):
    """The staged value and gradient (one VJP per step) of ``steps`` TRG steps with
    tenferro-rs :data:`VERSION` (``build``): lnZ/N, u, the first pass's time and the fastest
    of ``repeats`` passes after it."""
    args = ["staged", "--schedule", _schedule(steps, beta, chi), "--beta", repr(beta),
            "--repeats", str(repeats)]
    return _run(args, timeout, VERSION, build, {**_lattice(args, steps, beta), "repeats": repeats})


# ---- exact counts: callgrind ------------------------------------------------------------

#: The key equality counted (computegraph 0.1.0, ``src/types.rs``: ``impl PartialEq for
#: ValueKey``), as callgrind names it.
KEY_EQ = "<computegraph::types::ValueKey<Op> as core::cmp::PartialEq>::eq"
#: Where callgrind counts, one run each: the harness's ``ad.grad`` and its drop of the
#: gradient (never inlined, named for this), and, inside the transform, the library's
#: registration of the derivative graph's metadata in its process-wide registry
#: (tenferro-internal-ops ``src/ad/context.rs``).
COUNTED = {"transform": "{crate}::transform", "drop": "{crate}::release",
           "registry": "tenferro_ops::ad::context::register_scoped_global_metadata_batch*"}
#: The one place of ``count(..., eager=True)``: the harness's eager ``backward()`` (named so).
COUNTED_EAGER = {"backward": "{crate}::backward"}
#: computegraph's structural equality of operation keys.  The stock release build inlines it
#: into :data:`KEY_EQ`; the fixed build's ``OperationKey::same`` calls it, so there the walk's
#: calls of :data:`KEY_EQ` come from it.
OPERATION_EQ = "<computegraph::types::OperationKey<Op> as core::cmp::PartialEq>::eq"
#: Hard timeout of one callgrind run (the programs run ~50x slower under it), seconds.
COUNT_TIMEOUT_SECONDS = 300.0


def _valgrind():
    found = shutil.which("valgrind")
    if not found:
        raise TenferroError("count needs valgrind's callgrind, which is not installed "
                            "(Debian/Ubuntu: apt-get install valgrind)")
    return found


def _callgrind(args, version, build, timeout, places=COUNTED):
    """Calls of :data:`KEY_EQ` inside each place of ``places`` (:data:`COUNTED` or
    :data:`COUNTED_EAGER`), one callgrind run each, side by side
    (:func:`trgad.harness.callgrind.count_inside`)."""
    functions = {w: f.format(crate=_name(version, build).replace("-", "_")) for w, f in places.items()}
    try:
        return callgrind.count_inside(_valgrind(), [binary(version, build), *args], functions, KEY_EQ,
                                      timeout, f"{PROGRAM} {args[0]}", optional=("registry",))
    except callgrind.CallgrindError as e:
        raise TenferroError(str(e)) from None


def _cached(parts, arguments, compute):
    """``compute()`` once per machine: the count is kept as JSON under the cache folder
    (:func:`trgad.runtime.cache.root`), keyed by a hash of ``parts``, which name the harness
    binary's content, valgrind's version and the arguments.  A kept entry is used only
    when it passes :func:`trgad.harness.answers.kept_count` (the key it was stored under,
    ``arguments``, whole counts that add up); any other is counted again and replaced."""
    from ..runtime import cache

    root = cache.root()
    key = hashlib.sha256(json.dumps(parts).encode()).hexdigest()
    path = None if root is None else Path(root) / "callgrind" / f"{key[:24]}.json"
    if path is not None and path.is_file():
        try:
            return answers.kept_count(answers.parse(path.read_text()), key, arguments)
        except (OSError, UnicodeDecodeError, answers.BadAnswer):
            pass
    result = compute()
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"key": key, "count": result}))
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
    content).  ``eager=True`` (``graph="trg"``): the eager graph's ``backward()`` instead,
    ``eq_calls_backward``, ``eq_nested_backward``, ``callers_backward`` alone.  Needs
    valgrind: TenferroError in one line when it is missing."""
    graph = check_choice("graph", graph, ("chain", "trg"))
    if eager and graph != "trg":
        raise InputError("eager=True counts the TRG's backward(): graph must be 'trg'")
    (version, build), timeout = _program(version, build), check_timeout(timeout)
    if graph == "chain":
        args = _chain_args(depth, fanout, 1.1)
    else:
        beta = check_beta(beta)
        args = ["whole", "--schedule", _schedule(check_steps(steps), beta, check_chi(chi)),
                "--beta", repr(beta)]
    args, places = (args + ["--eager"], COUNTED_EAGER) if eager else (args, COUNTED)
    path = binary(version, build)
    parts = [_file_hash(path), _valgrind_version(timeout), args, KEY_EQ, places]
    arguments = {"graph": graph, "version": version, "build": build, "args": args}

    def compute():
        out = dict(arguments)
        for where, (outside, nested, callers) in _callgrind(args, version, build, timeout, places).items():
            if where == "registry":
                out["eq_nested_registry"] = nested
                continue
            out[f"eq_calls_{where}"] = outside + nested
            out[f"eq_nested_{where}"] = nested
            out[f"callers_{where}"] = [[name, n] for name, n in callers]
        return out

    return _cached(parts, arguments, compute)


def walk(result, where="transform"):
    """The walk in one :func:`count` result: calls of :data:`KEY_EQ` made inside a comparison
    of keys (one per pair of sub-keys compared), during ``where`` (``"transform"``, ``"drop"``
    or, of an ``eager=True`` count, ``"backward"``).  That is the calls into itself plus, where
    it is not inlined (the fixed build), the calls from :data:`OPERATION_EQ`; exact, the same
    in every run of one binary."""
    return result[f"eq_nested_{where}"] + dict(result[f"callers_{where}"]).get(OPERATION_EQ, 0)


def _valgrind_version(timeout):
    """valgrind's version (part of a count's key), its run bounded by ``timeout`` too."""
    try:
        result = run_command([_valgrind(), "--version"], timeout)
    except OSError as e:
        raise TenferroError(f"valgrind could not be started: {e}") from None
    if not result.returned:
        raise TenferroError(f"valgrind --version did not return within {timeout:g} s (process group killed)")
    if result.status != 0:
        raise TenferroError(f"valgrind --version {callgrind.failure(result)}")
    return result.stdout.strip()
