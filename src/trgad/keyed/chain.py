"""The minimal reproduction: the mul chain y <- y**K / K, each value used K times per layer.

The source report's chain (book/source-report.md) is y <- (y*y)/2 (fan-out K = 2).  Here the fan-out is a
parameter: layer d computes y_{d+1} = (y_d * y_d * ... * y_d) / K with K factors of the
*same* value, so each value is an input of K multiplications' worth of uses.  A transform
that compares structural keys without a memo walks this DAG as a tree of about K**depth
nodes; one that identifies values by identity or by interned ids stays linear.

Analytic derivative (the oracle): with e_d = 1 + K + ... + K**(d-1),

    y_D = x0**(K**D) / K**e_D,     d y_D / d x0 = K**D * x0**(K**D - 1) / K**e_D,

equivalently the product over layers of d y_{d+1} / d y_d = y_d**(K-1).
"""
from __future__ import annotations

import decimal
import math
from functools import partial

import jax

from . import engine as keyed
from .keys import STRATEGIES
from ..runtime.timing import Sweep, capped_sweep, count_eqns, time_grad_transform
from ..runtime.validate import (AD_MODES, CHAIN_MAX_OPS, check_chain, check_choice, check_depths,
                                check_engine, check_int, check_point, check_positive, checked)

#: Differentiation modes of :func:`run`: reverse mode, forward mode, and the keyed engine's
#: eager forward mode (its last, keyed engine only).
MODES = AD_MODES + ("forward_eager",)


def build(x, depth, fanout):
    """y_depth of the chain started at ``x`` (an engine Value, a JAX tracer or a float)."""
    y = x
    for _ in range(depth):
        p = y
        for _ in range(fanout - 1):
            p = p * y
        y = p / fanout
    return y


def _chain(depth, fanout):
    """depth and fanout, checked together (:func:`trgad.runtime.validate.check_chain`)."""
    return dict(zip(("depth", "fanout"), check_chain(depth, fanout)))


@checked(_chain)
def analytic_grad(depth, fanout, x0):
    """d y_D / d x0 from the closed form (see the module docstring); a float (0.0 or inf
    when it under- or overflows, nan when even the exponents leave decimal's range).  Raises
    InputError for depth or fanout < 1 or depth * fanout > CHAIN_MAX_OPS.

    Evaluated in 50-digit decimal arithmetic (``decimal``), because x0**(K**D - 1) and
    K**e_D each leave the float range long before their ratio does.
    """
    D, K = depth, fanout                           # the formulas' names
    power = K**D - 1                               # exponent of x0 (an exact int)
    e_D = D if K == 1 else (K**D - 1) // (K - 1)   # exponent of K in the denominator
    if power == 0:
        return 1.0
    ctx = decimal.Context(prec=50, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[])
    value = ctx.divide(ctx.multiply(ctx.power(K, D), ctx.power(decimal.Decimal(float(x0)), power)),
                       ctx.power(K, e_D))
    if value.is_nan():                             # inf / inf: the exponents left even this range
        return math.nan
    return float(value)


def _mode(engine, mode):
    """``mode``, one of the engine's: :data:`MODES` (keyed) or AD_MODES (JAX)."""
    return {"mode": check_choice("mode", mode, MODES if engine == "keyed" else AD_MODES)}


@checked(_chain, _mode, engine=check_engine, keys=partial(check_choice, "keys", allowed=STRATEGIES),
         x0=partial(check_point, "x0"))
def run(depth, fanout, engine="keyed", keys="structural", x0=1.1, mode="reverse"):
    """Differentiate the chain of ``depth`` layers and fan-out ``fanout`` at ``x0``.

    Parameters
    ----------
    depth : int >= 1, layers.
    fanout : int >= 1, factors of the same value per layer (uses of each value).
    engine : "keyed" (this project's graph engine, :mod:`trgad.keyed.engine`) or "jax".
    keys : key strategy of the keyed engine, one of :data:`trgad.keyed.keys.STRATEGIES`
        (ignored by JAX, reported as None).
    x0 : float, point of differentiation: 0 or finite with |x0| >= the smallest normal
        float64 (:func:`trgad.runtime.validate.check_point`; JAX on the CPU flushes subnormals to 0).
    mode : one of :data:`MODES`: "reverse" (keyed ``vjp`` / ``jax.grad``), "forward_mode"
        (the keyed engine's graph-to-graph ``jvp`` / ``jax.jvp``; "forward" is a deprecated
        alias) or "forward_eager" (keyed engine only: ``jvp_eager``, tangents along the
        trace by identity, no key lookups).

    Returns
    -------
    dict (JSON-serialisable) with ``depth``, ``fanout``, ``engine``, ``keys``, ``mode``,
    ``transform_seconds`` (keyed: the transform; JAX: ``make_jaxpr`` of the derivative, i.e.
    tracing plus the transform), ``key_visits`` (keyed: exact count; JAX: None),
    ``derivative_ops`` (keyed: instructions of the derivative program, or tangent operations
    computed by ``forward_eager``; JAX: equations of the derivative's jaxpr, nested ones
    included), ``grad`` (d y_D / d x0; None if not finite, and then a ``note`` says so),
    ``analytic_grad``, and for the keyed engine ``run_seconds`` and ``free_seconds``.

    Raises InputError for depth or fanout < 1, depth * fanout above
    :data:`trgad.runtime.validate.CHAIN_MAX_OPS`, an x0 that is not finite or is subnormal, or an unknown engine, keys or
    mode (``forward_eager`` with JAX included).
    """
    out = {"depth": depth, "fanout": fanout, "engine": engine,
           "keys": keys if engine == "keyed" else None, "mode": mode}
    if engine == "keyed":
        x = keyed.leaf.trusted(x0, keys)
        y = build(x, depth, fanout)
        if mode == "reverse":
            d = keyed.grad(y, x)
            g = float(d.run())
        else:
            d = (keyed.jvp if mode == "forward_mode" else keyed.jvp_eager)([y], x, 1.0)
            g = float(d.run()[0])
        d.free()
        out.update(transform_seconds=d.transform_seconds, key_visits=d.key_visits,
                   derivative_ops=d.derivative_ops, run_seconds=d.run_seconds,
                   free_seconds=d.free_seconds)
    else:
        f = lambda x: build(x, depth, fanout)  # noqa: E731
        seconds, jaxpr = time_grad_transform.trusted(f, x0, 1, mode=mode)
        g = float(jax.grad(f)(x0) if mode == "reverse" else jax.jvp(f, (x0,), (1.0,))[1])
        out.update(transform_seconds=seconds, key_visits=None, derivative_ops=count_eqns(jaxpr))
    out["grad"] = g if math.isfinite(g) else None
    out["analytic_grad"] = analytic_grad.trusted(depth, fanout, x0)
    if not math.isfinite(out["analytic_grad"]):
        out["analytic_grad"] = None
    if out["grad"] is None:
        out["note"] = f"d y_D / d x0 overflows float64 at x0={x0!r} (y grows like x0**(fanout**depth))"
    return out


def sweep(fanout, depths, engine="keyed", keys="structural", x0=1.1, cap_seconds=None, repeats=1,
          mode="reverse"):
    """:func:`run` for each depth in ``depths`` (ascending), stopping after the first whose
    transform takes longer than ``cap_seconds`` (None: no cap).

    Each row is :func:`run`'s dict; with ``repeats`` > 1 the chain is transformed that many
    times and ``transform_seconds`` is the minimum.  Returns a :class:`trgad.runtime.timing.Sweep`
    (``rows``, ``stopped_at`` = the depth that passed the cap or None).  Raises InputError as
    :func:`run` does, for depths that are not increasing, repeats < 1 or a cap that is not a
    positive number.
    """
    depths = check_depths("depths", depths, 1, CHAIN_MAX_OPS)
    fanout = check_chain(depths[-1], fanout)[1]      # the deepest chain bounds them all
    engine = check_engine(engine)
    keys = check_choice("keys", keys, STRATEGIES)
    mode = check_choice("mode", mode, MODES if engine == "keyed" else AD_MODES)
    x0, repeats = check_point("x0", x0), check_int("repeats", repeats, 1)

    def measure(depth):
        rows = [run.trusted(depth, fanout, engine, keys, x0, mode) for _ in range(repeats)]
        return min(rows, key=lambda r: r["transform_seconds"])

    if cap_seconds is None:
        return Sweep([measure(d) for d in depths], None, 0.0)
    return capped_sweep.trusted(measure, depths, check_positive("cap_seconds", cap_seconds),
                                  key="transform_seconds")
