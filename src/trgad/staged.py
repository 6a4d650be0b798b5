"""Staged differentiation of the TRG: one VJP per step, the cotangent passed back by hand.

This is the fix described in the source document (section "修法", the fix): never let one
transform see a deep graph.  Each TRG step is built on a *fresh leaf* that holds the
previous step's tensor, so a transform (``jax.vjp`` here, ``engine.vjp`` for the keyed
engine) only ever sees one step, whatever the number of steps.

The chain rule is then applied by hand.  With w_i = 1 / 2**i and n steps,

    lnZ/N = sum_i w_i ln||T_i|| + w_n ln tr T_n,      T_{i+1} = step_i(T_i),

so the cotangent of T_i (written Tbar_i) collects two paths:

    Tbar_i = [d T_{i+1} / d T_i]^T Tbar_{i+1}          (through the next tensor)
           + w_i * d ln||T_i|| / d T_i                 (through the step's own norm)

One VJP of ``trg_step`` with the output cotangent pair (Tbar_{i+1}, w_i) gives exactly that
sum, because a VJP is linear in its cotangent: vjp(a, b) = vjp(a, 0) + vjp(0, b).  The
backward pass starts from Tbar_n = w_n * d ln tr T_n / d T_n and ends with one more VJP
through ``ising.initial_tensor`` that turns Tbar_0 into d(lnZ/N)/d beta.

JAX: each of the pieces is ``jax.jit``-compiled once per distinct shape (bond dimension D,
kept values k); the forward program returns the step's VJP closure (a pytree of residuals,
``jax.tree_util.Partial``), so the backward program reuses the forward's residuals instead
of recomputing the step.  For chi = 16 the schedule [2, 4, 4, 16, 16, ...] has five distinct
(D, k) pairs, so 20 (or 100) steps compile five step programs.

Keyed engine: the same staging on :mod:`trgad.engine`, with structural keys still on.
"""
from __future__ import annotations

import functools
import time

from . import ising, trg
from .keys import STRATEGIES
from .validate import BETA_MAX, InputError, check_beta, check_choice, check_engine, check_repeats

#: Step of the central difference for the specific heat, as in the source document (h = 1e-5).
FD_STEP = 1e-5


# --------------------------------------------------------------------------------------
# JAX
# --------------------------------------------------------------------------------------

class _JaxPrograms:
    """Compiled per-shape programs, cached across calls (keyed on (D, k)).

    For each (D, k) there is a forward program T -> (T_next, ln||T||, residuals) and a
    backward program (residuals, cotangents) -> Tbar.  The residuals are the leaves of the
    step's ``jax.vjp`` closure; its tree structure (static: the linearised step) is recorded
    when the forward program is traced and rebuilt inside the backward program, so the
    backward pass reuses the forward's intermediate results rather than recomputing them.
    """

    def __init__(self):
        import jax

        self.jax = jax
        self.forward = {}    # (D, k) -> jitted forward
        self.backward = {}   # (D, k) -> jitted backward
        self.treedefs = {}   # (D, k) or name -> tree structure of the vjp closure
        ops = trg.jax_ops()
        self.init_fwd, self.init_bwd = self._pair("init", lambda b: ising.initial_tensor(b, ops))
        self.tail_fwd, self.tail_bwd = self._pair(
            "tail", lambda t, w: w * ops.log(trg.torus_trace(t, ops)))

    def _pair(self, key, fn):
        """Jitted (forward returning residual leaves, backward rebuilding the closure)."""
        jax = self.jax

        def fwd(x, *args):
            out, pullback = jax.vjp(lambda y: fn(y, *args), x)
            leaves, self.treedefs[key] = jax.tree_util.tree_flatten(pullback)
            return out, leaves

        def bwd(leaves, ct):
            pullback = jax.tree_util.tree_unflatten(self.treedefs[key], leaves)
            return pullback(ct)[0]

        return jax.jit(fwd), jax.jit(bwd)

    def step(self, D, k):
        """(forward, backward) programs of one TRG step from bond dimension D keeping k."""
        key = (D, k)
        if key not in self.forward:
            ops = trg.jax_ops()
            self.forward[key], self.backward[key] = self._pair(
                key, lambda t: trg.trg_step(t, k, ops))
        return self.forward[key], self.backward[key]


_PROGRAMS = None


def _programs():
    global _PROGRAMS
    if _PROGRAMS is None:
        _PROGRAMS = _JaxPrograms()
    return _PROGRAMS


def clear_cache():
    """Forget the compiled JAX step programs (the next call compiles again, as a first call)."""
    global _PROGRAMS
    _PROGRAMS = None


def compiled_shapes():
    """The (D, k) pairs for which a JAX step program exists, in the order they were built."""
    return list(_PROGRAMS.forward) if _PROGRAMS is not None else []


def _schedule(schedule):
    try:
        ks = [int(k) for k in schedule]
    except (TypeError, ValueError):
        raise InputError(f"schedule={schedule!r} is not a sequence of integers") from None
    if not ks:
        raise InputError("schedule=[] is out of range: at least one TRG step is needed")
    if min(ks) < 1:
        raise InputError(f"schedule={ks!r} is out of range: every entry must be an integer >= 1")
    return ks


def value_and_grad_jax(beta, schedule):
    """lnZ/N and d(lnZ/N)/d beta by staged JAX VJPs (one ``jax.vjp`` per TRG step).

    Parameters
    ----------
    beta : float > 0, inverse temperature in units of 1/J.
    schedule : sequence of int, the number of singular values kept at each step (from
        :func:`trgad.trg.truncation_schedule`); len(schedule) steps, 2**len sites.

    Returns
    -------
    (lnz, dlnz): Python floats; the internal energy per site is u = -dlnz (units of J).

    Raises
    ------
    InputError for beta <= 0 or a bad schedule.

    Source: the staged fix of the source document ("每一步单独建图、单独求 vjp", each step on
    its own graph with its own vjp), written with ``jax.vjp``.
    """
    beta, ks = check_beta(beta), _schedule(schedule)
    P = _programs()
    jnp = P.jax.numpy
    f64 = jnp.float64
    # forward: every step starts from a fresh leaf (the previous step's concrete output)
    T, res0 = P.init_fwd(jnp.asarray(beta, dtype=f64))
    stages, ln_norms = [], []
    for k in ks:
        fwd, bwd = P.step(int(T.shape[0]), k)
        (T, ln), res = fwd(T)
        stages.append((bwd, res))
        ln_norms.append(ln)
    n = len(ks)
    tail, res_n = P.tail_fwd(T, jnp.asarray(1.0 / 2**n, dtype=f64))
    # backward: Tbar_n from the trace term, then one VJP per step, last to first
    ct = P.tail_bwd(res_n, jnp.ones((), dtype=f64))
    for i in range(n - 1, -1, -1):
        bwd, res = stages[i]
        # both paths at once: through T_{i+1} (cotangent ct) and through ln||T_i|| (w_i)
        ct = bwd(res, (ct, jnp.asarray(1.0 / 2**i, dtype=f64)))
    dlnz = P.init_bwd(res0, ct)
    lnz = float(tail) + sum(float(ln) / 2**i for i, ln in enumerate(ln_norms))
    # the factor e^{2 beta} per site taken out of the initial tensor (trgad.ising)
    return lnz + ising.log_weight_per_site(beta), float(dlnz) + 2.0


# --------------------------------------------------------------------------------------
# Keyed engine
# --------------------------------------------------------------------------------------

def value_and_grad_engine(beta, schedule, keys="structural"):
    """lnZ/N and d(lnZ/N)/d beta by staged VJPs on the keyed graph engine.

    Same staging as :func:`value_and_grad_jax`: each step is built on a fresh
    ``engine.leaf`` holding the previous tensor, and ``engine.vjp`` sees one step at a time,
    so its cost stays flat per step even with structural keys.

    Parameters
    ----------
    beta : float > 0; schedule : sequence of int (see :func:`value_and_grad_jax`);
    keys : one of :data:`trgad.keys.STRATEGIES` ("structural", "interned", "memo"), the
        engine's value-key design.

    Returns
    -------
    dict with ``lnz_per_site``, ``dlnz`` (floats), ``transform_seconds`` (sum over all VJP
    transforms), ``run_seconds`` (sum of executing the derivative programs),
    ``forward_seconds``, ``key_visits`` and ``derivative_ops`` (sums over the VJPs), and
    ``per_step`` (list of dicts with the same figures for each step's VJP, last step first,
    plus ``forward_seconds``: that step's share of the forward pass; 0 for the trace and the
    initial tensor).

    Raises
    ------
    InputError for bad beta, schedule or keys.
    """
    import numpy as np

    from . import engine as keyed
    from .whole import KeyedOps

    beta, ks = check_beta(beta), _schedule(schedule)
    keys = check_choice("keys", keys, STRATEGIES)
    ops = KeyedOps(keys)
    n = len(ks)

    t0 = time.perf_counter()
    beta_leaf = keyed.leaf(beta, keys=keys)
    T0 = ising.initial_tensor(beta_leaf, ops)
    stages = []          # (leaf, T_next, ln) per step
    current = _concrete(T0)
    ln_values, step_forward = [], []
    for k in ks:
        t_step = time.perf_counter()
        leaf = keyed.leaf(current, keys=keys)
        T_next, ln = trg.trg_step(leaf, int(k), ops)
        stages.append((leaf, T_next, ln))
        current = _concrete(T_next)
        ln_values.append(float(_concrete(ln)))
        step_forward.append(time.perf_counter() - t_step)
    last_leaf = keyed.leaf(current, keys=keys)
    tail = ops.log(trg.torus_trace(last_leaf, ops))
    tail_value = float(_concrete(tail))
    forward_seconds = time.perf_counter() - t0
    lnz = tail_value / 2**n + sum(ln / 2**i for i, ln in enumerate(ln_values))
    lnz += ising.log_weight_per_site(beta)    # e^{2 beta} per site, out of T (trgad.ising)

    totals = {"transform_seconds": 0.0, "run_seconds": 0.0, "key_visits": 0, "derivative_ops": 0}
    per_step = []

    def pull(outputs, wrt, cotangents, label, forward=0.0):
        d = keyed.vjp(outputs, wrt, cotangents)
        t1 = time.perf_counter()
        grad = d.run()
        run = time.perf_counter() - t1
        d.free()
        row = {"stage": label, "transform_seconds": float(d.transform_seconds), "run_seconds": run,
               "key_visits": int(d.key_visits), "derivative_ops": int(d.derivative_ops),
               "forward_seconds": forward}
        per_step.append(row)
        for name in totals:
            totals[name] += row[name]
        return grad

    ct = pull([tail], last_leaf, [1.0 / 2**n], "trace")
    for i in range(n - 1, -1, -1):
        leaf, T_next, ln = stages[i]
        # both paths: through T_{i+1} (cotangent ct) and through ln||T_i|| (weight w_i)
        ct = pull([T_next, ln], leaf, [ct, 1.0 / 2**i], f"step {i}", step_forward[i])
    dlnz = pull([T0], beta_leaf, [ct], "initial tensor")
    out = {"lnz_per_site": lnz, "dlnz": float(np.asarray(dlnz)) + 2.0, "forward_seconds": forward_seconds,
           "per_step": per_step}
    out.update(totals)
    return out


def _concrete(value):
    """The NumPy array held by an engine value (``Value.data``)."""
    import numpy as np

    return np.asarray(getattr(value, "data", value))


# --------------------------------------------------------------------------------------
# Front ends
# --------------------------------------------------------------------------------------

def value_and_grad(beta, schedule, engine="jax", keys="structural"):
    """(lnZ/N, d lnZ/N / d beta) by the staged method on ``engine`` ("jax" or "keyed")."""
    engine = check_engine(engine)
    if engine == "jax":
        return value_and_grad_jax(beta, schedule)
    r = value_and_grad_engine(beta, schedule, keys=keys)
    return r["lnz_per_site"], r["dlnz"]


def fd_step(beta):
    """The central-difference step for :func:`specific_heat` at ``beta``: 1e-5 as in the
    source document (:data:`FD_STEP`), but at most beta / 2 (so that beta - h > 0 at small
    beta) and at least 1e-8 beta (so that beta +- h are distinct floats at large beta)."""
    return max(min(FD_STEP, beta / 2), beta * 1e-8)


def specific_heat(beta, schedule, engine="jax", keys="structural", h=None):
    """c = beta**2 d^2(lnZ/N)/d beta^2 from a central difference of two staged gradients.

    c ~= beta**2 [g(beta + h) - g(beta - h)] / (2 h) with g = d(lnZ/N)/d beta and h =
    :func:`fd_step` unless given; the truncation error is O(h**2) and the rounding error
    ~ 1e-16 / h.  The denominator is the distance of the two floats actually used (beta + h
    is capped at BETA_MAX).  A zero difference (deep in the ordered phase, where g = 2 to the
    last bit) gives c = 0, never inf * 0.  Units of k_B per site.  Raises InputError if h is given outside (0, beta).
    """
    beta = check_beta(beta)
    if h is None:
        h = fd_step(beta)
    elif not 0 < h < beta:
        raise InputError(f"h={h!r} is out of range: h must be in (0, beta)")
    up, down = min(beta + h, BETA_MAX), beta - h     # one-sided at the top of the range
    _, g_plus = value_and_grad(up, schedule, engine, keys)
    _, g_minus = value_and_grad(down, schedule, engine, keys)
    return beta * ((g_plus - g_minus) / (up - down)) * beta


@functools.lru_cache(maxsize=8)
def _whole_second(schedule):
    import jax

    from . import whole

    return jax.jit(jax.grad(jax.grad(whole.lnz_fn(schedule))))


def specific_heat_autodiff(beta, schedule):
    """c = beta**2 d^2(lnZ/N)/d beta^2 by ``jax.grad(jax.grad(.))`` of the whole JAX graph.

    Reverse-over-reverse through trgad's truncated-SVD rule (whose backward pass is itself
    differentiable).  Exact up to rounding.  The first call per schedule compiles the
    second-order program (measured here: about 30 s for 20 steps at chi = 16 on 2 shared
    cores, under a second per call after that).  Returns a float (units of k_B per site).
    """
    beta, ks = check_beta(beta), tuple(_schedule(schedule))
    return beta**2 * float(_whole_second(ks)(float(beta)))


def run(beta, schedule, engine="jax", keys="structural", with_specific_heat=False):
    """The staged method for the command line: ``python -m trgad trg --method staged``.

    Returns a JSON-ready dict: ``lnz_per_site``, ``u`` (= -d lnZ/N / d beta, units of J),
    ``c`` (specific heat per site by :func:`specific_heat` if ``with_specific_heat``, else
    None) and ``fd_step`` (the step h it used),
    ``value_and_grad_seconds`` (this call's staged value and gradient, first call included),
    ``keys`` (engine only) and, for the keyed engine, ``transform_seconds``, ``key_visits``,
    ``derivative_ops``, ``run_seconds`` summed over all per-step VJPs.
    """
    engine = check_engine(engine)
    keys = check_choice("keys", keys, STRATEGIES)
    t0 = time.perf_counter()
    out = {}
    if engine == "jax":
        lnz, dlnz = value_and_grad_jax(beta, schedule)
        out["compiled_step_programs"] = len(compiled_shapes())
    else:
        r = value_and_grad_engine(beta, schedule, keys=keys)
        lnz, dlnz = r["lnz_per_site"], r["dlnz"]
        out.update(keys=keys, transform_seconds=r["transform_seconds"], key_visits=r["key_visits"],
                   derivative_ops=r["derivative_ops"], run_seconds=r["run_seconds"],
                   forward_seconds=r["forward_seconds"])
    out["value_and_grad_seconds"] = time.perf_counter() - t0
    out.update(lnz_per_site=lnz, u=-dlnz, c=None)
    if with_specific_heat:
        beta = check_beta(beta)
        out["fd_step"] = fd_step(beta)
        out["c"] = specific_heat(beta, schedule, engine=engine, keys=keys, h=out["fd_step"])
    return out


def full_size_steps(schedule):
    """Indices of the steps whose input tensor has the schedule's largest bond dimension.

    Step i's input has bond dimension ``schedule[i - 1]`` (2 for step 0, the Ising tensor);
    steps with a smaller input cost far less (at chi = 16: steps 0-3, inputs of D <= 4).
    """
    ks = _schedule(schedule)
    dims = [2] + list(ks[:-1])
    return [i for i, d in enumerate(dims) if d == max(dims)]


def bench(beta, schedule, repeats=3, engine_steps=(10, 20), chi=None):
    """Staged timings for :func:`trgad.bench.run` (seconds, wall clock, one process).

    * ``staged_first``: first staged JAX value-and-gradient with an empty program cache
      (compilation of every per-shape program included);
    * ``staged``: steady state, min of ``repeats`` after one warm-up;
    * ``staged_compiled_programs``: number of per-shape step programs compiled;
    * ``engine_staged_<n>``: staged value-and-gradient on the keyed engine (structural keys),
      for n in ``engine_steps`` (the first n entries of ``schedule``, or a schedule of n
      steps at the same chi), and ``engine_staged_ratio`` = time at the last n over the first;
      ``engine_transform_<n>`` / ``engine_key_visits_<n>`` and their ratios (the transform
      alone); ``engine_full_size_steps_<n>`` (steps whose input has the schedule's largest
      bond dimension; the earlier ones are tiny), ``engine_linear_ratio`` (their ratio: what
      a cost linear in the steps predicts for ``engine_staged_ratio``),
      ``engine_step_cost_<n>`` (mean forward + transform + run time of a full-size step) and
      ``engine_step_cost_ratio`` (about 1 when the cost is linear).  Engine times are the
      minimum of ``repeats`` after one warm-up.

    The ratios to the whole graph and forward pass are formed by :func:`trgad.bench.run`.
    """
    from .timing import time_call

    beta, ks = check_beta(beta), _schedule(schedule)
    repeats = check_repeats(repeats)
    out = {}
    clear_cache()
    t0 = time.perf_counter()
    value_and_grad_jax(beta, ks)
    out["staged_first"] = time.perf_counter() - t0
    out["staged"] = time_call(lambda: value_and_grad_jax(beta, ks), warmup=1, repeats=repeats).min
    out["staged_compiled_programs"] = len(compiled_shapes())
    chi = chi or max(ks)
    for n in engine_steps:
        sched = ks[:n] if n <= len(ks) else trg.truncation_schedule(chi, n, beta)
        t = time_call(lambda: value_and_grad_engine(beta, sched), warmup=1, repeats=repeats)
        out[f"engine_staged_{n}"] = t.min
        out[f"engine_transform_{n}"] = t.value["transform_seconds"]
        out[f"engine_key_visits_{n}"] = t.value["key_visits"]
        full = full_size_steps(sched)
        rows = {r["stage"]: r for r in t.value["per_step"]}
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
