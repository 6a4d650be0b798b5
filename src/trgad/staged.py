"""Staged differentiation of the TRG in JAX: one VJP per step, the cotangent passed back by hand.

This is the fix described in the source report (book/source-report.md; its section "修法",
the fix): never let one transform see a deep graph.  Each TRG step is built on a *fresh
leaf* that holds the previous step's tensor, so a transform (``jax.vjp`` here;
:func:`trgad.keyed_trg.value_and_grad_engine` does the same with ``engine.vjp`` on the keyed
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
the registry of :mod:`trgad.compiled` (``compiled.clear()`` forgets them).  The
first-order steps run through :data:`trgad.trg.JAX_REVERSE` (the split's pullback written
out, :func:`trgad.svd.balanced_split_reverse`): the pullback programs are reverse mode only.

Second derivative (:func:`value_grad_hess_jax`): the same staging for the pair (T_i,
dT_i/d beta): one JVP program per (D, k) forward, one VJP of it backward, so the specific
heat is exact (:func:`specific_heat_exact`); the central difference of two staged
gradients (:func:`specific_heat`, the source report's way) stays available.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from . import compiled, ising, trg
from .validate import BETA_MAX, BETA_MIN, InputError, check_beta, check_schedule

#: Step of the central difference for the specific heat, as in the source report (h = 1e-5).
FD_STEP = 1e-5

#: (step program, pullback program) pairs, keyed ("step", D, k), ("jvp", D, k) and by name
#: for the ends (registered: :func:`trgad.compiled.clear`).
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
    :class:`trgad.compiled.Compiled`, kept under the hashable ``key`` until
    :func:`trgad.compiled.clear`; ``pull`` before ``step`` raises KeyError."""
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

        _PROGRAMS[key] = (compiled.Compiled(step), compiled.Compiled(pull))
    return _PROGRAMS[key]


def step_programs(D, k):
    """The (step program, pullback program) of one TRG step from bond dimension D keeping k.

    ``step(T)`` with T of shape (D, D, D, D) returns ((T_next, ln||T||), residuals): T_next
    of shape (k, k, k, k) (:func:`trgad.trg.trg_step`) and a list of residual arrays;
    ``pullback(residuals, (Tbar_next, ln_bar))`` returns Tbar, of T's shape.  Both are
    :class:`trgad.compiled.Compiled` (their ``executables`` give XLA's figures), built once
    per (D, k) and kept until :func:`trgad.compiled.clear`.
    """
    D, k = int(D), int(k)
    return vjp_pair(("step", D, k), lambda t: trg.trg_step(t, k, trg.JAX_REVERSE))


def end_programs():
    """The (step, pullback) pairs of the two ends of the first-order pass: the initial tensor,
    beta -> T_0 (:func:`trgad.ising.initial_tensor`), and the trace term,
    (T_n, w) -> w ln tr T_n (the pullback takes its cotangent, a scalar)."""
    return (vjp_pair("init", lambda b: ising.initial_tensor(b, trg.JAX_REVERSE)),
            vjp_pair("tail", lambda t, w: w * trg.JAX.log(trg.torus_trace(t, trg.JAX))))


def second_order_programs(D, k):
    """The (step, pullback) programs of one step's JVP, (T, dT) -> (T', ln, dT', dln), from
    bond dimension D keeping k: the second-order pass (:func:`value_grad_hess_jax`) takes one
    VJP of each.  Kept apart from :func:`step_programs`."""
    D, k = int(D), int(k)

    def jvp_step(pair):
        (t2, ln), (dt2, dln) = jax.jvp(lambda t: trg.trg_step(t, k, trg.JAX), (pair[0],), (pair[1],))
        return t2, ln, dt2, dln

    return vjp_pair(("jvp", D, k), jvp_step)


def second_order_end_programs():
    """The initial tensor's and the trace term's JVP programs for the second-order pass:
    beta -> (T_0, dT_0/dbeta) and (T_n, dT_n, w) -> (w ln tr T_n, its tangent)."""
    ops = trg.JAX

    def init(b):
        return jax.jvp(lambda x: ising.initial_tensor(x, ops), (b,), (1.0,))

    def tail(pair, w):
        return jax.jvp(lambda t: w * ops.log(trg.torus_trace(t, ops)), (pair[0],), (pair[1],))

    return vjp_pair("init2", init), vjp_pair("tail2", tail)


def compiled_shapes():
    """The (D, k) pairs for which a first-order step program exists, in the order they were
    built (the second-order ones are :func:`compiled_second_order_shapes`)."""
    return [key[1:] for key in _PROGRAMS if key[0] == "step"]


def compiled_second_order_shapes():
    """The (D, k) pairs for which a second-order (JVP-of-step) program exists, in order."""
    return [key[1:] for key in _PROGRAMS if key[0] == "jvp"]


def executables():
    """Every XLA executable the staged programs hold now (step and pullback programs of
    every shape and order, and the ends), each once: e.g. for their memory figures
    (``memory_analysis()``, :func:`trgad.bench.staged_memory`)."""
    return [exe for pair in _PROGRAMS.values() for program in pair
            for exe in program.executables.values()]


def step_residuals(beta, schedule):
    """The first-order staged forward pass alone: one (T_i, residuals_i) per step.

    ``T_i`` is step i's input tensor (a JAX array of shape (D, D, D, D)), ``residuals_i``
    the list of arrays its step program returns for the pullback, i.e. what the staged
    first-order pass keeps alive between its two passes.  Parameters and errors as
    :func:`value_and_grad_jax`.
    """
    beta, ks = check_beta(beta), check_schedule(schedule)
    (init_step, _), _ = end_programs()
    T, _ = init_step(jnp.asarray(beta, dtype=jnp.float64))
    out = []
    for k in ks:
        step, _ = step_programs(T.shape[0], k)
        (T_next, _), res = step(T)
        out.append((T, res))
        T = T_next
    return out


# --------------------------------------------------------------------------------------
# The staged passes
# --------------------------------------------------------------------------------------

def value_and_grad_jax(beta, schedule):
    """lnZ/N and d(lnZ/N)/d beta by staged JAX VJPs (one ``jax.vjp`` per TRG step).

    Parameters
    ----------
    beta : float, inverse temperature in units of 1/J, |beta| in [BETA_MIN, BETA_MAX]
        (:func:`trgad.validate.check_beta`; negative: the antiferromagnet).
    schedule : sequence of int, the number of singular values kept at each step (from
        :func:`trgad.trg.truncation_schedule`); len(schedule) steps, 2**len sites.

    Returns
    -------
    (lnz, dlnz): Python floats; the internal energy per site is u = -dlnz (units of J).

    Raises
    ------
    InputError for a beta out of that range or a bad schedule.

    Source: the staged fix of the source report ("每一步单独建图、单独求 vjp", each step on
    its own graph with its own vjp), written with ``jax.vjp``.
    """
    beta, ks = check_beta(beta), check_schedule(schedule)
    f64 = jnp.float64
    (init_step, init_pullback), (tail_step, tail_pullback) = end_programs()
    # forward: every step starts from a fresh leaf (the previous step's concrete output)
    T, res0 = init_step(jnp.asarray(beta, dtype=f64))
    stages, ln_norms = [], []
    for k in ks:
        step, pullback = step_programs(T.shape[0], k)
        (T, ln), res = step(T)
        stages.append((pullback, res))
        ln_norms.append(ln)
    n = len(ks)
    tail, res_n = tail_step(T, jnp.asarray(1.0 / 2**n, dtype=f64))
    # backward: Tbar_n from the trace term, then one VJP per step, last to first
    ct = tail_pullback(res_n, jnp.ones((), dtype=f64))
    for i in range(n - 1, -1, -1):
        pullback, res = stages[i]
        # both paths at once: through T_{i+1} (cotangent ct) and through ln||T_i|| (w_i)
        ct = pullback(res, (ct, jnp.asarray(1.0 / 2**i, dtype=f64)))
    dlnz = init_pullback(res0, ct)
    lnz = float(tail) + sum(float(ln) / 2**i for i, ln in enumerate(ln_norms))
    # the factor e^{2 beta} per site taken out of the initial tensor (trgad.ising)
    return lnz + ising.log_weight_per_site(beta), float(dlnz) + ising.log_weight_slope(beta)


def value_grad_hess_jax(beta, schedule):
    """lnZ/N and its first two beta-derivatives, exactly, by staged per-step programs.

    Reverse over forward, one step at a time: the forward pass carries (T_i, dT_i/dbeta)
    through each step's JVP program (so d(lnZ/N)/d beta = 2 + sum_i w_i dln||T_i|| +
    w_n d ln tr T_n comes out of it, w_i = 2**-i), and the backward pass takes one VJP of
    each step's JVP, last to first, with the output cotangents (Tbar', 0, dTbar', w_i): the
    cotangent of dT_i is the first-order Tbar_i, that of T_i its derivative in beta.  A VJP
    through the initial tensor's JVP then gives d^2(lnZ/N)/d beta^2 (2 beta, added back,
    has none).  As in :func:`value_and_grad_jax` each program is compiled once per (D, k)
    and the pullback program reuses its step program's residuals; the second-order programs
    are separate from the first-order ones (:func:`second_order_programs`,
    :func:`compiled_second_order_shapes`).

    Parameters: beta (1/J) and schedule, sequence of int, as :func:`value_and_grad_jax`.

    Returns (lnz, dlnz, d2lnz), Python floats: u = -dlnz (J), c = beta**2 d2lnz (k_B).

    Raises InputError for a bad beta or schedule.  Source: the staged fix, one
    transform per step, with the chain rule for (T, dT) pairs instead of T (forward mode
    over the steps, reverse mode over the pairs: e.g. Griewank and Walther, *Evaluating
    Derivatives*, 2nd ed., ch. 5, second-order adjoints).
    """
    beta, ks = check_beta(beta), check_schedule(schedule)
    f64 = jnp.float64
    (init_step, init_pullback), (tail_step, tail_pullback) = second_order_end_programs()
    pair, res0 = init_step(jnp.asarray(beta, dtype=f64))
    stages, ln_norms, d_ln_norms = [], [], []
    for k in ks:
        step, pullback = second_order_programs(pair[0].shape[0], k)
        (T, ln, dT, dln), res = step(pair)
        pair = (T, dT)
        stages.append((pullback, res))
        ln_norms.append(ln)
        d_ln_norms.append(dln)
    n = len(ks)
    (tail, d_tail), res_n = tail_step(pair, jnp.asarray(1.0 / 2**n, dtype=f64))
    zero, one = jnp.zeros((), dtype=f64), jnp.ones((), dtype=f64)
    # dL = sum_i w_i dln_i + d_tail is what the backward pass differentiates in beta
    ct = tail_pullback(res_n, (zero, one))
    for i in range(n - 1, -1, -1):
        pullback, res = stages[i]
        ct = pullback(res, (ct[0], zero, ct[1], jnp.asarray(1.0 / 2**i, dtype=f64)))
    d2lnz = init_pullback(res0, ct)
    lnz = float(tail) + sum(float(ln) / 2**i for i, ln in enumerate(ln_norms))
    dlnz = float(d_tail) + sum(float(d) / 2**i for i, d in enumerate(d_ln_norms))
    return lnz + ising.log_weight_per_site(beta), dlnz + ising.log_weight_slope(beta), float(d2lnz)


# --------------------------------------------------------------------------------------
# The specific heat
# --------------------------------------------------------------------------------------

def fd_step(beta):
    """The central-difference step for :func:`specific_heat` at ``beta``: 1e-5 as in the
    source report (:data:`FD_STEP`), but at most |beta| / 2 (so that |beta| - h keeps the
    sign at small beta) and at least 1e-8 |beta| (so that |beta| +- h are distinct floats at
    large beta).  Raises InputError for a bad beta."""
    b = abs(check_beta(beta))
    return max(min(FD_STEP, b / 2), b * 1e-8)


def central_difference_c(gradient, beta, h=None):
    """c = beta**2 d^2(lnZ/N)/d beta^2 from a central difference of ``gradient``.

    ``gradient`` is a function beta -> d(lnZ/N)/d beta (a float), e.g. a staged gradient
    on either engine.  c ~= b**2 [g(b + h) - g(b - h)] / (2 h) with b = |beta| (c is even in
    beta: :mod:`trgad.ising`) and h = :func:`fd_step` unless given; the truncation error is
    O(h**2) and the rounding error ~ 1e-16 / h.  The two points stay in [BETA_MIN, BETA_MAX]
    (:mod:`trgad.validate`: below BETA_MIN JAX would see 0): b + h is capped at BETA_MAX and
    b - h raised to BETA_MIN, so the difference is one-sided at either end of the range, and
    the denominator is the distance of the two floats actually used.  A zero difference
    (deep in the ordered phase, where g = 2 to the last bit) gives c = 0, never inf * 0.
    Units of k_B per site.  Raises InputError for a bad beta, or if h is given outside
    (0, |beta|).
    """
    b = abs(check_beta(beta))
    if h is None:
        h = fd_step(b)
    elif not 0 < h < b:
        raise InputError(f"h={h!r} is out of range: h must be in (0, |beta|)")
    up, down = min(b + h, BETA_MAX), max(b - h, BETA_MIN)
    diff = gradient(up) - gradient(down)
    return 0.0 if diff == 0 else b * ((b / (up - down)) * diff)   # b / (up - down) <= 1e8


def specific_heat(beta, schedule, h=None):
    """c = beta**2 d^2(lnZ/N)/d beta^2 from a central difference of two staged JAX gradients
    (:func:`value_and_grad_jax`, :func:`central_difference_c`; the source report's way).
    Units of k_B per site.  Raises InputError for a bad beta or schedule, or if h is given
    outside (0, beta)."""
    ks = check_schedule(schedule)
    return central_difference_c(lambda b: value_and_grad_jax(b, ks)[1], beta, h)


def specific_heat_exact(beta, schedule):
    """c = beta**2 d^2(lnZ/N)/d beta^2 from :func:`value_grad_hess_jax` (exact up to rounding),
    k_B per site; 0 when the second derivative is exactly 0 (deep in the ordered phase, where
    beta**2 would overflow).  Raises InputError for a bad beta or schedule."""
    beta = check_beta(beta)
    return ising.specific_heat_of(beta, value_grad_hess_jax(beta, schedule)[2])


def full_size_steps(schedule):
    """Indices of the steps whose input tensor has the schedule's largest bond dimension.

    Step i's input has bond dimension ``schedule[i - 1]`` (2 for step 0, the Ising tensor);
    steps with a smaller input cost far less (at chi = 16: steps 0-3, inputs of D <= 4).
    Raises InputError for a bad schedule.
    """
    ks = check_schedule(schedule)
    dims = [2] + list(ks[:-1])
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
    scaled Ising tensor of :func:`trgad.ising.initial_tensor`, T_i for 0 < i <= n the tensor
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
    f64 = jnp.float64
    (init_step, init_pullback), (tail_step, tail_pullback) = end_programs()
    T, res0 = init_step(jnp.asarray(beta, dtype=f64))
    tensors, stages, ln_norms = [T], [], []
    for k in ks:
        step, pullback = step_programs(T.shape[0], k)
        (T, ln), res = step(T)
        tensors.append(T)
        stages.append((pullback, res))
        ln_norms.append(ln)
    n = len(ks)
    tail, res_n = tail_step(T, jnp.asarray(1.0 / 2**n, dtype=f64))
    ct = tail_pullback(res_n, jnp.ones((), dtype=f64))
    bars = [ct]
    for i in range(n - 1, -1, -1):
        pullback, res = stages[i]
        ct = pullback(res, (ct, jnp.asarray(1.0 / 2**i, dtype=f64)))
        bars.append(ct)
    dlnz = init_pullback(res0, ct)
    lnz = float(tail) + sum(float(ln) / 2**i for i, ln in enumerate(ln_norms))
    return {"tensors": tensors, "cotangents": bars[::-1],
            "lnz_per_site": lnz + ising.log_weight_per_site(beta),
            "dlnz": float(dlnz) + ising.log_weight_slope(beta)}
