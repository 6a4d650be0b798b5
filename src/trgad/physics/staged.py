"""Staged differentiation of the TRG in JAX: one VJP per step, the cotangent passed back by hand.

This is the fix described in the source report (book/source-report.md; its section "修法",
the fix): never let one transform see a deep graph.  Each TRG step is built on a *fresh
leaf* that holds the previous step's tensor, so a transform (``jax.vjp`` here;
:func:`trgad.keyed.keyed_trg.value_and_grad_engine` does the same with ``engine.vjp`` on the keyed
engine) only ever sees one step, whatever the number of steps.

The chain rule is then applied by hand.  With w_i = 1 / 2**i and n steps,

    lnZ/N = sum_i w_i ln||T_i|| + w_n ln tr T_n,      T_{i+1} = step_i(T_i),

so the cotangent of T_i (written Tbar_i) collects two paths:

    Tbar_i = [d T_{i+1} / d T_i]^T Tbar_{i+1}          (through the next tensor)
           + w_i * d ln||T_i|| / d T_i                 (through the step's own norm)

One VJP of ``trg_step`` with the output cotangent pair (Tbar_{i+1}, w_i) gives exactly that
sum, because a VJP is linear in its cotangent: vjp(a, b) = vjp(a, 0) + vjp(0, b).  The
backward pass starts from Tbar_n = w_n * d ln tr T_n / d T_n and ends with one more VJP
through ``ising.initial_tensor`` that turns Tbar_0 into d(lnZ/N)/d beta.

Each piece is two programs, compiled once per distinct shape (bond dimension D, kept
values k; :func:`step_programs`): the *step program* T -> (T_next, ln||T||, residuals)
runs the step and returns the leaves of its ``jax.vjp`` closure (a pytree of residuals,
``jax.tree_util.Partial``), and the *pullback program* (residuals, cotangents) -> Tbar
rebuilds the closure and applies it, so the backward pass reuses the step's residuals
instead of recomputing the step.  For chi = 16 the schedule [2, 4, 4, 16, 16, ...] has five
distinct (D, k) pairs, so 20 (or 100) steps compile five pairs.  The programs are kept in
the registry of :mod:`trgad.runtime.compiled` (``compiled.clear()`` forgets them).  The
first-order steps run through :data:`trgad.physics.trg.JAX_REVERSE` (the split's pullback written
out, :func:`trgad.physics.svd.balanced_split_reverse`): the pullback programs are reverse mode only.

Second derivative (:func:`value_grad_hess_jax`): the same staging for the jet (T_i,
dT_i/d beta, d2T_i/d beta2), one forward-over-forward program per (D, k), so the specific
heat is exact (:func:`trgad.physics.heat.specific_heat_exact`; the central difference of
two staged gradients, the source report's way, is :func:`trgad.physics.heat.specific_heat`).  The shapes of
every program follow from the schedule, so a pass compiles them all before it runs, side by
side on the cores the process may use (:func:`compile_ahead`).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ..runtime import compiled
from . import ising, trg
from ..runtime.validate import check_beta, check_order, check_schedule, checked

#: (step program, pullback program) pairs, keyed ("step", D, k) and by name for the ends, and
#: 1-tuples (jet program,) keyed ("jet", D, k) and "init2", "tail2" for the second order
#: (registered: :func:`trgad.runtime.compiled.clear`).
_PROGRAMS = compiled.registry("staged")


# --------------------------------------------------------------------------------------
# The per-shape programs
# --------------------------------------------------------------------------------------

def vjp_pair(key, fn):
    """The (step, pullback) programs of ``fn`` under ``key``, built on first use.

    ``step(x, *args)`` returns ``(fn(x, *args), leaves)``: ``leaves`` is the list of
    residual arrays of the ``jax.vjp`` closure (a ``jax.tree_util.Partial`` pytree,
    flattened); its tree structure (static: the linearised function) is recorded while
    the step program is traced, per residual shapes.  ``pull(leaves, ct)`` rebuilds the
    closure from that structure and ``leaves`` and returns the cotangent of ``x``.  Both are
    :class:`trgad.runtime.compiled.Compiled`, kept under the hashable ``key`` until
    :func:`trgad.runtime.compiled.clear`; ``pull`` before ``step`` raises KeyError."""
    if key not in _PROGRAMS:
        trees = {}

        def step(x, *args):
            out, pullback = jax.vjp(lambda y: fn(y, *args), x)
            leaves, tree = jax.tree_util.tree_flatten(pullback)
            trees[tuple(jnp.shape(v) for v in leaves)] = tree
            return out, leaves

        def pull(leaves, ct):
            pullback = jax.tree_util.tree_unflatten(trees[tuple(jnp.shape(v) for v in leaves)], leaves)
            return pullback(ct)[0]

        step_program = compiled.Compiled(step, key=("staged", key, "step"))
        _PROGRAMS[key] = (step_program, compiled.Compiled(pull, key=("staged", key, "pull"),
                                                          after=step_program))
    return _PROGRAMS[key]


def step_programs(D, k):
    """The (step program, pullback program) of one TRG step from bond dimension D keeping k.

    ``step(T)`` with T of shape (D, D, D, D) returns ((T_next, ln||T||), residuals): T_next
    of shape (k, k, k, k) (:func:`trgad.physics.trg.trg_step`) and a list of residual arrays;
    ``pullback(residuals, (Tbar_next, ln_bar))`` returns Tbar, of T's shape.  Both are
    :class:`trgad.runtime.compiled.Compiled` (their ``executables`` give XLA's figures), built once
    per (D, k) and kept until :func:`trgad.runtime.compiled.clear`.
    """
    D, k = int(D), int(k)
    return vjp_pair(("step", D, k), lambda t: trg.trg_step(t, k, trg.JAX_REVERSE))


def end_programs():
    """The (step, pullback) pairs of the two ends of the first-order pass: the initial tensor,
    beta -> T_0 (:func:`trgad.physics.ising.initial_tensor`), and the trace term,
    (T_n, w) -> w ln tr T_n (the pullback takes its cotangent, a scalar)."""
    return (vjp_pair("init", lambda b: ising.initial_tensor(b, trg.JAX_REVERSE)),
            vjp_pair("tail", lambda t, w: w * trg.JAX.log(trg.torus_trace(t, trg.JAX))))


def jet(fn):
    """(x, dx, d2x) -> (y, dy, d2y) for y = fn(x) along one direction: the first two
    derivatives carried forward, dy = fn'(x) dx and d2y = fn''(x)[dx, dx] + fn'(x) d2x
    (nested ``jax.jvp``, forward over forward, not ``jax.experimental.jet``; dx and d2x have
    x's structure, shapes and dtype, else ``jax.jvp`` raises TypeError; outputs are pytrees
    like fn's).
    Composing jets composes the chain rule: the jet of step i's output is step i + 1's
    input, so a pass of per-step jets needs no backward pass (beta is one number)."""
    def second(x, dx, d2x):
        first = lambda y, dy: jax.jvp(fn, (y,), (dy,))                  # noqa: E731
        (y, dy), (_, d2y) = jax.jvp(first, (x, dx), (dx, d2x))
        return y, dy, d2y
    return second


def second_order_programs(D, k):
    """The program of one step's jet, (T, dT, d2T) -> ((T', ln), (dT', dln), (d2T', d2ln)),
    from bond dimension D keeping k (:func:`jet` of :func:`trgad.physics.trg.trg_step`, through
    :data:`trgad.physics.trg.JAX`): the second-order pass (:func:`value_grad_hess_jax`) runs one per
    step.  A :class:`trgad.runtime.compiled.Compiled`, kept apart from :func:`step_programs`."""
    D, k = int(D), int(k)
    key = ("jet", D, k)
    if key not in _PROGRAMS:
        _PROGRAMS[key] = (compiled.Compiled(jet(lambda t: trg.trg_step(t, k, trg.JAX)),
                                            key=("staged", key)),)
    return _PROGRAMS[key][0]


def second_order_end_programs():
    """The jets of the second-order pass's two ends: beta -> (T_0, dT_0, d2T_0) (the
    initial tensor, :func:`trgad.physics.ising.initial_tensor`) and (T_n, dT_n, d2T_n, w) ->
    (w ln tr T_n, its first and second derivative)."""
    ops = trg.JAX
    for name, fn in (("init2", lambda b: jet(lambda x: ising.initial_tensor(x, ops))(b, 1.0, 0.0)),
                     ("tail2", lambda T, dT, d2T, w: jet(
                         lambda t: w * ops.log(trg.torus_trace(t, ops)))(T, dT, d2T))):
        if name not in _PROGRAMS:
            _PROGRAMS[name] = (compiled.Compiled(fn, key=("staged", name)),)
    return _PROGRAMS["init2"][0], _PROGRAMS["tail2"][0]


def _shapes(ks):
    """The distinct (D, k) of a schedule, in the order the steps meet them."""
    return list(dict.fromkeys(zip([2] + list(ks[:-1]), ks)))


def _f64(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float64)


@checked(schedule=check_schedule, order=check_order)
def compile_ahead(schedule, order=1):
    """Compile every program a staged pass of ``schedule`` needs (``order`` 1:
    :func:`value_and_grad_jax`'s, 2: :func:`value_grad_hess_jax`'s) before it runs, side by
    side (:class:`trgad.runtime.compiled.SideBySide`): each is traced in turn while XLA compiles the
    ones before it on the cores the process may use.  The passes call it themselves; programs already
    compiled are skipped.  Their shapes follow from the schedule alone: step i's input has
    D = schedule[i - 1] (2 for step 0).  Raises InputError for a bad schedule or order."""
    scalar = _f64()
    with compiled.SideBySide() as ahead:
        if order == 2:              # the small end programs last: the last compile is waited for
            for D, k in _shapes(schedule)[::-1]:
                ahead.submit(second_order_programs(D, k), *(_f64(D, D, D, D),) * 3)
            init, tail = second_order_end_programs()
            ahead.submit(init, scalar)
            ahead.submit(tail, *(_f64(*(schedule[-1],) * 4),) * 3, scalar)
            return
        (init_step, init_pull), (tail_step, tail_pull) = end_programs()
        _, res = ahead.submit(init_step, scalar)
        ahead.submit(init_pull, res, _f64(2, 2, 2, 2))
        for D, k in _shapes(schedule):
            step, pull = step_programs(D, k)
            (T_next, ln), res = ahead.submit(step, _f64(D, D, D, D))
            ahead.submit(pull, res, (T_next, ln))
        Tn = _f64(*(schedule[-1],) * 4)
        _, res = ahead.submit(tail_step, Tn, scalar)
        ahead.submit(tail_pull, res, scalar)


def compiled_shapes():
    """The (D, k) pairs for which a first-order step program exists, in the order they were
    built (the second-order ones are :func:`compiled_second_order_shapes`)."""
    return [key[1:] for key in _PROGRAMS if key[0] == "step"]


def compiled_second_order_shapes():
    """The (D, k) pairs for which a second-order (step jet) program exists, in the order
    they were built (:func:`compile_ahead` builds the largest first)."""
    return [key[1:] for key in _PROGRAMS if key[0] == "jet"]


def executables():
    """Every XLA executable the staged programs hold now (step and pullback programs of
    every shape and order, and the ends), each once: e.g. for their memory figures
    (``memory_analysis()``, :func:`trgad.bench.staged_memory`)."""
    return [exe for pair in _PROGRAMS.values() for program in pair
            for exe in program.executables.values()]


@checked(beta=check_beta, schedule=check_schedule)
def step_residuals(beta, schedule):
    """The first-order staged forward pass alone: one (T_i, residuals_i) per step.

    ``T_i`` is step i's input tensor (a JAX array of shape (D, D, D, D)), ``residuals_i``
    the list of arrays its step program returns for the pullback, i.e. what the staged
    first-order pass keeps alive between its two passes.  Parameters and errors as
    :func:`value_and_grad_jax`.
    """
    tensors, stages, _, _ = _forward(beta, schedule, keep_tensors=True)
    return [(T, res) for T, (_, res) in zip(tensors, stages)]


def _forward(beta, ks, keep_tensors=False):
    """The first-order forward pass, the one loop every staged pass runs: each step on a
    fresh leaf (the previous step's concrete output).  Returns (tensors, stages, ln_norms,
    ends): tensors [T_0, ..., T_n] (only T_n unless ``keep_tensors``), stages the
    (pullback program, residuals) of each step, ln_norms each ln||T_i||, ends the two end
    programs' pullbacks and residuals."""
    (init_step, init_pullback), (tail_step, tail_pullback) = end_programs()
    T, res0 = init_step(jnp.asarray(beta, dtype=jnp.float64))
    tensors, stages, ln_norms = [T], [], []
    for k in ks:
        step, pullback = step_programs(T.shape[0], k)
        (T, ln), res = step(T)
        stages.append((pullback, res))
        ln_norms.append(ln)
        tensors = tensors + [T] if keep_tensors else [T]
    return tensors, stages, ln_norms, (init_pullback, res0, tail_step, tail_pullback)


def _passes(beta, ks, keep=False):
    """Both passes: (lnz, dlnz, tensors, cotangents), the lists kept only if ``keep`` (else
    only the last tensor and Tbar_0).  Backward: Tbar_n from the trace term, then one VJP
    per step, last to first, each taking both paths at once: through T_{i+1} (cotangent
    Tbar_{i+1}) and through ln||T_i|| (weight w_i)."""
    f64 = jnp.float64
    tensors, stages, ln_norms, (init_pullback, res0, tail_step, tail_pullback) = \
        _forward(beta, ks, keep_tensors=keep)
    n = len(ks)
    tail, res_n = tail_step(tensors[-1], jnp.asarray(1.0 / 2**n, dtype=f64))
    ct = tail_pullback(res_n, jnp.ones((), dtype=f64))
    bars = [ct]
    for i in range(n - 1, -1, -1):
        pullback, res = stages[i]
        ct = pullback(res, (ct, jnp.asarray(1.0 / 2**i, dtype=f64)))
        bars = bars + [ct] if keep else [ct]
    dlnz = init_pullback(res0, ct)
    lnz = float(tail) + sum(float(ln) / 2**i for i, ln in enumerate(ln_norms))
    # the factor e^{2 beta} per site taken out of the initial tensor (trgad.physics.ising)
    return (lnz + ising.log_weight_per_site(beta), float(dlnz) + ising.log_weight_slope(beta),
            tensors, bars[::-1])


# --------------------------------------------------------------------------------------
# The staged passes
# --------------------------------------------------------------------------------------

@checked(beta=check_beta, schedule=check_schedule)
def value_and_grad_jax(beta, schedule):
    """lnZ/N and d(lnZ/N)/d beta by staged JAX VJPs (one ``jax.vjp`` per TRG step).

    Parameters
    ----------
    beta : float, inverse temperature in units of 1/J, in [BETA_MIN, BETA_MAX]
        (:func:`trgad.runtime.validate.check_beta`).
    schedule : sequence of int, the number of singular values kept at each step (from
        :func:`trgad.physics.trg.truncation_schedule`); len(schedule) steps, 2**len sites.

    Returns
    -------
    (lnz, dlnz): Python floats; the internal energy per site is u = -dlnz (units of J).

    Raises
    ------
    InputError for a beta out of that range or a bad schedule.

    Source: the staged fix of the source report ("每一步单独建图、单独求 vjp", each step on
    its own graph with its own vjp), written with ``jax.vjp``.
    """
    compile_ahead.trusted(schedule, 1)
    return _passes(beta, schedule)[:2]


@checked(beta=check_beta, schedule=check_schedule)
def value_grad_hess_jax(beta, schedule):
    """lnZ/N and its first two beta-derivatives, exactly, by staged per-step programs.

    Forward over forward, one step at a time: the pass carries the jet (T_i, dT_i/dbeta,
    d2T_i/dbeta2) through each step's jet program (:func:`second_order_programs`, ``jax.jvp``
    of ``jax.jvp`` of one step), so each derivative of lnZ/N is the same weighted sum as
    lnZ/N itself: d^m(lnZ/N)/dbeta^m = sum_i w_i d^m ln||T_i|| + w_n d^m ln tr T_n
    (w_i = 2**-i), plus the derivative of 2 beta (2, then 0).  No transform sees more than
    one step, and no backward pass is needed: beta is one number, and forward mode costs one
    pass per input.  Programs are compiled once per (D, k), side by side before the pass
    (:func:`compile_ahead`), kept apart from the first-order ones
    (:func:`compiled_second_order_shapes`).

    Parameters: beta (1/J) and schedule, sequence of int, as :func:`value_and_grad_jax`.

    Returns (lnz, dlnz, d2lnz), Python floats: u = -dlnz (J), c = beta**2 d2lnz (k_B).

    Raises InputError for a bad beta or schedule.  Source: the staged fix, one transform per
    step, applied to second-order forward mode (e.g. Griewank and Walther, *Evaluating
    Derivatives*, 2nd ed., ch. 13, Taylor propagation: jets compose step by step).
    """
    compile_ahead.trusted(schedule, 2)
    f64 = jnp.float64
    init, tail = second_order_end_programs()
    T, dT, d2T = init(jnp.asarray(beta, dtype=f64))
    norms = []                  # (ln||T_i||, its first and second derivative) per step
    for k in schedule:
        (T, ln), (dT, dln), (d2T, d2ln) = second_order_programs(T.shape[0], k)(T, dT, d2T)
        norms.append((ln, dln, d2ln))
    ends = tail(T, dT, d2T, jnp.asarray(1.0 / 2**len(schedule), dtype=f64))
    # the weighted sums on the host, once every program has been dispatched
    lnz, dlnz, d2lnz = (float(ends[m]) + sum(float(x[m]) / 2**i for i, x in enumerate(norms))
                        for m in range(3))
    # the factor e^{2 beta} per site taken out of the initial tensor (trgad.physics.ising)
    return lnz + ising.log_weight_per_site(beta), dlnz + ising.log_weight_slope(beta), d2lnz


@checked(schedule=check_schedule)
def full_size_steps(schedule):
    """Indices of the steps whose input tensor has the schedule's largest bond dimension.

    Step i's input has bond dimension ``schedule[i - 1]`` (2 for step 0, the Ising tensor);
    steps with a smaller input cost far less (at chi = 16: steps 0-3, inputs of D <= 4).
    Raises InputError for a bad schedule.
    """
    dims = [2] + list(schedule[:-1])
    return [i for i, d in enumerate(dims) if d == max(dims)]


# --------------------------------------------------------------------------------------
# The cotangents themselves (the environments; book/environment.md)
# --------------------------------------------------------------------------------------

def cotangents(beta, schedule):
    """The staged first-order pass with every step's cotangent kept: the environments.

    The same forward and backward passes as :func:`value_and_grad_jax` (the same step and
    pullback programs), returning what that function discards on the way.

    Parameters: beta (1/J) and schedule, sequence of int, as :func:`value_and_grad_jax`.

    Returns
    -------
    dict with ``tensors``, the list [T_0, ..., T_n] (n = len(schedule); JAX arrays; T_0 the
    scaled Ising tensor of :func:`trgad.physics.ising.initial_tensor`, T_i for 0 < i <= n the tensor
    step i - 1 returns, *before* the division by its norm that step i makes; T_i has shape
    (D_i,) * 4 with D_0 = 2 and D_i = schedule[i - 1]); ``cotangents``, the list
    [Tbar_0, ..., Tbar_n] of the same shapes, Tbar_i = d(lnZ/N)/dT_i (what the backward pass
    hands to step i; Tbar_n comes from the trace term); ``lnz_per_site`` and ``dlnz``,
    Python floats, equal to :func:`value_and_grad_jax`'s.

    Since step i divides T_i by its norm, lnZ/N depends on T_i as
    2**-i ln||T_i|| + g(T_i / ||T_i||), so <Tbar_i, T_i> = 2**-i exactly (Euler's theorem
    for the homogeneous Z, which holds T_i 2**(n - i) times; the book's page on the
    environment asserts it).  Raises InputError for a bad beta or schedule.  Source: the
    backward iteration of the environment is the second renormalization of Xie et al.,
    PRL 103, 160601 (2009); Chen et al., PRB 101, 220409(R) (2020) obtain it by automatic
    differentiation.
    """
    beta, ks = check_beta(beta), check_schedule(schedule)
    lnz, dlnz, tensors, bars = _passes(beta, ks, keep=True)
    return {"tensors": tensors, "cotangents": bars, "lnz_per_site": lnz, "dlnz": dlnz}
