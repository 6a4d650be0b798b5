"""JAX on another axis, the order of differentiation, and JAX's own history of nesting.

:func:`nested_grad` (``jax.grad`` nested n times) against :func:`taylor_mode`
(``jax.experimental.jet``), both checked against the closed form :func:`sin_exp_derivative`;
:func:`distinct_eqns` counts a jaxpr's equations after merging equal ones.
:func:`nested_cond` rebuilds the reproductions of jax-ml/jax #8184 and #8193 and
:func:`cond_history` times them on today's JAX; :data:`trgad.pages.recorded.RECORDED_8193_SECONDS` are
the timings printed in #8193 (recorded elsewhere, quoted).  :func:`taylor_mode_works` and
:func:`jet_has_svd_rule` say whether Taylor mode reaches through the TRG's SVD.  Shown on the book's page "The same
trap elsewhere" (book/elsewhere.md).
"""
from __future__ import annotations

import math
import time
from typing import Callable, Sequence

from ..runtime.timing import count_eqns
from ..runtime.validate import check_depths, check_finite, check_int, check_repeats, check_schedule


#: Point at which sin(x) * exp(x) is differentiated (any real x works; 0.3 as elsewhere).
SIN_EXP_X0 = 0.3


#: Highest order :func:`nested_grad` accepts: make_jaxpr of grad nested 10 times takes about
#: a minute here and its jaxpr about 12,000 equations (the program grows about 2.2x per order).
MAX_GRAD_ORDER = 10


#: Highest order :func:`taylor_mode` accepts (its program grows quadratically in the order).
MAX_JET_ORDER = 40


#: Deepest nesting of :func:`nested_cond` accepted (each level is a Python recursion frame
#: per traced branch).
MAX_COND_DEPTH = 200


def sin_exp(x):
    """sin(x) * exp(x) (JAX), the function whose derivatives of every order are compared."""
    import jax.numpy as jnp

    return jnp.sin(x) * jnp.exp(x)


def sin_exp_derivative(n: int, x: float) -> float:
    """The n-th derivative of sin(x) exp(x) in closed form (the oracle), a float:

    d^n/dx^n [sin x e^x] = Im[(1 + i)^n e^((1 + i) x)] = 2**(n/2) e^x sin(x + n pi/4).

    Raises InputError for n outside [0, 1000] or a non-finite x.
    """
    n, x = check_int("n", n, 0, 1000), check_finite("x", x)
    return 2.0 ** (n / 2) * math.exp(x) * math.sin(x + n * math.pi / 4)


def _eval(closed, x0):
    import jax

    return float(jax.core.eval_jaxpr(closed.jaxpr, closed.consts, x0)[0])


def distinct_eqns(closed) -> int:
    """Equations of a jaxpr that remain after merging equal ones (value numbering).

    Walks the top-level equations of ``closed`` (a ``ClosedJaxpr``) in order and numbers
    each value: an equation whose primitive, parameters (compared by ``repr``) and input
    numbers (literals by value and type) repeat an earlier equation's gets that equation's
    numbers instead of new ones.  Returns how many distinct equations there are: what
    common-subexpression elimination keyed by structure could at best reduce the program
    to, with no algebra (x * 1 and x stay distinct).  An equation holding a sub-jaxpr counts
    as one equation, keyed by its parameters' ``repr``.
    """
    from jax.extend.core import Literal

    jaxpr = closed.jaxpr if hasattr(closed, "jaxpr") else closed
    number = {v: ("in", i) for i, v in enumerate(jaxpr.invars)}
    number.update({v: ("const", i) for i, v in enumerate(jaxpr.constvars)})
    table = {}
    for eqn in jaxpr.eqns:
        ins = tuple(("lit", repr(a.val), str(a.aval)) if isinstance(a, Literal) else number[a]
                    for a in eqn.invars)
        key = (eqn.primitive.name, repr(sorted(eqn.params.items())), ins)
        index = table.setdefault(key, len(table))
        number.update({v: (index, j) for j, v in enumerate(eqn.outvars)})
    return len(table)


def nested_grad(f: Callable, orders: Sequence[int], x0: float = SIN_EXP_X0) -> list:
    """``jax.make_jaxpr`` of ``jax.grad`` nested n times of ``f``, for each n in ``orders``.

    Rows: ``order``, ``eqns`` (equations of the jaxpr, nested ones included:
    :func:`trgad.runtime.timing.count_eqns`), ``distinct`` (:func:`distinct_eqns`), ``seconds`` (wall
    time of that one ``make_jaxpr``: tracing and every nested transform), ``value`` (the
    jaxpr evaluated at ``x0``, op by op, no compilation).  Orders: increasing integers in [1, :data:`MAX_GRAD_ORDER`].  Raises
    InputError for bad orders or a non-finite x0.
    """
    import jax

    orders, x0 = check_depths("orders", orders, 1, MAX_GRAD_ORDER), check_finite("x0", x0)
    rows, g = [], f
    for n in range(1, orders[-1] + 1):
        g = jax.grad(g)
        if n in orders:
            rows.append(_row(n, g, x0))
    return rows


def taylor_mode(f: Callable, orders: Sequence[int], x0: float = SIN_EXP_X0) -> list:
    """The n-th derivative of ``f`` by Taylor mode, ``jax.experimental.jet``, for each n.

    ``jet.jet(f, (x0,), ((1, 0, ..., 0),))`` with n series terms pushes the truncated
    Taylor series x0 + t through ``f``; its last output term is the n-th derivative (jet's
    series are derivatives, not Taylor coefficients: ``factorial_scaled=True``, the
    default).  Rows as :func:`nested_grad`: ``order``, ``eqns`` of the jaxpr of that
    computation, ``distinct``, ``seconds`` of its ``make_jaxpr``, ``value``.  Orders: increasing integers
    in [1, :data:`MAX_JET_ORDER`].  Raises InputError for bad orders or a non-finite x0.
    """
    from jax.experimental import jet

    orders, x0 = check_depths("orders", orders, 1, MAX_JET_ORDER), check_finite("x0", x0)
    rows = []
    for n in orders:
        series = ((1.0,) + (0.0,) * (n - 1),)
        g = lambda x, s=series: jet.jet(f, (x,), s)[1][-1]      # noqa: E731
        rows.append(_row(n, g, x0))
    return rows


def _row(order, g, x0):
    """One row of :func:`nested_grad` and :func:`taylor_mode`: ``g``'s jaxpr at ``x0``, its
    equations (all, distinct), the seconds of its ``make_jaxpr`` and its value."""
    import jax

    t0 = time.perf_counter()
    closed = jax.make_jaxpr(g)(x0)
    seconds = time.perf_counter() - t0
    return {"order": order, "eqns": count_eqns(closed), "distinct": distinct_eqns(closed),
            "seconds": seconds, "value": _eval(closed, x0)}


def nested_cond(x, pred, depth: int):
    """``depth - 1`` nested ``lax.cond``, each taking the deeper cond or the identity: the
    reproduction of jax-ml/jax #8184 (``pred = jnp.array(True)``, under ``vmap``) and #8193
    (``pred = True``, under ``linearize``), as written in those threads.  Returns x."""
    from jax import lax

    if depth == 1:
        return x
    return lax.cond(pred, lambda y: nested_cond(y, pred, depth - 1), lambda y: y, x)


def cond_history(depths: Sequence[int], repeats: int = 3) -> dict:
    """The two reproductions of the nested-cond threads, timed on today's JAX.

    ``"vmap"`` (jax-ml/jax #8184): ``make_jaxpr(vmap(lambda x: nested_cond(x,
    jnp.array(True), d)))`` at ``jnp.array([1.])``; ``"linearize"`` (#8193):
    ``jax.linearize(lambda x: nested_cond(x, True, d), jnp.array([1.]))``.  Each maps to
    rows ``depth``, ``seconds`` (this process's CPU time, ``time.process_time``, the fastest
    of ``repeats``, a fresh function each time, after one untimed call at the first depth)
    and ``eqns`` (equations of the vmap jaxpr, nested ones included; None for linearize).
    Depths: increasing integers in [2, :data:`MAX_COND_DEPTH`].  Raises InputError for bad
    depths or repeats.
    """
    import jax
    import jax.numpy as jnp

    depths, repeats = check_depths("depths", depths, 2, MAX_COND_DEPTH), check_repeats(repeats)
    x = jnp.array([1.0])

    def vmapped(d):
        return jax.make_jaxpr(jax.vmap(lambda y: nested_cond(y, jnp.array(True), d)))(x)

    def linearized(d):
        return jax.linearize(lambda y: nested_cond(y, True, d), x)

    out = {}
    for name, run in (("vmap", vmapped), ("linearize", linearized)):
        run(depths[0])                                   # warm-up: first-use costs of JAX
        rows = []
        for d in depths:
            best, result = math.inf, None
            for _ in range(repeats):
                t0 = time.process_time()
                result = run(d)
                best = min(best, time.process_time() - t0)
            rows.append({"depth": d, "seconds": best, "eqns": count_eqns(result) if name == "vmap" else None})
        out[name] = rows
    return out


def taylor_mode_works(schedule=(2,)):
    """Whether ``jax.experimental.jet`` (Taylor mode) can take the second derivative of
    lnZ/N through trgad's custom_jvp SVD rules: returns (False, the error's first line) or
    (True, None).  With JAX 0.10.x to 0.12.0.1 it is False: an ``UnexpectedTracerError`` inside
    ``jnp.linalg.svd`` under jet's ``custom_jvp`` handling (see the module docstring)."""
    import jax
    from jax.experimental import jet

    from ..physics import trg

    ks = tuple(check_schedule(schedule))
    f = lambda b: trg.lnz_per_site.trusted(b, ks)                               # noqa: E731
    try:
        jax.block_until_ready(jet.jet(f, (0.3,), ((1.0, 0.0),)))
    except Exception as e:                                          # noqa: BLE001 (reported)
        return False, (str(e).strip().splitlines() or [type(e).__name__])[0]
    return True, None


def jet_has_svd_rule():
    """Whether ``jax.experimental.jet`` can push a Taylor series through ``jnp.linalg.svd``
    (a 3 x 3 matrix linear in x): returns (False, "ExceptionName: message") or (True, None).
    With JAX 0.10.x to 0.12.0.1 it is False (``KeyError: 'svd'``: jet has no rule for the primitive)."""
    import jax.numpy as jnp
    from jax.experimental import jet

    f = lambda x: jnp.linalg.svd(x * jnp.eye(3) + jnp.ones((3, 3)))[1].sum()    # noqa: E731
    try:
        jet.jet(f, (0.3,), ((1.0, 0.0),))
    except Exception as e:                                          # noqa: BLE001 (reported)
        return False, f"{type(e).__name__}: {e}"
    return True, None
