"""The specific heat c = beta**2 d^2(lnZ/N)/d beta^2 from staged derivatives, two ways.

:func:`specific_heat` is the source report's way, a central difference of two staged
gradients (:func:`central_difference_c` works on any gradient, the keyed engine's too);
:func:`specific_heat_exact` takes the second derivative of the staged forward-over-forward
pass (:func:`trgad.physics.staged.value_grad_hess_jax`).  Units of k_B per site.
"""
from __future__ import annotations

from . import ising, staged
from ..runtime.validate import BETA_MAX, BETA_MIN, InputError, check_beta, check_schedule, checked

#: Step of the central difference for the specific heat, as in the source report (h = 1e-5).
FD_STEP = 1e-5


def fd_step(beta):
    """The central-difference step for :func:`specific_heat` at ``beta``: 1e-5 as in the
    source report (:data:`FD_STEP`), but at most beta / 2 (so that beta - h stays positive at
    small beta) and at least 1e-8 beta (so that beta +- h are distinct floats at large beta).
    ``beta`` in [BETA_MIN, BETA_MAX], not checked here (the callers check it)."""
    b = float(beta)
    return max(min(FD_STEP, b / 2), b * 1e-8)


def central_difference_c(gradient, beta, h=None):
    """c = beta**2 d^2(lnZ/N)/d beta^2 from a central difference of ``gradient``.

    ``gradient`` is a function beta -> d(lnZ/N)/d beta (a float), e.g. a staged gradient
    on either engine.  c ~= b**2 [g(b + h) - g(b - h)] / (2 h) with b = beta and h = :func:`fd_step` unless given; the truncation error is
    O(h**2) and the rounding error ~ 1e-16 / h.  The two points stay in [BETA_MIN, BETA_MAX]
    (:mod:`trgad.runtime.validate`): b + h is capped at BETA_MAX and
    b - h raised to BETA_MIN, so the difference is one-sided at either end of the range, and
    the denominator is the distance of the two floats actually used.  A zero difference
    (deep in the ordered phase, where g = 2 to the last bit) gives c = 0, never inf * 0.
    Units of k_B per site.  ``beta`` is not checked here (the callers check it); raises
    InputError if h is given outside (0, beta).
    """
    b = float(beta)
    if h is None:
        h = fd_step(b)
    elif not 0 < h < b:
        raise InputError(f"h={h!r} is out of range: h must be in (0, beta)")
    up, down = min(b + h, BETA_MAX), max(b - h, BETA_MIN)
    diff = gradient(up) - gradient(down)
    return 0.0 if diff == 0 else b * ((b / (up - down)) * diff)   # b / (up - down) <= 1e8


@checked(beta=check_beta, schedule=check_schedule)
def specific_heat(beta, schedule, h=None):
    """c = beta**2 d^2(lnZ/N)/d beta^2 from a central difference of two staged JAX gradients
    (:func:`value_and_grad_jax`, :func:`central_difference_c`; the source report's way).
    Units of k_B per site.  Raises InputError for a bad beta or schedule, or if h is given
    outside (0, beta)."""
    return central_difference_c(lambda b: staged.value_and_grad_jax.trusted(b, schedule)[1], beta, h)


def specific_heat_exact(beta, schedule):
    """c = beta**2 d^2(lnZ/N)/d beta^2 from :func:`value_grad_hess_jax` (exact up to rounding),
    k_B per site; 0 when the second derivative is exactly 0 (deep in the ordered phase, where
    beta**2 would overflow).  Raises InputError for a bad beta or schedule."""
    beta = check_beta(beta)
    return ising.specific_heat_of(beta, staged.value_grad_hess_jax.trusted(beta, check_schedule(schedule))[2])
