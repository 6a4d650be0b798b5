"""Compiled programs: the ahead-of-time wrapper and the one registry of their caches.

Every module that keeps compiled JAX programs between calls keeps them in a dict it gets
from :func:`registry`, so that one call, :func:`clear`, forgets all of them (the next call of
every method then compiles again, as a first call does).  The caches today: ``modes``
(one executable per method, order and schedule), ``staged`` (the per-shape step and
pullback programs), ``whole.value_and_grad`` and ``whole.second`` (the whole graph's jitted
functions, per schedule), ``exact.kaufman``.  These live in this process's memory; JAX's
persistent compilation cache (:mod:`trgad.runtime.cache`) keeps compiled executables on disk for the
next process, and :mod:`trgad.runtime.exports` the lowered programs of ``modes`` and ``staged``
(:func:`lower` and :class:`Compiled` with a ``key``), so that it does not trace them.

:func:`snapshot` and :func:`restore` let a benchmark time several first calls from empty
caches and keep what each compiled (:func:`trgad.bench.second_order_costs`).

:func:`jit` is how the package compiles a top-level program: ``jax.jit`` with
:func:`options`, XLA settings under which a derivative program compiles faster; eager
operations and programs compiled by plain ``jax.jit`` keep XLA's defaults.
"""
from __future__ import annotations

import os
import threading

import jax

from . import cache, exports

_CACHES = {}

#: XLA options trgad asks for on every program it compiles: the CPU back end's legacy loop
#: emitters instead of its fusion emitters, and LLVM without optimisation passes.  Why: a
#: first call is mostly XLA compiling, whose time grows with the number of kernels, and a
#: derivative has at least twice the primal's; with these settings a derivative program
#: compiles faster, and its steady calls may run slower (its many small element-wise kernels
#: are not optimised).  The reproducibility appendix (book/reproducibility.md) measures both
#: settings at every build; tests/test_compiled.py checks that results agree with XLA's
#: defaults to 1e-12.  Source: XLA's ``DebugOptions`` fields of these names.
#:
#: They are passed through JAX's ``compiler_options`` (:func:`jit`), which checks each name
#: against the XLA in use and raises for an unknown one, never through ``XLA_FLAGS``, where
#: an option this XLA no longer has aborts the whole process (the XLA of jaxlib 0.12 removed
#: the fusion emitters' switch).  :func:`options` gives the ones in force: those the running XLA knows
#: (checked once per process), less those the user names in ``XLA_FLAGS``, whose values XLA
#: reads from there.  Eager operations and your own ``jax.jit`` programs keep XLA's defaults.
COMPILER_OPTIONS = {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 0}
#: XLA's own defaults for the same options (its ``DebugOptions`` defaults), for comparison.
XLA_DEFAULTS = {"xla_cpu_use_fusion_emitters": True, "xla_backend_optimization_level": 3}

_KNOWN = {}      # option name -> whether the running XLA accepts it (filled by options())
_LOCK = threading.Lock()


def _parse_flags(text):
    """``{name: value}`` of the ``--name=value`` words of an ``XLA_FLAGS`` string (the value
    as text; None for a bare ``--name``)."""
    flags = {}
    for word in (text or "").split():
        name, eq, value = word.lstrip("-").partition("=")
        flags[name] = value.strip() if eq else None
    return flags


def setup(environ=None):
    """Leave to ``XLA_FLAGS`` (``environ``, default ``os.environ``) every option of
    :data:`COMPILER_OPTIONS` it names: those are dropped here, so XLA applies the user's
    value.  Nothing is written to ``XLA_FLAGS``.  Returns the options left."""
    environ = os.environ if environ is None else environ
    for name in _parse_flags(environ.get("XLA_FLAGS", "")):
        COMPILER_OPTIONS.pop(name, None)
    return dict(COMPILER_OPTIONS)


def _accepted(name, value):
    """Whether the running XLA compiles a one-operation program with option ``name``."""
    if name not in _KNOWN:
        try:
            jax.jit(lambda x: x + 1, compiler_options={name: value}).lower(1.0).compile()
            _KNOWN[name] = True
        except Exception as e:             # JaxRuntimeError: "No such compile option"
            if "No such compile option" not in str(e):
                raise
            _KNOWN[name] = False
    return _KNOWN[name]


def options():
    """The compile options in force (see :data:`COMPILER_OPTIONS`): on the first call, each
    option the running XLA does not know is dropped, from here and from
    :data:`XLA_DEFAULTS`.  A new dict each call."""
    named = _parse_flags(os.environ.get("XLA_FLAGS", ""))     # the user's, read by XLA
    with _LOCK:
        for table in (COMPILER_OPTIONS, XLA_DEFAULTS):
            for name, value in list(table.items()):
                if name in named or not _accepted(name, value):
                    table.pop(name, None)
        return dict(COMPILER_OPTIONS)


def defaults():
    """XLA's defaults for the options in force (for comparisons): a new dict."""
    options()
    return dict(XLA_DEFAULTS)


def _backend_started():
    """Whether JAX's CPU back end has started, seen from the OS: XLA's CPU client starts
    threads named ``tf_XLA...`` (its compile, Eigen and execute pools) when it starts, and
    JAX has no public way to ask.  False where the OS does not tell (no ``/proc``)."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return False
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().startswith("tf_XLA"):
                    return True
        except OSError:         # a thread that ended meanwhile
            pass
    return False


def jit(fn, **kwargs):
    """``jax.jit(fn, compiler_options=options(), **kwargs)``: the package's way of compiling
    ``fn`` (same arguments and results as ``jax.jit``; the options are read now, so a change
    applies to programs made afterwards).  For a top-level program only: JAX refuses
    compiler options on a jit that runs inside another transform's trace (``jax.vjp`` of
    it, or a jit inside a jit), whose options are the outer program's."""
    return jax.jit(fn, compiler_options=options(), **kwargs)


def lower(fn, *args, key=None):
    """``jit(fn).lower(*args)``; with ``key`` (hashable, naming ``fn`` and every value it
    closes over), through trgad's store of exported programs (:func:`trgad.runtime.exports.lower`),
    so that the next process loads the lowered program instead of tracing it.  Why: a
    derivative program's tracing and lowering are much of its first call."""
    if key is None:
        return jit(fn).lower(*args)
    return exports.lower(fn, args, key, options())


def registry(name):
    """The registered dict of compiled programs called ``name`` (created empty on first use).

    The owner module stores what it compiled under keys of its choosing; :func:`clear`
    empties the dict in place, so the owner's reference stays valid.
    """
    return _CACHES.setdefault(str(name), {})


def clear():
    """Forget every compiled program of every registered cache."""
    for entries in _CACHES.values():
        entries.clear()


def snapshot():
    """A copy of every registered cache, ``{name: {key: program}}`` (the programs themselves
    are shared, not copied)."""
    return {name: dict(entries) for name, entries in _CACHES.items()}


def restore(saved):
    """Put back the entries of a :func:`snapshot` (entries added since are kept)."""
    for name, entries in saved.items():
        registry(name).update(entries)


def sizes():
    """Number of entries of each registered cache, ``{name: int}``."""
    return {name: len(entries) for name, entries in _CACHES.items()}


class Compiled:
    """:func:`jit` of ``fn``, compiled ahead of time for the shapes of each call.

    The first call with a new argument signature (tree structure, shapes and dtypes of the
    arguments) runs ``jit(fn).lower(*args).compile()``; every call then runs that XLA
    executable.  ``executables`` maps each signature to its executable, which gives XLA's
    figures, e.g. ``memory_analysis().temp_size_in_bytes``.  With ``key`` (hashable, naming
    ``fn`` and every value it closes over) each signature goes through trgad's store of
    exported programs (:func:`trgad.runtime.exports.lower`): a later process loads it, untraced.
    ``after``: a Compiled whose traces ``fn``'s trace reads (staged's pullback reads the
    tree its step recorded): it is traced again first, whenever ``fn`` is traced.  Source:
    JAX's ahead-of-time lowering API (``jax.jit(...).lower(...).compile()``, "Ahead-of-time
    lowering and compilation" in the JAX documentation).
    """

    def __init__(self, fn, key=None, after=None):
        self.fn, self.key, self.after = fn, key, after
        self.jit = jit(fn)
        self.executables = {}
        self.signatures = {}

    def lower(self, *args):
        """The ``jax.stages.Lowered`` of this program for ``args`` (see the class docstring)."""
        self.signatures[self._key(args)] = exports.specs(args)
        prepare = None if self.after is None else self.after.retrace
        if self.key is None:
            if prepare is not None:
                prepare()
            return self.jit.lower(*args)
        return exports.lower(self.fn, args, self.key, options(), prepare)

    def retrace(self):
        """Trace ``fn`` for every signature lowered so far (JAX's trace cache makes a repeat
        cheap), for what tracing it records."""
        for args in self.signatures.values():
            self.jit.trace(*args)

    @staticmethod
    def _key(args):
        leaves, tree = jax.tree_util.tree_flatten(args)
        return (tree, tuple((jax.numpy.shape(x), str(getattr(x, "dtype", type(x).__name__)))
                            for x in leaves))

    def __call__(self, *args):
        key = self._key(args)
        exe = self.executables.get(key)
        if exe is None:
            exe = self.executables[key] = self.lower(*args).compile()
        return exe(*args)


class SideBySide:
    """Compile several :class:`Compiled` programs at once, ahead of their first calls.

    ``with SideBySide() as ahead:`` then ``ahead.submit(program, *args)`` for each program:
    ``args`` may be arrays or ``jax.ShapeDtypeStruct``; ``submit`` traces and lowers the
    program now, in this thread (Python and JAX tracing hold the interpreter lock), hands
    XLA's compilation to a pool of ``workers`` threads (default: the CPUs this process may
    use; most of ``compile()`` runs outside the lock) and returns the program's output shapes
    and dtypes (a pytree of ``jax.ShapeDtypeStruct``), so that a program whose input is
    another's output can be submitted next.  Leaving the block waits for every compilation
    and stores each executable in its program's ``executables``, as a call would have (keyed
    by shapes and dtypes: call the program with arrays of those, not Python scalars); if a
    compilation failed, the others are stored and the first error is raised there; if the
    block itself raised, nothing is stored.  A program already compiled for those shapes is
    skipped; calling a submitted program inside the block compiles it again.  Worker
    threads see JAX's global configuration (``jax.config.update``), not a thread-local
    context of the caller.
    Why: independent programs (the staged per-shape step programs) then compile on all
    cores while the next one is traced, instead of one after another.  Source:
    ``jax.jit(...).lower(...).compile()`` ("Ahead-of-time lowering and compilation" in the
    JAX documentation) and :class:`concurrent.futures.ThreadPoolExecutor`.
    """

    def __init__(self, workers=None):
        self.workers = workers or _usable_cpus()

    def __enter__(self):
        from concurrent.futures import ThreadPoolExecutor
        self._pool = ThreadPoolExecutor(self.workers)
        self._pending = []
        return self

    def submit(self, program, *args):
        key = program._key(args)
        if key in program.executables:
            info = program.executables[key].out_info
        else:
            lowered = program.lower(*args)
            self._pending.append((program, key, self._pool.submit(lowered.compile)))
            info = lowered.out_info
        return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), info)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:                # the block failed: do not wait for its compiles
            self._pool.shutdown(wait=True, cancel_futures=True)
            return False
        first_error = None
        try:
            for program, key, future in self._pending:
                try:
                    program.executables[key] = future.result()
                except Exception as err:        # noqa: BLE001 - keep the others, raise the first
                    first_error = first_error or err
        finally:
            self._pool.shutdown(wait=True)
        if first_error is not None:
            raise first_error
        return False


def pin_to_one_cpu(slot):
    """Run this process on one CPU: the ``slot``-th (modulo their number) of the CPUs it may
    use now.  Every thread it has (``/proc/self/task``) and every thread and process it
    starts from now on run there, and JAX's compilation cache moves to the folder of one CPU
    (:func:`trgad.runtime.cache.follow_cpus`).  Returns that CPU's number.  For processes that run side
    by side (test workers, a parallel book build): XLA's CPU runtime sizes its thread pool
    to the usable CPUs when JAX's back end starts, and processes whose pools share the
    cores can slow each other down by a large factor; restricting each process's CPUs
    (``taskset``) is the remedy given on JAX's issue tracker (jax-ml/jax#1539, #29499).
    Call it before JAX's back end starts; raises RuntimeError after (the pool would keep
    its size), ValueError for a negative slot, and OSError where the OS has no CPU affinity
    (``os.sched_setaffinity``)."""
    if not isinstance(slot, int) or slot < 0:
        raise ValueError(f"slot={slot!r} is not a non-negative integer")
    if _backend_started():
        raise RuntimeError("pin_to_one_cpu: JAX's back end has started; call it before "
                           "anything runs on JAX")
    cpus = sorted(os.sched_getaffinity(0))
    cpu = cpus[slot % len(cpus)]
    os.sched_setaffinity(0, {cpu})
    try:
        threads = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        threads = []
    for tid in threads:
        try:
            os.sched_setaffinity(tid, {cpu})
        except OSError:          # a thread that ended meanwhile
            pass
    cache.follow_cpus()          # the compilation cache folder of the new CPU count
    return cpu


def _usable_cpus():
    """The CPUs this process may run on (its affinity where the OS tells), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
