"""Growth probe: does the reverse-mode transform of an iterative graph grow exponentially?

The source document's advice ("怎么确认没中招", how to check you are not hit): time the
transform after each added step; growth that keeps multiplying is exponential; if execution
takes milliseconds while the transform takes seconds, this is the trap; every graph that
loops on its previous result needs staging, not only TRG.  This module turns that advice
into functions:

* :func:`growth` unrolls a step function (plain Python using ``+ - * /`` on its argument
  and on constants) to increasing depths, transforms it at each depth (the keyed engine's
  ``vjp``, or ``jax.make_jaxpr(jax.grad(.))``), runs the derivative program and frees it,
  and returns a :class:`Growth` with per-depth figures, the base per layer and a verdict.
* :func:`trg_growth` does the same for the whole-graph TRG by number of steps.
* :func:`classify` is the verdict rule alone, on any cost sequence.
* :func:`split_costs` separates transform, execution and freeing at one depth and names the
  signature of the trap ("milliseconds to run, seconds to transform").
* :func:`run` is the command line's probe: a built-in graph or a user's ``module:function``.

The cost m(d) is the exact number of key visits on the keyed engine, and the CPU time of
``make_jaxpr(grad)`` (minimum of 3) with JAX.  The verdict asks how m grows as the depth
*doubles*: for a polynomial of degree p, m(2d)/m(d) settles to 2**p; for an exponential b**d
it is b**d, so it keeps growing and any base b > 1 shows once the probe is deep enough.  The
rule (:func:`classify`) and its constants are explained in the book's chapter "How to detect
it" (book/detect.md).
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import math
import os
import time
from typing import Callable, Sequence

from .engine import STRATEGIES
from .validate import (BUDGET_MAX, InputError, check_choice, check_engine, check_finite,
                       check_int, check_positive)

#: Degree of the largest polynomial that can never be called exponential: a polynomial of
#: degree <= 3 with non-negative coefficients has m(2d)/m(d) <= 2**3 at every depth.
POLY_DEGREE = 3
#: Doubling the depth must multiply log-growth by more than this: log(m(D)/m(D/2)) >
#: ACCELERATION * log(m(D/2)/m(D/4)).  Exponential: 2; polynomial: tends to 1.
ACCELERATION = 1.5
#: Per-layer ratio above which growth counts as exponential when the depths probed do not
#: span two doublings (e.g. the TRG by 1, 2, 3 steps); with the polynomial bound as well.
THRESHOLD = 1.5
#: Fewest measured depths on which a verdict is given (two ratios, never one).
MIN_DEPTHS = 3
#: Default depths for :func:`growth` on the keyed engine (exact key visits; the time budget
#: stops an exponential sweep early).
DEPTHS = tuple(range(2, 41, 2))
#: Default depths with JAX: doubling, so that timing noise is spread over many layers.
DEPTHS_JAX = (4, 8, 16, 32, 64, 128)
#: Default TRG steps for :func:`trg_growth` with JAX (the first steps are small: D = 2, 4).
STEPS_JAX = (1, 2, 4, 8, 16)
#: Default TRG steps on the keyed engine (structural keys: the budget stops after 3 or 4).
STEPS_KEYED = (1, 2, 3, 4, 5, 6)
#: Default time budget, seconds.
BUDGET = 10.0
#: Most components of a user's state tuple (each is one leaf of the unrolled graph).
MAX_STATE = 100
#: Transform-to-execution ratio above which :func:`split_costs` names the trap ...
TRAP_RATIO = 10.0
#: ... provided the transform also takes at least this long (seconds).
TRAP_MIN_SECONDS = 0.05


@dataclasses.dataclass
class Classification:
    """Result of :func:`classify`.

    ``ratios``: per-layer ratios (m(d2)/m(d1))**(1/(d2-d1)) between consecutive depths;
    ``base``: per-layer growth from a least-squares fit of log m against d over the
    deepest half of the depths (d >= D/2); ``rule``: "doubling", "per-layer ratio" or why no
    verdict; ``doubling``: the depths (D/4, D/2, D) and the two growth factors
    m(D/2)/m(D/4) and m(D)/m(D/2) the doubling rule used (None otherwise); ``verdict``:
    "exponential", "polynomial" or "undetermined".
    """

    ratios: list
    base: float
    verdict: str
    rule: str
    doubling: dict | None = None


def _per_layer(c1, c2, d1, d2):
    if not (c1 > 0 and c2 > 0):
        return math.nan
    return (c2 / c1) ** (1.0 / (d2 - d1))


def _interp(x, xs, ys):
    """Piecewise-linear interpolation (xs increasing, xs[0] <= x <= xs[-1])."""
    for (x1, y1), (x2, y2) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if x1 <= x <= x2:
            return y1 + (y2 - y1) * (x - x1) / (x2 - x1)
    return ys[-1] if x >= xs[-1] else ys[0]


def _fit_slope(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx


def classify(depths, costs, degree=POLY_DEGREE, acceleration=ACCELERATION, threshold=THRESHOLD):
    """Verdict on costs ``costs`` measured at increasing ``depths`` (a :class:`Classification`).

    With D the deepest depth and at least :data:`MIN_DEPTHS` positive costs:

    * if D >= 4 * depths[0] (two doublings probed), "exponential" when
      g1 = ln(m(D)/m(D/2)) > degree * ln 2 and g1 > acceleration * ln(m(D/2)/m(D/4)), log m
      interpolated linearly in d between probed depths; "polynomial" otherwise;
    * else (too short a range to double twice) "exponential" when each of the last two
      per-layer ratios exceeds max(threshold, (d2/d1)**(degree/(d2-d1))), the largest ratio a
      polynomial of that degree can show there.

    Fewer than :data:`MIN_DEPTHS` depths, or a cost <= 0 or not finite: "undetermined".
    """
    ds, cs = [float(d) for d in depths], [float(c) for c in costs]
    ratios = [_per_layer(cs[j], cs[j + 1], ds[j], ds[j + 1]) for j in range(len(ds) - 1)]
    if len(ds) < MIN_DEPTHS:
        return Classification(ratios, math.nan, "undetermined", f"fewer than {MIN_DEPTHS} depths")
    if not all(math.isfinite(c) and c > 0 for c in cs):
        return Classification(ratios, math.nan, "undetermined", "a cost is zero or not finite")
    logs = [math.log(c) for c in cs]
    D = ds[-1]
    deep = [(d, L) for d, L in zip(ds, logs) if d >= D / 2]
    if len(deep) < 2:
        deep = list(zip(ds, logs))[-2:]
    base = math.exp(_fit_slope([d for d, _ in deep], [L for _, L in deep]))
    if D >= 4 * ds[0]:
        L = lambda x: _interp(x, ds, logs)  # noqa: E731
        g0, g1 = L(D / 2) - L(D / 4), L(D) - L(D / 2)
        exponential = g1 > degree * math.log(2) and g1 > acceleration * g0
        doubling = {"depths": [D / 4, D / 2, D], "growth": [math.exp(g0), math.exp(g1)]}
        return Classification(ratios, base, "exponential" if exponential else "polynomial",
                              "doubling", doubling)
    last = list(zip(ds, ds[1:], ratios))[-2:]
    exponential = all(r > max(threshold, (d2 / d1) ** (degree / (d2 - d1))) for d1, d2, r in last)
    return Classification(ratios, base, "exponential" if exponential else "polynomial", "per-layer ratio")


@dataclasses.dataclass
class Growth:
    """Result of :func:`growth` / :func:`trg_growth`.

    Per-depth lists (same length as ``depths``): ``transform_seconds`` (keyed engine: wall
    time of the transform; JAX: CPU time of ``make_jaxpr(grad)``, minimum of 3),
    ``run_seconds`` (executing the derivative program; JAX: a compiled ``jit(grad)`` call, or
    None when not executed), ``free_seconds`` (keyed engine: dropping the program; JAX:
    None), ``key_visits`` (keyed engine; JAX: None), ``derivative_ops`` (instructions /
    jaxpr equations, nested ones included), ``grads``.  ``measure`` names the cost the
    verdict uses ("key_visits" or "transform_cpu_seconds"); ``ratios``, ``base``, ``rule``,
    ``doubling`` and ``verdict`` are :func:`classify`'s; ``stopped_early`` / ``stop_reason``
    say whether and why the sweep ended before the last requested depth.
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
    budget_seconds: float
    elapsed_seconds: float = 0.0
    stopped_early: bool = False
    stop_reason: str = ""
    ratios: list = dataclasses.field(default_factory=list)
    base: float = math.nan
    rule: str = ""
    doubling: dict | None = None
    verdict: str = "undetermined"

    def costs(self):
        """The per-depth cost the verdict uses."""
        return self.key_visits if self.measure == "key_visits" else self.transform_seconds

    def as_dict(self):
        """JSON-ready dict (non-finite floats become None)."""
        def clean(x):
            if isinstance(x, float) and not math.isfinite(x):
                return None
            if isinstance(x, (list, tuple)):
                return [clean(v) for v in x]
            if isinstance(x, dict):
                return {k: clean(v) for k, v in x.items()}
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


def _check_common(engine, keys, budget):
    return (check_engine(engine), check_choice("keys", keys, STRATEGIES),
            check_positive("budget", budget, BUDGET_MAX))


def _check_depths(depths, name="depths"):
    try:
        ds = [check_int(name, d, 1, 100_000) for d in depths]
    except TypeError:
        raise InputError(f"{name}={depths!r} is not a sequence of integers") from None
    if not ds or any(b <= a for a, b in zip(ds, ds[1:])):
        raise InputError(f"{name}={list(depths)!r} is out of range: give increasing integers in [1, 100000]")
    return ds


def _as_state(x0):
    """x0 as a tuple of finite floats (a scalar state is a 1-tuple), and whether it was a tuple."""
    items = x0 if isinstance(x0, (tuple, list)) else (x0,)
    if not items or len(items) > MAX_STATE:
        raise InputError(f"x0={x0!r} is out of range: give a number or 1 to {MAX_STATE} numbers")
    return tuple(check_finite("x0", v) for v in items), isinstance(x0, (tuple, list))


def _one_line(e):
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


def _unroll(step, state, depth, is_tuple, where):
    """Apply ``step`` ``depth`` times; return the first component of the final state.

    Any exception the user's step raises becomes an InputError naming ``where``.
    """
    x = state if is_tuple else state[0]
    for _ in range(depth):
        try:
            x = step(x)
        except InputError:
            raise
        except Exception as e:  # the user's code failed on these values
            name = getattr(step, "__qualname__", "step")
            raise InputError(f"step function {name!r} failed {where} (the probe needs + - * / only): "
                             f"{_one_line(e)}") from None
        if is_tuple and (not isinstance(x, (tuple, list)) or len(x) != len(state)):
            raise InputError(f"step must return a tuple of {len(state)} values for a tuple x0")
    return x[0] if is_tuple else x


def _measure_keyed(step, state, is_tuple, depth, keys):
    from . import engine

    leaves = [engine.leaf(v, keys) for v in state]
    start = tuple(leaves) if is_tuple else (leaves[0],)
    y = _unroll(step, start, depth, is_tuple, "on the keyed engine's values")
    if not isinstance(y, engine.Value) or y.shape != ():
        raise InputError("step must compute a scalar from its argument with + - * / "
                         "(the result is not a scalar engine value that depends on it)")
    return _engine_row(engine.grad(y, leaves[0]))


def _engine_row(d):
    """Run and free an engine Derivative; its transform, run and free costs as one row."""
    g = float(d.run())
    ops = d.derivative_ops
    d.free()
    return {"transform_seconds": d.transform_seconds, "run_seconds": d.run_seconds,
            "free_seconds": d.free_seconds, "key_visits": d.key_visits,
            "derivative_ops": ops, "grad": g}


def _jax_row(f, x0, execute=True, repeats=3):
    """JAX's transform of ``f`` at ``x0`` (CPU time, min of ``repeats``), and optionally one
    compiled ``jit(grad)`` call (wall time, after compiling)."""
    import jax

    from .timing import time_grad_transform
    from .whole import count_eqns

    seconds, jaxpr = time_grad_transform(f, x0, repeats=repeats, clock=time.process_time)
    run, val = None, None
    if execute:
        g = jax.jit(jax.grad(f))
        jax.block_until_ready(g(x0))   # compile
        t0 = time.perf_counter()
        val = float(jax.block_until_ready(g(x0)))
        run = time.perf_counter() - t0
    return {"transform_seconds": seconds, "run_seconds": run, "free_seconds": None,
            "key_visits": None, "derivative_ops": count_eqns(jaxpr), "grad": val}


def _measure_jax(step, state, is_tuple, depth):
    rest = state[1:]

    def f(x):
        start = (x, *rest) if is_tuple else (x,)
        return _unroll(step, start, depth, is_tuple, "on JAX tracers")

    try:
        return _jax_row(f, float(state[0]))
    except InputError:
        raise
    except TypeError as e:   # jax.grad of a non-scalar, or of something not an array
        raise InputError(f"step must compute a scalar from its argument: {_one_line(e)}") from None


def _predict(depths, walls, costs, d):
    """Predicted wall time at depth ``d``: the last wall time grown by the last observed
    growth of the cost, extrapolated exponentially in d (an overestimate for polynomials)."""
    if len(depths) < 2:
        return 0.0
    c1, c2 = costs[-2], costs[-1]
    growth = c2 / c1 if c1 and c2 and c2 > c1 else 1.0
    return walls[-1] * growth ** ((d - depths[-1]) / (depths[-1] - depths[-2]))


def _sweep(measure_at, depths, engine, keys, budget):
    """Shared sweep loop with the time budget; returns a classified :class:`Growth`."""
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
    return res


def growth(step: Callable, x0, depths: Sequence[int] | None = None, engine: str = "keyed",
           keys: str = "structural", budget: float = BUDGET) -> Growth:
    """Probe how the reverse-mode transform of ``step`` unrolled d times grows with d.

    Parameters
    ----------
    step : callable x -> x' (or (x1, ..., xm) -> (x1', ..., xm') for a tuple ``x0``), plain
        Python using ``+ - * /`` on its argument(s) and on constants, so that it works on the
        keyed engine's values and on JAX tracers alike.
    x0 : float or tuple of 1 to :data:`MAX_STATE` floats, the starting state; the derivative
        is taken of the first component of the final state with respect to the first
        component of ``x0``.
    depths : increasing ints in [1, 100000] (default :data:`DEPTHS`, 2, 4, ..., 40, for the
        keyed engine and :data:`DEPTHS_JAX`, 4, 8, ..., 128, for JAX).
    engine : "keyed" (this project's engine; cost = exact key visits) or "jax"
        (cost = CPU time of ``make_jaxpr(grad)``, min of 3).
    keys : one of ``trgad.engine.STRATEGIES`` (keyed engine only).
    budget : seconds, in (0, 3600].  The sweep stops before a depth whose predicted time
        (the last time grown by the last observed cost growth, extrapolated exponentially)
        would overrun it, and after any depth that used it up.  Not a hard limit: one
        measurement can take longer than predicted (the command line adds a hard timeout).

    Returns
    -------
    :class:`Growth` (``verdict``, ``base``, ``rule``, per-depth figures); the verdict is
    :func:`classify`'s.

    Raises
    ------
    InputError for a bad engine, keys, budget, depths or x0, a step that is not callable,
    fails on the probe's values, returns the wrong shape of state or ignores its argument.
    """
    engine, keys, budget = _check_common(engine, keys, budget)
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

    return _sweep(measure_at, depths, engine, keys, budget)


def trg_growth(steps: Sequence[int] | None = None, engine: str = "keyed",
               keys: str = "structural", chi: int = 16, beta: float = 0.3,
               budget: float = BUDGET, execute: bool = True) -> Growth:
    """:func:`growth` for the whole-graph TRG, by number of steps.

    Each depth n differentiates lnZ/N of n TRG steps (chi, beta; schedule from
    :func:`trgad.trg.truncation_schedule`) with respect to beta as one graph: on the keyed
    engine (key visits, transform / run / free seconds) or with JAX (CPU time of
    ``make_jaxpr(grad)``, min of 3; jaxpr equations; run = a compiled ``jit(grad)`` call).
    Default steps: :data:`STEPS_KEYED` or :data:`STEPS_JAX`.  Same verdict rule and budget
    as :func:`growth`.  ``execute=False`` skips the JAX execution (its ``jit`` compilation
    costs seconds per step; run_seconds is then None).  Raises InputError for bad arguments.
    """
    from . import trg
    from .validate import check_beta, check_chi

    engine, keys, budget = _check_common(engine, keys, budget)
    if steps is None:
        steps = STEPS_KEYED if engine == "keyed" else STEPS_JAX
    steps = _check_depths(steps, "steps")
    chi, beta = check_chi(chi), check_beta(beta)
    full = trg.truncation_schedule(chi, max(steps), beta)

    def measure_at(n):
        schedule = full[:n]
        if engine == "keyed":
            from . import engine as keyed

            b = keyed.leaf(beta, keys)
            y = trg.lnz_per_site(b, schedule, ops=keyed.KeyedOps(keys))
            return _engine_row(keyed.grad(y, b))
        from . import whole

        return _jax_row(whole.lnz_fn(schedule), beta, execute=execute)

    return _sweep(measure_at, steps, engine, keys, budget)


def split_costs(step: Callable, x0, depth: int, keys: str = "structural") -> dict:
    """Transform, execution and freeing of one derivative, separately (keyed engine).

    Builds ``step`` unrolled ``depth`` times, then times (1) the transform that builds the
    derivative program, (2) running that program, (3) dropping it.  Returns a dict with
    the three times in seconds, ``key_visits``, ``derivative_ops``, ``transform_over_run``
    and ``diagnosis``: "trap" when the transform takes more than :data:`TRAP_RATIO` times
    the execution and at least :data:`TRAP_MIN_SECONDS` (the source document's "milliseconds
    to run, seconds to transform"), "ok" otherwise.  Raises InputError for bad input.
    """
    depth = check_int("depth", depth, 1, 100_000)
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
#: Graph names the command line accepts besides ``module:function``.
GRAPHS = ("chain", "trg", "power", "newton", "evolve")


def parse_x0(text):
    """``--x0`` text: one number ("1.5") or comma-separated numbers ("0.9,0.8" -> a tuple)."""
    parts = [p.strip() for p in str(text).split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise InputError(f"x0={text!r} is not a number or a comma-separated list of numbers") from None
    if not all(math.isfinite(v) for v in values) or len(values) > MAX_STATE:
        raise InputError(f"x0={text!r} is out of range: give 1 to {MAX_STATE} finite numbers")
    return values[0] if len(values) == 1 else tuple(values)


def load_step(spec):
    """The function named by ``spec``: "module:function" (importable from the current
    directory or sys.path) or "path/to/file.py:function".  Raises InputError (one line) if
    the spec is malformed, the module does not import, or the name is not a callable."""
    module_name, sep, name = str(spec).rpartition(":")
    if not sep or not module_name or not name.isidentifier():
        raise InputError(f"graph={spec!r} is not known: choose one of {', '.join(GRAPHS)}, "
                         f"or give module:function")
    try:
        if module_name.endswith(".py") or os.sep in module_name:
            path = os.path.abspath(module_name)
            if not os.path.isfile(path):
                raise InputError(f"graph={spec!r}: no file {module_name!r}")
            where = importlib.util.spec_from_file_location(f"_trgad_user_{abs(hash(path))}", path)
            module = importlib.util.module_from_spec(where)
            where.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except InputError:
        raise
    except (Exception, SystemExit) as e:   # the user's module failed to import
        raise InputError(f"graph={spec!r} does not import: {_one_line(e)}") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise InputError(f"graph={spec!r}: {module_name} has no function {name!r}")
    return fn


def check_step(step, x0, spec):
    """Run ``step`` once on plain floats at ``x0``; InputError (one line) if it fails or
    returns something that is not a state of the same shape with finite numbers."""
    state, is_tuple = _as_state(x0)
    try:
        out = step(state if is_tuple else state[0])
        values = list(out) if is_tuple else [out]
        if len(values) != len(state):
            raise ValueError(f"returned {len(values)} values for {len(state)}")
        finite = all(math.isfinite(float(v)) for v in values)
    except Exception as e:  # the user's step failed on plain floats
        raise InputError(f"graph={spec!r} fails on x0={x0!r}: {_one_line(e)}") from None
    if not finite:
        raise InputError(f"graph={spec!r} gives a non-finite state at x0={x0!r}")


def run(graph: str = "chain", x0=None, engine: str = "keyed", keys: str = "structural",
        budget: float = 20.0) -> dict:
    """The probe for the command line (``python -m trgad probe``), as a JSON-ready dict.

    ``graph`` is one of :data:`GRAPHS` ("trg": by TRG steps, chi = 16, beta = 0.3, no JAX
    execution; the others: see :data:`BUILTINS`) or a user's step "module:function" /
    "file.py:function" (see :func:`load_step`), which needs ``x0``.  ``x0`` (a number or a
    list of numbers) replaces a built-in graph's starting state; not for "trg".  The dict
    holds ``graph``, ``description``, ``x0`` and everything in :meth:`Growth.as_dict`.
    Raises InputError for a bad graph, x0, engine, keys or budget, or a user step that does
    not import or fails on x0.
    """
    engine, keys, budget = _check_common(engine, keys, budget)
    if isinstance(x0, list):
        x0 = tuple(x0)
    if graph == "trg":
        if x0 is not None:
            raise InputError("x0 is not used with graph='trg' (the TRG is probed by steps at beta = 0.3)")
        res = trg_growth(engine=engine, keys=keys, budget=budget, execute=False)
        desc = "whole-graph Levin-Nave TRG, chi = 16, beta = 0.3, by steps"
    elif graph in BUILTINS:
        step, default, desc = BUILTINS[graph]
        x0 = default if x0 is None else x0
        res = growth(step, x0, engine=engine, keys=keys, budget=budget)
    else:
        step = load_step(graph)
        if x0 is None:
            raise InputError(f"graph={graph!r} needs x0 (--x0), the starting state")
        check_step(step, x0, graph)
        res = growth(step, x0, engine=engine, keys=keys, budget=budget)
        desc = f"user step {graph}"
    out = {"graph": graph, "description": desc, "x0": list(x0) if isinstance(x0, tuple) else x0}
    out.update(res.as_dict())
    return out
