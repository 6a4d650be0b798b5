"""The benchmark: every mode of differentiation of the TRG, one process, one run.

All figures come from one process, so their ratios are meaningful even on a noisy, shared
machine; absolute times are not.  ``python -m trgad bench`` prints them.  The rows
(:data:`trgad.benchrows.ROWS`, :func:`trgad.benchrows.methods`) are two yardsticks, the
**scanned primal** (lnZ/N alone through the same ``lax.scan`` body the derivative modes
use) and the **unrolled primal**, and the four modes of :mod:`trgad.physics.modes` at
first order.  Every ratio names its yardstick: ``<row>_over_scanned_primal``,
``<row>_over_unrolled_primal``, ``<row>_over_<floor>``.

The floors.  One full-size step is timed in its parts, each its own compiled program
(:mod:`trgad.physics.stepcost`): the forward alone, the forward that saves residuals, the
pullback from residuals, the step with one tangent.  They are timed in the same rounds as
the rows (:func:`trgad.benchrows.round_robin`), so a change of load hits both alike.  With
n the steps of the measured shape (:func:`trgad.physics.stepcost.steps_of_measured_shape`)
and the scan's **bookkeeping** = scanned primal - n x forward (the first, smaller steps,
the two ends, the loop; measured, not assumed):

* ``reverse_floor`` = n x (forward with residuals + pullback) + bookkeeping: what a reverse
  pass of this graph runs, the whole graph's floor;
* ``staged_floor`` = reverse_floor + the staged pass's dispatch, measured as the same pass
  over as many steps at bond dimension 2 (``staged_dispatch``: its programs' calls and its
  Python, almost no arithmetic);
* ``forward_floor`` = n x (the step's jvp) + bookkeeping: forward mode's in one parameter.

:data:`TARGETS` sets its bounds against these; :data:`TARGET_REASONS` gives each one's
reason, :data:`NOT_KEPT` why the whole graph's and the staged pass's 1.1x were not kept.
Beside JAX's rows, :func:`run` measures tenferro-rs itself (:data:`TENFERRO_ROWS`, the
book's Rust harness as a child process, :func:`trgad.harness.rows.tenferro_rows`), the
keyed engine's staged rows (:func:`trgad.benchrows.engine_rows`), c by each method
(:func:`trgad.benchrows.second_order_costs`) and a gradient in 16 parameters by reverse
mode, 16 ``jax.jvp`` and one ``jax.jacfwd`` (:func:`trgad.topics.params.compare`).

The project's targets (``python -m trgad bench`` says of each whether it was met):

==================================================  =========================================
``forward_mode_over_forward_floor``                 <= 1.1x
``checkpoint_temp_over_whole_temp`` (XLA temps)     <= 1/4
``whole_over_reverse_floor``,                       shown, not kept (:data:`NOT_KEPT`)
``staged_over_staged_floor``
``tenferro_staged`` (20 steps, first and steady)    shown beside JAX's staged and whole
``tenferro_whole`` (most steps within its cap)      shown beside JAX's whole graph
==================================================  =========================================

Recorded (three runs alone on a 2-core machine, 2026-12-06; only ratios of one run mean
anything on a shared machine): every target met in all three; forward mode at 0.90-1.08x
its floor; per full-size step, saving residuals added 28-35 % to the forward and the
pullback from residuals cost 14-19 % of it; the whole graph at 1.07-1.20x its floor
(1.59-1.71x the scanned primal), staged at 1.03-1.31x; for 16 parameters 16 jvps took
16.6-17.1x reverse mode, one ``jacfwd`` 3.1-3.9x.  trgad compiles with LLVM unoptimised
(``xla_backend_optimization_level`` 0) because first calls are what a chapter's reader
waits for; the appendix *Reproducibility* measures both settings at every build.
"""
from __future__ import annotations

from .benchrows import (PRIMALS, ROWS, check_names, engine_rows, measure, methods, second_order_costs,
                        staged_memory, staged_residual_bytes)
from .physics import staged, stepcost, trg
from .topics import params
from .harness.rows import TENFERRO_ROWS, tenferro_rows
from .runtime.validate import check_beta, check_chi, check_repeats, check_steps

#: The benchmark's targets, ``ratio name: upper bound``; each ratio is a quotient of two
#: figures of one run (:func:`run` defines them; the module's docstring lists them).
TARGETS = {
    "forward_mode_over_forward_floor": 1.1,
    "checkpoint_temp_over_whole_temp": 0.25,
}
#: Why each target is set where it is (one line each).
TARGET_REASONS = {
    "forward_mode_over_forward_floor": "forward mode runs each step's jvp once, inside the same scan "
                                       "as the primal: nothing but the floor's parts",
    "checkpoint_temp_over_whole_temp": "the checkpointed scan keeps one tensor per step where the "
                                       "whole graph keeps every residual (exact bytes, no noise)",
}
#: Targets the issue asked for (<= 1.1x the floor) that this machine's runs showed out of
#: reach, with the measured part that says why; ``run`` reports their values, unjudged.
NOT_KEPT = {
    "whole_over_reverse_floor": "1.07-1.20 in three runs alone here, so 1.1 is not met reliably: the "
                                "scan also stacks each step's residuals (3.6 MiB a step at chi 16) "
                                "and reads them back, a part no program of the floor contains",
    "staged_over_staged_floor": "1.03-1.31 in the same runs: its pullbacks read residuals made long "
                                "before, out of cache, where the floor's pullback runs on hot data",
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
#: Which floor each row is set against.
FLOOR_OF = {"whole": "reverse_floor", "checkpoint": "reverse_floor", "staged": "staged_floor",
            "forward_mode": "forward_floor"}
#: Fastest of this many calls per round for the step's parts (milliseconds each), so that
#: they get as many samples as they need beside the rows.
PART_CALLS = 5


def floors(costs, scanned_primal_seconds, n_steps, dispatch_seconds):
    """The floors of the module docstring, in seconds, from one step's parts (``costs``,
    :func:`trgad.physics.stepcost.costs_of`), the scanned primal's steady seconds, the
    number of steps of the measured shape and the staged pass's dispatch: a dict with
    ``steps``, ``bookkeeping_seconds``, ``staged_dispatch_seconds`` and the three floors."""
    step = costs["step_seconds"]
    bookkeeping = scanned_primal_seconds - n_steps * step
    reverse = n_steps * (costs["residual_forward_seconds"] + costs["pullback_seconds"]) + bookkeeping
    return {"steps": n_steps, "bookkeeping_seconds": bookkeeping,
            "staged_dispatch_seconds": dispatch_seconds, "reverse_floor": reverse,
            "staged_floor": reverse + dispatch_seconds,
            "forward_floor": n_steps * costs["jvp_seconds"] + bookkeeping}


def _ratios(rows):
    """The ratios of one run's rows, each naming its yardstick."""
    out = {}
    for name, row in rows.items():
        for base in PRIMALS:
            if base in rows and name != base and name != "scanned_primal":
                out[f"{name}_over_{base}"] = row["steady_seconds"] / rows[base]["steady_seconds"]
                out[f"{name}_first_over_{base}_first"] = row["first_seconds"] / rows[base]["first_seconds"]
    if "staged" in rows and "whole" in rows:
        out["staged_over_whole"] = rows["staged"]["steady_seconds"] / rows["whole"]["steady_seconds"]
        out["staged_first_over_whole_first"] = rows["staged"]["first_seconds"] / rows["whole"]["first_seconds"]
    if "checkpoint" in rows and "whole" in rows:
        out["checkpoint_temp_over_whole_temp"] = rows["checkpoint"]["temp_bytes"] / rows["whole"]["temp_bytes"]
    return out


def run(chi=16, steps=20, beta=0.3, repeats=3, engine=True, names=ROWS, second_order=False,
        with_tenferro=True, many_parameters=False):
    """Measure every row (or those in ``names``) at one (chi, steps, beta), in one process.

    Returns a JSON-ready dict with ``chi``, ``steps``, ``beta``, ``repeats``, ``schedule``;
    ``methods`` (row name -> row, :func:`trgad.benchrows.methods`); the ratios of every row
    to each yardstick that ran (``<row>_over_scanned_primal``, ``<row>_first_over_
    unrolled_primal_first``, ...), ``staged_over_whole``, ``staged_first_over_whole_first``
    and ``checkpoint_temp_over_whole_temp``; with the scanned primal and a derivative row,
    ``step_costs`` (one full-size step in its parts, timed in the same rounds as the rows,
    :func:`trgad.physics.stepcost.costs_of`), ``floors`` (:func:`floors`) and
    ``<row>_over_<its floor>`` for each derivative row (:data:`FLOOR_OF`);
    with ``second_order``, ``second_order`` (:func:`trgad.benchrows.second_order_costs`) and
    ``second_order_fastest_first_over_<yardstick>_first`` (and ``slowest``);
    with ``many_parameters``, ``many_parameters`` (:func:`trgad.topics.params.compare` of the
    16 entries of T0 on the same schedule, reverse, 16 jvps and jacfwd, no finite
    differences); ``targets`` (ratio of :data:`TARGETS` -> {"value", "bound", "met",
    "reason"}), ``targets_not_kept`` (ratio of :data:`NOT_KEPT` -> {"value", "reason"}) and
    ``all_targets_met`` (True when every target present is met); with
    ``with_tenferro``, ``tenferro`` (:func:`trgad.harness.rows.tenferro_rows`, measured after
    JAX's rows) and the ratios of :data:`TENFERRO_RATIOS` whose rows ran and are available;
    and, with ``engine``, the keyed engine's staged figures (``engine_staged_<n>`` ...).
    With a subset ``names`` only the rows, ratios and targets whose rows ran are there.

    Raises InputError for chi, steps, beta or repeats out of range (:mod:`trgad.runtime.validate`)
    and for an unknown row name.
    """
    chi, steps, beta = check_chi(chi), check_steps(steps), check_beta(beta)
    repeats, names = check_repeats(repeats), check_names(names)
    ks = tuple(trg.truncation_schedule.trusted(chi, steps, beta))
    out = {"chi": chi, "steps": steps, "beta": beta, "repeats": repeats, "schedule": list(ks)}
    with_floor = "scanned_primal" in names and any(n in FLOOR_OF for n in names)
    held = {}

    def parts():
        held["info"], calls = stepcost.step_programs.trusted(beta, ks)
        tiny = tuple(trg.truncation_schedule.trusted(2, steps, beta))
        calls["staged_dispatch"] = lambda: staged.value_and_grad_jax.trusted(beta, tiny)
        return calls, {name: PART_CALLS for name in calls}

    rows, seconds = measure.trusted(beta, ks, repeats, names, parts if with_floor else None)
    out["methods"] = rows
    out.update(_ratios(rows))
    if with_floor:
        dispatch = seconds.pop("staged_dispatch")
        cost = out["step_costs"] = stepcost.costs_of(held["info"], seconds)
        floor = out["floors"] = floors(cost, rows["scanned_primal"]["steady_seconds"],
                                       stepcost.steps_of_measured_shape(ks), dispatch)
        for name, key in FLOOR_OF.items():
            if name in rows:
                out[f"{name}_over_{key}"] = rows[name]["steady_seconds"] / floor[key]
    if with_tenferro:
        rust = out["tenferro"] = tenferro_rows.trusted(beta, chi, steps, repeats=repeats)
        for key, (a, fa, b, fb) in TENFERRO_RATIOS.items():
            if rust[a]["available"] and rust[a][fa] is not None and b in rows:
                out[key] = rust[a][fa] / rows[b][fb]
    if second_order:
        out["second_order"] = second_order_costs.trusted(beta, ks, repeats=repeats)
        firsts = [r["first_seconds"] for r in out["second_order"].values()]
        for base in PRIMALS:
            if base in rows:
                out[f"second_order_fastest_first_over_{base}_first"] = min(firsts) / rows[base]["first_seconds"]
                out[f"second_order_slowest_first_over_{base}_first"] = max(firsts) / rows[base]["first_seconds"]
    if many_parameters:
        out["many_parameters"] = params.compare(beta, ks, "tensor", repeats=repeats, with_fd=False)
    out["targets"] = {k: {"value": out[k], "bound": b, "met": out[k] <= b, "reason": TARGET_REASONS[k]}
                      for k, b in TARGETS.items() if k in out}
    out["targets_not_kept"] = {k: {"value": out[k], "reason": r} for k, r in NOT_KEPT.items() if k in out}
    out["all_targets_met"] = all(t["met"] for t in out["targets"].values())
    if engine:
        out.update(engine_rows.trusted(beta, ks, repeats=repeats, chi=chi))
    return out


def summary(out, targets=True):
    """Human-readable lines for :func:`run`'s result; ``targets=False`` leaves out the
    project's targets (the module's docstring lists them; the book does not)."""
    lines = [f"chi={out['chi']} steps={out['steps']} beta={out['beta']} (min of {out['repeats']} after a warm-up; "
             f"yardsticks: the scanned primal, the modes' own scan, and the unrolled primal)",
             f"{'row':16s} {'first call':>11s} {'steady':>9s} {'XLA temp':>10s}"]
    for name, row in out["methods"].items():
        lines.append(f"{name:16s} {row['first_seconds']:9.2f} s {row['steady_seconds']:7.3f} s "
                     f"{row['temp_bytes'] / 2**20:6.1f} MiB")
    lines += _tenferro_lines(out.get("tenferro", {}))
    for name, row in out.get("second_order", {}).items():
        lines.append(f"c by {name:11s} {row['first_seconds']:9.2f} s {row['steady_seconds']:7.3f} s")
    if "many_parameters" in out:
        p = out["many_parameters"]
        lines.append(f"{p['n_params']} parameters, steady: reverse {p['reverse']['steady_seconds']:.3f} s, "
                     f"{p['forward_mode']['passes']} jvps {p['forward_mode']['steady_seconds']:.3f} s, "
                     f"jacfwd {p['jacfwd']['steady_seconds']:.3f} s")
    if "step_costs" in out:
        f, fl = out["step_costs"], out["floors"]
        ms = {x: f[f"{x}_seconds"] * 1e3 for x in ("step", "residual_forward", "pullback", "jvp", "vjp")}
        lines.append(f"one full-size step: forward {ms['step']:.1f} ms, forward saving residuals "
                     f"{ms['residual_forward']:.1f} ms, pullback from residuals {ms['pullback']:.1f} ms "
                     f"(floor {f['floor']:.2f}x the forward), jvp {ms['jvp']:.1f} ms; forward and "
                     f"pullback in one program {ms['vjp']:.1f} ms")
        lines.append(f"floors over {fl['steps']} steps: reverse {fl['reverse_floor']:.3f} s, staged "
                     f"{fl['staged_floor']:.3f} s (dispatch {fl['staged_dispatch_seconds']:.3f} s), forward "
                     f"{fl['forward_floor']:.3f} s; scan bookkeeping {fl['bookkeeping_seconds']:.3f} s")
    shown = [k for k in out if isinstance(out[k], float) and "_over_" in k and k not in TARGETS
             and k not in NOT_KEPT]
    for key in shown + ["engine_staged_ratio", "engine_linear_ratio", "engine_step_cost_ratio"]:
        if key in out:
            lines.append(f"{key.replace('_', ' '):50s} {out[key]:.2f}")
    for key, t in (out.get("targets", {}) if targets else {}).items():
        lines.append(f"{key.replace('_', ' '):50s} {t['value']:.2f} (target <= {t['bound']:g}: "
                     f"{'met' if t['met'] else 'not met'})")
    for key, t in (out.get("targets_not_kept", {}) if targets else {}).items():
        lines.append(f"{key.replace('_', ' '):50s} {t['value']:.2f} (no target: {t['reason']})")
    if targets and out.get("targets"):
        lines.append(f"{'every target met':50s} {'yes' if out['all_targets_met'] else 'no'}")
    return "\n".join(lines)


def _tenferro_lines(rust):
    """One line per tenferro-rs row."""
    lines = []
    for name, r in rust.items():
        if not r["available"]:
            lines.append(f"{name:16s} not measured: {r['reason']}")
        elif name == "tenferro_staged":
            lines.append(f"{name:17s}{r['first_seconds']:9.2f} s {r['steady_seconds']:7.3f} s")
        else:
            stop = f", {r['stopped_at']} steps passed the {r['cap_seconds']:g} s cap" if r["stopped_at"] else ""
            took = f": {r['transform_seconds']:.2f} s" if r["steps"] else ""
            lines.append(f"{name:16s} ad.grad at {r['steps']} steps{took}{stop}")
    return lines


__all__ = ["ROWS", "PRIMALS", "TARGETS", "TARGET_REASONS", "NOT_KEPT", "TENFERRO_ROWS", "TENFERRO_RATIOS",
           "FLOOR_OF", "floors", "run", "summary", "methods", "staged_memory",
           "staged_residual_bytes", "engine_rows", "second_order_costs"]
