"""The gradient of lnZ/N with respect to many parameters: reverse mode against forward mode.

Two parameter sets, both differentiated through the same TRG (:func:`trgad.physics.trg.trg_step`):

* ``tensor`` - the 16 entries of the initial site tensor T0[l, u, r, d] (2 x 2 x 2 x 2), the
  scaled Ising tensor of :mod:`trgad.physics.ising` at beta; lnZ/N = 2 beta + ln Z~(T0)/N.
* ``couplings`` - the bond couplings (J_x, J_y) of the anisotropic Ising model
  Z = sum_s exp(beta sum_<ij> J_<ij> s_i s_j), horizontal bonds J_x, vertical J_y
  (:func:`anisotropic_tensor`), at J_x = J_y = 1.

Reverse mode gets the whole gradient from one backward pass (``jax.value_and_grad``).
Forward mode carries one tangent per parameter, two ways: ``forward_mode``, one ``jax.jvp``
per parameter (run one after another with the same compiled program, each recomputing the
primal pass, SVDs included), and ``jacfwd``, ``jax.jacfwd``: the tangents ``vmap``-ed in one
program, the primal pass and its SVDs once, the tangent work still one per parameter.
:func:`compare` times the three and checks them against each other, against central
finite differences and against the beta-derivative:

* tensor: sum_e (d lnZ/N / d T0_e) (d T0_e / d beta) + 2 = d lnZ/N / d beta (chain rule);
* couplings: lnZ/N depends on beta J_x and beta J_y only, so at J_x = J_y = 1
  d lnZ/N / d J_x + d lnZ/N / d J_y = beta d lnZ/N / d beta (Euler's relation).
"""
from __future__ import annotations

import time

import numpy as np

import jax
import jax.numpy as jnp

from ..runtime import compiled
from ..physics import ising, staged, trg
from ..runtime.timing import block, time_call
from ..runtime.validate import (AD_MODES, InputError, check_beta, check_choice, check_positive, check_repeats,
                                check_schedule, checked)

#: Parameter sets of :func:`gradient`.
PARAMS = ("tensor", "couplings")
#: Modes of :func:`gradient`: those of :data:`trgad.runtime.validate.AD_MODES` and ``jacfwd``.
GRADIENT_MODES = AD_MODES + ("jacfwd",)


def bond_matrix(K, ops):
    """W~ (2, 2) with W~ W~^T = [[e^K, e^-K], [e^-K, e^K]] e^{-K}: the scaled bond factor of
    :mod:`trgad.physics.ising` for the coupling K = beta J (dimensionless, > 0; float or traced)."""
    m2k = K * -2.0
    even, odd = 1.0 + ops.exp(m2k), ops.expm1(m2k) * -1.0
    lam = even * ops.constant([1.0, 0.0]) + odd * ops.constant([0.0, 1.0])
    return ops.constant(ising.HADAMARD) * ops.reshape(ops.sqrt(lam), (1, 2))


def anisotropic_tensor(kx, ky, ops):
    """Scaled site tensor T~[l, u, r, d] = sum_s Wx[s, l] Wy[s, u] Wx[s, r] Wy[s, d], shape
    (2, 2, 2, 2), for the couplings kx = beta J_x (legs l, r: horizontal bonds) and
    ky = beta J_y (legs u, d).  lnZ/N = kx + ky + ln Z~/N.  At kx = ky = beta it is
    :func:`trgad.physics.ising.initial_tensor` (same construction, one W per bond end)."""
    Wx, Wy = bond_matrix(kx, ops), bond_matrix(ky, ops)
    return ops.einsum("si,sj,sk,sl->ijkl", Wx, Wy, Wx, Wy)


@checked(schedule=check_schedule)
def lnz_of_tensor(T0, schedule):
    """ln Z~/N of the lattice of copies of T0 ((2, 2, 2, 2) JAX array) by TRG with
    ``schedule``, as one JAX graph (no 2 beta added: see :func:`trgad.physics.trg.lnz_from_steps`)."""
    ops = trg.JAX
    T, ln_norms = T0, []
    for k in schedule:
        T, ln = trg.trg_step(T, k, ops)
        ln_norms.append(ln)
    return trg.lnz_from_steps(ln_norms, T, ops)


def _objective(params, beta, schedule):
    """(f, x0): lnZ/N as a function of a flat parameter vector, and the point x0."""
    ops = trg.JAX
    if params == "tensor":
        x0 = np.asarray(ising.initial_tensor(beta, trg.NUMPY)).reshape(-1)
        return (lambda x: lnz_of_tensor.trusted(jnp.reshape(x, (2, 2, 2, 2)), schedule) + 2.0 * beta), x0

    def f(J):
        return lnz_of_tensor.trusted(anisotropic_tensor(beta * J[0], beta * J[1], ops), schedule) + beta * (J[0] + J[1])

    return f, np.ones(2)


def _checked(params, mode, beta, schedule):
    params = check_choice("params", params, PARAMS)
    mode = check_choice("mode", mode, GRADIENT_MODES)
    return params, mode, check_beta(beta), tuple(check_schedule(schedule))


def gradient(beta, schedule, params="tensor", mode="reverse", repeats=1):
    """d(lnZ/N)/d(parameters) by one mode, timed.

    Parameters
    ----------
    beta : float in [BETA_MIN, BETA_MAX] (1/J; positive: these formulas are the ferromagnet's).  schedule : sequence of int (:func:`trgad.physics.trg.truncation_schedule`).
    params : "tensor" (16 entries of T0, row-major over [l, u, r, d]) or "couplings" (J_x, J_y).
    mode : one of :data:`GRADIENT_MODES`: "reverse" (one ``jax.value_and_grad`` pass),
        "forward_mode" (one ``jax.jvp`` per parameter, the same compiled program called with
        each unit tangent; "forward" is a deprecated alias) or "jacfwd" (``jax.jacfwd``, one
        program, the tangents vmapped).
    repeats : steady-state repeats (int in [1, 100]).

    Returns
    -------
    JSON-ready dict: ``params``, ``mode``, ``lnz_per_site``, ``gradient`` (list of floats,
    per unit of T0 entry or of J), ``passes`` (1, or the number of parameters),
    ``first_seconds`` (compile and first full gradient), ``steady_seconds`` (min of
    ``repeats`` full gradients after the first).

    Raises InputError for bad beta, schedule, params, mode or repeats.
    """
    params, mode, beta, ks = _checked(params, mode, beta, schedule)
    return _gradient(params, mode, beta, ks, check_repeats(repeats))


def _gradient(params, mode, beta, ks, repeats):
    f, x0 = _objective(params, beta, ks)
    x0 = jax.numpy.asarray(x0)
    if mode == "reverse":
        program = compiled.jit(jax.value_and_grad(f))
    elif mode == "jacfwd":              # the value as jacfwd's aux: the primal pass runs once
        jac = jax.jacfwd(lambda x: (lambda v: (v, v))(f(x)), has_aux=True)
        program = compiled.jit(lambda x: jac(x)[::-1])
    if mode != "forward_mode":

        def run():
            v, g = program(x0)
            return float(v), np.asarray(g)
    else:
        program = compiled.jit(lambda x, t: jax.jvp(f, (x,), (t,)))
        basis = np.eye(x0.shape[0])

        def run():
            pairs = [block(program(x0, jax.numpy.asarray(e))) for e in basis]
            return float(pairs[0][0]), np.array([float(p[1]) for p in pairs])

    t0 = time.perf_counter()
    value, grad = block(run())
    first = time.perf_counter() - t0
    steady = time_call.trusted(run, warmup=0, repeats=repeats).min
    return {"params": params, "mode": mode, "lnz_per_site": value, "gradient": [float(g) for g in grad],
            "passes": int(x0.shape[0]) if mode == "forward_mode" else 1,
            "first_seconds": first, "steady_seconds": steady}


def finite_difference(beta, schedule, params="tensor", h=1e-5):
    """Central differences [f(x + h e) - f(x - h e)] / 2h of lnZ/N for every parameter e, with
    one compiled primal program (lnZ/N alone); error O(h^2) + O(1e-16 / h).  Returns a list
    of floats.  Raises InputError for a bad beta, schedule, params or h outside (0, 0.1]."""
    params, _, beta, ks = _checked(params, "reverse", beta, schedule)
    return _finite_difference(params, beta, ks, check_positive("h", h, 0.1))


def _finite_difference(params, beta, ks, h):
    f, x0 = _objective(params, beta, ks)
    fn = compiled.jit(f)
    out = []
    for e in np.eye(len(x0)):
        out.append((float(fn(x0 + h * e)) - float(fn(x0 - h * e))) / (2 * h))
    return out


def beta_oracle(beta, schedule, params, grad):
    """The beta-derivative that ``grad`` must reproduce, and what ``grad`` gives for it.

    Returns (expected, from_grad): d lnZ/N / d beta by the staged method, against
    sum_e grad_e dT0_e/dbeta + 2 (tensor; dT0/dbeta by ``jax.jacfwd`` of the 2x2x2x2 initial
    tensor, no SVD in it) or (expected, from_grad) = (beta d lnZ/N / d beta, grad_x + grad_y)
    (couplings)."""
    params, _, beta, ks = _checked(params, "reverse", beta, schedule)
    return _beta_oracle(params, beta, ks, grad)


def _beta_oracle(params, beta, ks, grad):
    _, dlnz = staged.value_and_grad_jax.trusted(beta, ks)
    grad = np.asarray(grad, dtype=float)
    if params == "couplings":
        return beta * dlnz, float(grad[0] + grad[1])
    dT = jax.jacfwd(lambda b: ising.initial_tensor(b, trg.JAX))(beta)
    return dlnz, float(np.dot(grad, np.asarray(dT).reshape(-1)) + 2.0)


def compare(beta, schedule, params="tensor", repeats=1, h=1e-5, with_fd=True):
    """Reverse and forward mode for one parameter set, side by side, checked.

    Returns a JSON-ready dict: ``params``, ``n_params``, ``reverse``, ``forward_mode`` and
    ``jacfwd`` (the dicts of :func:`gradient`), ``max_abs_difference`` (the largest between
    reverse mode's gradient and either forward mode's),
    ``fd`` (central differences, :func:`finite_difference`, or None) and
    ``max_abs_fd_difference``, ``beta_oracle`` (expected, from_gradient: see
    :func:`beta_oracle`), ``forward_mode_over_reverse`` and ``jacfwd_over_reverse``
    (steady-state time ratios: where reverse mode wins, they are > 1).  Raises InputError for bad input (see :func:`gradient`).
    """
    params, _, beta, ks = _checked(params, "reverse", beta, schedule)
    repeats, h = check_repeats(repeats), check_positive("h", h, 0.1)
    rev = _gradient(params, "reverse", beta, ks, repeats)
    fwd = _gradient(params, "forward_mode", beta, ks, repeats)
    jac = _gradient(params, "jacfwd", beta, ks, repeats)
    g_r = np.asarray(rev["gradient"])
    g_f = np.concatenate([fwd["gradient"], jac["gradient"]])
    fd = _finite_difference(params, beta, ks, h) if with_fd else None
    return {"params": rev["params"], "n_params": len(g_r), "reverse": rev, "forward_mode": fwd,
            "jacfwd": jac, "max_abs_difference": float(np.max(np.abs(np.tile(g_r, 2) - g_f))),
            "fd": fd, "max_abs_fd_difference": None if fd is None else float(np.max(np.abs(g_r - fd))),
            "beta_oracle": list(_beta_oracle(params, beta, ks, g_r)),
            "forward_mode_over_reverse": fwd["steady_seconds"] / rev["steady_seconds"],
            "jacfwd_over_reverse": jac["steady_seconds"] / rev["steady_seconds"]}


__all__ = ["PARAMS", "GRADIENT_MODES", "bond_matrix", "anisotropic_tensor", "lnz_of_tensor", "gradient",
           "finite_difference", "beta_oracle", "compare", "InputError"]
