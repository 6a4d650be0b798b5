"""Growth probe: does the reverse-mode transform of an iterative graph grow exponentially?

The source document's advice ("怎么确认没中招", how to check you are not hit): time the
transform after each added step; a ratio that stays above about 2 is exponential growth;
if execution takes milliseconds while the transform takes seconds, this is the trap; every
graph that loops on its previous result needs staging, not only TRG.  This module turns that
advice into a function.

* :func:`growth` unrolls a user's step function (plain Python using ``+ - * /`` on its
  argument and on constants) to increasing depths, transforms it at each depth (the keyed
  engine's ``vjp``, or ``jax.make_jaxpr(jax.grad(.))``), runs the derivative program and
  frees it, and returns a :class:`Growth` with per-depth figures, per-layer ratios, an
  estimated base and a verdict.
* :func:`trg_growth` does the same for the whole-graph TRG by number of steps.
* :func:`split_costs` separates transform, execution and freeing at one depth and names the
  signature of the trap ("milliseconds to run, seconds to transform").
* :func:`run_builtin` runs the probe on built-in iterative graphs for the command line.

The verdict
-----------
Let m(d) be the transform cost at depth d (exact key visits for the keyed engine, wall-clock
seconds for JAX) and r = (m(d2)/m(d1))**(1/(d2 - d1)) the per-layer ratio between two
probed depths.  Exponential growth b**d gives r = b at every depth.  A cost that is a
polynomial of degree at most p in d (with non-negative coefficients) gives
r <= (d2/d1)**(p/(d2 - d1)), a bound that falls towards 1 as the depth grows.  The verdict is
"exponential" when each of the last ``window`` ratios exceeds both the threshold and that
polynomial bound for p = :data:`POLY_DEGREE`, and "polynomial" otherwise.

Why the default threshold is 1.5 and not the source document's 2: a value used k times per
layer gives a base of exactly k, so "stably above 2" catches every k >= 2, but it sits right
on the fan-out-2 case (a noisy timing can fall to 1.97) and misses bases between 1 and 2,
which occur when two state variables feed each other unevenly (x' = x + y, y' = x gives the
golden ratio 1.618).  1.5 lies between such bases and what a linear or quadratic transform
can show at the depths probed (at d = 8 -> 10 a quadratic cost has r <= 1.25, a linear one
r <= 1.12), and the polynomial bound above guards the shallow depths where even a linear
cost doubles from one step to two.
"""
from __future__ import annotations

import dataclasses
import gc
import math
import time
from typing import Callable, Sequence

from .keys import STRATEGIES
from .validate import InputError, check_choice, check_finite, check_int, check_positive

ENGINES = ("keyed", "jax")
#: Default per-layer ratio above which growth counts as exponential (see the module docstring).
THRESHOLD = 1.5
#: Degree of the largest polynomial growth the verdict tolerates.
POLY_DEGREE = 2
#: Default depths for :func:`growth` on the keyed engine (exact key visits; the time budget
#: stops an exponential sweep early).
DEPTHS = tuple(range(2, 41, 2))
#: Default depths with JAX: doubling, so that timing noise is spread over many layers
#: (a 2x spike between depths 16 and 32 is a per-layer ratio of only 1.04).
DEPTHS_JAX = (4, 8, 16, 32, 64, 128)
#: Default time budget, seconds.
BUDGET = 10.0
#: Transform-to-execution ratio above which :func:`split_costs` names the trap ...
TRAP_RATIO = 10.0
#: ... provided the transform also takes at least this long (seconds).
TRAP_MIN_SECONDS = 0.05


@dataclasses.dataclass
class Growth:
    """Result of :func:`growth` / :func:`trg_growth`.

    Per-depth lists (same length as ``depths``): ``transform_seconds``, ``run_seconds``
    (executing the derivative program; JAX: a compiled ``jit(grad)`` call),
    ``free_seconds`` (keyed engine: dropping the program; JAX: None), ``key_visits``
    (keyed engine; JAX: None), ``derivative_ops`` (instructions / jaxpr equations),
    ``grads``.  ``measure`` names the cost the ratios use ("key_visits" or
    "transform_seconds"); ``ratios`` are per-layer ratios between consecutive depths
    (len(depths) - 1 of them); ``base`` the geometric mean of the last ``window`` ratios;
    ``verdict`` "exponential", "polynomial" or "undetermined" (fewer than two depths
    measured); ``stopped_early`` / ``stop_reason`` say whether and why the sweep ended
    before the last requested depth.
    """

    engine: str
    keys: str | None
    depths: list
    transform_seconds: list
    run_seconds: list
    free_seconds: list
    key_visits: list
    derivative_ops: list
    grads: list
    measure: str
    threshold: float
    window: int
    budget_seconds: float
    elapsed_seconds: float = 0.0
    stopped_early: bool = False
    stop_reason: str = ""
    ratios: list = dataclasses.field(default_factory=list)
    poly_bounds: list = dataclasses.field(default_factory=list)
    base: float = math.nan
    verdict: str = "undetermined"

    def costs(self):
        """The per-depth cost the verdict uses."""
        return self.key_visits if self.measure == "key_visits" else self.transform_seconds

    def as_dict(self):
        """JSON-ready dict (non-finite floats become None)."""
        def clean(x):
            if isinstance(x, float) and not math.isfinite(x):
                return None
            if isinstance(x, list):
                return [clean(v) for v in x]
            return x
        return {f.name: clean(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def rows(self):
        """One dict per depth (for a table)."""
        out = []
        for i, d in enumerate(self.depths):
            out.append({"depth": d, "transform_seconds": self.transform_seconds[i],
                        "run_seconds": self.run_seconds[i], "free_seconds": self.free_seconds[i],
                        "key_visits": self.key_visits[i], "derivative_ops": self.derivative_ops[i],
                        "ratio": self.ratios[i - 1] if i else None})
        return out


def _per_layer(c1, c2, d1, d2):
    if c1 <= 0 or c2 <= 0:
        return math.nan
    return (c2 / c1) ** (1.0 / (d2 - d1))


def classify(depths, costs, threshold=THRESHOLD, window=2, degree=POLY_DEGREE):
    """(ratios, poly_bounds, base, verdict) for costs measured at increasing depths.

    ``ratios[j]`` is the per-layer ratio between depths[j] and depths[j+1];
    ``poly_bounds[j]`` = (depths[j+1]/depths[j])**(degree/(depths[j+1]-depths[j])), the largest
    ratio a polynomial cost of that degree can show there.  Exponential when each of the last
    ``window`` ratios (fewer if fewer were measured) exceeds max(threshold, bound).
    """
    ratios, bounds = [], []
    for j in range(len(depths) - 1):
        d1, d2 = depths[j], depths[j + 1]
        ratios.append(_per_layer(costs[j], costs[j + 1], d1, d2))
        bounds.append((d2 / d1) ** (degree / (d2 - d1)))
    if not ratios:
        return ratios, bounds, math.nan, "undetermined"
    last = ratios[-window:]
    last_bounds = bounds[-window:]
    finite = [r for r in last if math.isfinite(r) and r > 0]
    base = math.exp(sum(math.log(r) for r in finite) / len(finite)) if finite else math.nan
    exponential = all(math.isfinite(r) and r > max(threshold, b) for r, b in zip(last, last_bounds))
    return ratios, bounds, base, "exponential" if exponential else "polynomial"


def _check_common(engine, keys, budget, threshold, window):
    engine = check_choice("engine", engine, ENGINES)
    keys = check_choice("keys", keys, STRATEGIES)
    budget = check_positive("budget", budget)
    threshold = check_positive("threshold", threshold)
    if threshold <= 1:
        raise InputError(f"threshold={threshold!r} is out of range: threshold must be > 1")
    window = check_int("window", window, 1)
    return engine, keys, budget, threshold, window


def _check_depths(depths, name="depths"):
    try:
        ds = [check_int(name, d, 1) for d in depths]
    except TypeError:
        raise InputError(f"{name}={depths!r} is not a sequence of integers") from None
    if not ds or any(b <= a for a, b in zip(ds, ds[1:])):
        raise InputError(f"{name}={list(depths)!r} is out of range: give increasing integers >= 1")
    return ds


def _as_state(x0):
    """x0 as a tuple of floats (a scalar state is a 1-tuple)."""
    items = x0 if isinstance(x0, (tuple, list)) else (x0,)
    if not items:
        raise InputError("x0=() is out of range: give a number or a tuple of numbers")
    out = []
    for v in items:
        out.append(check_finite("x0", v))
    return tuple(out), isinstance(x0, (tuple, list))


def _unroll(step, state, depth, is_tuple):
    """Apply ``step`` ``depth`` times; return the first component of the final state."""
    x = state if is_tuple else state[0]
    for _ in range(depth):
        x = step(x)
        if is_tuple and (not isinstance(x, (tuple, list)) or len(x) != len(state)):
            raise InputError(f"step must return a tuple of {len(state)} values for a tuple x0")
    return x[0] if is_tuple else x


def _measure_keyed(step, state, is_tuple, depth, keys):
    from . import engine as keyed

    leaves = [keyed.leaf(v, keys) for v in state]
    start = tuple(leaves) if is_tuple else (leaves[0],)
    y = _unroll(step, start, depth, is_tuple)
    if not isinstance(y, keyed.Value):
        raise InputError("step must compute with its argument (the result does not depend on it)")
    return _engine_row(keyed.grad(y, leaves[0]))


def _engine_row(d):
    """Run and free an engine Derivative; its transform, run and free costs as one row."""
    g = float(d.run())
    ops = d.derivative_ops
    d.free()
    return {"transform_seconds": d.transform_seconds, "run_seconds": d.run_seconds,
            "free_seconds": d.free_seconds, "key_visits": d.key_visits,
            "derivative_ops": ops, "grad": g}


def _measure_jax(step, state, is_tuple, depth, repeats=3):
    import jax

    rest = state[1:]

    def f(x):
        start = (x, *rest) if is_tuple else (x,)
        return _unroll(step, start, depth, is_tuple)

    x0 = float(state[0])
    best, jaxpr = math.inf, None
    for _ in range(repeats):       # tracing + transform; min of repeats against noise
        gc.collect()
        t0 = time.perf_counter()
        jaxpr = jax.make_jaxpr(jax.grad(f))(x0)
        best = min(best, time.perf_counter() - t0)
    g = jax.jit(jax.grad(f))
    jax.block_until_ready(g(x0))   # compile
    t0 = time.perf_counter()
    val = float(jax.block_until_ready(g(x0)))
    run = time.perf_counter() - t0
    return {"transform_seconds": best, "run_seconds": run, "free_seconds": None,
            "key_visits": None, "derivative_ops": len(jaxpr.jaxpr.eqns), "grad": val}


def _sweep(measure_at, depths, engine, keys, budget, threshold, window):
    """Shared sweep loop with the time budget; returns a :class:`Growth`."""
    res = Growth(engine=engine, keys=keys if engine == "keyed" else None, depths=[],
                 transform_seconds=[], run_seconds=[], free_seconds=[], key_visits=[],
                 derivative_ops=[], grads=[],
                 measure="key_visits" if engine == "keyed" else "transform_seconds",
                 threshold=threshold, window=window, budget_seconds=budget)
    t_start = time.perf_counter()
    last_cost_seconds, ratio = 0.0, 1.0
    for i, d in enumerate(depths):
        elapsed = time.perf_counter() - t_start
        if i:
            # predicted wall time of the next measurement from the growth seen so far
            predicted = last_cost_seconds * max(1.0, ratio) ** (d - depths[i - 1])
            if elapsed + predicted > budget:
                res.stopped_early = True
                res.stop_reason = (f"budget: depth {d} predicted to take {predicted:.3g} s, "
                                   f"{budget - elapsed:.3g} s of {budget:g} s left")
                break
        t0 = time.perf_counter()
        row = measure_at(d)
        last_cost_seconds = time.perf_counter() - t0
        res.depths.append(d)
        for name in ("transform_seconds", "run_seconds", "free_seconds", "key_visits", "derivative_ops"):
            getattr(res, name).append(row[name])
        res.grads.append(row["grad"])
        costs = res.costs()
        if len(costs) >= 2:
            r = _per_layer(costs[-2], costs[-1], res.depths[-2], d)
            # wall-time ratio drives the prediction (key visits and time grow alike)
            rt = _per_layer(res.transform_seconds[-2] + 1e-4, res.transform_seconds[-1] + 1e-4,
                            res.depths[-2], d)
            # the exact count when there is one (key visits track time, without the noise)
            pick = r if res.measure == "key_visits" else rt
            ratio = pick if math.isfinite(pick) else 1.0
        if time.perf_counter() - t_start > budget and i < len(depths) - 1:
            res.stopped_early = True
            res.stop_reason = f"budget: {budget:g} s used up after depth {d}"
            break
    res.elapsed_seconds = time.perf_counter() - t_start
    res.ratios, res.poly_bounds, res.base, res.verdict = classify(
        res.depths, res.costs(), threshold, window)
    return res


def growth(step: Callable, x0, depths: Sequence[int] | None = None, engine: str = "keyed",
           keys: str = "structural", budget: float = BUDGET, threshold: float = THRESHOLD,
           window: int = 2) -> Growth:
    """Probe how the reverse-mode transform of ``step`` unrolled d times grows with d.

    Parameters
    ----------
    step : callable x -> x' (or (x1, ..., xm) -> (x1', ..., xm') for a tuple ``x0``), plain
        Python using ``+ - * /`` on its argument(s) and on constants, so that it works on the
        keyed engine's values and on JAX tracers alike.
    x0 : float or tuple of floats, the starting state; the derivative is taken of the first
        component of the final state with respect to the first component of ``x0``.
    depths : increasing ints >= 1 (default :data:`DEPTHS`, 2, 4, ..., 40, for the keyed
        engine and :data:`DEPTHS_JAX`, 4, 8, ..., 128, for JAX).
    engine : "keyed" (this project's engine; cost = exact key visits) or "jax"
        (cost = ``make_jaxpr(grad)`` wall time, min of 3).
    keys : "structural" (the failing design), "interned" or "memo" (keyed engine only).
    budget : seconds.  The sweep stops before a depth whose predicted time (last time times
        the observed per-layer ratio to the power of the depth step) would overrun it, and
        after any depth that used it up.  One measurement can overshoot by at most the
        growth of one depth step beyond the prediction.
    threshold : per-layer ratio above which growth counts as exponential (default 1.5; see
        the module docstring for why).
    window : how many of the last ratios must all pass (default 2).

    Returns
    -------
    :class:`Growth` (``verdict``, ``base``, ``ratios``, per-depth figures).

    Raises
    ------
    InputError for a bad engine, keys, budget, threshold, depths or x0, or a step that
    returns the wrong shape of state or ignores its argument.
    """
    engine, keys, budget, threshold, window = _check_common(engine, keys, budget, threshold, window)
    if depths is None:
        depths = DEPTHS if engine == "keyed" else DEPTHS_JAX
    depths = _check_depths(depths)
    if not callable(step):
        raise InputError(f"step={step!r} is not callable")
    state, is_tuple = _as_state(x0)

    def measure_at(d):
        if engine == "keyed":
            return _measure_keyed(step, state, is_tuple, d, keys)
        return _measure_jax(step, state, is_tuple, d)

    return _sweep(measure_at, depths, engine, keys, budget, threshold, window)


def trg_growth(steps: Sequence[int] = (1, 2, 3, 4, 5, 6), engine: str = "keyed",
               keys: str = "structural", chi: int = 16, beta: float = 0.3,
               budget: float = BUDGET, threshold: float = THRESHOLD, window: int = 2,
               execute: bool = True) -> Growth:
    """:func:`growth` for the whole-graph TRG, by number of steps.

    Each depth n differentiates lnZ/N of n TRG steps (chi, beta; schedule from
    :func:`trgad.trg.truncation_schedule`) with respect to beta as one graph: on the keyed
    engine (key visits, transform / run / free seconds) or with JAX
    (``make_jaxpr(grad)`` seconds, jaxpr equations; run = a compiled ``jit(grad)`` call).
    Same verdict rule and budget as :func:`growth`.  ``execute=False`` skips the JAX
    execution (its ``jit`` compilation costs seconds per step; run_seconds is then None).
    Raises InputError for bad arguments.
    """
    from . import trg
    from .validate import check_beta, check_chi

    engine, keys, budget, threshold, window = _check_common(engine, keys, budget, threshold, window)
    steps = _check_depths(steps, "steps")
    chi, beta = check_chi(chi), check_beta(beta)
    full = trg.truncation_schedule(chi, max(steps), beta)

    def measure_at(n):
        schedule = full[:n]
        if engine == "keyed":
            from . import engine as keyed
            from .whole import KeyedOps

            b = keyed.leaf(beta, keys)
            y = trg.lnz_per_site(b, schedule, ops=KeyedOps(keys))
            return _engine_row(keyed.grad(y, b))
        import jax

        from . import whole

        f = whole.lnz_fn(schedule)
        t = math.inf
        for _ in range(3):      # min of 3: the first trace also pays one-time set-up
            t0 = time.perf_counter()
            jaxpr = jax.make_jaxpr(jax.grad(f))(beta)
            t = min(t, time.perf_counter() - t0)
        run, val = None, None
        if execute:
            g = jax.jit(jax.grad(f))
            jax.block_until_ready(g(beta))
            t0 = time.perf_counter()
            val = float(jax.block_until_ready(g(beta)))
            run = time.perf_counter() - t0
        return {"transform_seconds": t, "run_seconds": run, "free_seconds": None,
                "key_visits": None, "derivative_ops": len(jaxpr.jaxpr.eqns), "grad": val}

    return _sweep(measure_at, steps, engine, keys, budget, threshold, window)


def split_costs(step: Callable, x0, depth: int, keys: str = "structural") -> dict:
    """Transform, execution and freeing of one derivative, separately (keyed engine).

    Builds ``step`` unrolled ``depth`` times, then times (1) the transform that builds the
    derivative program, (2) running that program, (3) dropping it.  Returns a dict with
    the three times in seconds, ``key_visits``, ``derivative_ops``, ``transform_over_run``
    and ``diagnosis``: "trap" when the transform takes more than :data:`TRAP_RATIO` times
    the execution and at least :data:`TRAP_MIN_SECONDS` (the source document's "milliseconds to run, seconds
    to transform"), "ok" otherwise.  Raises InputError for bad input.
    """
    depth = check_int("depth", depth, 1)
    keys = check_choice("keys", keys, STRATEGIES)
    state, is_tuple = _as_state(x0)
    row = _measure_keyed(step, state, is_tuple, depth, keys)
    ratio = row["transform_seconds"] / max(row["run_seconds"], 1e-9)
    trap = ratio > TRAP_RATIO and row["transform_seconds"] > TRAP_MIN_SECONDS
    row.update(depth=depth, keys=keys, transform_over_run=ratio, diagnosis="trap" if trap else "ok")
    return row


# --------------------------------------------------------------------------------------
# Built-in iterative graphs
# --------------------------------------------------------------------------------------

def chain_step(y):
    """The source document's mul chain: y <- (y * y) / 2 (each value used twice)."""
    return (y * y) / 2.0


def power_step(state):
    """One power-iteration step for A = [[2, 1], [1, 3]]: v <- A v / (sum of A v).

    The 1-norm of a positive vector needs no abs or sqrt; the first component converges to
    the dominant eigenvector's first entry.  Each old component feeds both a2 and b2, and
    each of those is used twice (numerator and norm), so every old component reaches every
    new one along 3 paths: the path-count matrix per step is [[3, 3], [3, 3]] (largest
    eigenvalue 6, the asymptotic base of a structural key walk).
    """
    a, b = state
    a2 = 2.0 * a + b
    b2 = a + 3.0 * b
    n = a2 + b2
    return a2 / n, b2 / n


def newton_step(x):
    """Newton's method for sqrt(2): x <- (x + 2/x) / 2 (x used twice per step)."""
    return (x + 2.0 / x) / 2.0


def evolve_step(state, dt=0.1):
    """Symplectic Euler for a harmonic oscillator: p <- p - dt q; q <- q + dt p.

    A linear time-evolution loop: every operation is linear, yet q and p feed each other.
    Paths per step: p2 <- (q: 1, p: 1), q2 <- (q: 2, p: 1), a path-count matrix
    [[2, 1], [1, 1]] whose largest eigenvalue is (3 + sqrt 5)/2 = 2.618 (the golden ratio
    squared), so a structural key of q after n steps holds about 2.618**n paths.
    """
    q, p = state
    p2 = p - dt * q
    q2 = q + dt * p2
    return q2, p2


#: Built-in graphs: name -> (step, x0, description).  "trg" is handled by :func:`trg_growth`.
BUILTINS = {
    "chain": (chain_step, 1.1, "mul chain y <- (y*y)/2"),
    "power": (power_step, (1.0, 0.5), "power iteration v <- A v / |A v|_1, A = [[2, 1], [1, 3]]"),
    "newton": (newton_step, 1.5, "Newton iteration x <- (x + 2/x)/2 for sqrt(2)"),
    "evolve": (evolve_step, (1.0, 0.0), "harmonic oscillator, symplectic Euler, dt = 0.1"),
}
GRAPHS = ("chain", "trg", "power", "newton", "evolve")


def run_builtin(graph: str, engine: str = "keyed", keys: str = "structural",
                budget: float = 20.0) -> dict:
    """The probe on a built-in iterative graph, as a JSON-ready dict (``python -m trgad probe``).

    ``graph`` is one of :data:`GRAPHS`: "chain", "trg" (by TRG steps, chi = 16, beta = 0.3),
    "power", "newton", "evolve" (see :data:`BUILTINS`).  The dict holds ``graph``,
    ``description`` and everything in :meth:`Growth.as_dict`.  Raises InputError for a bad
    graph, engine, keys or budget.
    """
    graph = check_choice("graph", graph, GRAPHS)
    engine, keys, budget, _, _ = _check_common(engine, keys, budget, THRESHOLD, 2)
    if graph == "trg":
        res = trg_growth(engine=engine, keys=keys, budget=budget,
                         steps=(1, 2, 4, 8) if engine == "jax" else (1, 2, 3, 4, 5, 6))
        desc = "whole-graph Levin-Nave TRG, chi = 16, beta = 0.3, by steps"
    else:
        step, x0, desc = BUILTINS[graph]
        res = growth(step, x0, engine=engine, keys=keys, budget=budget)
    out = {"graph": graph, "description": desc}
    out.update(res.as_dict())
    return out
