"""The benchmark's rows: each mode of differentiation timed at one point, in one process.

:func:`methods` runs the rows of :data:`ROWS`: two yardsticks and the four modes of
:mod:`trgad.physics.modes` at first order (lnZ/N and u):

* ``scanned_primal`` - ``jax.jit(lnZ/N)`` of the graph every mode but staged differentiates
  (:func:`trgad.physics.modes.lnz_scanned`: the full-size steps in one ``lax.scan``, the
  same body), lnZ/N alone: the yardstick of the derivative rows;
* ``unrolled_primal`` - ``jax.jit(lnZ/N)`` of the unrolled graph
  (:func:`trgad.physics.whole.lnz_fn`): the second yardstick (it compiles more slowly than
  the scan, so a first call's ratio to it favours the modes);
* ``whole`` - ``jax.jit(jax.value_and_grad(lnZ/N))`` of the scanned graph;
* ``staged`` - one VJP per step (:mod:`trgad.physics.staged`), step and pullback programs
  compiled per (D, k);
* ``checkpoint`` - ``jax.value_and_grad`` through the checkpointed ``lax.scan``;
* ``forward_mode`` - one ``jax.jvp`` in beta through the scan.

For each: ``first_seconds`` (first call with empty caches, :func:`trgad.runtime.compiled.clear`:
tracing, compilation and the run), ``steady_seconds`` (minimum of ``repeats`` calls after
one warm-up, the rows taking turns, :func:`round_robin`) and ``temp_bytes`` (XLA's temporary
memory, ``compiled.memory_analysis().temp_size_in_bytes``).  Also here: the staged programs'
memory, the keyed engine's staged rows (:func:`engine_rows`) and the cost of c by each
method (:func:`second_order_costs`).  :mod:`trgad.bench` adds the floors and the targets.
"""
from __future__ import annotations

import time

import jax

from .runtime import cache, compiled
from .keyed import keyed_trg
from .physics import modes, staged, trg, whole
from .runtime.timing import block, time_call
from .runtime.validate import InputError, check_beta, check_chi, check_repeats, check_schedule, checked

#: The rows of ``methods(...)``, in order: the two yardsticks (scanned and unrolled primal
#: pass), then the four modes of :data:`trgad.physics.modes.METHODS` at first order.
ROWS = ("scanned_primal", "unrolled_primal", "whole", "staged", "checkpoint", "forward_mode")
#: The rows that compute lnZ/N alone.
PRIMALS = ("scanned_primal", "unrolled_primal")


def _program(name, ks):
    """The compiled executable of row ``name`` (not staged): a primal pass, scanned
    (:func:`trgad.physics.modes.lnz_scanned`) or unrolled (:func:`trgad.physics.whole.lnz_fn`),
    or the first-order program of :func:`trgad.physics.modes.program`."""
    if name == "scanned_primal":
        return compiled.jit(lambda b: modes.lnz_scanned(b, ks)).lower(0.3).compile()
    if name == "unrolled_primal":
        return compiled.jit(whole.lnz_fn.trusted(ks)).lower(0.3).compile()
    return modes.program.trusted(name, 1, ks)[0]


def _first_call(name, beta, ks):
    """Row ``name``'s first call (JAX's in-process caches cleared, ``jax.clear_caches``; compile
    whatever is not cached in this process, then run once; the persistent compilation cache
    is off meanwhile, :func:`trgad.runtime.cache.disabled`):
    (the call, as a function of no arguments; its seconds; the executable, None for staged)."""
    jax.clear_caches()          # JAX's in-process caches too: no row reuses another's traces
    with cache.disabled():
        t0 = time.perf_counter()
        if name == "staged":
            staged.value_and_grad_jax.trusted(beta, ks)
            return (lambda: staged.value_and_grad_jax.trusted(beta, ks)), time.perf_counter() - t0, None
        exe = _program(name, ks)
        block(exe(beta))
        return (lambda: exe(beta)), time.perf_counter() - t0, exe


def _warm_up():
    """Start what a process starts once, before any row is timed: JAX's back end, the
    compiler and LAPACK's SVD (a 2 x 2 matrix), so that no row's first call, the primal
    pass's least of all, pays for them."""
    block(compiled.jit(lambda m: jax.numpy.linalg.svd(m)[1])(jax.numpy.eye(2)))


def _memory(exe):
    """XLA's temporary memory of a row: ``temp_bytes`` of its executable, or for staged
    (``exe`` None) the sum over its programs and ``peak_temp_bytes`` (:func:`staged_memory`)."""
    if exe is not None:
        return {"temp_bytes": int(exe.memory_analysis().temp_size_in_bytes)}
    total, largest, _ = staged_memory()
    return {"temp_bytes": total, "peak_temp_bytes": largest}


def round_robin(calls, repeats, inner=None):
    """Steady-state seconds of each zero-argument call: one warm-up each, then ``repeats``
    rounds in which every call is timed once (``inner[name]`` times, the fastest kept, for a
    call named in ``inner``: a short program then gets as many samples as it needs), the
    minimum per call.  Taking turns spreads the load of a shared machine over all of them,
    so that their ratios stay fair."""
    inner = inner or {}
    for fn in calls.values():
        block(fn())
    best = {name: float("inf") for name in calls}
    for _ in range(repeats):
        for name, fn in calls.items():
            for _ in range(inner.get(name, 1)):
                t0 = time.perf_counter()
                block(fn())
                best[name] = min(best[name], time.perf_counter() - t0)
    return best


def check_names(names):
    """``names`` as a tuple (its order, repeats dropped), else InputError naming the bad one."""
    names = tuple(names)
    for name in names:
        if name not in ROWS:
            raise InputError(f"names={name!r} is not known: choose from {', '.join(ROWS)}")
    if not names:
        raise InputError("names=() is out of range: at least one row is needed")
    return tuple(dict.fromkeys(names))


def staged_memory():
    """XLA temporary memory of the staged programs compiled so far (bytes).

    Returns (sum, largest, programs): ``sum`` counts each per-shape step and pullback program
    (and the ends' programs, the initial tensor and the trace) ONCE, however many steps run
    it (:func:`trgad.physics.staged.executables`); ``largest`` is the biggest single program's (they
    run one after another, so the peak of temporaries is this, not the sum); ``programs``
    their number.  The residuals kept between the forward and the backward pass are program
    outputs, not temporaries: :func:`staged_residual_bytes` counts them.
    """
    sizes = [e.memory_analysis().temp_size_in_bytes for e in staged.executables()]
    return int(sum(sizes)), int(max(sizes, default=0)), len(sizes)


def staged_residual_bytes(beta, schedule):
    """Bytes of the residuals that the staged first-order pass keeps alive between its
    forward and backward pass (all steps, the peak: just before the backward pass;
    :func:`trgad.physics.staged.step_residuals`, which checks beta and the schedule)."""
    return _residual_bytes(staged.step_residuals(beta, schedule))


def _residual_bytes(stages):
    return int(sum(x.nbytes for _, res in stages for x in res))


@checked(beta=check_beta, schedule=check_schedule, repeats=check_repeats, names=check_names)
def methods(beta, schedule, repeats=3, names=ROWS):
    """The rows of :data:`ROWS` (or of the subset ``names``, in its order) at one
    (beta, schedule): a dict row name -> row.

    Each row: ``first_seconds`` (every row from empty caches, :func:`trgad.runtime.compiled.clear`,
    one after another, once the process's one-off start-up, JAX's back end, the compiler and
    LAPACK, is paid), ``steady_seconds`` (after one warm-up each, ``repeats`` rounds in
    which the rows take turns, the minimum per row: a change of load on a shared machine
    then hits every row alike), ``temp_bytes`` and ``value`` (what the timed program
    returned, as a list of floats: [lnZ/N] for the primal rows, [lnZ/N, d(lnZ/N)/d beta] for
    the others, so a page can show the numbers without compiling the program again); the
    staged row also ``compiled_programs`` (per-shape step programs), ``peak_temp_bytes``
    (largest single program) and ``residual_bytes`` (see :func:`staged_memory`).  Raises
    InputError for a bad input or an unknown name.
    """
    return measure.trusted(beta, schedule, repeats, names)[0]


@checked(beta=check_beta, schedule=check_schedule, repeats=check_repeats, names=check_names)
def measure(beta, schedule, repeats=3, names=ROWS, parts=None):
    """:func:`methods`, and more programs timed in the same rounds: ``parts``, called once
    the first calls are done (they clear every cache), returns (calls, inner) as
    :func:`round_robin` takes them.  Returns (rows, the seconds of each of those calls).
    Raises InputError as :func:`methods`."""
    schedule = tuple(schedule)
    _warm_up()
    compiled.clear()
    first = {name: _first_call(name, beta, schedule) for name in names}
    extra, inner = parts() if parts else ({}, {})
    calls = dict({name: first[name][0] for name in names}, **extra)
    steady = round_robin(calls, repeats, inner)
    rows = {}
    for name in names:
        call, seconds, exe = first[name]
        value = [float(x) for x in jax.tree_util.tree_leaves(call())]
        rows[name] = dict({"first_seconds": seconds, "steady_seconds": steady[name]}, **_memory(exe),
                          value=value)
        if name == "staged":
            rows[name].update(compiled_programs=len(staged.compiled_shapes()),
                              residual_bytes=_residual_bytes(staged.step_residuals.trusted(beta, schedule)))
    return rows, {name: steady[name] for name in extra}


def _optional_chi(chi):
    """``chi`` checked, or None (the schedule's largest k)."""
    return None if chi is None else check_chi(chi)


@checked(beta=check_beta, schedule=check_schedule, repeats=check_repeats, chi=_optional_chi)
def engine_rows(beta, schedule, repeats=3, engine_steps=(10, 20), chi=None):
    """The keyed engine's staged timings (seconds, wall clock, one process).

    Every figure for one n comes from the same call, the fastest of ``repeats`` after one
    warm-up (:func:`trgad.runtime.timing.time_call` keeps that call's result), so the per-step
    figures add up to less than its total.

    * ``engine_staged_<n>``: staged value-and-gradient on the keyed engine (structural
      keys), for n in ``engine_steps`` (the first n entries of ``schedule``, or a schedule
      of n steps at the same chi), and
      ``engine_staged_ratio`` = time at the last n over the first;
    * ``engine_transform_<n>`` / ``engine_key_visits_<n>`` and their ratios (the transform
      alone); ``engine_full_size_steps_<n>`` (steps whose input has the schedule's largest
      bond dimension; the earlier ones are tiny), ``engine_linear_ratio`` (their ratio: what
      a cost linear in the steps predicts for ``engine_staged_ratio``),
      ``engine_step_cost_<n>`` (mean primal + transform + run time of a full-size step) and
      ``engine_step_cost_ratio`` (about 1 when the cost is linear); ``engine_staged_steps``.
    """
    out = {}
    chi = chi or max(schedule)
    for n in engine_steps:
        sched = schedule[:n] if n <= len(schedule) else trg.truncation_schedule.trusted(chi, n, beta)
        t = time_call.trusted(lambda: keyed_trg.value_and_grad_engine.trusted(beta, sched),
                                warmup=1, repeats=repeats)
        seconds, res = t.min, t.fastest
        out[f"engine_staged_{n}"] = seconds
        out[f"engine_transform_{n}"] = res["transform_seconds"]
        out[f"engine_key_visits_{n}"] = res["key_visits"]
        full = staged.full_size_steps.trusted(sched)
        rows = {r["stage"]: r for r in res["per_step"]}
        costs = [sum(rows[f"step {i}"][x] for x in ("primal_seconds", "transform_seconds", "run_seconds"))
                 for i in full]
        out[f"engine_full_size_steps_{n}"] = len(full)
        out[f"engine_step_cost_{n}"] = sum(costs) / len(costs)
    if len(engine_steps) >= 2:
        a, b = engine_steps[0], engine_steps[-1]
        out["engine_staged_ratio"] = out[f"engine_staged_{b}"] / out[f"engine_staged_{a}"]
        out["engine_transform_ratio"] = out[f"engine_transform_{b}"] / out[f"engine_transform_{a}"]
        out["engine_key_visits_ratio"] = out[f"engine_key_visits_{b}"] / out[f"engine_key_visits_{a}"]
        out["engine_linear_ratio"] = out[f"engine_full_size_steps_{b}"] / out[f"engine_full_size_steps_{a}"]
        out["engine_step_cost_ratio"] = out[f"engine_step_cost_{b}"] / out[f"engine_step_cost_{a}"]
        out["engine_staged_steps"] = [a, b]
    return out


def _methods(names):
    """Method names of :mod:`trgad.physics.modes`, each checked."""
    return [modes.check_method(name) for name in names]


@checked(beta=check_beta, schedule=check_schedule, names=_methods, repeats=check_repeats)
def second_order_costs(beta, schedule, names=modes.METHODS, repeats=2):
    """Cost of c by each method of :mod:`trgad.physics.modes` (order 2, exact) at one point.

    Returns a dict method -> {"first_seconds", "steady_seconds", "c"}: the first call from
    empty caches (:func:`trgad.runtime.compiled.clear` and ``jax.clear_caches`` before each method, the persistent
    compilation cache off, :func:`trgad.runtime.cache.disabled`; what each compiled is kept for the
    steady state), then the steady state by taking turns (``repeats`` rounds, as in
    :func:`methods`).  What :mod:`trgad.topics.transition` chose its default from.  Raises
    InputError for a bad beta, schedule, method or repeats.
    """
    schedule = tuple(schedule)
    out, kept = {}, {}
    for name in names:
        compiled.clear()
        jax.clear_caches()      # as the first-order rows: no method reuses another's traces
        with cache.disabled():
            r = modes.value_and_derivatives.trusted(beta, schedule, name, order=2)
        out[name] = {"first_seconds": r["seconds"], "c": r["c"]}
        # keep what this method compiled: the next method's first call starts from empty
        # caches, and compiling every program twice would double the cost
        for registry, entries in compiled.snapshot().items():
            kept.setdefault(registry, {}).update(entries)
    compiled.restore(kept)
    calls = {name: (lambda name=name: modes.value_and_derivatives.trusted(beta, schedule, name, order=2))
             for name in names}
    for name, t in round_robin(calls, repeats).items():
        out[name]["steady_seconds"] = t
    return out
