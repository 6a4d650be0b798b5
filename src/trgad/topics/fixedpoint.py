"""A fixed-point loop of this field and its derivative three ways: unrolled, staged, implicit.

The loop: power iteration for the dominant eigenvector v* of the row transfer matrix T of
the 2D Ising model on an infinite cylinder of circumference L (:mod:`trgad.topics.cylinder`,
which builds the scaled T~ = T e^{-2 L beta}).  lnZ/N of the cylinder is
f = ln(lambda_max)/L, u = -df/dbeta, and a row configuration s occurs with probability
v*(s)^2, so the bond correlation along a row is <s_i s_{i+1}> = sum_s v*(s)^2 h(s)/L.

Power iteration v <- g(v) = T v / ||T v|| from the uniform vector converges to v* (T has
positive entries and is positive definite, so v* is unique and positive: Perron-Frobenius).
The uniform start has the symmetries of v* (spin flip, translations and reflections of the
row), so the error falls per iteration by r = lambda_2/lambda_1, lambda_2 the next eigenvalue
*with those symmetries* (:func:`~trgad.topics.cylinder.exact` returns it as ``rate``).

Outputs (:data:`OUTPUTS`), functions of (v, T, beta): "lnz", lnZ/N from the Rayleigh quotient
v^T T v, and "bond", the row's bond correlation.  Their beta-derivative three ways:

* :func:`unrolled`: ``jax.grad`` through every iteration, one whole graph.
* :func:`staged`: one ``jax.vjp`` per iteration, the cotangent passed back by hand (the
  book's staged TRG); T(beta) feeds every iteration, so its cotangent sums over them.
* :func:`implicit`: :func:`fixed_point`, a ``jax.custom_vjp`` that keeps only the loop's
  vector and, backwards, solves the adjoint equation of the implicit function theorem
  (:func:`adjoint_solve`).  Memory does not depend on the number of iterations, and the
  forward loop is a ``lax.while_loop``, which JAX cannot differentiate in reverse mode.

:func:`truncated_curve` gives the truncated loop's derivative after every n at once (forward
mode through the loop: the same derivative as the unrolled and staged passes).

Oracles: :mod:`trgad.topics.cylinder` (exact diagonalisation, its finite difference and
Kaufman's closed form).

Sources: implicit function theorem and derivatives of fixed-point iterations, Griewank and
Walther, *Evaluating Derivatives*, 2nd ed. (SIAM 2008), ch. 15; JAX, "Advanced automatic
differentiation", example "Implicit function differentiation of iterative implementations"
(https://docs.jax.dev/en/latest/advanced-autodiff.html) and ``jax.lax.custom_root``;
Liao, Liu, Wang and Xiang, Phys. Rev. X 9, 031041 (2019) for fixed points in tensor-network
automatic differentiation (CTMRG).
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from ..runtime import compiled
from .cylinder import L_MAX, bond_sums, check_cylinder_beta, check_L, transfer_matrix
from ..runtime.validate import InputError, check_choice, check_int, check_range, checked

#: Most power iterations in one call (the unrolled and staged derivatives keep two vectors
#: per iteration; 10**5 is far beyond what any beta needs from the uniform start).
ITERATIONS_MAX = 100_000
#: Smallest tolerance on the fixed-point residual ||g(v) - v||: one step rounds at about
#: 1e-16 * sqrt(2**L), so a tighter tolerance might never be met.
TOL_MIN = 1e-15
#: Relative tolerance and most iterations of :func:`adjoint_solve` inside :func:`fixed_point`.
ADJOINT_TOL, ADJOINT_MAX = 1e-15, 10_000
#: Iteration methods of :func:`held_bytes`.
LOOP_METHODS = ("unrolled", "staged", "implicit")


def check_iterations(iterations, low=1, name="iterations"):
    """A number of power iterations: an integer in [low, ITERATIONS_MAX]."""
    return check_int(name, iterations, low, ITERATIONS_MAX)


def check_tol(tol):
    """Tolerance on ||g(v) - v||: a finite float in [TOL_MIN, 1)."""
    tol = check_range("tol", tol)
    if not TOL_MIN <= tol < 1.0:
        raise InputError(f"tol={tol!r} is out of range: tol must be in [{TOL_MIN:g}, 1) "
                         f"(one power step rounds at about 1e-16 * sqrt(2**L))")
    return tol


def check_output(output):
    """One of the names of :data:`OUTPUTS`."""
    return check_choice("output", output, tuple(OUTPUTS))


# ---- the loop ----------------------------------------------------------------------------


def _L(v):
    return int(round(math.log2(v.shape[0])))


@checked(L=check_L)
def start_vector(L):
    """The uniform unit vector of length 2**L, the start of every power iteration here."""
    return jnp.full(2**L, 2.0 ** (-L / 2))


def power_step(v, T):
    """One power iteration g(v) = T v / ||T v||: v of shape (n,), T of shape (n, n)."""
    w = T @ v
    return w / jnp.linalg.norm(w)


def residual(v, T):
    """The convergence criterion ||g(v) - v|| (2-norm; v a unit vector)."""
    return jnp.linalg.norm(power_step(v, T) - v)


def lnz_from_vector(v, T, beta):
    """lnZ/N of the cylinder from a unit vector v: ln(v^T T~ v)/L + 2 beta (the Rayleigh
    quotient: exact at v = v*, in error by O(||v - v*||^2) near it)."""
    return jnp.log(v @ (T @ v)) / _L(v) + 2.0 * beta


def row_bond(v, T, beta):
    """The bond correlation along a row, <s_i s_{i+1}> = sum_s v(s)^2 h(s)/L, for a unit
    vector v (exact at v = v*, in error by O(||v - v*||) near it).  T and beta are unused
    (the signature of :data:`OUTPUTS`)."""
    L = _L(v)
    return (v * v) @ jnp.asarray(bond_sums.trusted(L)[0]) / L


#: Outputs of the loop's vector: name -> function (v, T~, beta) -> scalar.
OUTPUTS = {"lnz": lnz_from_vector, "bond": row_bond}


@checked(iterations=functools.partial(check_iterations, low=0))
def power_iteration(T, iterations):
    """``iterations`` power steps from the uniform vector, as a plain Python loop.

    ``T``: (2**L, 2**L) array.  Returns v, shape (2**L,).  Differentiable by any JAX
    transform (this is the loop the unrolled and staged derivatives go through).
    """
    v = start_vector.trusted(_L(T))
    for _ in range(iterations):
        v = power_step(v, T)
    return v


def while_power_iteration(T, tol, max_iterations):
    """Power iteration as a ``lax.while_loop``: stop after the first step that moved v by at
    most tol (||g(v) - v|| <= tol for the v it started from) or after ``max_iterations``
    steps (tol = 0: exactly max_iterations).  Returns (v after the last step, iterations
    done, that last step's ||g(v) - v||).  JAX can evaluate, jit and forward-differentiate
    it, not reverse-differentiate it (the number of steps is only known at run time)."""
    v0 = start_vector.trusted(_L(T))

    def cond(state):
        _, k, res = state
        return (k < max_iterations) & (res > tol)

    def body(state):
        v, k, _ = state
        v_next = power_step(v, T)
        return v_next, k + 1, jnp.linalg.norm(v_next - v)

    return jax.lax.while_loop(cond, body, (v0, jnp.asarray(0), jnp.asarray(jnp.inf)))


@functools.lru_cache(maxsize=None)
def _compiled_while():
    return compiled.jit(while_power_iteration)


@checked(beta=check_cylinder_beta, L=check_L, tol=check_tol,
         max_iterations=functools.partial(check_iterations, name="max_iterations"))
def converge(beta, L, tol=1e-12, max_iterations=10_000):
    """Power iteration to convergence (:func:`while_power_iteration`): the first step whose
    change ||g(v) - v|| is at most tol ends the loop.  Returns a dict with ``v`` (NumPy array,
    shape (2**L,)), ``iterations`` (steps done) and ``residual`` (the last step's change).
    Raises InputError for a bad beta, L, tol or max_iterations, and when tol was not reached
    within max_iterations (naming both)."""
    v, k, res = _compiled_while()(transfer_matrix.trusted(beta, L), tol, max_iterations)
    if not float(res) <= tol:
        raise InputError(f"max_iterations={max_iterations} is too small: power iteration at "
                         f"beta={beta!r}, L={L} left ||g(v) - v|| = {float(res):.1e} > "
                         f"tol={tol:g}; raise max_iterations or tol")
    return {"v": np.asarray(v), "iterations": int(k), "residual": float(res)}


# ---- (a) unrolled whole graph, (b) staged, and the truncated loop's derivative at every n ----

def value_unrolled(beta, L, iterations, output="lnz"):
    """The output after exactly ``iterations`` power steps, as one JAX graph of beta."""
    T = transfer_matrix.trusted(beta, L)
    return OUTPUTS[output](power_iteration.trusted(T, iterations), T, beta)


@functools.lru_cache(maxsize=64)
def _compiled_unrolled(L, iterations, output):
    return compiled.jit(jax.value_and_grad(lambda b: value_unrolled(b, L, iterations, output)))


def unrolled(beta, L, iterations, output="lnz"):
    """The output of the truncated loop and its beta-derivative by ``jax.grad`` through all
    ``iterations`` steps: one whole graph, compiled once per (L, iterations, output).

    Returns a dict with ``value`` and ``derivative`` (for "lnz": lnZ/N and -u, u in J per
    site).  Raises InputError for a bad beta, L, iterations or output.
    """
    beta, L = check_cylinder_beta(beta), check_L(L)
    iterations, output = check_iterations(iterations), check_output(output)
    value, derivative = _compiled_unrolled(L, iterations, output)(beta)
    return {"value": float(value), "derivative": float(derivative)}


@functools.lru_cache(maxsize=None)
def _step_jit():
    # plain jax.jit: it runs under jax.vjp, where a jit is nested and takes no compiler options
    return jax.jit(power_step)


@checked(beta=check_cylinder_beta, L=check_L, iterations=check_iterations, output=check_output)
def staged(beta, L, iterations, output="lnz"):
    """The truncated loop's output and beta-derivative by one ``jax.vjp`` per power step.

    Forward: T = T~(beta) once, then v_{k+1} = g(v_k, T), each step's pullback kept.
    Backward, last step first: (v_bar_k, T_bar_k) = pullback_k(v_bar_{k+1}) and
    T_bar = sum_k T_bar_k (T feeds every step), then beta_bar from T~'s own pullback: the
    derivative of :func:`unrolled`.  Returns a dict with ``value``, ``derivative`` and
    ``residual_bytes``, the exact size of the arrays all pullbacks hold when the backward
    pass starts (:func:`residual_bytes`).  Raises InputError for a bad beta, L, iterations
    or output.
    """
    T, T_pullback = jax.vjp(lambda b: transfer_matrix.trusted(b, L), beta)
    v, pullbacks = start_vector.trusted(L), []
    for _ in range(iterations):
        v, pullback = jax.vjp(_step_jit(), v, T)
        pullbacks.append(pullback)
    value, out_pullback = jax.vjp(OUTPUTS[output], v, T, beta)
    held = residual_bytes([T_pullback, out_pullback] + pullbacks)
    v_bar, T_bar, beta_bar = out_pullback(1.0)
    for pullback in reversed(pullbacks):
        v_bar, T_bar_k = pullback(v_bar)
        T_bar = T_bar + T_bar_k
    beta_bar = beta_bar + T_pullback(T_bar)[0]
    return {"value": float(value), "derivative": float(beta_bar), "residual_bytes": held}


def truncated_curve(beta, L, iterations, output="lnz"):
    """The output after n = 1 .. ``iterations`` power steps and its beta-derivative, by
    forward mode through the loop (``jax.jvp``, eager): (v_n, dv_n/dbeta) are carried along,
    so one pass gives the truncated loop's derivative at every n, the same derivative that
    :func:`unrolled` and :func:`staged` give at one n (Griewank and Walther 2008, ch. 15).

    Returns (values, derivatives), NumPy arrays of shape (iterations,).  Raises InputError
    for a bad beta, L, iterations or output.
    """
    beta, L = check_cylinder_beta(beta), check_L(L)
    iterations, output = check_iterations(iterations), check_output(output)

    def outputs(b):
        T, v, out = transfer_matrix.trusted(b, L), start_vector.trusted(L), []
        for _ in range(iterations):
            v = power_step(v, T)
            out.append(OUTPUTS[output](v, T, b))
        return jnp.stack(out)

    values, derivatives = jax.jvp(outputs, (jnp.asarray(beta),), (jnp.asarray(1.0),))
    return np.asarray(values), np.asarray(derivatives)


def residual_bytes(pullbacks):
    """Bytes of the distinct arrays held by JAX pullbacks (``jax.vjp``'s second output, or a
    list of them): each array counted once however many pullbacks hold it."""
    seen = {}
    for leaf in jax.tree_util.tree_leaves(pullbacks):
        if hasattr(leaf, "nbytes"):
            seen[id(leaf)] = leaf.nbytes
    return int(sum(seen.values()))


# ---- (c) implicit ------------------------------------------------------------------------

def _g(v, beta, L):
    return power_step(v, transfer_matrix.trusted(beta, L))


def adjoint_solve(v, beta, L, v_bar, tol=ADJOINT_TOL, max_iterations=ADJOINT_MAX):
    """Solve the adjoint equation (I - A^T) w = v_bar, A = dg/dv at (v, beta), matrix-free.

    By the fixed-point iteration w <- v_bar + A^T w from w = v_bar (the Neumann series of
    (I - A^T)^{-1}; A^T w is one ``jax.vjp`` of g), until an update is at most
    tol * ||v_bar|| or after ``max_iterations``.  At v* the eigenvalues of A are 0 (along v*)
    and lambda_k/lambda_1 (k > 1), so it converges at the power iteration's own rate.
    Shapes: v, v_bar (2**L,); L a Python int.  Returns (w, iterations done).  JAX-traceable
    (a ``lax.while_loop``).  Source: B. Christianson, "Reverse accumulation and attractive
    fixed points", Optim. Methods Softw. 3, 311 (1994), as in Griewank and Walther (2008),
    ch. 15, and JAX's ``fixed_point`` example (see the module docstring).
    """
    _, g_pullback = jax.vjp(lambda x: _g(x, beta, L), v)
    scale = tol * jnp.linalg.norm(v_bar)

    def cond(state):
        _, k, change = state
        return (k < max_iterations) & (change > scale)

    def body(state):
        w, k, _ = state
        w_next = v_bar + g_pullback(w)[0]
        return w_next, k + 1, jnp.linalg.norm(w_next - w)

    w, k, _ = jax.lax.while_loop(cond, body, (v_bar, jnp.asarray(0), jnp.asarray(jnp.inf)))
    return w, k


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def fixed_point(beta, L, tol, max_iterations):
    """The power iteration's vector v*(beta), differentiable by the implicit function theorem.

    Forward: :func:`while_power_iteration` from the uniform vector until ||g(v) - v|| <= tol
    or ``max_iterations`` steps (tol = 0.0: exactly max_iterations); returns v, shape
    (2**L,).  Backward (``jax.custom_vjp``): for the cotangent v_bar, w from
    :func:`adjoint_solve` at the returned v, and beta_bar = (dg/dbeta)^T w, one more VJP of
    g.  It keeps only v and beta for the backward pass, whatever the number of iterations.
    At an unconverged v it is the derivative the fixed point would have if v were it.  ``L``
    is a Python int (static); tol and max_iterations may be traced (one compiled program
    serves every value) and get no derivative.
    """
    return while_power_iteration(transfer_matrix.trusted(beta, L), tol, max_iterations)[0]


def _fixed_point_fwd(beta, L, tol, max_iterations):
    v = fixed_point(beta, L, tol, max_iterations)
    return v, (v, beta)


def _fixed_point_bwd(L, saved, v_bar):
    v, beta = saved
    w, _ = adjoint_solve(v, beta, L, v_bar)
    _, g_beta_pullback = jax.vjp(lambda b: _g(v, b, L), beta)
    return g_beta_pullback(w)[0], None, None


fixed_point.defvjp(_fixed_point_fwd, _fixed_point_bwd)


def value_implicit(beta, L, tol, max_iterations, output="lnz"):
    """The output at the vector of :func:`fixed_point`, a JAX graph of beta in which the whole
    loop is one node."""
    return OUTPUTS[output](fixed_point(beta, L, tol, max_iterations), transfer_matrix.trusted(beta, L), beta)


@functools.lru_cache(maxsize=2 * (L_MAX + 1))
def _compiled_implicit(L, output):
    return compiled.jit(jax.value_and_grad(lambda b, tol, n: value_implicit(b, L, tol, n, output)))


def implicit(beta, L, iterations=None, output="lnz", tol=1e-12, max_iterations=10_000):
    """The output and its beta-derivative by implicit differentiation at the loop's vector.

    With ``iterations`` given, the loop runs exactly that many steps (stopped early, the
    derivative is taken as if its vector were the fixed point); otherwise until
    ||g(v) - v|| <= tol (at most max_iterations; InputError if not reached, see
    :func:`converge`).  One compiled program per (L, output) serves every beta, iteration
    count and tolerance.  Returns a dict with ``value`` and ``derivative``.  Raises
    InputError for a bad beta, L, iterations, output, tol or max_iterations.
    """
    beta, L, output = check_cylinder_beta(beta), check_L(L), check_output(output)
    if iterations is not None:
        tol, max_iterations = 0.0, check_iterations(iterations)
    else:
        tol, max_iterations = check_tol(tol), check_iterations(max_iterations, name="max_iterations")
        converge.trusted(beta, L, tol, max_iterations)      # InputError if it does not converge
    value, derivative = _compiled_implicit(L, output)(beta, float(tol), int(max_iterations))
    return {"value": float(value), "derivative": float(derivative)}


def held_bytes(method, beta, L, iterations, output="lnz"):
    """Exact bytes of the arrays a method keeps for its backward pass after ``iterations``
    power steps: the distinct arrays of ``jax.vjp``'s pullback of the method's graph of beta
    (for "staged", of all its per-step pullbacks; see :func:`staged`).  Includes T~ and
    what its exponential keeps (shared by all three methods).  Raises InputError for a bad
    method, beta, L, iterations or output.
    """
    method = check_choice("method", method, LOOP_METHODS)
    beta, L = check_cylinder_beta(beta), check_L(L)
    iterations, output = check_iterations(iterations), check_output(output)
    if method == "staged":
        return staged.trusted(beta, L, iterations, output)["residual_bytes"]
    if method == "unrolled":
        _, pullback = jax.vjp(lambda b: value_unrolled(b, L, iterations, output), beta)
    else:
        _, pullback = jax.vjp(lambda b: value_implicit(b, L, 0.0, iterations, output), beta)
    return residual_bytes(pullback)
