"""Whole-graph differentiation in JAX: one ``jax.grad`` over all TRG steps.

This is the JAX half of the phenomenon: tracing plus the transform (``make_jaxpr`` of the
gradient) grows linearly with the number of steps, because a jaxpr identifies values by
object identity, not by structure.
"""
from __future__ import annotations

import functools
import time

from . import trg
from .timing import block, time_call
from .validate import check_beta, check_chi, check_steps


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

    Returns a dict with ``steps``, ``eqns`` (equations in the jaxpr of ``jax.grad``, nested
    jaxprs counted once each), ``make_jaxpr_seconds`` (tracing plus the transform),
    ``first_jit_seconds`` (first call of ``jax.jit(jax.grad(f))``, compilation included),
    ``grad`` (d lnZ/N / d beta), and, when ``repeats`` > 0, ``run_seconds`` (steady-state
    call, min of ``repeats``).  Mirrors the source document's JAX script: each timed call
    uses a fresh function so that no cache hides the work.
    """
    jax = _jax()
    steps, chi, beta = check_steps(steps), check_chi(chi), check_beta(beta)
    schedule = trg.truncation_schedule(chi, steps, beta)
    f = lnz_fn(schedule)
    t0 = time.perf_counter()
    jaxpr = jax.make_jaxpr(jax.grad(f))(beta)
    t_jaxpr = time.perf_counter() - t0
    g = jax.jit(jax.grad(lnz_fn(schedule)))
    t0 = time.perf_counter()
    grad = block(g(beta))
    t_first = time.perf_counter() - t0
    row = {
        "steps": steps,
        "eqns": count_eqns(jaxpr.jaxpr),
        "make_jaxpr_seconds": t_jaxpr,
        "first_jit_seconds": t_first,
        "grad": float(grad),
    }
    if repeats:
        row["run_seconds"] = time_call(lambda: g(beta), warmup=0, repeats=repeats).min
    return row


def count_eqns(jaxpr):
    """Number of equations in a jaxpr, top level only (as ``len(jaxpr.eqns)``)."""
    return len(jaxpr.eqns)
