"""Input checks shared by the library and the command line, and the ranges they enforce.

Each check returns the value converted to its type or raises :class:`InputError` whose
one-line message names the value as the user gave it and the allowed range.  Every range
below has a one-line reason (memory, float range or time); README's "Bad input" section
lists them for the command line.
"""
from __future__ import annotations

import math
import sys


class InputError(ValueError):
    """Bad user input: the message is one line naming the value and the allowed range."""


#: Differentiation back ends: JAX, or this project's keyed graph engine (:mod:`trgad.engine`).
ENGINES = ("jax", "keyed")

#: Largest inverse temperature: lnZ/N = 2 beta + ln Z~/N (trgad.ising), so 2 beta must be a
#: finite float64.
BETA_MAX = sys.float_info.max / 2
#: Smallest inverse temperature (in magnitude): the smallest normal float64, 2.2250738585072014e-308.
#: JAX on the CPU flushes subnormal floats to zero, so a smaller beta reaches the graph as 0,
#: where the site tensor's sqrt(2 sinh beta) has no derivative (u came out NaN).
BETA_MIN = sys.float_info.min
#: Smallest nonzero magnitude of a point of differentiation (``--x0``): the smallest normal
#: float64, for the same reason (JAX would compute at 0 instead of at a subnormal x0).
X0_MIN = sys.float_info.min
#: Largest bond dimension: at chi = 32 the schedule and a staged gradient of 20 steps take
#: about a minute on 2 cores; the SVD of a chi**2 x chi**2 matrix costs chi**6, so chi = 64
#: would take about an hour (and a chi**4 tensor is 128 MB).
CHI_MAX = 32
#: Most TRG steps accepted.  Step i enters lnZ/N with weight 2**-i, so beyond about 55 steps
#: (2**-53 = float64 resolution) further steps cannot change the result; 64 leaves a margin.
MAX_STEPS = 64
#: Longest time cap (seconds) for a run in a child process: one day.
TIMEOUT_MAX = 86400.0
#: Longest probe budget (seconds): one hour (a probe is meant to be a quick check).
BUDGET_MAX = 3600.0
#: Most timed repeats of one measurement (each is a full run; 100 is ample for a minimum).
REPEATS_MAX = 100
#: Most operations of a mul chain (depth x fan-out): each keeps a value and a key of about
#: 0.5 kB on the keyed engine (50 MB at the bound; fan-out 10**8 would need 50 GB before any
#: timeout fired).  Time is capped separately by --timeout (JAX needs about 1 ms per
#: operation to trace, transform and run; the keyed engine with interned keys 0.1 ms).
CHAIN_MAX_OPS = 100_000


def _number(name, value, kind):
    try:
        if kind is int:
            if isinstance(value, bool):
                raise ValueError
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            if isinstance(value, str):
                return int(value.strip())
            return int(value)
        if isinstance(value, bool):
            raise ValueError
        return float(value)
    except (TypeError, ValueError, OverflowError):
        what = "an integer" if kind is int else "a number"
        raise InputError(f"{name}={value!r} is not {what}") from None


def check_int(name, value, low, high=None):
    """``value`` as an int in [low, high] (high=None: no upper bound)."""
    v = _number(name, value, int)
    if v < low or (high is not None and v > high):
        allowed = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise InputError(f"{name}={_typed(value, v)} is out of range: {name} must be an integer {allowed}")
    return v


def _typed(raw, converted):
    """A value as the user gave it: the text as typed (command line), else its repr."""
    return repr(raw.strip()) if isinstance(raw, str) else repr(converted)


def _fmt(x):
    """Shortest text for a bound that still means exactly that bound."""
    return f"{x:g}" if float(f"{x:g}") == x else repr(x)


def check_range(name, value, low=None, high=None, why=""):
    """A finite float in (low, high] (low/high None: unbounded on that side).

    ``why`` (optional) is appended to the message as the reason for the range.
    """
    v = _number(name, value, float)
    bad = not math.isfinite(v) or (low is not None and v <= low) or (high is not None and v > high)
    if bad:
        if low is not None and high is not None:
            allowed = f"in ({_fmt(low)}, {_fmt(high)}]"
        elif low is not None:
            allowed = f"> {_fmt(low)}"
        elif high is not None:
            allowed = f"<= {_fmt(high)}"
        else:
            allowed = ""
        reason = f" ({why})" if why else ""
        raise InputError(f"{name}={_typed(value, v)} is out of range: {name} must be a finite number {allowed}".rstrip()
                         + reason)
    return v


def check_beta(beta, signed=True):
    """Inverse temperature (units of 1/J), as a float.

    ``signed`` (default): |beta| in [BETA_MIN, BETA_MAX] (2.2250738585072014e-308 to
    8.98e307); a negative beta is the antiferromagnet, which the TRG computes exactly
    (Z(-beta) = Z(beta) on the bipartite tori it builds, :mod:`trgad.ising`).
    ``signed=False``: beta in [BETA_MIN, BETA_MAX] (the command line, and formulas that hold
    for the ferromagnet only).  Below BETA_MIN a float is subnormal and JAX on the CPU
    flushes it to zero; above BETA_MAX, 2 beta is not a finite float64.  Raises InputError
    naming the value as given and the allowed range.
    """
    v = _number("beta", beta, float)
    size = abs(v) if signed else v
    if not (math.isfinite(v) and BETA_MIN <= size <= BETA_MAX):
        name = "|beta|" if signed else "beta"
        raise InputError(f"beta={_typed(beta, v)} is out of range: {name} must be a finite number in "
                         f"[{BETA_MIN!r}, {_fmt(BETA_MAX)}] (2*beta must be a finite float64; below the "
                         f"smallest normal float64 JAX on the CPU flushes beta to zero)")
    return v


def check_point(name, value):
    """A point of differentiation or a starting value: 0 or a finite float with |value| >=
    X0_MIN (the smallest normal float64: JAX on the CPU flushes subnormals to zero, so it
    would differentiate at 0 instead).  Raises InputError naming the value."""
    v = _number(name, value, float)
    if not math.isfinite(v) or 0 < abs(v) < X0_MIN:
        raise InputError(f"{name}={_typed(value, v)} is out of range: {name} must be 0 or a finite number "
                         f"with |{name}| >= {X0_MIN!r} (JAX on the CPU flushes smaller, subnormal "
                         f"floats to zero)")
    return v


def check_finite(name, value):
    """A finite float (a point of differentiation, a starting value)."""
    return check_range(name, value)


def check_positive(name, value, high=None, why=""):
    """A finite float > 0 (time caps, step sizes), at most ``high`` if given."""
    return check_range(name, value, 0.0, high, why)


def check_chi(chi):
    """Bond dimension: an integer in [2, CHI_MAX]."""
    return check_int("chi", chi, 2, CHI_MAX)


def check_steps(steps, high=MAX_STEPS):
    """Number of TRG steps (the lattice has 2**steps sites): an integer in [1, MAX_STEPS]."""
    return check_int("steps", steps, 1, high)


def check_timeout(timeout, name="timeout"):
    """A time cap in seconds: a finite float in (0, TIMEOUT_MAX] (one day)."""
    return check_positive(name, timeout, TIMEOUT_MAX)


def check_repeats(repeats, low=1):
    """Timed repeats: an integer in [low, REPEATS_MAX]."""
    return check_int("repeats", repeats, low, REPEATS_MAX)


def check_choice(name, value, allowed):
    """``value`` must be one of ``allowed`` (a sequence of strings)."""
    if value not in allowed:
        raise InputError(f"{name}={value!r} is not known: choose one of {', '.join(allowed)}")
    return value


def check_engine(engine):
    """One of :data:`ENGINES`."""
    return check_choice("engine", engine, ENGINES)


def check_chain(depth, fanout):
    """(depth, fanout) of a mul chain: integers >= 1 with depth * fanout <= CHAIN_MAX_OPS."""
    depth = check_int("depth", depth, 1, CHAIN_MAX_OPS)
    fanout = check_int("fanout", fanout, 1, CHAIN_MAX_OPS)
    if depth * fanout > CHAIN_MAX_OPS:
        raise InputError(f"depth={depth} with fanout={fanout} is out of range: depth * fanout must be "
                         f"<= {CHAIN_MAX_OPS} operations (memory and build time of the graph)")
    return depth, fanout
