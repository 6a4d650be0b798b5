"""Timing helpers shared by the chapters, the benchmark and the command line.

* :func:`time_call` - warm-up, repeats, min and median (wall clock, ``time.perf_counter``).
* :func:`capped_sweep` - run a measurement for growing sizes, stop once one passes a cap.
* :func:`time_grad_transform` - JAX's ``make_jaxpr(grad(f))``, timed (wall or CPU clock).
* :func:`count_eqns` - the size of a jaxpr, nested jaxprs included.
* :func:`run_with_timeout` - run a function in a fresh Python process with a hard timeout
  and report "did not return within T s" instead of hanging; :func:`run_command`, the same
  for a program (the tenferro-rs harness).  Both live in :mod:`trgad.runtime.children`
  (with what ends them on a signal) and are named here too.

The demonstrations in this book grow exponentially; these helpers are how no page ever
waits longer than it says.
"""
from __future__ import annotations

import dataclasses
import gc
import math
import statistics
import time
from functools import partial
from typing import Any, Callable, Iterable

import jax

from .children import (CommandResult, SubprocessResult, run_command,  # noqa: F401 (named here too)
                       run_with_timeout)
from .validate import AD_MODES, check_choice, check_int, check_positive, checked


@dataclasses.dataclass
class Timing:
    """Wall-clock times of repeated calls, in seconds; ``value`` is the last call's result,
    ``fastest`` the result of the call that took ``min`` (its figures belong to that time)."""

    times: list
    value: Any = None
    fastest: Any = None

    @property
    def min(self) -> float:
        return min(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def block(x):
    """Wait for JAX's asynchronous dispatch to finish (no-op for other values)."""
    return jax.block_until_ready(x)


@checked(repeats=partial(check_int, "repeats", low=1), mode=partial(check_choice, "mode", allowed=AD_MODES))
def time_grad_transform(f, x, repeats=1, clock=time.perf_counter, mode="reverse"):
    """Trace and transform ``jax.grad(f)`` at ``x`` (``jax.make_jaxpr``), timed; with
    ``mode="forward_mode"`` the forward-mode derivative ``jax.jvp(f, (x,), (1.0,))`` instead
    (``mode`` is one of :data:`trgad.runtime.validate.AD_MODES`; "forward" is a deprecated alias).

    Returns ``(seconds, closed_jaxpr)``: the minimum over ``repeats`` calls of ``clock``'s
    difference (``time.perf_counter``: wall time; ``time.process_time``: this process's CPU
    time, which other processes on the machine do not inflate), with Python's garbage
    collector paused during each call (as ``timeit`` does), and the jaxpr of the gradient.
    Every repeat traces and transforms ``f`` afresh (JAX caches the jaxpr of a function it has
    traced before, so repeating ``make_jaxpr`` on one function object would time the cache).
    This is JAX's counterpart of the keyed engine's transform: tracing plus the reverse-mode
    transform, no compilation.
    """
    best, jaxpr = math.inf, None
    for _ in range(repeats):
        # A fresh function per repeat: make_jaxpr of the same function object is a cache hit
        # from the second call on (microseconds), which would time JAX's cache, not the transform.
        fresh = lambda y: f(y)  # noqa: E731
        derivative = jax.grad(fresh) if mode == "reverse" else (lambda y: jax.jvp(fresh, (y,), (1.0,))[1])
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            t0 = clock()
            jaxpr = jax.make_jaxpr(derivative)(x)
            best = min(best, clock() - t0)
        finally:
            if was_enabled:
                gc.enable()
    return best, jaxpr


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


@checked(warmup=partial(check_int, "warmup", low=0), repeats=partial(check_int, "repeats", low=1))
def time_call(fn: Callable[[], Any], *, warmup: int = 1, repeats: int = 3) -> Timing:
    """Time ``fn()`` after ``warmup`` untimed calls, ``repeats`` times.

    JAX results are waited for (``block_until_ready``) inside the timed region.  Returns a
    :class:`Timing` whose ``value`` is the last result and ``fastest`` the result of the
    fastest timed call, so that figures a result carries (e.g. per-step times) can be taken
    from the same call as ``Timing.min``.  Raises InputError for warmup < 0 or repeats < 1.
    """
    value = None
    for _ in range(warmup):
        value = block(fn())
    times, fastest = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = block(fn())
        times.append(time.perf_counter() - t0)
        if times[-1] == min(times):
            fastest = value
    return Timing(times, value, fastest)


@dataclasses.dataclass
class Sweep:
    """Result of :func:`capped_sweep`: the rows measured and where it stopped."""

    rows: list
    stopped_at: Any = None     # the parameter whose measurement passed the cap (None: all ran)
    cap_seconds: float = 0.0

    @property
    def completed(self) -> bool:
        return self.stopped_at is None


@checked(cap_seconds=partial(check_positive, "cap_seconds"))
def capped_sweep(measure: Callable[[Any], dict], params: Iterable, cap_seconds: float,
                 key: str = "seconds") -> Sweep:
    """Call ``measure(p)`` for each p in ``params`` until one result's ``key`` exceeds the cap.

    ``measure`` returns a dict (one table row) containing ``key`` in seconds.  The row that
    passed the cap is kept (it did return); no larger parameter is tried.  Use this for
    growth that may be exponential: the worst case costs about cap_seconds times the growth
    factor of one step.  Raises InputError for a cap that is not a positive number.
    """
    rows = []
    for p in params:
        row = measure(p)
        rows.append(row)
        if row[key] > cap_seconds:
            return Sweep(rows, stopped_at=p, cap_seconds=cap_seconds)
    return Sweep(rows, None, cap_seconds)


# ---- one rule for ties and leads, book-wide ---------------------------------------------

#: Two timings whose ratio is within this relative distance of 1 are a tie: on a shared
#: 2-core machine the same program's repeated timings move by about this much, so a
#: smaller gap says nothing about which is faster.
TIE_RTOL = 0.10


def tie(a: float, b: float, rtol: float = TIE_RTOL) -> bool:
    """Whether timings ``a`` and ``b`` (seconds, > 0) are a tie: max/min <= 1 + ``rtol``."""
    a, b = check_positive("a", a), check_positive("b", b)
    return max(a, b) / min(a, b) <= 1.0 + rtol


def faster(a: float, b: float, rtol: float = TIE_RTOL) -> bool:
    """Whether ``a`` is faster than ``b`` by more than a tie: b / a > 1 + ``rtol``.  The one
    rule the book's sentences "X is faster than Y" are asserted with (:func:`tie` otherwise)."""
    a, b = check_positive("a", a), check_positive("b", b)
    return b / a > 1.0 + rtol
