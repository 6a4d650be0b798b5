"""Staged differentiation of the TRG: one VJP per step, the cotangent passed back by hand.

This is the fix described in the source report (book/source-report.md; its section "修法",
the fix): never let one transform see a deep graph.  Each TRG step is built on a *fresh
leaf* that holds the previous step's tensor, so a transform (``jax.vjp`` here, ``engine.vjp`` for the keyed
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

JAX: each of the pieces is ``jax.jit``-compiled once per distinct shape (bond dimension D,
kept values k); the forward program returns the step's VJP closure (a pytree of residuals,
``jax.tree_util.Partial``), so the backward program reuses the forward's residuals instead
of recomputing the step.  For chi = 16 the schedule [2, 4, 4, 16, 16, ...] has five distinct
(D, k) pairs, so 20 (or 100) steps compile five step programs.

Second derivative (:func:`value_grad_hess_jax`): the same staging for the pair (T_i,
dT_i/d beta): one JVP program per (D, k) forward, one VJP of it backward, so the specific
heat is exact (:func:`specific_heat_exact`); the central difference of two staged
gradients (:func:`specific_heat`, the source report's way) stays available.

Keyed engine: the same staging on :mod:`trgad.engine`, with structural keys still on.
"""
from __future__ import annotations

import functools
import time

from . import ising, trg
from .keys import STRATEGIES
from .validate import BETA_MAX, BETA_MIN, InputError, check_beta, check_choice, check_engine

#: Step of the central difference for the specific heat, as in the source report (h = 1e-5).
FD_STEP = 1e-5


# --------------------------------------------------------------------------------------
# JAX
# --------------------------------------------------------------------------------------

class Compiled:
    """``jax.jit(fn)`` compiled ahead of time for the shapes of each call
    (``jit(fn).lower(*args).compile()``, once per distinct argument shapes), then called as
    that executable.  ``executables`` maps the argument signature to it, which gives XLA's
    figures, e.g. ``memory_analysis().temp_size_in_bytes``.  A per-(D, k) step program has
    one signature; the trace term takes T_n of whatever shape the schedule ends with."""

    def __init__(self, fn):
        import jax

        self.jax = jax
        self.jit = jax.jit(fn)
        self.executables = {}

    def __call__(self, *args):
        leaves, tree = self.jax.tree_util.tree_flatten(args)
        key = (tree, tuple((self.jax.numpy.shape(x), str(getattr(x, "dtype", type(x).__name__)))
                           for x in leaves))
        exe = self.executables.get(key)
        if exe is None:
            exe = self.executables[key] = self.jit.lower(*args).compile()
        return exe(*args)


class _JaxPrograms:
    """Compiled per-shape programs, cached across calls (keyed on (D, k)).

    For each (D, k) there is a forward program T -> (T_next, ln||T||, residuals) and a
    backward program (residuals, cotangents) -> Tbar.  The residuals are the leaves of the
    step's ``jax.vjp`` closure; its tree structure (static: the linearised step) is recorded
    when the forward program is traced and rebuilt inside the backward program, so the
    backward pass reuses the forward's intermediate results rather than recomputing them.
    """

    def __init__(self):
        import jax

        self.jax = jax
        self.forward = {}    # (D, k) -> jitted forward
        self.backward = {}   # (D, k) -> jitted backward
        self.treedefs = {}   # (D, k) or name -> tree structure of the vjp closure
        ops = trg.jax_ops()
        self.init_fwd, self.init_bwd = self._pair("init", lambda b: ising.initial_tensor(b, ops))
        self.tail_fwd, self.tail_bwd = self._pair(
            "tail", lambda t, w: w * ops.log(trg.torus_trace(t, ops)))

    def _pair(self, key, fn):
        """Compiled (forward returning residual leaves, backward rebuilding the closure)."""
        jax = self.jax

        def fwd(x, *args):
            out, pullback = jax.vjp(lambda y: fn(y, *args), x)
            leaves, self.treedefs[key] = jax.tree_util.tree_flatten(pullback)
            return out, leaves

        def bwd(leaves, ct):
            pullback = jax.tree_util.tree_unflatten(self.treedefs[key], leaves)
            return pullback(ct)[0]

        return Compiled(fwd), Compiled(bwd)

    def step(self, D, k):
        """(forward, backward) programs of one TRG step from bond dimension D keeping k."""
        key = (D, k)
        if key not in self.forward:
            ops = trg.jax_ops()
            self.forward[key], self.backward[key] = self._pair(
                key, lambda t: trg.trg_step(t, k, ops))
        return self.forward[key], self.backward[key]

    def step2(self, D, k):
        """(forward, backward) programs of one step's JVP, (T, dT) -> (T', ln, dT', dln):
        the second-order pass (:func:`value_grad_hess_jax`) takes one VJP of each."""
        key = ("jvp", D, k)
        if key not in self.forward:
            ops = trg.jax_ops()
            jax = self.jax

            def jvp_step(pair):
                (t2, ln), (dt2, dln) = jax.jvp(lambda t: trg.trg_step(t, k, ops), (pair[0],), (pair[1],))
                return t2, ln, dt2, dln

            self.forward[key], self.backward[key] = self._pair(key, jvp_step)
        return self.forward[key], self.backward[key]

    def ends2(self):
        """The initial tensor's and the trace term's JVP programs for the second-order pass:
        beta -> (T_0, dT_0/dbeta) and (T_n, dT_n, w) -> (w ln tr T_n, its tangent)."""
        if not hasattr(self, "init2"):
            jax, ops = self.jax, trg.jax_ops()
            init = lambda b: jax.jvp(lambda x: ising.initial_tensor(x, ops), (b,), (1.0,))  # noqa: E731

            def tail(pair, w):
                return jax.jvp(lambda t: w * ops.log(trg.torus_trace(t, ops)), (pair[0],), (pair[1],))

            self.init2 = self._pair("init2", init)
            self.tail2 = self._pair("tail2", tail)
        return self.init2, self.tail2


_PROGRAMS = None


def _programs():
    global _PROGRAMS
    if _PROGRAMS is None:
        _PROGRAMS = _JaxPrograms()
    return _PROGRAMS


def clear_cache():
    """Forget the compiled JAX step programs (the next call compiles again, as a first call)."""
    global _PROGRAMS
    _PROGRAMS = None


def compiled_shapes():
    """The (D, k) pairs for which a JAX step program exists, in the order they were built
    (the first-order programs; the second-order ones are :func:`compiled_second_order_shapes`)."""
    return [key for key in _PROGRAMS.forward if key[0] != "jvp"] if _PROGRAMS is not None else []


def compiled_second_order_shapes():
    """The (D, k) pairs for which a second-order (JVP-of-step) program exists, in order."""
    return [key[1:] for key in _PROGRAMS.forward if key[0] == "jvp"] if _PROGRAMS is not None else []


def programs():
    """The compiled per-shape programs (a ``_JaxPrograms``; built on first use), e.g. for
    :func:`trgad.bench.run`'s memory figures: its dicts ``forward`` and ``backward`` map
    (D, k), and ("jvp", D, k) for the second-order pass, to ``jax.jit`` functions."""
    return _programs()


def _schedule(schedule):
    try:
        ks = [int(k) for k in schedule]
    except (TypeError, ValueError):
        raise InputError(f"schedule={schedule!r} is not a sequence of integers") from None
    if not ks:
        raise InputError("schedule=[] is out of range: at least one TRG step is needed")
    if min(ks) < 1:
        raise InputError(f"schedule={ks!r} is out of range: every entry must be an integer >= 1")
    return ks


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
    beta, ks = check_beta(beta), _schedule(schedule)
    P = _programs()
    jnp = P.jax.numpy
    f64 = jnp.float64
    # forward: every step starts from a fresh leaf (the previous step's concrete output)
    T, res0 = P.init_fwd(jnp.asarray(beta, dtype=f64))
    stages, ln_norms = [], []
    for k in ks:
        fwd, bwd = P.step(int(T.shape[0]), k)
        (T, ln), res = fwd(T)
        stages.append((bwd, res))
        ln_norms.append(ln)
    n = len(ks)
    tail, res_n = P.tail_fwd(T, jnp.asarray(1.0 / 2**n, dtype=f64))
    # backward: Tbar_n from the trace term, then one VJP per step, last to first
    ct = P.tail_bwd(res_n, jnp.ones((), dtype=f64))
    for i in range(n - 1, -1, -1):
        bwd, res = stages[i]
        # both paths at once: through T_{i+1} (cotangent ct) and through ln||T_i|| (w_i)
        ct = bwd(res, (ct, jnp.asarray(1.0 / 2**i, dtype=f64)))
    dlnz = P.init_bwd(res0, ct)
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
    and the backward program reuses its forward's residuals; the second-order programs are
    separate from the first-order ones (:func:`compiled_second_order_shapes`).

    Parameters: beta (1/J) and schedule, sequence of int, as :func:`value_and_grad_jax`.

    Returns (lnz, dlnz, d2lnz), Python floats: u = -dlnz (J), c = beta**2 d2lnz (k_B).

    Raises InputError for a bad beta or schedule.  Source: the staged fix, one
    transform per step, with the chain rule for (T, dT) pairs instead of T (forward mode
    over the steps, reverse mode over the pairs: e.g. Griewank and Walther, *Evaluating
    Derivatives*, 2nd ed., ch. 5, second-order adjoints).
    """
    beta, ks = check_beta(beta), _schedule(schedule)
    P = _programs()
    jnp = P.jax.numpy
    f64 = jnp.float64
    (init_fwd, init_bwd), (tail_fwd, tail_bwd) = P.ends2()
    pair, res0 = init_fwd(jnp.asarray(beta, dtype=f64))
    stages, ln_norms, d_ln_norms = [], [], []
    for k in ks:
        fwd, bwd = P.step2(int(pair[0].shape[0]), k)
        (T, ln, dT, dln), res = fwd(pair)
        pair = (T, dT)
        stages.append((bwd, res))
        ln_norms.append(ln)
        d_ln_norms.append(dln)
    n = len(ks)
    (tail, d_tail), res_n = tail_fwd(pair, jnp.asarray(1.0 / 2**n, dtype=f64))
    zero, one = jnp.zeros((), dtype=f64), jnp.ones((), dtype=f64)
    # dL = sum_i w_i dln_i + d_tail is what the backward pass differentiates in beta
    ct = tail_bwd(res_n, (zero, one))
    for i in range(n - 1, -1, -1):
        bwd, res = stages[i]
        ct = bwd(res, (ct[0], zero, ct[1], jnp.asarray(1.0 / 2**i, dtype=f64)))
    d2lnz = init_bwd(res0, ct)
    lnz = float(tail) + sum(float(ln) / 2**i for i, ln in enumerate(ln_norms))
    dlnz = float(d_tail) + sum(float(d) / 2**i for i, d in enumerate(d_ln_norms))
    return lnz + ising.log_weight_per_site(beta), dlnz + ising.log_weight_slope(beta), float(d2lnz)


# The keyed engine's staging lives in trgad.staged_keyed; its entry point is also here.
from .staged_keyed import value_and_grad_engine  # noqa: E402  (needs _schedule above)


# --------------------------------------------------------------------------------------
# Front ends
# --------------------------------------------------------------------------------------

def value_and_grad(beta, schedule, engine="jax", keys="structural"):
    """(lnZ/N, d lnZ/N / d beta) by the staged method on ``engine`` ("jax" or "keyed")."""
    engine = check_engine(engine)
    if engine == "jax":
        return value_and_grad_jax(beta, schedule)
    r = value_and_grad_engine(beta, schedule, keys=keys)
    return r["lnz_per_site"], r["dlnz"]


def fd_step(beta):
    """The central-difference step for :func:`specific_heat` at ``beta``: 1e-5 as in the
    source report (:data:`FD_STEP`), but at most |beta| / 2 (so that |beta| - h keeps the
    sign at small beta) and at least 1e-8 |beta| (so that |beta| +- h are distinct floats at
    large beta).  Raises InputError for a bad beta."""
    b = abs(check_beta(beta))
    return max(min(FD_STEP, b / 2), b * 1e-8)


def specific_heat(beta, schedule, engine="jax", keys="structural", h=None):
    """c = beta**2 d^2(lnZ/N)/d beta^2 from a central difference of two staged gradients.

    c ~= b**2 [g(b + h) - g(b - h)] / (2 h) with b = |beta| (c is even in beta:
    :mod:`trgad.ising`), g = d(lnZ/N)/d beta and h = :func:`fd_step` unless given; the
    truncation error is O(h**2) and the rounding error ~ 1e-16 / h.  The two points stay in
    [BETA_MIN, BETA_MAX] (:mod:`trgad.validate`: below BETA_MIN JAX would see 0): b + h is
    capped at BETA_MAX and b - h raised to BETA_MIN, so the difference is one-sided at either
    end of the range, and the denominator is the distance of the two floats actually used.
    A zero difference (deep in the ordered phase, where g = 2 to the last bit) gives c = 0,
    never inf * 0.  Units of k_B per site.  Raises InputError for a bad beta, or if h is
    given outside (0, |beta|).
    """
    b = abs(check_beta(beta))
    if h is None:
        h = fd_step(b)
    elif not 0 < h < b:
        raise InputError(f"h={h!r} is out of range: h must be in (0, |beta|)")
    up, down = min(b + h, BETA_MAX), max(b - h, BETA_MIN)
    _, g_plus = value_and_grad(up, schedule, engine, keys)
    _, g_minus = value_and_grad(down, schedule, engine, keys)
    diff = g_plus - g_minus
    return 0.0 if diff == 0 else b * ((b / (up - down)) * diff)   # b / (up - down) <= 1e8


@functools.lru_cache(maxsize=8)
def _whole_second(schedule):
    import jax

    from . import whole

    return jax.jit(jax.grad(jax.grad(whole.lnz_fn(schedule))))


def specific_heat_autodiff(beta, schedule):
    """c = beta**2 d^2(lnZ/N)/d beta^2 by ``jax.grad(jax.grad(.))`` of the whole JAX graph.

    Reverse-over-reverse through trgad's truncated-SVD rule (whose backward pass is itself
    differentiable): the exact derivative of the truncated TRG, up to rounding.  The first
    call per schedule traces and compiles the second-order program, which takes far longer
    than later calls (the chapter *The staged fix* times both).  Returns a float (units of
    k_B per site).
    """
    beta, ks = check_beta(beta), tuple(_schedule(schedule))
    return beta**2 * float(_whole_second(ks)(float(beta)))


def specific_heat_exact(beta, schedule):
    """c = beta**2 d^2(lnZ/N)/d beta^2 from :func:`value_grad_hess_jax` (exact up to rounding),
    k_B per site; 0 when the second derivative is exactly 0 (deep in the ordered phase, where
    beta**2 would overflow).  Raises InputError for a bad beta or schedule."""
    beta = check_beta(beta)
    d2 = value_grad_hess_jax(beta, schedule)[2]
    return 0.0 if d2 == 0 else beta * d2 * beta


#: How :func:`run` gets c: exact staged second derivative, or central difference.
C_METHODS = ("exact", "fd")


def run(beta, schedule, engine="jax", keys="structural", with_specific_heat=False, c_method="exact"):
    """The staged method for the command line: ``python -m trgad trg --method staged``.

    Returns a JSON-ready dict: ``lnz_per_site``, ``u`` (= -d lnZ/N / d beta, units of J),
    ``c`` (specific heat per site if ``with_specific_heat``, else None), ``c_method``
    ("exact": :func:`value_grad_hess_jax`, whose one pass then gives lnZ/N and u too;
    "fd": :func:`specific_heat`, with ``fd_step``, the step h it used, and ``c_seconds``,
    the time the two extra gradients took; None without c), ``value_and_grad_seconds``
    (this call's staged pass, first call included), ``compiled_step_programs`` (JAX:
    per-shape programs of the pass that ran), ``keys`` (engine only) and, for the keyed engine,
    ``transform_seconds``, ``key_visits``, ``derivative_ops``, ``run_seconds`` summed over
    all per-step VJPs.

    Raises InputError for a bad input, and for ``c_method="exact"`` with the keyed engine
    (which has first derivatives only).
    """
    engine = check_engine(engine)
    keys = check_choice("keys", keys, STRATEGIES)
    c_method = check_choice("c_method", c_method, C_METHODS)
    if with_specific_heat and c_method == "exact" and engine != "jax":
        raise InputError("c_method='exact' needs engine='jax' (the keyed engine has first "
                         "derivatives only): use c_method='fd' (--c-method fd)")
    t0 = time.perf_counter()
    out = {}
    exact_jax = with_specific_heat and c_method == "exact" and engine == "jax"
    if exact_jax:          # one second-order pass gives lnZ/N and u too
        lnz, dlnz, d2 = value_grad_hess_jax(beta, schedule)
        beta = check_beta(beta)
        out.update(compiled_step_programs=len(compiled_second_order_shapes()), c_method="exact",
                   c=0.0 if d2 == 0 else beta * d2 * beta)
    elif engine == "jax":
        lnz, dlnz = value_and_grad_jax(beta, schedule)
        out["compiled_step_programs"] = len(compiled_shapes())
    else:
        r = value_and_grad_engine(beta, schedule, keys=keys)
        lnz, dlnz = r["lnz_per_site"], r["dlnz"]
        out.update(keys=keys, transform_seconds=r["transform_seconds"], key_visits=r["key_visits"],
                   derivative_ops=r["derivative_ops"], run_seconds=r["run_seconds"],
                   forward_seconds=r["forward_seconds"])
    out["value_and_grad_seconds"] = time.perf_counter() - t0
    out.update(lnz_per_site=lnz, u=-dlnz)
    out.setdefault("c", None)
    out.setdefault("c_method", None)
    if with_specific_heat and not exact_jax:
        beta = check_beta(beta)
        t1 = time.perf_counter()
        if c_method == "fd":
            out["fd_step"] = fd_step(beta)
            out["c"] = specific_heat(beta, schedule, engine=engine, keys=keys, h=out["fd_step"])
        out.update(c_method=c_method, c_seconds=time.perf_counter() - t1)
    return out


def full_size_steps(schedule):
    """Indices of the steps whose input tensor has the schedule's largest bond dimension.

    Step i's input has bond dimension ``schedule[i - 1]`` (2 for step 0, the Ising tensor);
    steps with a smaller input cost far less (at chi = 16: steps 0-3, inputs of D <= 4).
    """
    ks = _schedule(schedule)
    dims = [2] + list(ks[:-1])
    return [i for i, d in enumerate(dims) if d == max(dims)]
