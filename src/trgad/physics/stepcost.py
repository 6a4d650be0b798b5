"""What one full-size TRG step costs in each mode, part by part: the floor of the steady state.

Every reverse-mode row (the whole graph and the checkpointed scan inside one program, the
staged pass as two) runs every step forward, saving what its pullback needs, then every
step's pullback; forward mode runs every step with its tangent.  So one full-size step,
each part its own compiled program timed in turns in the same run, says what those rows
cannot skip, with this TRG, these SVD rules and these compile options:

* ``step_seconds``: the forward alone (what the primal runs per step);
* ``residual_forward_seconds``: the forward that saves residuals (``jax.vjp``'s forward,
  the residuals its outputs, as the staged step program);
* ``pullback_seconds``: the pullback alone, from those residuals and a cotangent;
* ``jvp_seconds``: the step with one tangent (``jax.jvp``, forward mode's step);
* ``vjp_seconds``: forward, residuals and pullback in one program (a cross-check: XLA may
  fuse across the two, so it need not equal their sum).

The first four are timed over every step of the measured shape, each on its own input
tensor (a step's time depends on its tensor, the SVDs' above all), and reported per step;
the rest on the first such tensor.
``floor = (residual_forward + pullback) / step`` (an estimate from a few calls, not a
bound; the first, smaller steps change it little; the checkpointed scan runs each step
forward twice, so its own is higher), ``residual_share`` the forward's surcharge for
saving residuals and ``pullback_share`` the pullback's, both as fractions of the forward.
The step's own figures say where the time goes: ``svd_seconds`` (its two LAPACK SVDs
alone), XLA's count of the arithmetic (``cost_analysis()["flops"]``, in which the SVDs'
custom calls, marked unknown, add nothing: ``step_flops`` forward, ``vjp_flops`` forward
and pullback), and the pullback's two largest parts timed alone (the contraction's, two
products as large as its forward's largest, and one split's).  Programs compiled by
:func:`trgad.runtime.compiled.jit`; the step is :func:`trgad.physics.trg.trg_step` through
:data:`trgad.physics.trg.JAX_REVERSE` (the staged pass's and the whole graph's first-order
back end), its jvp through :data:`trgad.physics.trg.JAX` (forward mode's).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ..runtime import compiled
from ..runtime.timing import time_call
from ..runtime.validate import check_beta, check_repeats, check_schedule, checked
from . import ising, svd, trg


def _measured_tensors(beta, ks):
    """The input tensors of the steps of the measured shape (:func:`steps_of_measured_shape`)."""
    T, out = ising.initial_tensor(beta, trg.JAX), []
    for k in ks:
        if T.shape[0] == k == max(ks):
            out.append(T)
        T, _ = trg.trg_step(T, k, trg.JAX)
    return out


#: The parts timed over every step of the measured shape (their seconds: the mean per step).
PER_STEP = ("step", "residual_forward", "jvp", "pullback")


def _full_size_tensor(beta, ks):
    """T at the first step of ``ks`` whose input has the schedule's largest bond dimension."""
    T = ising.initial_tensor(beta, trg.JAX)
    for k in ks:
        if T.shape[0] == max(ks):
            break
        T, _ = trg.trg_step(T, k, trg.JAX)
    return T


@checked(beta=check_beta, schedule=check_schedule, repeats=check_repeats)
def step_costs(beta, schedule, repeats=5):
    """One full-size step's costs at inverse temperature ``beta`` for the truncation
    ``schedule`` (the largest k is some step's input): a dict with ``D``, ``k`` and, each the
    fastest of ``repeats`` calls timed in turns after a warm-up round, ``step_seconds``,
    ``residual_forward_seconds``, ``pullback_seconds`` (from those residuals),
    ``jvp_seconds``, ``vjp_seconds`` (forward and pullback in one program),
    ``svd_seconds``, ``contraction_pullback_seconds`` (the pullback of
    :func:`trgad.physics.trg.plaquette` alone) and ``split_pullback_seconds`` (that of one
    :func:`trgad.physics.svd.balanced_split_reverse` alone); ``floor``, ``residual_share``
    and ``pullback_share`` (the module docstring), ``step_flops`` and ``vjp_flops`` (XLA's
    count, the SVDs left out).  Raises InputError for beta, the schedule or repeats out of
    range."""
    schedule = tuple(schedule)
    info, calls = step_programs.trusted(beta, schedule)
    best = {name: float("inf") for name in calls}
    for _ in range(repeats + 1):         # in turns, the first round a warm-up: fair ratios
        for name, call in calls.items():
            best[name] = min(best[name], time_call.trusted(call, warmup=0, repeats=1).min)
    return costs_of(info, best)


@checked(beta=check_beta, schedule=check_schedule)
def step_programs(beta, schedule):
    """The programs :func:`step_costs` times, compiled: (info, calls), ``info`` a dict with
    ``D``, ``k``, ``step_flops`` and ``vjp_flops``, ``calls`` a dict name -> zero-argument
    call of one program (names as the ``<name>_seconds`` of :func:`step_costs`), so that a
    caller may time them in its own rounds (:func:`trgad.benchrows.round_robin`) and hand
    the seconds to :func:`costs_of`.  Raises InputError for a bad beta or schedule."""
    schedule = tuple(schedule)
    T = _full_size_tensor(beta, schedule)
    D = k = T.shape[0]
    step = lambda t: trg.trg_step(t, k, trg.JAX_REVERSE)             # noqa: E731
    M, M_B = _matrices(T / jnp.linalg.norm(T))
    (A1, A2), (B1, B2) = (trg.split_halves(m, D, k, trg.JAX) for m in (M, M_B))

    def vjp(t):
        out, pullback = jax.vjp(step, t)
        return out, pullback((jnp.ones_like(out[0]), jnp.ones_like(out[1])))[0]

    def residual_forward(t):
        out, pullback = jax.vjp(step, t)
        return out, jax.tree_util.tree_leaves(pullback)

    def jvp(t):
        return jax.jvp(lambda x: trg.trg_step(x, k, trg.JAX), (t,), (t,))

    def svds(t):
        return tuple(jnp.linalg.svd(m, full_matrices=False) for m in _matrices(t))

    info, exes = {"D": int(D), "k": int(k)}, {}
    for name, fn, arg in (("step", step, T), ("residual_forward", residual_forward, T),
                          ("jvp", jvp, T), ("svd", svds, T), ("vjp", vjp, T)):
        exes[name] = (compiled.jit(fn).lower(arg).compile(), (arg,))
        if name in ("step", "vjp"):
            info[f"{name}_flops"] = float((exes[name][0].cost_analysis() or {}).get("flops", float("nan")))
    for name, fn, args in (("pullback", step, (T,)),
                           ("contraction_pullback", lambda *h: trg.plaquette(*h, trg.JAX), (B1, A1, B2, A2)),
                           ("split_pullback", lambda m: svd.balanced_split_reverse(m, k), (M,))):
        exes[name] = _pullback_alone(fn, args)
    calls = {name: (lambda exe=exe, args=args: exe(*args)) for name, (exe, args) in exes.items()}
    # the floor's parts over every step of the measured shape, each on its own tensor (a
    # step's time depends on its tensor, the SVDs' above all): the sum, per step
    tensors = _measured_tensors(beta, schedule) or [T]
    info["tensors"] = len(tensors)
    for name in ("step", "residual_forward", "jvp"):
        calls[name] = lambda exe=exes[name][0]: [exe(t) for t in tensors]
    out, pullback = jax.vjp(step, T)
    tree, ct = jax.tree_util.tree_structure(pullback), jax.tree_util.tree_map(jnp.ones_like, out)
    leaves = [jax.tree_util.tree_leaves(jax.vjp(step, t)[1]) for t in tensors]
    pull = compiled.jit(lambda r, c: jax.tree_util.tree_unflatten(tree, r)(c)).lower(leaves[0], ct).compile()
    calls["pullback"] = lambda: [pull(r, ct) for r in leaves]
    return info, calls


def costs_of(info, seconds):
    """:func:`step_costs`'s dict from :func:`step_programs`'s ``info`` and
    the seconds of each of its calls (name -> seconds)."""
    n = info.get("tensors", 1)
    out = dict(info, **{f"{name}_seconds": t / (n if name in PER_STEP else 1) for name, t in seconds.items()})
    step_s = out["step_seconds"]
    out["residual_share"] = out["residual_forward_seconds"] / step_s - 1
    out["pullback_share"] = out["pullback_seconds"] / step_s
    out["floor"] = (out["residual_forward_seconds"] + out["pullback_seconds"]) / step_s
    return out


def _matrices(T):
    """The two (D^2, D^2) matrices a step splits: T as (l, u | r, d) and as (u, r | d, l)
    (:func:`trgad.physics.trg.trg_step`)."""
    D = T.shape[0]
    return (jnp.reshape(T, (D * D, D * D)),
            jnp.reshape(jnp.transpose(T, (1, 2, 3, 0)), (D * D, D * D)))


def _pullback_alone(fn, args):
    """(a compiled program, its arguments) that runs ``fn``'s pullback at ``args`` alone: the
    residuals of ``jax.vjp`` are its input, a cotangent of ones its other."""
    out, pullback = jax.vjp(fn, *args)
    cotangent = jax.tree_util.tree_map(jnp.ones_like, out)
    exe = compiled.jit(lambda p, c: p(c)).lower(pullback, cotangent).compile()
    return exe, (pullback, cotangent)


def steps_of_measured_shape(schedule):
    """How many steps of ``schedule`` (a checked tuple) have input bond dimension D and kept k
    both equal to its largest k: the shape :func:`step_costs` measures (16 of 20 steps at
    chi 16).  Unlike :func:`trgad.physics.staged.full_size_steps` (the steps whose input D
    is the largest) it leaves out a last step that grows k."""
    dims = (2,) + tuple(schedule[:-1])
    return sum(1 for d, k in zip(dims, schedule) if d == k == max(schedule))
