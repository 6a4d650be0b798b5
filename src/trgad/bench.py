"""The benchmark: every mode of differentiation of the TRG, one process, one run.

All figures come from one process, so their ratios are meaningful even on a noisy, shared
machine; absolute times are not.  ``python -m trgad bench`` prints them.  The methods are
those of :mod:`trgad.modes` at first order (lnZ/N and u), plus the forward pass alone:

* ``forward_only`` - ``jax.jit(lnZ/N)``, no derivative (the yardstick);
* ``whole`` - ``jax.jit(jax.value_and_grad(lnZ/N))`` of the whole graph;
* ``staged`` - one VJP per step (:mod:`trgad.staged`), programs compiled per (D, k);
* ``checkpoint`` - ``jax.value_and_grad`` through the checkpointed ``lax.scan``
  (:func:`trgad.modes.lnz_checkpointed`);
* ``forward_mode`` - one ``jax.jvp`` in beta.

For each: ``first_seconds`` (first call with empty caches: tracing, compilation and the
run), ``steady_seconds`` (minimum of ``repeats`` calls after one warm-up) and
``temp_bytes`` (XLA's temporary memory, ``compiled.memory_analysis().temp_size_in_bytes``).
"""
from __future__ import annotations

import time

from . import modes, staged, trg, whole
from .timing import Sweep, block, capped_sweep, time_call
from .validate import InputError, check_beta, check_chi, check_positive, check_repeats, check_steps

#: The rows of ``run(...)["methods"]``, in order.
METHODS = ("forward_only", "whole", "staged", "checkpoint", "forward_mode")
#: The benchmark's targets, ``ratio name: upper bound``; each ratio is a quotient of two
#: figures of one run (:func:`run` defines them; README's benchmark section shows them).
TARGETS = {
    "checkpoint_first_over_forward_first": 2.0,
    "forward_mode_over_forward": 2.0,
    "checkpoint_temp_over_whole_temp": 0.25,
    "staged_over_forward": 1.3,
}


def _aot(fn, beta):
    """``jax.jit(fn)`` compiled for a float64 scalar: (executable, seconds it took)."""
    import jax

    t0 = time.perf_counter()
    exe = jax.jit(fn).lower(float(beta)).compile()
    return exe, time.perf_counter() - t0


def _row(first, steady, temp, **extra):
    return dict({"first_seconds": first, "steady_seconds": steady, "temp_bytes": int(temp)}, **extra)


def _first(fn, beta):
    """Compile ``fn`` (from empty caches) and call it once: (executable, seconds for both)."""
    t0 = time.perf_counter()
    exe, _ = _aot(fn, beta)
    block(exe(beta))
    return exe, time.perf_counter() - t0


def _one_program(fn, beta, repeats):
    """first call (compile + run), steady state and temporary memory of one jitted program."""
    exe, first = _first(fn, beta)
    steady = time_call(lambda: exe(beta), warmup=1, repeats=repeats).min
    return _row(first, steady, exe.memory_analysis().temp_size_in_bytes)


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
        if name not in METHODS:
            raise InputError(f"names={name!r} is not known: choose from {', '.join(METHODS)}")
    if not names:
        raise InputError("names=() is out of range: at least one method is needed")
    return tuple(dict.fromkeys(names))


def staged_memory():
    """XLA temporary memory of the staged programs compiled so far (bytes).

    Returns (sum, largest, programs): ``sum`` counts each per-shape forward and backward
    program (and the two small ones, the initial tensor and the trace) ONCE, however many
    steps run it; ``largest`` is the biggest single program's (they run one after another,
    so the peak of temporaries is this, not the sum); ``programs`` their number.  The
    residuals kept between the forward and the backward pass are program outputs, not
    temporaries: :func:`staged_residual_bytes` counts them.
    """
    P = staged.programs()
    progs = list(P.forward.values()) + list(P.backward.values())
    progs += [p for p in (P.init_fwd, P.init_bwd, P.tail_fwd, P.tail_bwd)]
    sizes = [e.memory_analysis().temp_size_in_bytes for p in progs for e in p.executables.values()]
    return int(sum(sizes)), int(max(sizes, default=0)), len(sizes)


def staged_residual_bytes(beta, schedule):
    """Bytes of the residuals that the staged first-order pass keeps alive between its
    forward and backward pass (all steps, the peak: just before the backward pass)."""
    import jax.numpy as jnp

    P = staged.programs()
    T, _ = P.init_fwd(jnp.asarray(check_beta(beta), dtype=jnp.float64))
    total = 0
    for k in schedule:
        fwd, _ = P.step(int(T.shape[0]), int(k))
        (T, _), res = fwd(T)
        total += sum(x.nbytes for x in res)
    return int(total)


def methods(beta, schedule, repeats=3, names=METHODS):
    """The rows of :data:`METHODS` (or of the subset ``names``, in its order) at one
    (beta, schedule): a dict method -> row.

    Each row: ``first_seconds`` (every method from empty caches, one after another),
    ``steady_seconds`` (after one warm-up each, ``repeats`` rounds in which the methods take
    turns, the minimum per method: a change of load on a shared machine then hits every
    method alike), ``temp_bytes`` and ``value`` (what the timed program returned, as a list
    of floats: [lnZ/N] for ``forward_only``, [lnZ/N, d(lnZ/N)/d beta] for the others, so a
    page can show the numbers without compiling the program again); the staged row also ``compiled_programs`` (per-shape
    step programs), ``peak_temp_bytes`` (largest single program) and ``residual_bytes``
    (see :func:`staged_memory`).  Raises InputError for a bad input or an unknown name.
    """
    import jax

    beta, ks = check_beta(beta), tuple(staged._schedule(schedule))
    repeats = check_repeats(repeats)
    names = _check_names(names)
    f = whole.lnz_fn(ks)
    programs = {"forward_only": f, "whole": jax.value_and_grad(f),
                "checkpoint": jax.value_and_grad(lambda b: modes.lnz_checkpointed(b, ks)),
                "forward_mode": lambda b: jax.jvp(f, (b,), (1.0,))}
    exes, first = {}, {}
    for name in names:
        if name == "staged":
            staged.clear_cache()
            t0 = time.perf_counter()
            staged.value_and_grad_jax(beta, ks)
            first[name] = time.perf_counter() - t0
        else:
            exes[name], first[name] = _first(programs[name], beta)
    calls = {name: (lambda: staged.value_and_grad_jax(beta, ks)) if name == "staged"
             else (lambda e=exes[name]: e(beta)) for name in names}
    steady = _round_robin(calls, repeats)
    rows = {}
    for name in names:
        value = [float(x) for x in jax.tree_util.tree_leaves(calls[name]())]
        if name == "staged":
            total, largest, _ = staged_memory()
            rows[name] = _row(first[name], steady[name], total, peak_temp_bytes=largest,
                              compiled_programs=len(staged.compiled_shapes()),
                              residual_bytes=staged_residual_bytes(beta, ks), value=value)
        else:
            rows[name] = _row(first[name], steady[name], exes[name].memory_analysis().temp_size_in_bytes,
                              value=value)
    return rows


def run(chi=16, steps=20, beta=0.3, repeats=3, engine=True, names=METHODS):
    """Measure every method (or those in ``names``) at one (chi, steps, beta), in one process.

    Returns a JSON-ready dict with ``chi``, ``steps``, ``beta``, ``repeats``, ``schedule``;
    ``methods`` (:func:`methods`); the ratios of :data:`TARGETS` and ``targets`` (ratio ->
    {"value", "bound", "met"}); and the keys the staged chapter and README read:
    ``forward_first`` / ``forward``, ``whole_first`` / ``whole``, ``staged_first`` /
    ``staged`` (first call and steady state, seconds), ``whole_over_forward``,
    ``staged_over_whole``, ``staged_over_forward``, ``staged_first_over_whole_first``,
    ``staged_compiled_programs`` and, with ``engine``, the keyed engine's staged figures
    (:func:`engine_rows`: ``engine_staged_<n>`` ...).  With a subset ``names`` only the
    rows, keys and ratios whose methods ran are there (a page that needs three rows need
    not compile five programs).

    Raises InputError for chi, steps, beta or repeats out of range (:mod:`trgad.validate`)
    and for an unknown method name.
    """
    chi, steps, beta = check_chi(chi), check_steps(steps), check_beta(beta)
    repeats, names = check_repeats(repeats), _check_names(names)
    schedule = trg.truncation_schedule(chi, steps, beta)
    out = {"chi": chi, "steps": steps, "beta": beta, "repeats": repeats, "schedule": schedule}
    rows = methods(beta, schedule, repeats, names)
    out["methods"] = rows
    for key, name in (("forward", "forward_only"), ("whole", "whole"), ("staged", "staged")):
        if name in rows:
            out[key + "_first"], out[key] = rows[name]["first_seconds"], rows[name]["steady_seconds"]
    if "staged" in rows:
        out["staged_compiled_programs"] = rows["staged"]["compiled_programs"]
    ratios = {
        "whole_over_forward": ("whole", "steady_seconds", "forward_only", "steady_seconds"),
        "staged_over_whole": ("staged", "steady_seconds", "whole", "steady_seconds"),
        "staged_over_forward": ("staged", "steady_seconds", "forward_only", "steady_seconds"),
        "staged_first_over_whole_first": ("staged", "first_seconds", "whole", "first_seconds"),
        "checkpoint_first_over_forward_first": ("checkpoint", "first_seconds", "forward_only", "first_seconds"),
        "forward_mode_over_forward": ("forward_mode", "steady_seconds", "forward_only", "steady_seconds"),
        "checkpoint_temp_over_whole_temp": ("checkpoint", "temp_bytes", "whole", "temp_bytes"),
    }
    for key, (a, fa, b, fb) in ratios.items():
        if a in rows and b in rows:
            out[key] = rows[a][fa] / rows[b][fb]
    out["targets"] = {k: {"value": out[k], "bound": b, "met": out[k] <= b}
                      for k, b in TARGETS.items() if k in out}
    if engine:
        out.update(engine_rows(beta, schedule, repeats=repeats, chi=chi))
    return out


def engine_rows(beta, schedule, repeats=3, engine_steps=(10, 20), chi=None):
    """The keyed engine's staged timings (seconds, wall clock, one process).

    Every figure for one n comes from the same call, the fastest of ``repeats`` after one
    warm-up (:func:`trgad.timing.time_call` keeps that call's result), so the per-step
    figures add up to less than its total.

    * ``engine_staged_<n>``: staged value-and-gradient on the keyed engine (structural
      keys), for n in ``engine_steps`` (the first n entries of ``schedule``, or a schedule
      of n steps at the same chi), and
      ``engine_staged_ratio`` = time at the last n over the first;
    * ``engine_transform_<n>`` / ``engine_key_visits_<n>`` and their ratios (the transform
      alone); ``engine_full_size_steps_<n>`` (steps whose input has the schedule's largest
      bond dimension; the earlier ones are tiny), ``engine_linear_ratio`` (their ratio: what
      a cost linear in the steps predicts for ``engine_staged_ratio``),
      ``engine_step_cost_<n>`` (mean forward + transform + run time of a full-size step) and
      ``engine_step_cost_ratio`` (about 1 when the cost is linear); ``engine_staged_steps``.
    """
    beta, ks = check_beta(beta), staged._schedule(schedule)
    repeats = check_repeats(repeats)
    out = {}
    chi = chi or max(ks)
    for n in engine_steps:
        sched = ks[:n] if n <= len(ks) else trg.truncation_schedule(chi, n, beta)
        t = time_call(lambda: staged.value_and_grad_engine(beta, sched), warmup=1, repeats=repeats)
        seconds, res = t.min, t.fastest
        out[f"engine_staged_{n}"] = seconds
        out[f"engine_transform_{n}"] = res["transform_seconds"]
        out[f"engine_key_visits_{n}"] = res["key_visits"]
        full = staged.full_size_steps(sched)
        rows = {r["stage"]: r for r in res["per_step"]}
        costs = [sum(rows[f"step {i}"][x] for x in ("forward_seconds", "transform_seconds", "run_seconds"))
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


def growth(steps_list, chi=16, beta=0.3, repeats=1, cap_seconds=None, names=METHODS):
    """How each method's cost grows with the number of steps.

    For each method in ``names`` (from :data:`METHODS`) and each n in ``steps_list``, the
    row of :func:`methods` plus ``steps``; a method's sweep stops after the first n whose
    first call took more than ``cap_seconds`` (default: no cap), as
    :func:`trgad.timing.capped_sweep` does.  Returns a dict method -> {"rows": [...],
    "stopped_at": n or None}.  Raises InputError for bad input.
    """
    import jax

    steps_list = [check_steps(n) for n in steps_list]
    chi, beta, repeats = check_chi(chi), check_beta(beta), check_repeats(repeats)
    cap = check_positive("cap_seconds", cap_seconds) if cap_seconds is not None else float("inf")
    names = _check_names(names)
    schedules = {n: tuple(trg.truncation_schedule(chi, n, beta)) for n in steps_list}

    def measure(name, n):
        ks = schedules[n]
        if name == "staged":
            staged.clear_cache()
            t0 = time.perf_counter()
            staged.value_and_grad_jax(beta, ks)
            first = time.perf_counter() - t0
            steady = time_call(lambda: staged.value_and_grad_jax(beta, ks), warmup=0, repeats=repeats).min
            total, largest, _ = staged_memory()
            row = _row(first, steady, total, peak_temp_bytes=largest)
        else:
            f = whole.lnz_fn(ks)
            fn = {"forward_only": f, "whole": jax.value_and_grad(f),
                  "checkpoint": jax.value_and_grad(lambda b: modes.lnz_checkpointed(b, ks)),
                  "forward_mode": lambda b: jax.jvp(f, (b,), (1.0,))}[name]
            row = _one_program(fn, beta, repeats)
        return dict(row, steps=n, seconds=row["first_seconds"])

    out = {}
    for name in names:
        sweep = capped_sweep(lambda n: measure(name, n), steps_list, cap) if cap != float("inf") \
            else Sweep([measure(name, n) for n in steps_list])
        out[name] = {"rows": sweep.rows, "stopped_at": sweep.stopped_at}
    return out


def second_order_costs(beta, schedule, names=modes.METHODS, repeats=2):
    """Cost of c by each method of :mod:`trgad.modes` (order 2, exact) at one point.

    Returns a dict method -> {"first_seconds", "steady_seconds", "c"}: the first call from
    empty caches (methods one after another), then the steady state by taking turns
    (:func:`_round_robin`, ``repeats`` rounds).  What :mod:`trgad.transition` chose its
    default from.  Raises InputError for a bad beta, schedule, method or repeats.
    """
    repeats = check_repeats(repeats)
    for name in names:
        modes.check_method(name)
    out = {}
    kept, kept_staged = {}, None
    for name in names:
        modes.clear_caches()
        r = modes.value_and_derivatives(beta, schedule, name, order=2)
        out[name] = {"first_seconds": r["seconds"], "c": r["c"]}
        # keep what this method compiled: clear_caches above empties the caches for the
        # next method's first call, and compiling every program twice doubled the cost
        kept.update(modes._EXECUTABLES)
        kept_staged = staged._PROGRAMS if name == "staged" else kept_staged
    modes._EXECUTABLES.update(kept)
    if kept_staged is not None:
        staged._PROGRAMS = kept_staged
    calls = {name: (lambda name=name: modes.value_and_derivatives(beta, schedule, name, order=2))
             for name in names}
    for name, t in _round_robin(calls, repeats).items():
        out[name]["steady_seconds"] = t
    return out


def summary(out, targets=True):
    """Human-readable lines for :func:`run`'s result; ``targets=False`` leaves out the
    project's targets (README's benchmark section shows them; the book does not)."""
    lines = [f"chi={out['chi']} steps={out['steps']} beta={out['beta']} (min of {out['repeats']} after a warm-up)",
             f"{'method':14s} {'first call':>11s} {'steady':>9s} {'XLA temp':>10s}"]
    for name, row in out["methods"].items():
        lines.append(f"{name:14s} {row['first_seconds']:9.2f} s {row['steady_seconds']:7.3f} s "
                     f"{row['temp_bytes'] / 2**20:6.1f} MiB")
    for key in ("whole_over_forward", "staged_over_whole", "staged_first_over_whole_first",
                "engine_staged_ratio", "engine_linear_ratio", "engine_step_cost_ratio"):
        if key in out:
            lines.append(f"{key.replace('_', ' '):40s} {out[key]:.2f}")
    for key, t in (out.get("targets", {}) if targets else {}).items():
        lines.append(f"{key.replace('_', ' '):40s} {t['value']:.2f} (target <= {t['bound']:g}: "
                     f"{'met' if t['met'] else 'not met'})")
    return "\n".join(lines)


#: The staged chapter prints ``bench.format(result)``.
format = summary    # noqa: A001 (the chapter's name for it)
