"""Whole-graph differentiation: one gradient over all TRG steps, in JAX and on the keyed engine.

The JAX half of the phenomenon: tracing plus the transform (``make_jaxpr`` of the gradient)
grows linearly with the number of steps, because a jaxpr identifies values by object
identity, not by structure.  The keyed half (:func:`trg_whole`, with :class:`KeyedOps`
running the same TRG code on :mod:`trgad.engine`) grows exponentially with structural keys.
"""
from __future__ import annotations

import functools
import time

from . import engine as keyed
from . import trg
from .keys import STRATEGIES
from .timing import block, time_call, time_grad_transform
from .validate import InputError, check_beta, check_chi, check_choice, check_int, check_steps


def _jax():
    import jax

    return jax


def lnz_fn(schedule):
    """beta -> lnZ/N as one JAX graph for a fixed truncation schedule."""
    schedule = tuple(int(k) for k in schedule)
    return lambda beta: trg.lnz_per_site(beta, schedule)


@functools.lru_cache(maxsize=8)
def _compiled_value_and_grad(schedule):
    jax = _jax()
    return jax.jit(jax.value_and_grad(lnz_fn(schedule)))


def value_and_grad(beta, schedule, jit=True):
    """(lnZ/N, d lnZ/N / d beta) of the whole graph at ``beta``; u = -(the second entry).

    With ``jit`` the compiled function is cached per schedule, so a scan over beta compiles
    once.  Raises InputError for a bad beta.
    """
    jax = _jax()
    beta = check_beta(beta)
    schedule = tuple(int(k) for k in schedule)
    f = _compiled_value_and_grad(schedule) if jit else jax.value_and_grad(lnz_fn(schedule))
    v, g = f(beta)
    return float(v), float(g)


def measure(steps, chi=16, beta=0.3, repeats=0):
    """The phenomenon's JAX row for ``steps`` TRG steps.

    Returns a dict with ``steps``, ``eqns`` (equations in the jaxpr of ``jax.grad``,
    counting the equations inside nested jaxprs too: see :func:`count_eqns`),
    ``eqns_top_level`` (top-level equations only, ``len(jaxpr.eqns)``; the source report,
    book/source-report.md, prints "eqns" without saying which count), ``make_jaxpr_seconds`` (tracing plus the transform, wall clock),
    ``first_jit_seconds`` (first call of ``jax.jit(jax.grad(f))``, compilation included),
    ``grad`` (d lnZ/N / d beta), and, when ``repeats`` > 0, ``run_seconds`` (steady-state
    call, min of ``repeats``).  Mirrors the source report's JAX script: each timed call
    uses a fresh function so that no cache hides the work.
    """
    jax = _jax()
    steps, chi, beta = check_steps(steps), check_chi(chi), check_beta(beta)
    schedule = trg.truncation_schedule(chi, steps, beta)
    t_jaxpr, jaxpr = time_grad_transform(lnz_fn(schedule), beta)
    g = jax.jit(jax.grad(lnz_fn(schedule)))
    t0 = time.perf_counter()
    grad = block(g(beta))
    t_first = time.perf_counter() - t0
    row = {
        "steps": steps,
        "eqns": count_eqns(jaxpr),
        "eqns_top_level": count_eqns(jaxpr, nested=False),
        "make_jaxpr_seconds": t_jaxpr,
        "first_jit_seconds": t_first,
        "grad": float(grad),
    }
    if repeats:
        row["run_seconds"] = time_call(lambda: g(beta), warmup=0, repeats=repeats).min
    return row


def count_eqns(jaxpr, nested=True):
    """Number of equations in a jaxpr (a ``Jaxpr`` or ``ClosedJaxpr``).

    With ``nested`` (default) every equation counts once at its own level, and the equations
    of each sub-jaxpr held in an equation's parameters are added, recursively: the body of
    ``jit``/``pjit``, the ``call_jaxpr`` of ``custom_vjp_call``/``custom_jvp_call``, the
    bodies of ``scan`` and ``while``, every branch of ``cond``.  So ``jit(f)`` inside ``g``
    counts 1 (the call) plus f's equations.  ``nested=False`` gives ``len(jaxpr.eqns)``.
    """
    root = jaxpr.jaxpr if hasattr(jaxpr, "jaxpr") else jaxpr
    if not nested:
        return len(root.eqns)
    total, stack = 0, [root]
    while stack:
        current = stack.pop()
        total += len(current.eqns)
        for eqn in current.eqns:
            stack.extend(_sub_jaxprs(list(eqn.params.values())))
    return total


def _sub_jaxprs(values):
    """The jaxprs among equation parameters (Jaxpr, ClosedJaxpr, or tuples of them)."""
    found, todo = [], list(values)
    while todo:
        v = todo.pop()
        if hasattr(v, "eqns"):
            found.append(v)
        elif hasattr(v, "jaxpr") and hasattr(v.jaxpr, "eqns"):
            found.append(v.jaxpr)
        elif isinstance(v, (tuple, list)):
            todo.extend(v)
    return found


class KeyedOps:
    """Array namespace for :mod:`trgad.trg` that builds the keyed engine's graph.

    ``trg.lnz_per_site(keyed.leaf(beta, keys), schedule, ops=KeyedOps(keys))`` runs the very
    same TRG code as the JAX back end.  ``keys`` is one of :data:`trgad.keys.STRATEGIES`
    (InputError otherwise).  Attributes: ``name``, ``keys``, ``exp``, ``expm1``, ``log``,
    ``sqrt``, ``reshape``, ``transpose``, ``einsum``, ``norm``, ``svd(M, k)``,
    ``split(M, k)``, ``constant``.
    """

    def __init__(self, keys="structural"):
        self.keys = check_choice("keys", keys, STRATEGIES)
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


def trg_whole(beta, schedule, keys="structural"):
    """lnZ/N and u = -d(lnZ/N)/d beta, differentiating the whole TRG graph on the keyed engine.

    Parameters: ``beta`` > 0 (1/J); ``schedule`` list of ints, ks[i] kept at step i (from
    :func:`trgad.trg.truncation_schedule`); ``keys`` one of :data:`trgad.keys.STRATEGIES`
    ("structural", "interned" or "memo").

    Returns a dict: ``lnz_per_site``, ``u``, ``forward_seconds`` (eager forward pass),
    ``transform_seconds``, ``key_visits``, ``derivative_ops``, ``primal_ops``,
    ``run_seconds``, ``free_seconds`` (seconds; counts are ints).

    Raises InputError for a bad beta, an empty schedule or an unknown ``keys``.  With
    structural keys the transform is exponential in the number of steps: cap it
    (:func:`trgad.timing.capped_sweep`, :func:`trgad.timing.run_with_timeout`).
    """
    beta = check_beta(beta)
    keys = check_choice("keys", keys, STRATEGIES)
    schedule = [check_int("k", k, 1) for k in schedule]
    if not schedule:
        raise InputError("schedule=[] is out of range: at least one TRG step is needed")
    t0 = time.perf_counter()
    b = keyed.leaf(beta, keys)
    lnz = trg.lnz_per_site(b, schedule, ops=KeyedOps(keys))
    forward = time.perf_counter() - t0
    d = keyed.grad(lnz, b)
    g = float(d.run())
    d.free()
    return {
        "lnz_per_site": float(lnz.data), "u": -g, "forward_seconds": forward,
        "transform_seconds": d.transform_seconds, "key_visits": d.key_visits,
        "derivative_ops": d.derivative_ops, "primal_ops": d.primal_ops,
        "run_seconds": d.run_seconds, "free_seconds": d.free_seconds,
    }
