"""The Ising TRG on the keyed graph engine: the whole graph and the staged fix.

Engine side.  :class:`KeyedOps` runs the very same TRG code (:mod:`trgad.physics.trg`) on
:mod:`trgad.keyed.engine`, so that the graph the keyed engine transforms is the graph JAX
differentiates.  Two ways to differentiate it:

* :func:`trg_whole` - one reverse-mode transform of the whole graph: with structural keys
  its cost grows exponentially with the number of steps (the phenomenon of the book);
* :func:`value_and_grad_engine` - the staged fix of :mod:`trgad.physics.staged` (see there for the
  chain rule), on the keyed engine with structural keys still on: each step is built on a
  fresh ``engine.leaf`` and a transform never sees more than one step.

:func:`specific_heat` (central difference of two staged gradients) and
:func:`staged_derivatives` (what ``python -m trgad trg --engine keyed --method staged``
prints) build on the staged one.
"""
from __future__ import annotations

import time
from functools import partial

import numpy as np

from . import engine as keyed
from ..physics import heat, ising, trg
from .keys import STRATEGIES
from ..runtime.validate import check_beta, check_choice, check_order, check_schedule, checked


class KeyedOps:
    """Array namespace for :mod:`trgad.physics.trg` that builds the keyed engine's graph.

    ``trg.lnz_per_site(engine.leaf(beta, keys), schedule, ops=KeyedOps(keys))`` runs the very
    same TRG code as the JAX back end.  ``keys`` is one of :data:`trgad.keyed.keys.STRATEGIES`
    (InputError otherwise).  Attributes: ``name``, ``keys``, ``exp``, ``expm1``, ``log``,
    ``sqrt``, ``reshape``, ``transpose``, ``einsum``, ``norm``, ``svd(M, k)``,
    ``split(M, k)``, ``constant``.
    """

    def __init__(self, keys="structural"):
        self._use(check_choice("keys", keys, STRATEGIES))

    @classmethod
    def unchecked(cls, keys):
        """The namespace for a caller that checked ``keys``."""
        ops = cls.__new__(cls)
        ops._use(keys)
        return ops

    def _use(self, keys):
        self.keys = keys
        self.name = f"keyed-{keys}"
        self.exp, self.expm1, self.log, self.sqrt = keyed.exp, keyed.expm1, keyed.log, keyed.sqrt
        self.reshape, self.transpose, self.einsum = keyed.reshape, keyed.transpose, keyed.einsum
        self.norm, self.svd = keyed.norm, keyed.svd

    def split(self, M, k):
        """Halves U sqrt(s) and sqrt(s) Vh from the engine's SVD primitive, as tenferro-rs's
        TRG builds them: all three SVD outputs enter the graph."""
        U, s, Vh = keyed.svd(M, k)
        r = keyed.sqrt(s)
        return U * keyed.reshape(r, (1, k)), keyed.reshape(r, (k, 1)) * Vh

    def constant(self, x):
        return keyed.constant(x, self.keys)


@checked(beta=check_beta, schedule=check_schedule, keys=partial(check_choice, "keys", allowed=STRATEGIES))
def trg_whole(beta, schedule, keys="structural"):
    """lnZ/N and u = -d(lnZ/N)/d beta, differentiating the whole TRG graph on the keyed engine.

    Parameters: ``beta`` > 0 (1/J); ``schedule`` list of ints, ks[i] kept at step i (from
    :func:`trgad.physics.trg.truncation_schedule`); ``keys`` one of :data:`trgad.keyed.keys.STRATEGIES`
    ("structural", "interned" or "memo").

    Returns a dict: ``lnz_per_site``, ``u``, ``primal_seconds`` (the eager primal pass that
    computes lnZ/N and records the graph), ``transform_seconds``, ``key_visits``,
    ``derivative_ops``, ``primal_ops``, ``run_seconds``, ``free_seconds`` (seconds; counts
    are ints).

    Raises InputError for a bad beta or schedule (:func:`trgad.runtime.validate.check_schedule`) or
    an unknown ``keys``.  With structural keys the transform is exponential in the number of
    steps: cap it (:func:`trgad.runtime.timing.capped_sweep`, :func:`trgad.runtime.timing.run_with_timeout`).
    """
    t0 = time.perf_counter()
    b = keyed.leaf.trusted(beta, keys)
    lnz = trg.lnz_per_site.trusted(b, schedule, ops=KeyedOps.unchecked(keys))
    primal = time.perf_counter() - t0
    d = keyed.grad(lnz, b)
    g = float(d.run())
    d.free()
    return {
        "lnz_per_site": float(lnz.data), "u": -g, "primal_seconds": primal,
        "transform_seconds": d.transform_seconds, "key_visits": d.key_visits,
        "derivative_ops": d.derivative_ops, "primal_ops": d.primal_ops,
        "run_seconds": d.run_seconds, "free_seconds": d.free_seconds,
    }


@checked(beta=check_beta, schedule=check_schedule, keys=partial(check_choice, "keys", allowed=STRATEGIES))
def value_and_grad_engine(beta, schedule, keys="structural"):
    """lnZ/N and d(lnZ/N)/d beta by staged VJPs on the keyed graph engine.

    Same staging as :func:`trgad.physics.staged.value_and_grad_jax`: each step is built on a fresh
    ``engine.leaf`` holding the previous tensor, and ``engine.vjp`` sees one step at a time,
    so its cost stays flat per step even with structural keys.

    Parameters
    ----------
    beta : float in [BETA_MIN, BETA_MAX]; schedule : sequence of int (see
        :func:`trgad.physics.staged.value_and_grad_jax`);
    keys : one of :data:`trgad.keyed.keys.STRATEGIES` ("structural", "interned", "memo"), the
        engine's value-key design.

    Returns
    -------
    dict with ``lnz_per_site``, ``dlnz`` (floats), ``transform_seconds`` (sum over all VJP
    transforms), ``run_seconds`` (sum of executing the derivative programs),
    ``primal_seconds`` (the eager primal pass, all steps), ``key_visits`` and
    ``derivative_ops`` (sums over the VJPs), and ``per_step`` (list of dicts with the same
    figures for each step's VJP, last step first, plus ``primal_seconds``: that step's share
    of the primal pass; 0 for the trace and the initial tensor).

    Raises
    ------
    InputError for bad beta, schedule or keys.
    """
    ops = KeyedOps.unchecked(keys)
    n = len(schedule)

    t0 = time.perf_counter()
    beta_leaf = keyed.leaf.trusted(beta, keys)
    T0 = ising.initial_tensor(beta_leaf, ops)
    stages = []          # (leaf, T_next, ln) per step
    current = _concrete(T0)
    ln_values, step_primal = [], []
    for k in schedule:
        t_step = time.perf_counter()
        leaf = keyed.leaf.trusted(current, keys)
        T_next, ln = trg.trg_step(leaf, k, ops)
        stages.append((leaf, T_next, ln))
        current = _concrete(T_next)
        ln_values.append(float(_concrete(ln)))
        step_primal.append(time.perf_counter() - t_step)
    last_leaf = keyed.leaf.trusted(current, keys)
    tail = ops.log(trg.torus_trace(last_leaf, ops))
    tail_value = float(_concrete(tail))
    primal_seconds = time.perf_counter() - t0
    lnz = tail_value / 2**n + sum(ln / 2**i for i, ln in enumerate(ln_values))
    lnz += ising.log_weight_per_site(beta)    # e^{2 beta} per site, out of T (trgad.physics.ising)

    totals = {"transform_seconds": 0.0, "run_seconds": 0.0, "key_visits": 0, "derivative_ops": 0}
    per_step = []

    def pull(outputs, wrt, cotangents, label, primal=0.0):
        d = keyed.vjp(outputs, wrt, cotangents)
        t1 = time.perf_counter()
        grad = d.run()
        run = time.perf_counter() - t1
        d.free()
        row = {"stage": label, "transform_seconds": float(d.transform_seconds), "run_seconds": run,
               "key_visits": int(d.key_visits), "derivative_ops": int(d.derivative_ops),
               "primal_seconds": primal}
        per_step.append(row)
        for name in totals:
            totals[name] += row[name]
        return grad

    ct = pull([tail], last_leaf, [1.0 / 2**n], "trace")
    for i in range(n - 1, -1, -1):
        leaf, T_next, ln = stages[i]
        # both paths: through T_{i+1} (cotangent ct) and through ln||T_i|| (weight w_i)
        ct = pull([T_next, ln], leaf, [ct, 1.0 / 2**i], f"step {i}", step_primal[i])
    dlnz = pull([T0], beta_leaf, [ct], "initial tensor")
    out = {"lnz_per_site": lnz, "dlnz": float(np.asarray(dlnz)) + ising.log_weight_slope(beta),
           "primal_seconds": primal_seconds,
           "per_step": per_step}
    out.update(totals)
    return out


def _concrete(value):
    """The NumPy array held by an engine value (``Value.data``)."""
    return np.asarray(getattr(value, "data", value))


@checked(beta=check_beta, schedule=check_schedule, keys=partial(check_choice, "keys", allowed=STRATEGIES))
def specific_heat(beta, schedule, keys="structural", h=None):
    """c = beta**2 d^2(lnZ/N)/d beta^2 from a central difference of two staged gradients on
    the keyed engine (:func:`value_and_grad_engine`, :func:`trgad.physics.heat.central_difference_c`
    with its step :func:`trgad.physics.heat.fd_step` unless ``h`` is given).  The engine has first
    derivatives only, so this is its way to c.  Units of k_B per site.  Raises InputError for
    a bad beta, schedule or keys, or h outside (0, beta)."""
    return heat.central_difference_c(lambda b: value_and_grad_engine.trusted(b, schedule, keys)["dlnz"], beta, h)


@checked(beta=check_beta, schedule=check_schedule, keys=partial(check_choice, "keys", allowed=STRATEGIES),
         order=check_order)
def staged_derivatives(beta, schedule, keys="structural", order=1):
    """lnZ/N, u and (``order=2``) c by the staged method on the keyed engine, as one JSON-ready
    dict: what ``python -m trgad trg --engine keyed --method staged`` prints.

    Returns ``method`` ("staged"), ``order``, ``lnz_per_site``, ``u`` (J per site), ``c``
    (k_B per site, by :func:`specific_heat`; None for order 1), ``c_method`` ("fd"; None for
    order 1), ``fd_step`` (the step h of the central difference; None for order 1),
    ``keys``, ``seconds`` (this call), and the first-order pass's ``transform_seconds``,
    ``key_visits``, ``derivative_ops``, ``run_seconds`` and ``primal_seconds``
    (:func:`value_and_grad_engine`).  Raises InputError for a bad beta, schedule, keys or order.
    """
    t0 = time.perf_counter()
    r = value_and_grad_engine.trusted(beta, schedule, keys)
    out = {"method": "staged", "order": order, "lnz_per_site": r["lnz_per_site"], "u": -r["dlnz"],
           "c": None, "c_method": None, "fd_step": None, "keys": keys}
    out.update({name: r[name] for name in ("transform_seconds", "key_visits", "derivative_ops",
                                           "run_seconds", "primal_seconds")})
    if order == 2:
        out.update(c=specific_heat.trusted(beta, schedule, keys, h=heat.fd_step(beta)), c_method="fd",
                   fd_step=heat.fd_step(beta))
    out["seconds"] = time.perf_counter() - t0
    return out
