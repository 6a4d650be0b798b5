"""The probe's sweep: one measurement per depth under a time budget, then the verdict.

Kept apart from :mod:`trgad.growth.probe` (which measures a step on the keyed engine or with
JAX) so that the budget rule, the prediction of the next depth's time, reads on its own."""
from __future__ import annotations

import time

from .verdict import Growth, classify


def _predict(depths, walls, costs, d):
    """Predicted wall time at depth ``d``: the last wall time grown by the last observed
    growth of the cost, extrapolated exponentially in d (an overestimate for polynomials)."""
    if len(depths) < 2:
        return 0.0
    c1, c2 = costs[-2], costs[-1]
    growth = c2 / c1 if c1 and c2 and c2 > c1 else 1.0
    return walls[-1] * growth ** ((d - depths[-1]) / (depths[-1] - depths[-2]))


def budgeted_sweep(measure_at, depths, engine, keys, budget):
    """``measure_at(d)`` (a row: ``transform_seconds``, ``run_seconds``, ``free_seconds``,
    ``key_visits``, ``derivative_ops``, ``grad``) at each depth in ``depths`` while the time
    ``budget`` (seconds) lasts: the sweep stops before a depth whose predicted time would
    overrun it, and after any depth that used it up.  Returns the rows as a
    :class:`trgad.growth.verdict.Growth`, classified (:func:`trgad.growth.verdict.classify`).
    The arguments are trusted (:func:`trgad.growth.probe.growth` checked them)."""
    res = Growth(engine=engine, keys=keys if engine == "keyed" else None, depths=[],
                 transform_seconds=[], run_seconds=[], free_seconds=[], key_visits=[],
                 derivative_ops=[], grads=[],
                 measure="key_visits" if engine == "keyed" else "transform_cpu_seconds",
                 budget_seconds=budget)
    t_start = time.perf_counter()
    walls = []
    for i, d in enumerate(depths):
        elapsed = time.perf_counter() - t_start
        predicted = _predict(res.depths, walls, res.costs(), d)
        if i and elapsed + predicted > budget:
            res.stopped_early = True
            res.stop_reason = (f"budget: depth {d} predicted to take {predicted:.3g} s, "
                               f"{budget - elapsed:.3g} s of {budget:g} s left")
            break
        t0 = time.perf_counter()
        row = measure_at(d)
        walls.append(time.perf_counter() - t0)
        res.depths.append(d)
        for name in ("transform_seconds", "run_seconds", "free_seconds", "key_visits", "derivative_ops"):
            getattr(res, name).append(row[name])
        res.grads.append(row["grad"])
        if time.perf_counter() - t_start > budget and i < len(depths) - 1:
            res.stopped_early = True
            res.stop_reason = f"budget: {budget:g} s used up after depth {d}"
            break
    res.elapsed_seconds = time.perf_counter() - t_start
    c = classify(res.depths, res.costs())
    res.ratios, res.base, res.verdict, res.rule, res.doubling = c.ratios, c.base, c.verdict, c.rule, c.doubling
    res.detection_limit = c.detection_limit
    return res
