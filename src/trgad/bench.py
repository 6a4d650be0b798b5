"""The benchmark: every mode of differentiation of the TRG, one process, one run.

All figures come from one process, so their ratios are meaningful even on a noisy, shared
machine; absolute times are not.  ``python -m trgad bench`` prints them.  The rows
(:data:`ROWS`) are the modes of :mod:`trgad.physics.modes` at first order (lnZ/N and u), plus the
primal pass as the yardstick:

* ``primal`` - ``jax.jit(lnZ/N)`` of the unrolled graph (:func:`trgad.physics.whole.lnz_fn`):
  lnZ/N alone, no derivative (the derivative rows scan the repeated steps, which compiles
  faster than unrolling them, so a ratio to the primal's first call favours them);
* ``whole`` - ``jax.jit(jax.value_and_grad(lnZ/N))`` of the whole graph;
* ``staged`` - one VJP per step (:mod:`trgad.physics.staged`), step and pullback programs compiled
  per (D, k);
* ``checkpoint`` - ``jax.value_and_grad`` through the checkpointed ``lax.scan``
  (:func:`trgad.physics.modes.lnz_scanned`, checkpointed);
* ``forward_mode`` - one ``jax.jvp`` in beta.

Beside them, :func:`run` measures tenferro-rs itself (:data:`TENFERRO_ROWS`, the book's Rust
harness as a child process, :func:`trgad.harness.rows.tenferro_rows`): its staged pass and its whole graph's
``ad.grad`` at the most steps that finish within a cap.

The derivative rows run the programs of :func:`trgad.physics.modes.program` and
:func:`trgad.physics.staged.value_and_grad_jax` themselves.  For each: ``first_seconds`` (first call
with empty caches, :func:`trgad.runtime.compiled.clear`: tracing, compilation and the run),
``steady_seconds`` (minimum of ``repeats`` calls after one warm-up) and ``temp_bytes``
(XLA's temporary memory, ``compiled.memory_analysis().temp_size_in_bytes``).
"""
from __future__ import annotations

import time

import jax

from .runtime import cache, compiled
from .keyed import keyed_trg
from .physics import modes, staged, stepcost, trg, whole
from .harness.rows import TENFERRO_ROWS, tenferro_rows_unchecked
from .runtime.timing import block, time_call_unchecked
from .runtime.validate import (InputError, check_beta, check_chi, check_repeats, check_schedule,
                               check_steps)

#: The rows of ``run(...)["methods"]``, in order: the primal pass, then the four modes of
#: :data:`trgad.physics.modes.METHODS` at first order.
ROWS = ("primal", "whole", "staged", "checkpoint", "forward_mode")
#: The benchmark's targets, ``ratio name: upper bound``; each ratio is a quotient of two
#: figures of one run (:func:`run` defines them; README's benchmark section shows them).
TARGETS = {
    "whole_first_over_primal_first": 2.0,
    "staged_first_over_primal_first": 2.0,
    "checkpoint_first_over_primal_first": 2.0,
    "forward_mode_first_over_primal_first": 2.0,
    "second_order_fastest_first_over_primal_first": 3.0,
    "second_order_slowest_first_over_primal_first": 6.0,
    "whole_over_primal": 1.1,
    "staged_over_primal": 1.3,
    "forward_mode_over_primal": 1.5,
    "checkpoint_temp_over_whole_temp": 0.25,
}
#: Ratios of the tenferro-rs rows to JAX's (no targets), ``name: (row, field, JAX row, field)``.
TENFERRO_RATIOS = {
    "tenferro_staged_over_jax_staged": ("tenferro_staged", "steady_seconds", "staged", "steady_seconds"),
    "tenferro_staged_first_over_jax_staged_first": ("tenferro_staged", "first_seconds", "staged",
                                                    "first_seconds"),
    "tenferro_staged_over_jax_whole": ("tenferro_staged", "steady_seconds", "whole", "steady_seconds"),
    "tenferro_whole_transform_over_jax_whole_first": ("tenferro_whole", "transform_seconds", "whole",
                                                      "first_seconds"),
}


def _program(name, ks):
    """The compiled executable of row ``name`` (not staged): the primal pass
    ``jit(lnZ/N)``, or the first-order program of :func:`trgad.physics.modes.program`."""
    if name == "primal":
        return compiled.jit(whole.lnz_fn_unchecked(ks)).lower(0.3).compile()
    return modes.program_unchecked(name, 1, ks)[0]


def _first_call(name, beta, ks):
    """Row ``name``'s first call (JAX's in-process caches cleared, ``jax.clear_caches``; compile
    whatever is not cached in this process, then run once; the persistent compilation cache
    is off meanwhile, :func:`trgad.runtime.cache.disabled`):
    (the call, as a function of no arguments; its seconds; the executable, None for staged)."""
    jax.clear_caches()          # JAX's in-process caches too: no row reuses another's traces
    with cache.disabled():
        t0 = time.perf_counter()
        if name == "staged":
            staged.value_and_grad_jax_unchecked(beta, ks)
            return (lambda: staged.value_and_grad_jax_unchecked(beta, ks)), time.perf_counter() - t0, None
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


def _round_robin(calls, repeats):
    """Steady-state seconds of each zero-argument call: one warm-up each, then ``repeats``
    rounds in which every call is timed once, the minimum per call.  Taking turns spreads
    the load of a shared machine over all of them, so that their ratios stay fair."""
    for fn in calls.values():
        block(fn())
    best = {name: float("inf") for name in calls}
    for _ in range(repeats):
        for name, fn in calls.items():
            t0 = time.perf_counter()
            block(fn())
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def _check_names(names):
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


def methods(beta, schedule, repeats=3, names=ROWS):
    """The rows of :data:`ROWS` (or of the subset ``names``, in its order) at one
    (beta, schedule): a dict row name -> row.

    Each row: ``first_seconds`` (every row from empty caches, :func:`trgad.runtime.compiled.clear`,
    one after another, once the process's one-off start-up, JAX's back end, the compiler and
    LAPACK, is paid), ``steady_seconds`` (after one warm-up each, ``repeats`` rounds in
    which the rows take turns, the minimum per row: a change of load on a shared machine
    then hits every row alike), ``temp_bytes`` and ``value`` (what the timed program
    returned, as a list of floats: [lnZ/N] for ``primal``, [lnZ/N, d(lnZ/N)/d beta] for the
    others, so a page can show the numbers without compiling the program again); the staged
    row also ``compiled_programs`` (per-shape step programs), ``peak_temp_bytes`` (largest
    single program) and ``residual_bytes`` (see :func:`staged_memory`).  Raises InputError
    for a bad input or an unknown name.
    """
    return _methods(check_beta(beta), tuple(check_schedule(schedule)),
                             check_repeats(repeats), _check_names(names))


def _methods(beta, ks, repeats=3, names=ROWS):
    """:func:`methods` of checked arguments (``ks`` a tuple)."""
    _warm_up()
    compiled.clear()
    first = {name: _first_call(name, beta, ks) for name in names}
    steady = _round_robin({name: first[name][0] for name in names}, repeats)
    rows = {}
    for name in names:
        call, seconds, exe = first[name]
        value = [float(x) for x in jax.tree_util.tree_leaves(call())]
        rows[name] = dict({"first_seconds": seconds, "steady_seconds": steady[name]}, **_memory(exe),
                          value=value)
        if name == "staged":
            rows[name].update(compiled_programs=len(staged.compiled_shapes()),
                              residual_bytes=_residual_bytes(staged.step_residuals_unchecked(beta, ks)))
    return rows


def run(chi=16, steps=20, beta=0.3, repeats=3, engine=True, names=ROWS, second_order=False,
        with_tenferro=True):
    """Measure every row (or those in ``names``) at one (chi, steps, beta), in one process.

    Returns a JSON-ready dict with ``chi``, ``steps``, ``beta``, ``repeats``, ``schedule``;
    ``methods`` (:func:`methods`, row name -> row); the ratios ``whole_over_primal``,
    ``staged_over_whole``, ``staged_over_primal``, ``staged_first_over_whole_first``,
    ``<row>_first_over_primal_first`` for every derivative row, ``forward_mode_over_primal``,
    ``checkpoint_over_primal`` and ``checkpoint_temp_over_whole_temp`` (steady-state times
    unless named first or temp); with the primal and a derivative row, ``step_costs`` (one
    full-size step forward and with its pullback, :func:`trgad.physics.stepcost.step_costs_unchecked`:
    its ``floor`` estimates the steady ratio to the primal that a mode running each step
    and then its pullback can reach), ``whole_over_floor``, ``staged_over_floor`` (their
    steady ratio to the primal over that floor);
    with ``second_order``, ``second_order`` (:func:`second_order_costs` at the same point:
    method -> {"first_seconds", "steady_seconds", "c"}, one row per exact method) and the
    ratios ``second_order_fastest_first_over_primal_first`` and
    ``second_order_slowest_first_over_primal_first``;
    ``targets`` (ratio of :data:`TARGETS` -> {"value", "bound", "met"}) and
    ``all_targets_met`` (True when every target present is met); with ``with_tenferro``,
    ``tenferro`` (:func:`trgad.harness.rows.tenferro_rows`, measured after JAX's rows) and the ratios of
    :data:`TENFERRO_RATIOS` whose rows ran and are available; and, with ``engine``, the
    keyed engine's staged figures (:func:`engine_rows`: ``engine_staged_<n>`` ...).  With a subset ``names`` only the rows, ratios and targets whose rows ran are there
    (a page that needs three rows need not compile five programs).

    Raises InputError for chi, steps, beta or repeats out of range (:mod:`trgad.runtime.validate`)
    and for an unknown row name.
    """
    chi, steps, beta = check_chi(chi), check_steps(steps), check_beta(beta)
    repeats, names = check_repeats(repeats), _check_names(names)
    schedule = trg.truncation_schedule_unchecked(chi, steps, beta)
    out = {"chi": chi, "steps": steps, "beta": beta, "repeats": repeats, "schedule": schedule}
    rows = _methods(beta, tuple(schedule), repeats, names)
    out["methods"] = rows
    ratios = {
        "whole_over_primal": ("whole", "steady_seconds", "primal", "steady_seconds"),
        "staged_over_whole": ("staged", "steady_seconds", "whole", "steady_seconds"),
        "staged_over_primal": ("staged", "steady_seconds", "primal", "steady_seconds"),
        "staged_first_over_whole_first": ("staged", "first_seconds", "whole", "first_seconds"),
        "whole_first_over_primal_first": ("whole", "first_seconds", "primal", "first_seconds"),
        "staged_first_over_primal_first": ("staged", "first_seconds", "primal", "first_seconds"),
        "checkpoint_first_over_primal_first": ("checkpoint", "first_seconds", "primal", "first_seconds"),
        "forward_mode_first_over_primal_first": ("forward_mode", "first_seconds", "primal", "first_seconds"),
        "forward_mode_over_primal": ("forward_mode", "steady_seconds", "primal", "steady_seconds"),
        "checkpoint_over_primal": ("checkpoint", "steady_seconds", "primal", "steady_seconds"),
        "checkpoint_temp_over_whole_temp": ("checkpoint", "temp_bytes", "whole", "temp_bytes"),
    }
    for key, (a, fa, b, fb) in ratios.items():
        if a in rows and b in rows:
            out[key] = rows[a][fa] / rows[b][fb]
    if "primal" in rows and len(rows) > 1:
        floor = out["step_costs"] = stepcost.step_costs_unchecked(beta, tuple(schedule), repeats)
        for name in ("whole", "staged"):          # each step forward, then each pullback
            if f"{name}_over_primal" in out:
                out[f"{name}_over_floor"] = out[f"{name}_over_primal"] / floor["floor"]
    if with_tenferro:
        rust = out["tenferro"] = tenferro_rows_unchecked(beta, chi, steps, repeats=repeats)
        for key, (a, fa, b, fb) in TENFERRO_RATIOS.items():
            if rust[a]["available"] and rust[a][fa] is not None and b in rows:
                out[key] = rust[a][fa] / rows[b][fb]
    if second_order:
        out["second_order"] = _second_order_costs(beta, tuple(schedule), repeats=repeats)
        if "primal" in rows:
            firsts = [r["first_seconds"] for r in out["second_order"].values()]
            primal = rows["primal"]["first_seconds"]
            out["second_order_fastest_first_over_primal_first"] = min(firsts) / primal
            out["second_order_slowest_first_over_primal_first"] = max(firsts) / primal
    out["targets"] = {k: {"value": out[k], "bound": b, "met": out[k] <= b}
                      for k, b in TARGETS.items() if k in out}
    out["all_targets_met"] = all(t["met"] for t in out["targets"].values())
    if engine:
        out.update(_engine_rows(beta, schedule, repeats=repeats, chi=chi))
    return out


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
    return _engine_rows(check_beta(beta), check_schedule(schedule), check_repeats(repeats),
                                 engine_steps, None if chi is None else check_chi(chi))


def _engine_rows(beta, ks, repeats=3, engine_steps=(10, 20), chi=None):
    """:func:`engine_rows` of checked arguments."""
    out = {}
    chi = chi or max(ks)
    for n in engine_steps:
        sched = ks[:n] if n <= len(ks) else trg.truncation_schedule_unchecked(chi, n, beta)
        t = time_call_unchecked(lambda: keyed_trg.value_and_grad_engine_unchecked(beta, sched),
                                warmup=1, repeats=repeats)
        seconds, res = t.min, t.fastest
        out[f"engine_staged_{n}"] = seconds
        out[f"engine_transform_{n}"] = res["transform_seconds"]
        out[f"engine_key_visits_{n}"] = res["key_visits"]
        full = staged.full_size_steps_unchecked(sched)
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


def second_order_costs(beta, schedule, names=modes.METHODS, repeats=2):
    """Cost of c by each method of :mod:`trgad.physics.modes` (order 2, exact) at one point.

    Returns a dict method -> {"first_seconds", "steady_seconds", "c"}: the first call from
    empty caches (:func:`trgad.runtime.compiled.clear` and ``jax.clear_caches`` before each method, the persistent
    compilation cache off, :func:`trgad.runtime.cache.disabled`; what each compiled is kept for the
    steady state), then the steady state by taking turns (``repeats`` rounds, as in
    :func:`methods`).  What :mod:`trgad.topics.transition` chose its default from.  Raises
    InputError for a bad beta, schedule, method or repeats.
    """
    return _second_order_costs(check_beta(beta), tuple(check_schedule(schedule)),
                                        [modes.check_method(name) for name in names],
                                        check_repeats(repeats))


def _second_order_costs(beta, ks, names=modes.METHODS, repeats=2):
    """:func:`second_order_costs` of checked arguments (``ks`` a tuple)."""
    out, kept = {}, {}
    for name in names:
        compiled.clear()
        jax.clear_caches()      # as the first-order rows: no method reuses another's traces
        with cache.disabled():
            r = modes.value_and_derivatives_unchecked(beta, ks, name, order=2)
        out[name] = {"first_seconds": r["seconds"], "c": r["c"]}
        # keep what this method compiled: the next method's first call starts from empty
        # caches, and compiling every program twice would double the cost
        for registry, entries in compiled.snapshot().items():
            kept.setdefault(registry, {}).update(entries)
    compiled.restore(kept)
    calls = {name: (lambda name=name: modes.value_and_derivatives_unchecked(beta, ks, name, order=2))
             for name in names}
    for name, t in _round_robin(calls, repeats).items():
        out[name]["steady_seconds"] = t
    return out


def summary(out, targets=True):
    """Human-readable lines for :func:`run`'s result; ``targets=False`` leaves out the
    project's targets (README's benchmark section shows them; the book does not)."""
    lines = [f"chi={out['chi']} steps={out['steps']} beta={out['beta']} (min of {out['repeats']} after a warm-up; "
             f"primal: jit of the unrolled graph, the modes scan)",
             f"{'row':14s} {'first call':>11s} {'steady':>9s} {'XLA temp':>10s}"]
    for name, row in out["methods"].items():
        lines.append(f"{name:14s} {row['first_seconds']:9.2f} s {row['steady_seconds']:7.3f} s "
                     f"{row['temp_bytes'] / 2**20:6.1f} MiB")
    for name, r in out.get("tenferro", {}).items():
        if not r["available"]:
            lines.append(f"{name:14s} not measured: {r['reason']}")
        elif name == "tenferro_staged":
            lines.append(f"{name:15s}{r['first_seconds']:9.2f} s {r['steady_seconds']:7.3f} s")
        else:
            stop = f", {r['stopped_at']} steps passed the {r['cap_seconds']:g} s cap" if r["stopped_at"] else ""
            took = f": {r['transform_seconds']:.2f} s" if r["steps"] else ""
            lines.append(f"{name:14s} ad.grad at {r['steps']} steps{took}{stop}")
    for name, row in out.get("second_order", {}).items():
        lines.append(f"c by {name:9s} {row['first_seconds']:9.2f} s {row['steady_seconds']:7.3f} s")
    if "step_costs" in out:
        f = out["step_costs"]
        lines.append(f"one full-size step: {f['step_seconds'] * 1e3:.1f} ms forward ({f['svd_seconds'] * 1e3:.1f} ms "
                     f"in its SVDs), {f['vjp_seconds'] * 1e3:.1f} ms with its pullback: floor {f['floor']:.2f}x; "
                     f"pullback alone {f['pullback_seconds'] * 1e3:.1f} ms (contraction's "
                     f"{f['contraction_pullback_seconds'] * 1e3:.1f}, a split's {f['split_pullback_seconds'] * 1e3:.1f})")
    for key in ("whole_over_primal", "whole_over_floor", "staged_over_floor",
                "staged_over_whole", "staged_first_over_whole_first",
                "engine_staged_ratio", "engine_linear_ratio", "engine_step_cost_ratio", *TENFERRO_RATIOS):
        if key in out:
            lines.append(f"{key.replace('_', ' '):45s} {out[key]:.2f}")
    for key, t in (out.get("targets", {}) if targets else {}).items():
        lines.append(f"{key.replace('_', ' '):45s} {t['value']:.2f} (target <= {t['bound']:g}: "
                     f"{'met' if t['met'] else 'not met'})")
    if targets and out.get("targets"):
        lines.append(f"{'every target met':45s} {'yes' if out['all_targets_met'] else 'no'}")
    return "\n".join(lines)
