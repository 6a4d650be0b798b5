"""Staged differentiation on the keyed graph engine: one ``engine.vjp`` per TRG step.

The same staging as :func:`trgad.staged.value_and_grad_jax` (see :mod:`trgad.staged` for
the chain rule), on :mod:`trgad.engine` with structural keys still on: each step is built
on a fresh ``engine.leaf`` and a transform never sees more than one step.
:func:`value_and_grad_engine` is also importable as ``trgad.staged.value_and_grad_engine``.
"""
from __future__ import annotations

import time

from . import ising, trg
from .keys import STRATEGIES
from .validate import check_beta, check_choice



def value_and_grad_engine(beta, schedule, keys="structural"):
    """lnZ/N and d(lnZ/N)/d beta by staged VJPs on the keyed graph engine.

    Same staging as :func:`trgad.staged.value_and_grad_jax`: each step is built on a fresh
    ``engine.leaf`` holding the previous tensor, and ``engine.vjp`` sees one step at a time,
    so its cost stays flat per step even with structural keys.

    Parameters
    ----------
    beta : float, |beta| in [BETA_MIN, BETA_MAX]; schedule : sequence of int (see
        :func:`trgad.staged.value_and_grad_jax`);
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

    from .staged import _schedule

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
    out = {"lnz_per_site": lnz, "dlnz": float(np.asarray(dlnz)) + ising.log_weight_slope(beta), "forward_seconds": forward_seconds,
           "per_step": per_step}
    out.update(totals)
    return out


def _concrete(value):
    """The NumPy array held by an engine value (``Value.data``)."""
    import numpy as np

    return np.asarray(getattr(value, "data", value))
