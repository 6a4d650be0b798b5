"""Input checks shared by the library and the command line.

Each check returns the value converted to its type or raises :class:`InputError` whose
one-line message names the bad value and the allowed range.
"""
from __future__ import annotations

import math


class InputError(ValueError):
    """Bad user input: the message is one line naming the value and the allowed range."""


def _number(name, value, kind):
    try:
        if kind is int:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            if isinstance(value, str):
                value = value.strip()
                return int(value)
            return int(value)
        return float(value)
    except (TypeError, ValueError):
        what = "an integer" if kind is int else "a number"
        raise InputError(f"{name}={value!r} is not {what}") from None


def check_int(name, value, low, high=None):
    """``value`` as an int in [low, high] (high=None: no upper bound)."""
    v = _number(name, value, int)
    if v < low or (high is not None and v > high):
        allowed = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise InputError(f"{name}={v} is out of range: {name} must be an integer {allowed}")
    return v


def check_beta(beta):
    """Inverse temperature: a finite float > 0 (units of 1/J)."""
    b = _number("beta", beta, float)
    if not math.isfinite(b) or b <= 0:
        raise InputError(f"beta={b!r} is out of range: beta must be a finite number > 0")
    return b


def check_finite(name, value):
    """A finite float (a point of differentiation, a starting value)."""
    v = _number(name, value, float)
    if not math.isfinite(v):
        raise InputError(f"{name}={v!r} is out of range: {name} must be a finite number")
    return v


def check_positive(name, value):
    """A finite float > 0 (used for time caps and step sizes)."""
    v = _number(name, value, float)
    if not math.isfinite(v) or v <= 0:
        raise InputError(f"{name}={v!r} is out of range: {name} must be a finite number > 0")
    return v


def check_chi(chi):
    """Bond dimension: an integer >= 2."""
    return check_int("chi", chi, 2)


#: Most TRG steps accepted.  Step i enters lnZ/N with weight 2**-i, so beyond about 55 steps
#: (2**-53 = float64 resolution) further steps cannot change the result; 64 leaves a margin.
MAX_STEPS = 64


def check_steps(steps, high=MAX_STEPS):
    """Number of TRG steps (the lattice has 2**steps sites): an integer in [1, MAX_STEPS]."""
    return check_int("steps", steps, 1, high)


def check_choice(name, value, allowed):
    """``value`` must be one of ``allowed`` (a sequence of strings)."""
    if value not in allowed:
        raise InputError(f"{name}={value!r} is not known: choose one of {', '.join(allowed)}")
    return value
