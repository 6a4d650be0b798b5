"""Growth probe: does the reverse-mode transform of an iterative graph grow exponentially?

The source report's advice (book/source-report.md) ("怎么确认没中招", how to check you are not hit): time the
transform after each added step; growth that keeps multiplying is exponential; if execution
takes milliseconds while the transform takes seconds, this is the trap; every graph that
loops on its previous result needs staging, not only TRG.  This module turns that advice
into functions:

* :func:`growth` unrolls a step function (plain Python using ``+ - * /`` on its argument
  and on constants) to increasing depths, transforms it at each depth (the keyed engine's
  ``vjp``, or ``jax.make_jaxpr(jax.grad(.))``), runs the derivative program and frees it,
  and returns a :class:`Growth` with per-depth figures, the base per layer and a verdict.
* :func:`trg_growth` does the same for the whole-graph TRG by number of steps.
* :func:`trgad.growth.verdict.classify` is the verdict rule alone, on any cost sequence.
* :func:`path_matrix` counts the paths by which one step's inputs reach its outputs: its
  largest eigenvalue is the base a structural key walk grows by.
* :func:`split_costs` separates transform, execution and freeing at one depth and names the
  signature of the trap ("milliseconds to run, seconds to transform").
* :func:`run` is the command line's probe: a built-in graph or a user's ``module:function``.

The cost m(d) is the exact number of key visits on the keyed engine, and the CPU time of
``make_jaxpr(grad)`` (minimum of 3) with JAX.  The verdict asks how m grows as the depth
*doubles*: for a polynomial of degree p, m(2d)/m(d) settles to 2**p; for an exponential b**d
it is b**d, so it keeps growing and any base b > 1 shows once the probe is deep enough.  The
rule (:mod:`trgad.growth.verdict`) and its constants are explained in the book's chapter "How to
detect it" (book/detect.md).
"""
from __future__ import annotations

import time
from functools import partial
from typing import Callable, Sequence

import jax

from ..keyed import engine as keyed
from ..runtime import compiled
from ..physics import trg, whole
from ..keyed.keyed_trg import KeyedOps
from ..keyed.keys import STRATEGIES, path_count
from ..runtime.timing import count_eqns, time_grad_transform
from .graphs import BUILTINS, GRAPHS
from .userstep import as_state, check_state, check_step, load_step, one_line
from ..runtime.validate import (BUDGET_MAX, InputError, check_beta, check_chi, check_choice, check_depths, check_engine,
                                check_int, check_positive, checked)
from .sweep import budgeted_sweep
from .verdict import Growth, depth_to_detect

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
#: Transform-to-execution ratio above which :func:`split_costs` names the trap ...
TRAP_RATIO = 10.0
#: ... provided the transform also takes at least this long (seconds).
TRAP_MIN_SECONDS = 0.05


def _check_common(engine, keys, budget):
    return (check_engine(engine), check_choice("keys", keys, STRATEGIES),
            check_positive("budget", budget, BUDGET_MAX))


def _unroll(step, state, depth, is_tuple, where, first=True):
    """Apply ``step`` ``depth`` times; return the first component of the final state (with
    ``first=False``, the whole state: a tuple for a tuple ``state``).

    Any exception the user's step raises becomes an InputError naming ``where``.
    """
    x = state if is_tuple else state[0]
    for _ in range(depth):
        try:
            x = step(x)
        except InputError:
            raise
        except BaseException as e:  # the user's code failed, exited or interrupted itself here
            name = getattr(step, "__qualname__", "step")
            raise InputError(f"step function {name!r} failed {where} (the probe needs + - * / only): "
                             f"{one_line(e)}") from None
        if is_tuple and (not isinstance(x, (tuple, list)) or len(x) != len(state)):
            raise InputError(f"step must return a tuple of {len(state)} values for a tuple x0")
    return x[0] if is_tuple and first else x


def _measure_keyed(step, state, is_tuple, depth, keys):
    leaves = [keyed.leaf.trusted(v, keys) for v in state]
    start = tuple(leaves) if is_tuple else (leaves[0],)
    y = _unroll(step, start, depth, is_tuple, "on the keyed engine's values")
    if not isinstance(y, keyed.Value) or y.shape != ():
        raise InputError("step must compute a scalar from its argument with + - * / "
                         "(the result is not a scalar engine value that depends on it)")
    return _engine_row(keyed.grad(y, leaves[0]))


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
    seconds, jaxpr = time_grad_transform.trusted(f, x0, repeats, time.process_time)
    run, val = None, None
    if execute:
        g = compiled.jit(jax.grad(f))
        jax.block_until_ready(g(x0))   # compile
        t0 = time.perf_counter()
        val = float(jax.block_until_ready(g(x0)))
        run = time.perf_counter() - t0
    return {"transform_seconds": seconds, "run_seconds": run, "free_seconds": None,
            "key_visits": None, "derivative_ops": count_eqns(jaxpr), "grad": val}


def _measure_jax(step, state, is_tuple, depth, execute=True):
    rest = state[1:]

    def f(x):
        start = (x, *rest) if is_tuple else (x,)
        return _unroll(step, start, depth, is_tuple, "on JAX tracers")

    try:
        return _jax_row(f, float(state[0]), execute=execute)
    except InputError:
        raise
    except TypeError as e:   # jax.grad of a non-scalar, or of something not an array
        raise InputError(f"step must compute a scalar from its argument: {one_line(e)}") from None


#: Path growth per layer above which the paths count as exponential (a permutation or a
#: chain of single uses has growth exactly 1; rounding of the eigenvalue stays far below this).
PATH_GROWTH_TOL = 1e-9


def path_growth(step: Callable, x0) -> float:
    """Growth per layer of the number of paths from the first component of the state after d
    steps back to the start: the largest |eigenvalue| of :func:`path_matrix` restricted to
    the components the first one depends on, directly or through others (its Perron root).

    Paths along d steps are entries of M**d, so the paths from component 0 grow like
    rho**d (times a polynomial): rho > 1 means exponentially many paths, which a
    structural key walk visits one by one.  Returns a float >= 0; raises InputError as
    :func:`path_matrix` does.
    """
    return _path_growth(step, *_checked_step(step, x0))


def _path_growth(step, state, is_tuple):
    import numpy as np

    M = np.array(_path_matrix(step, state, is_tuple), dtype=float)
    reach, todo = {0}, [0]
    while todo:                       # components that component 0 depends on
        i = todo.pop()
        for j in np.flatnonzero(M[i]):
            if int(j) not in reach:
                reach.add(int(j))
                todo.append(int(j))
    idx = sorted(reach)
    return float(max(abs(np.linalg.eigvals(M[np.ix_(idx, idx)]))))


def _path_check(res, step, state, is_tuple):
    """A "polynomial" verdict that the exact path count contradicts becomes "undetermined"
    (structural keys on the keyed engine, whose visits walk every path)."""
    res.path_growth = _path_growth(step, state, is_tuple)
    if res.verdict == "polynomial" and res.path_growth > 1 + PATH_GROWTH_TOL:
        need = depth_to_detect(res.path_growth)
        res.verdict = "undetermined"
        res.rule = (f"path count: the paths grow like {res.path_growth:.5g}**d (path_matrix), an "
                    f"exponential, but at depths up to {res.depths[-1]} this rule tells only a base above "
                    f"{res.detection_limit:.4g} from polynomial (probe to depth {need} or more)")
    return res


def growth(step: Callable, x0, depths: Sequence[int] | None = None, engine: str = "keyed",
           keys: str = "structural", budget: float = BUDGET, execute: bool = True) -> Growth:
    """Probe how the reverse-mode transform of ``step`` unrolled d times grows with d.

    Parameters
    ----------
    step : callable x -> x' (or (x1, ..., xm) -> (x1', ..., xm') for a tuple ``x0``), plain
        Python using ``+ - * /`` on its argument(s) and on constants, so that it works on the
        keyed engine's values and on JAX tracers alike.
    x0 : float or tuple of 1 to ``trgad.growth.userstep.MAX_STATE`` (100) floats, the starting state; the derivative
        is taken of the first component of the final state with respect to the first
        component of ``x0``.
    depths : increasing ints in [1, 100000] (default :data:`DEPTHS`, 2, 4, ..., 40, for the
        keyed engine and :data:`DEPTHS_JAX`, 4, 8, ..., 128, for JAX).
    engine : "keyed" (this project's engine; cost = exact key visits) or "jax"
        (cost = CPU time of ``make_jaxpr(grad)``, min of 3).
    keys : one of ``trgad.keyed.keys.STRATEGIES`` (keyed engine only).
    budget : seconds, in (0, 3600].  The sweep stops before a depth whose predicted time
        (the last time grown by the last observed cost growth, extrapolated exponentially)
        would overrun it, and after any depth that used it up.  Not a hard limit: one
        measurement can take longer than predicted (the command line adds a hard timeout).
    execute : JAX only: also compile ``jit(grad)`` and time one call at every depth (the
        default); ``False`` skips that (run_seconds and grads are then None), as in
        :func:`trg_growth`.  The keyed engine always runs its derivative program.

    Returns
    -------
    :class:`Growth` (``verdict``, ``base``, ``rule``, ``detection_limit``, per-depth
    figures); the verdict is :func:`classify`'s, except that on the keyed engine with
    structural keys a "polynomial" verdict is "undetermined" when the exact path count
    (:func:`path_growth`) grows exponentially: a base below the detection limit.

    Raises
    ------
    InputError for a bad engine, keys, budget, depths or x0, a step that is not callable,
    fails on the probe's values, returns the wrong shape of state or ignores its argument.
    """
    engine, keys, budget = _check_common(engine, keys, budget)
    if depths is None:
        depths = DEPTHS if engine == "keyed" else DEPTHS_JAX
    depths = check_depths("depths", depths, 1, 100_000)
    return _growth(step, *_checked_step(step, x0), depths, engine, keys, budget, execute)


def _checked_step(step, x0):
    """(state, is_tuple) of a callable ``step`` and a good ``x0``; InputError otherwise."""
    if not callable(step):
        raise InputError(f"step={step!r} is not callable")
    return as_state(x0)


def _growth(step, state, is_tuple, depths, engine, keys, budget, execute=True):
    """:func:`growth` of checked arguments."""
    def measure_at(d):
        if engine == "keyed":
            return _measure_keyed(step, state, is_tuple, d, keys)
        return _measure_jax(step, state, is_tuple, d, execute=execute)

    res = budgeted_sweep(measure_at, depths, engine, keys, budget)
    if engine == "keyed" and keys == "structural":
        _path_check(res, step, state, is_tuple)
    return res


def _steps_of(steps, engine):
    """``steps``, checked, or the engine's default ones."""
    steps = (STEPS_KEYED if engine == "keyed" else STEPS_JAX) if steps is None else steps
    return {"steps": check_depths("steps", steps, 1, 100_000)}


@checked(_steps_of, engine=check_engine, keys=partial(check_choice, "keys", allowed=STRATEGIES),
         budget=partial(check_positive, "budget", high=BUDGET_MAX), chi=check_chi, beta=check_beta)
def trg_growth(steps: Sequence[int] | None = None, engine: str = "keyed",
               keys: str = "structural", chi: int = 16, beta: float = 0.3,
               budget: float = BUDGET, execute: bool = True) -> Growth:
    """:func:`growth` for the whole-graph TRG, by number of steps.

    Each depth n differentiates lnZ/N of n TRG steps (chi, beta; schedule from
    :func:`trgad.physics.trg.truncation_schedule`) with respect to beta as one graph: on the keyed
    engine (key visits, transform / run / free seconds) or with JAX (CPU time of
    ``make_jaxpr(grad)``, min of 3; jaxpr equations; run = a compiled ``jit(grad)`` call).
    Default steps: :data:`STEPS_KEYED` or :data:`STEPS_JAX`.  Same verdict rule and budget
    as :func:`growth`.  ``execute=False`` skips the JAX execution (its ``jit`` compilation
    costs seconds per step; run_seconds is then None).  Raises InputError for bad arguments.
    """
    full = trg.truncation_schedule.trusted(chi, max(steps), beta)

    def measure_at(n):
        schedule = full[:n]
        if engine == "keyed":
            b = keyed.leaf.trusted(beta, keys)
            y = trg.lnz_per_site.trusted(b, schedule, ops=KeyedOps.unchecked(keys))
            return _engine_row(keyed.grad(y, b))
        return _jax_row(whole.lnz_fn.trusted(schedule), beta, execute=execute)

    return budgeted_sweep(measure_at, steps, engine, keys, budget)


def split_costs(step: Callable, x0, depth: int, keys: str = "structural") -> dict:
    """Transform, execution and freeing of one derivative, separately (keyed engine).

    Builds ``step`` unrolled ``depth`` times, then times (1) the transform that builds the
    derivative program, (2) running that program, (3) dropping it.  Returns a dict with
    the three times in seconds, ``key_visits``, ``derivative_ops``, ``transform_over_run``
    and ``diagnosis``: "trap" when the transform takes more than :data:`TRAP_RATIO` times
    the execution and at least :data:`TRAP_MIN_SECONDS` (the source report's "milliseconds
    to run, seconds to transform"), "ok" otherwise.  Raises InputError for bad input.
    """
    depth = check_int("depth", depth, 1, 100_000)
    keys = check_choice("keys", keys, STRATEGIES)
    state, is_tuple = as_state(x0)
    row = _measure_keyed(step, state, is_tuple, depth, keys)
    ratio = row["transform_seconds"] / max(row["run_seconds"], 1e-9)
    trap = ratio > TRAP_RATIO and row["transform_seconds"] > TRAP_MIN_SECONDS
    row.update(depth=depth, keys=keys, transform_over_run=ratio, diagnosis="trap" if trap else "ok")
    return row


def path_matrix(step: Callable, x0) -> list:
    """Paths from one step's inputs to its outputs: M[i][j] = the number of distinct paths
    from component i of ``step(x)`` back to component j of ``x`` in the keyed engine's graph
    (:func:`trgad.keyed.keys.path_count`, on structural keys).

    Paths multiply along a chain of steps, so the key of a component after d steps holds
    about rho**d paths back to the start, rho = the largest eigenvalue of M (a non-negative
    matrix: its Perron root); a structural comparison walks every path, so rho is the base
    of the probe's key visits.  ``step`` and ``x0`` as for :func:`growth` (a number, or a
    tuple of numbers).  Returns a list of lists of ints, one row per output component (an
    output that is a constant, not an engine value, has a row of zeros).  Raises InputError
    as :func:`growth` does for a bad step or x0.
    """
    return _path_matrix(step, *_checked_step(step, x0))


def _path_matrix(step, state, is_tuple):
    leaves = [keyed.leaf.trusted(v, "structural") for v in state]
    start = tuple(leaves) if is_tuple else (leaves[0],)
    out = _unroll(step, start, 1, is_tuple, "on the keyed engine's values", first=False)
    outs = tuple(out) if is_tuple else (out,)
    return [[path_count(o.key, leaf.key) if isinstance(o, keyed.Value) else 0 for leaf in leaves]
            for o in outs]


def _graph_and_x0(graph, x0, label):
    """Refuse an x0 for "trg" and a user's step without one."""
    if graph == "trg" and x0 is not None:
        raise InputError("x0 is not used with graph='trg' (the TRG is probed by steps at beta = 0.3)")
    if graph not in GRAPHS and x0 is None:
        raise InputError(f"graph={graph if label is None else label!r} needs x0 (--x0), the starting state")


def _optional_state(x0):
    """``x0`` checked (:func:`check_state`), or None (a built-in graph's own)."""
    return None if x0 is None else check_state(x0)


@checked(_graph_and_x0, engine=check_engine, keys=partial(check_choice, "keys", allowed=STRATEGIES),
         budget=partial(check_positive, "budget", high=BUDGET_MAX), x0=_optional_state)
def run(graph: str = "chain", x0=None, engine: str = "keyed", keys: str = "structural",
        budget: float = 20.0, label: str | None = None) -> dict:
    """The probe as ``python -m trgad probe`` runs it, as a JSON-ready dict.

    ``graph`` is one of :data:`GRAPHS` ("trg": by TRG steps, chi = 16, beta = 0.3, no JAX
    execution; the others: see :data:`BUILTINS`) or a user's step "module:function" /
    "file.py:function" (see :func:`load_step`), which needs ``x0``.  ``x0`` (a number or a
    list of numbers) replaces a built-in graph's starting state; not for "trg".  The dict
    holds ``graph`` (``label`` if given: the spec as the user typed it), ``description``,
    ``x0``, everything in :meth:`Growth.as_dict` (``detection_limit`` and, for a derivative
    that is not finite, a ``note``) and ``detection``, the limit in words.  Raises InputError (naming ``label``)
    for a bad graph, x0, engine, keys or budget, or a user step that does not import or
    fails on x0.
    """
    label = graph if label is None else label
    if isinstance(x0, list):
        x0 = tuple(x0)
    depths = DEPTHS if engine == "keyed" else DEPTHS_JAX
    if graph == "trg":
        steps = STEPS_KEYED if engine == "keyed" else STEPS_JAX
        res = trg_growth.trusted(steps, engine, keys, 16, 0.3, budget, execute=False)
        desc = "whole-graph Levin-Nave TRG, chi = 16, beta = 0.3, by steps"
    elif graph in BUILTINS:
        step, default, desc = BUILTINS[graph]
        x0 = default if x0 is None else x0
        res = _growth(step, *as_state.trusted(x0), depths, engine, keys, budget)
    else:
        step = load_step(graph, label)
        check_step(step, x0, label)
        res = _growth(step, *as_state.trusted(x0), depths, engine, keys, budget)
        desc = f"user step {label}"
    out = {"graph": label, "description": desc, "x0": list(x0) if isinstance(x0, tuple) else x0}
    out.update(res.as_dict())
    out["detection"] = res.detection()
    return out
