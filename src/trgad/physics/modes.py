"""Every mode of differentiation of the TRG's lnZ/N in beta, side by side, one entry point.

:func:`value_and_derivatives` gives lnZ/N, u = -d(lnZ/N)/d beta and (``order=2``) the
specific heat c = beta**2 d^2(lnZ/N)/d beta^2 by one of :data:`METHODS`:

* ``whole`` - one ``jax.jit(jax.value_and_grad)`` of the whole graph; c by forward over
  reverse (``jax.jvp`` of ``value_and_grad``) of the whole graph (:data:`SECOND_FORM`
  says which second-order form each method uses, and why).  The repeated full-size steps
  are one ``jax.lax.scan`` inside that graph (:func:`lnz_scanned`), so the step is traced,
  transformed and compiled once; the transform still sees the whole graph.
* ``staged`` - one transform per TRG step, programs compiled per (D, k), side by side
  before the pass (:mod:`trgad.physics.staged`); c exactly by :func:`trgad.physics.staged.value_grad_hess_jax`
  (forward over forward, step by step), or by the central difference of two staged
  gradients (``c_method="fd"``).
* ``forward_mode`` - forward-mode AD only: u from one ``jax.jvp`` in beta, c from
  ``jax.jvp`` of that (forward over forward); "forward" is accepted as a deprecated alias
  for one release (:data:`trgad.runtime.validate.DEPRECATED_NAMES`).  Taylor mode
  (``jax.experimental.jet``) does not work here (:func:`trgad.topics.nesting.taylor_mode_works`), for two reasons (JAX 0.10.2 to 0.12.0.1): jet ignores ``custom_jvp``
  rules and calls the primal function instead ("TODO(mattjj): don't just ignore custom jvp
  rules?" in ``jax/experimental/jet.py``), and it has no Taylor rule for ``svd`` at all
  (``jet.jet`` of ``jnp.linalg.svd`` raises ``KeyError: svd``, :func:`trgad.topics.nesting.jet_has_svd_rule`).
  On the TRG graph it fails even before that: a tracer escapes inside the primal function
  of trgad's ``custom_jvp`` SVD (at its first ``jnp`` call, the finiteness check, before any
  SVD runs) under jet's handling of the ``custom_jvp`` call (``UnexpectedTracerError``), a
  defect of jet's ``custom_jvp`` path.
* ``checkpoint`` - the scan with its step checkpointed: the steps whose shapes repeat (input bond dimension
  D = kept k = chi, from the fifth step on at chi = 16) run in one ``jax.lax.scan`` whose
  body is ``jax.checkpoint``-ed, so the repeated step is traced and compiled once and its
  backward pass recomputes the step instead of storing its intermediates; the first,
  smaller steps are unrolled (:func:`lnz_scanned` with ``checkpoint=True``).  c by reverse
  over forward (the step's ``jax.jvp`` inside the scan, then one reverse pass).

Every method but staged scans the repeated steps (:func:`lnz_scanned`), and first-order
reverse mode (``whole``, ``checkpoint`` and ``staged`` at order 1) runs through
:data:`trgad.physics.trg.JAX_REVERSE`, whose split has its pullback written out
(:func:`trgad.physics.svd.balanced_split_reverse`); forward mode and second derivatives go through
:data:`trgad.physics.trg.JAX` (:func:`trgad.physics.svd.balanced_split`).  Both give the same numbers to
rounding; they differ in the size of the program, hence its compile time.

Every method compiles one program per (method, order, schedule) and caches it in the
registry of :mod:`trgad.runtime.compiled` (``compiled.clear()`` forgets them, the staged ones too).  All are exact up to rounding; they differ in compile
time, run time and memory (:mod:`trgad.bench`).  The book's chapter on the modes explains
the trade-offs; this module only computes.
"""
from __future__ import annotations

import copy
import time
from functools import partial

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from ..runtime import compiled
from . import ising, staged, trg, heat
from ..runtime.validate import InputError, check_beta, check_choice, check_order, check_schedule, checked

#: The methods of :func:`value_and_derivatives`: the modes of differentiation.
METHODS = ("whole", "staged", "forward_mode", "checkpoint")
#: How ``staged`` gets c: ``exact`` (second-order staged pass) or ``fd`` (central difference).
C_METHODS = ("exact", "fd")
#: Forms of a second derivative (the outer transform first): ``jax.jvp`` of ``jax.jvp``,
#: ``jax.jvp`` of ``jax.value_and_grad``, ``jax.value_and_grad`` of ``jax.jvp``.
SECOND_FORMS = ("forward-over-forward", "forward-over-reverse", "reverse-over-forward")
#: The form each method uses for c.  ``checkpoint``: reverse over forward (a ``jax.jvp``
#: inside every scanned, checkpointed step, then one reverse pass), the only reverse-mode
#: form that came out right there in this package: forward over reverse through the
#: checkpointed scan gave c off by 5e-3 relative at 6 steps (chi = 16), and reverse over
#: reverse through a ``lax.scan`` of the step gave NaN (JAX 0.10.2; not traced to its cause,
#: which may be this package's SVD rule under remat rather than JAX).  ``whole``: forward
#: over reverse, the form whose program compiled fastest of the three (a first call is
#: mostly compilation); :func:`trgad.physics.whole.specific_heat_autodiff` is reverse over reverse.
#: ``staged``: forward over forward one step at a time (:func:`trgad.physics.staged.value_grad_hess_jax`:
#: each step's jet program, no backward pass).
#: ``python -m trgad bench --json`` measures each method's c (its ``second_order`` rows).
SECOND_FORM = {"whole": "forward-over-reverse", "forward_mode": "forward-over-forward",
               "checkpoint": "reverse-over-forward", "staged": "forward-over-forward"}


def check_method(method):
    """One of :data:`METHODS` (a deprecated alias, "forward", is returned as its new name),
    else InputError naming it."""
    return check_choice("method", method, METHODS)


# ---- the checkpointed scan -----------------------------------------------------------------

@checked(schedule=check_schedule)
def scan_start(schedule):
    """Index of the first step of the repeated tail: from there to the end every step's input
    bond dimension D equals its kept k and all the k are equal (the scan's fixed shape).
    Step i's input has D = schedule[i - 1] (2 for step 0).  At chi = 16 ([2, 4, 4, 16, ...])
    it is 4; at chi = 2 ([2, 2, ...]) 0.  Returns len(schedule) when the last step does not
    qualify (nothing is scanned); a one-step tail is still a scan.  Raises InputError for a
    bad schedule."""
    schedule = list(schedule)
    dims = [2] + schedule[:-1]
    start = len(schedule) - 1
    while start > 0 and dims[start - 1] == schedule[start - 1] == schedule[-1]:
        start -= 1
    return start if dims[start] == schedule[start] == schedule[-1] else len(schedule)


#: Name of the one value the checkpointed step saves for its backward pass (see below).
NORM_NAME = "trg_norm"


def named_norm_ops(ops=None):
    """A copy of the JAX ops ``ops`` (default :data:`trgad.physics.trg.JAX`) with ``norm``'s result
    tagged :data:`NORM_NAME` (``jax.ad_checkpoint.checkpoint_name``), for a
    ``jax.checkpoint`` policy that saves it; the values are those of ``ops``.

    Why: the backward pass of a ``jax.checkpoint``-ed step recomputes the step, and XLA may
    fuse or order the recomputed reduction differently, so the norm ||T|| can round
    differently in its last bit;
    the SVD of the slightly different matrix then picks another basis inside each multiplet
    of equal singular values, which the Ising TRG has at every step, and the next step's
    cotangent, written in the first basis, is applied in the second: u came out wrong in its
    eighth digit (chi = 16).  Saving the norm (one scalar per step) makes the recomputed
    SVD's input bitwise the forward's, so it returns the same basis.
    """
    ops = copy.copy(ops or trg.JAX)
    base = ops.norm
    ops.norm = lambda T: checkpoint_name(base(T), NORM_NAME)
    return ops


@checked(schedule=check_schedule)
def lnz_scanned(beta, schedule, ops=None, checkpoint=False):
    """lnZ/N as :func:`trgad.physics.trg.lnz_per_site`, with the repeated steps in one ``lax.scan``.

    Steps before :func:`scan_start` are unrolled; the rest are the scan's iterations, each
    one TRG step that carries T and the running sum of w_i ln||T_i|| (w_i = 2**-i, the
    scan's input), so the repeated step is traced, transformed and compiled once, however
    many steps there are.  With ``checkpoint`` the step is ``jax.checkpoint``-ed (its
    backward pass recomputes the step instead of storing its intermediates; the norm is
    saved, :func:`named_norm_ops`).  Same value as the unrolled graph up to the order of the
    floating-point sum.

    Parameters: ``beta`` scalar, float or traced (1/J); ``schedule`` sequence of int;
    ``ops`` the JAX back end (default :data:`trgad.physics.trg.JAX`; :data:`trgad.physics.trg.JAX_REVERSE`
    for first-order reverse mode).  Returns a scalar (dimensionless).  Raises InputError
    for a bad schedule.  Source: ``jax.lax.scan`` and ``jax.checkpoint`` (JAX documentation,
    "Gradient checkpointing"), applied to the Levin-Nave steps.
    """
    schedule = tuple(schedule)
    ops = ops or trg.JAX
    start = scan_start.trusted(schedule)
    T = ising.initial_tensor(beta, ops)
    total = 0.0
    for i, k in enumerate(schedule[:start]):
        T, ln = trg.trg_step(T, k, ops)
        total = total + ln * (1.0 / 2**i)
    if start < len(schedule):
        k = schedule[-1]
        if checkpoint:
            named = named_norm_ops(ops)
            policy = jax.checkpoint_policies.save_only_these_names(NORM_NAME)
            step = jax.checkpoint(lambda t: trg.trg_step(t, k, named), policy=policy)
        else:
            def step(t):
                return trg.trg_step(t, k, ops)

        def body(carry, w):
            t, acc = carry
            t, ln = step(t)
            return (t, acc + ln * w), None

        weights = jnp.asarray([1.0 / 2**i for i in range(start, len(schedule))],
                              dtype=jnp.float64)
        (T, total), _ = jax.lax.scan(body, (T, total + 0.0 * weights[0]), weights)
    n = len(schedule)
    total = total + ops.log(trg.torus_trace(T, ops)) * (1.0 / 2**n)
    return total + ising.log_weight_per_site(beta)


# ---- compiled programs ---------------------------------------------------------------------

def _lnz(method, schedule, order):
    """beta -> lnZ/N as ``method`` builds it at ``order``: every method scans the repeated
    steps (:func:`lnz_scanned`; ``checkpoint`` also checkpoints them); first-order reverse
    mode (``whole`` and ``checkpoint`` at order 1) uses :data:`trgad.physics.trg.JAX_REVERSE`, the
    rest :data:`trgad.physics.trg.JAX`."""
    reverse = order == 1 and method in ("whole", "checkpoint")
    ops = trg.JAX_REVERSE if reverse else trg.JAX
    return lambda b: lnz_scanned.trusted(b, schedule, ops, checkpoint=method == "checkpoint")


def _second(form, f):
    """beta -> (f, f', f'') by a second-order form of :data:`SECOND_FORMS`."""
    if form == "forward-over-forward":
        first = lambda b: jax.jvp(f, (b,), (1.0,))                      # noqa: E731
        return lambda b: (lambda p, t: (p[0], p[1], t[1]))(*jax.jvp(first, (b,), (1.0,)))
    if form == "forward-over-reverse":
        vg = jax.value_and_grad(f)
        return lambda b: (lambda p, t: (p[0], p[1], t[1]))(*jax.jvp(vg, (b,), (1.0,)))

    def first_with_value(b):                                        # reverse over forward
        value, slope = jax.jvp(f, (b,), (1.0,))
        return slope, value

    vg = jax.value_and_grad(first_with_value, has_aux=True)
    return lambda b: (lambda r: (r[0][1], r[0][0], r[1]))(vg(b))


def _build(method, order, schedule):
    """beta -> (lnz, dlnz, d2lnz or None) for one method (not staged), not yet compiled."""
    f = _lnz(method, schedule, order)
    if order == 2:
        return _second(SECOND_FORM[method], f)
    if method == "forward_mode":
        return lambda b: (*jax.jvp(f, (b,), (1.0,)), None)
    return lambda b: (*jax.value_and_grad(f)(b), None)


#: One executable per (method, order, schedule) (registered: :func:`trgad.runtime.compiled.clear`).
_EXECUTABLES = compiled.registry("modes")


def _one_program(method):
    """``method``, checked, if it is one program (not "staged")."""
    method = check_method(method)
    if method == "staged":
        raise InputError("method='staged' is not one program: see trgad.physics.staged")
    return method


@checked(method=_one_program, order=check_order, schedule=check_schedule)
def program(method, order, schedule):
    """The compiled beta -> (lnZ/N, dlnZ/N/dbeta, d^2 lnZ/N/dbeta^2 or None) of ``method``
    ("whole", "forward_mode" or "checkpoint"; ``order`` 1 or 2) for ``schedule``, and the
    seconds spent tracing and compiling it now (0.0 when it was cached).

    The executable is ``jax.jit(f).lower(beta).compile()``: call it with a Python float;
    its ``memory_analysis()`` gives XLA's memory figures.  Raises InputError for "staged"
    (a sequence of per-step programs, :mod:`trgad.physics.staged`) and for a bad order or schedule.
    """
    key = (method, order, tuple(schedule))
    if key in _EXECUTABLES:
        return _EXECUTABLES[key], 0.0
    t0 = time.perf_counter()
    exe = compiled.lower(_build(*key), 0.3, key=("modes.program", *key)).compile()
    _EXECUTABLES[key] = exe
    return exe, time.perf_counter() - t0


@checked(beta=check_beta, schedule=check_schedule, method=check_method, order=check_order,
         c_method=partial(check_choice, "c_method", allowed=C_METHODS))
def value_and_derivatives(beta, schedule, method="staged", order=1, c_method="exact"):
    """lnZ/N, u and (order 2) c of the Ising model by TRG, by one mode of differentiation.

    Parameters
    ----------
    beta : float in [BETA_MIN, BETA_MAX] (:func:`trgad.runtime.validate.check_beta`),
        inverse temperature (1/J).
    schedule : sequence of int, the kept k at each step (:func:`trgad.physics.trg.truncation_schedule`).
    method : one of :data:`METHODS` (see the module docstring).
    order : 1 (lnZ/N and u) or 2 (also c).
    c_method : "exact" or "fd", how ``staged`` gets c (ignored by the other methods, which
        are always exact).

    Returns
    -------
    JSON-ready dict: ``method``, ``order``, ``lnz_per_site``, ``u`` (J per site), ``c``
    (k_B per site; None for order 1), ``c_method`` ("exact" or "fd"; None for order 1),
    ``fd_step`` (the central difference's step h, :func:`trgad.physics.heat.fd_step`; None unless
    c_method is "fd"), ``seconds`` (this call, compilation included on a first call) and
    ``compile_seconds`` (the part spent tracing and compiling: 0 when the program was
    cached; the staged method compiles inside the call, :func:`trgad.physics.staged.compile_ahead`,
    not timed apart, so it reports None).

    Raises
    ------
    InputError for a bad beta, schedule, method, order or c_method.
    """
    schedule = tuple(schedule)
    t0 = time.perf_counter()
    compile_seconds = None
    if method == "staged":
        if order == 1:
            lnz, dlnz = staged.value_and_grad_jax.trusted(beta, schedule)
            c = None
        elif c_method == "exact":
            lnz, dlnz, d2 = staged.value_grad_hess_jax.trusted(beta, schedule)
            c = ising.specific_heat_of(beta, d2)
        else:
            lnz, dlnz = staged.value_and_grad_jax.trusted(beta, schedule)
            c = heat.specific_heat.trusted(beta, schedule)
    else:
        exe, compile_seconds = program.trusted(method, order, schedule)
        lnz, dlnz, d2 = (None if x is None else float(x) for x in exe(beta))
        c = None if d2 is None else ising.specific_heat_of(beta, d2)
    fd = order == 2 and method == "staged" and c_method == "fd"
    return {"method": method, "order": order, "lnz_per_site": float(lnz), "u": -float(dlnz),
            "c": None if c is None else float(c),
            "c_method": None if order == 1 else ("fd" if fd else "exact"),
            "fd_step": heat.fd_step(beta) if fd else None,
            "seconds": time.perf_counter() - t0, "compile_seconds": compile_seconds}
