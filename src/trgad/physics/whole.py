"""Whole-graph differentiation in JAX: one transform over all TRG steps.

The JAX half of the phenomenon: tracing plus the transform (``make_jaxpr`` of the gradient)
grows linearly with the number of steps, because a jaxpr identifies values by object
identity, not by structure.  The keyed engine's whole graph, which grows exponentially with
structural keys, is :func:`trgad.keyed.keyed_trg.trg_whole` (engine side).
"""
from __future__ import annotations

import time

import jax

from ..runtime import compiled
from . import ising, trg
from ..runtime.timing import block, count_eqns, time_call, time_grad_transform
from ..runtime.validate import check_beta, check_chi, check_repeats, check_schedule, check_steps, checked

#: Compiled whole-graph functions, per schedule (registered: :func:`trgad.runtime.compiled.clear`).
_VALUE_AND_GRAD = compiled.registry("whole.value_and_grad")
_SECOND = compiled.registry("whole.second")


@checked(schedule=check_schedule)
def lnz_fn(schedule):
    """beta -> lnZ/N as one JAX graph for a fixed truncation schedule (checked:
    :func:`trgad.runtime.validate.check_schedule`)."""
    schedule = tuple(schedule)
    return lambda beta: trg.lnz_per_site.trusted(beta, schedule)


def value_and_grad(beta, schedule, jit=True):
    """(lnZ/N, d lnZ/N / d beta) of the whole graph at ``beta``; u = -(the second entry).

    With ``jit`` the compiled function is cached per schedule, so a scan over beta compiles
    once.  Raises InputError for a bad beta or schedule.
    """
    beta, schedule = check_beta(beta), tuple(check_schedule(schedule))
    if not jit:
        f = jax.value_and_grad(lnz_fn.trusted(schedule))
    elif schedule in _VALUE_AND_GRAD:
        f = _VALUE_AND_GRAD[schedule]
    else:
        f = _VALUE_AND_GRAD[schedule] = compiled.jit(jax.value_and_grad(lnz_fn.trusted(schedule)))
    v, g = f(beta)
    return float(v), float(g)


def specific_heat_autodiff(beta, schedule):
    """c = beta**2 d^2(lnZ/N)/d beta^2 by ``jax.grad(jax.grad(.))`` of the whole JAX graph.

    Reverse-over-reverse through trgad's truncated-SVD rule (whose backward pass is itself
    differentiable): the exact derivative of the truncated TRG, up to rounding.  The first
    call per schedule traces and compiles the second-order program (cached per schedule),
    which takes far longer than later calls.  Returns a float (units of k_B per site; 0 when
    the second derivative is exactly 0, :func:`trgad.physics.ising.specific_heat_of`).  Raises
    InputError for a bad beta or schedule.  :func:`trgad.physics.modes.value_and_derivatives` with
    ``method="whole"`` computes the same c by forward over reverse.
    """
    beta, ks = check_beta(beta), tuple(check_schedule(schedule))
    if ks not in _SECOND:
        _SECOND[ks] = compiled.jit(jax.grad(jax.grad(lnz_fn.trusted(ks))))
    return ising.specific_heat_of(beta, float(_SECOND[ks](float(beta))))


def measure(steps, chi=16, beta=0.3, repeats=0):
    """The phenomenon's JAX row for ``steps`` TRG steps.

    Returns a dict with ``steps``, ``eqns`` (equations in the jaxpr of ``jax.grad``,
    counting the equations inside nested jaxprs too: see :func:`trgad.runtime.timing.count_eqns`),
    ``eqns_top_level`` (top-level equations only, ``len(jaxpr.eqns)``; the source report,
    book/source-report.md, prints "eqns" without saying which count), ``make_jaxpr_seconds`` (tracing plus the transform, wall clock),
    ``first_jit_seconds`` (first call of ``jax.jit(jax.grad(f))``, compilation included),
    ``grad`` (d lnZ/N / d beta), and, when ``repeats`` > 0, ``run_seconds`` (steady-state
    call, min of ``repeats``).  Mirrors the source report's JAX script: each timed call
    uses a fresh function so that no cache hides the work.
    """
    steps, chi, beta = check_steps(steps), check_chi(chi), check_beta(beta)
    repeats = check_repeats(repeats, low=0)
    schedule = tuple(trg.truncation_schedule.trusted(chi, steps, beta))
    t_jaxpr, jaxpr = time_grad_transform.trusted(lnz_fn.trusted(schedule), beta)
    g = jax.jit(jax.grad(lnz_fn.trusted(schedule)))
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
        row["run_seconds"] = time_call.trusted(lambda: g(beta), warmup=0, repeats=repeats).min
    return row
