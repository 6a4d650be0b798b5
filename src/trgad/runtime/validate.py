"""Input checks shared by the library and the command line, and the ranges they enforce.

Each check returns the value converted to its type or raises :class:`InputError` whose
one-line message names the value as the user gave it and the allowed range.  Every range
below has a one-line reason (physics resolved, memory, float range or time); ``python -m
trgad --help`` lists them for the command line.

Input is checked once, where it enters: the command line and the functions a chapter calls.
Such a function is written once and marked :func:`checked`, which names the check of each
argument in one line above it::

    @checked(beta=check_beta, schedule=check_schedule)
    def value_and_grad_jax(beta, schedule): ...

``value_and_grad_jax(0.3, [2, 4])`` checks, then runs the body; trgad's own callers, whose
input is checked already, call the body as ``value_and_grad_jax.trusted(...)``.  Why a
mark rather than a checking facade module: the contract (what is checked, what is trusted)
sits on the function it governs, where a reader sees it, the chapters import each function
from where it lives, and a function has one body.  ``tests/test_check_once.py`` counts the
checks of every command and public function; ``tests/test_checked.py`` tests the mark and
``tests/test_layers.py`` refuses a checked twin written by hand.
"""
from __future__ import annotations

import functools
import inspect
import math
import numbers
import re
import sys

import numpy as np


class InputError(ValueError):
    """Bad user input: the message is one line naming the value and the allowed range."""


#: Differentiation back ends: JAX, or this project's keyed graph engine (:mod:`trgad.keyed.engine`).
ENGINES = ("jax", "keyed")
#: Modes of automatic differentiation: reverse mode (a VJP) and forward mode (a JVP).
AD_MODES = ("reverse", "forward_mode")
#: Names accepted for one release only, each mapped to its new name (:func:`check_choice`):
#: "forward" named forward-mode AD before the primal pass and the staged step programs got
#: names of their own.
DEPRECATED_NAMES = {"forward": "forward_mode"}

#: The physical range of the inverse temperature (1/J), beta in [BETA_MIN, BETA_MAX], stated
#: once; the public functions and the command line refuse a beta outside it, nothing inside
#: checks it again.  Measured with the staged and whole-graph derivatives (chi = 16; 3 steps
#: against exact enumeration, 20 steps against the high-temperature series u = -2 tanh beta):
#: from 1e-11 up, u agrees to 1e-7 relative and c to 1e-12 relative.  Below, u = -(2 +
#: d ln Z~/N / d beta) cancels to ~1e-16 / beta: off by 1e-4 at 1e-12, by 100% at 1e-16, and
#: -0.0 at 1e-20 (chi = 16's schedule is refused at 1e-13, a split multiplet).  Above
#: BETA_MAX the site tensor's e^{-2 beta} is no longer a normal float64 (from 354.4 on: XLA on
#: the CPU flushes it to 0 and the tensor stops depending on beta); up to it lnZ/N = 2 beta +
#: ln 2 / N and u = -2 hold to the last digit, and c (below 1e-180 from beta = 200) to 1e-15
#: absolute.
BETA_MIN, BETA_MAX = 1e-10, 350.0
#: Smallest bond dimension: one kept value would leave no bond to truncate.
CHI_MIN = 2
#: Smallest nonzero magnitude of a point of differentiation (``--x0``): the smallest normal
#: float64, for the same reason (JAX would compute at 0 instead of at a subnormal x0).
X0_MIN = sys.float_info.min
#: Largest bond dimension: the SVD of a chi**2 x chi**2 matrix costs chi**6, so doubling chi
#: to 64 makes every step 64 times slower than at 32 (and a chi**4 tensor is 128 MB).
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
#: timeout fired).  Time is capped separately by --timeout.
CHAIN_MAX_OPS = 100_000


#: Longest text of a value a message shows; a longer one is cut (:func:`shown`).
SHOWN_MAX = 60
_DIGITS = re.compile(r"[+-]?\d[\d_]*")


def shown(value, limit=SHOWN_MAX):
    """``repr(value)`` for a message, cut to about ``limit`` characters: a value typed
    100,000 characters long is named by its start and its length, never echoed whole."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(value) if isinstance(value, str) else len(text)} characters)"


def _number(name, value, kind):
    try:
        if kind is int:
            if isinstance(value, bool):
                raise ValueError
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            if isinstance(value, str):
                text = value.strip()
                if len(text) > 4000 and _DIGITS.fullmatch(text):
                    # an integer too long for int() (Python's limit on digits): as large as
                    # it is, out of every range, the answer a 4,000-digit one gets
                    return -math.inf if text.startswith("-") else math.inf
                return int(text)
            return int(value)
        if isinstance(value, bool):
            raise ValueError
        return float(value)
    except (TypeError, ValueError, OverflowError):
        what = "an integer" if kind is int else "a number"
        raise InputError(f"{name}={shown(value)} is not {what}") from None


def check_int(name, value, low, high=None):
    """``value`` as an int in [low, high] (high=None: no upper bound)."""
    v = _number(name, value, int)
    if v < low or (high is not None and v > high) or isinstance(v, float):
        allowed = f">= {low}" if high is None else f"in [{low}, {high}]"
        allowed += " of at most 4000 digits" if high is None and isinstance(v, float) else ""
        raise InputError(f"{name}={_typed(value, v)} is out of range: {name} must be an integer {allowed}")
    return v


def _typed(raw, converted):
    """A value as the user gave it: the text as typed (command line), else its repr."""
    return shown(raw.strip()) if isinstance(raw, str) else shown(converted)


def format_bound(x):
    """Shortest text for a bound that still means exactly that bound (``1e-10`` for
    :data:`BETA_MIN`, ``86400`` for :data:`TIMEOUT_MAX`, ``repr`` where ``:g`` would round):
    error messages and help texts."""
    return f"{x:g}" if float(f"{x:g}") == x else repr(x)


def check_range(name, value, low=None, high=None, why=""):
    """A finite float in (low, high] (low/high None: unbounded on that side).

    ``why`` (optional) is appended to the message as the reason for the range.
    """
    v = _number(name, value, float)
    bad = not math.isfinite(v) or (low is not None and v <= low) or (high is not None and v > high)
    if bad:
        if low is not None and high is not None:
            allowed = f"in ({format_bound(low)}, {format_bound(high)}]"
        elif low is not None:
            allowed = f"> {format_bound(low)}"
        elif high is not None:
            allowed = f"<= {format_bound(high)}"
        else:
            allowed = ""
        reason = f" ({why})" if why else ""
        raise InputError(f"{name}={_typed(value, v)} is out of range: {name} must be a finite number {allowed}".rstrip()
                         + reason)
    return v


def check_beta(beta):
    """Inverse temperature (units of 1/J) as a float in [BETA_MIN, BETA_MAX], the range in
    which the TRG resolves lnZ/N, u and c (see :data:`BETA_MIN`).  Raises InputError, one line
    naming the value as given and the range."""
    v = _number("beta", beta, float)
    if not (math.isfinite(v) and BETA_MIN <= v <= BETA_MAX):
        raise InputError(f"beta={_typed(beta, v)} is out of range: beta must be in "
                         f"[{format_bound(BETA_MIN)}, {format_bound(BETA_MAX)}] (where the TRG resolves u and c)")
    return v


def check_point(name, value, high=None):
    """A point of differentiation or a starting value: 0 or a finite float with |value| >=
    X0_MIN (the smallest normal float64: JAX on the CPU flushes subnormals to zero, so it
    would differentiate at 0 instead), and at most ``high`` if given.  Text that is not 0
    but rounds to 0 (``"1e-400"``) is refused too, not taken as 0.  Raises InputError
    naming the value."""
    v = _number(name, value, float)
    if (not math.isfinite(v) or 0 < abs(v) < X0_MIN or (high is not None and abs(v) > high)
            or (v == 0 and _rounds_to_zero(value))):
        allowed = f"|{name}| >= {X0_MIN!r}" if high is None else f"{X0_MIN!r} <= |{name}| <= {format_bound(high)}"
        raise InputError(f"{name}={_typed(value, v)} is out of range: {name} must be 0 or a finite number "
                         f"with {allowed} (JAX on the CPU flushes smaller, subnormal floats to zero)")
    return v


def _rounds_to_zero(value):
    """Whether ``value``, text, names a number other than 0 (a nonzero digit before its
    exponent) that float() rounds to 0."""
    if not isinstance(value, str):
        return False
    mantissa = re.split(r"[eE]", value.strip(), maxsplit=1)[0]
    return any(c.isdecimal() and int(c) for c in mantissa)


def check_finite(name, value):
    """A finite float (a point of differentiation, a starting value)."""
    return check_range(name, value)


def check_positive(name, value, high=None, why=""):
    """A finite float > 0 (time caps, step sizes), at most ``high`` if given."""
    return check_range(name, value, 0.0, high, why)


def check_chi(chi):
    """Bond dimension: an integer in [CHI_MIN, CHI_MAX]."""
    return check_int("chi", chi, CHI_MIN, CHI_MAX)


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
    """``value`` must be one of ``allowed`` (a sequence of strings); returns it.

    A name of :data:`DEPRECATED_NAMES` whose new name is allowed is accepted and returned as
    the new name (one release only).  Anything else raises InputError naming the value and
    the choices.
    """
    new = DEPRECATED_NAMES.get(value) if isinstance(value, str) else None
    if new is not None and new in allowed and value not in allowed:
        return new
    if value not in allowed:
        raise InputError(f"{name}={shown(value)} is not known: choose one of {', '.join(allowed)}")
    return value


def check_schedule(schedule):
    """A truncation schedule: the number of singular values kept at each TRG step.

    ``schedule`` must be a non-empty sequence (list, tuple, NumPy array, ...) of positive
    integers, each a Python or NumPy integer (not a bool, a float such as 2.0 or a string
    such as '2').  Returns it as a list of Python ints.  Raises InputError, one line naming
    the schedule as given and what a schedule must be.
    """
    if isinstance(schedule, (str, bytes)) or not hasattr(schedule, "__len__") \
            or not hasattr(schedule, "__iter__"):
        raise InputError(f"schedule={schedule!r} is not a sequence: a schedule is a non-empty "
                         f"sequence of integers >= 1, one per TRG step")
    ks = list(schedule)
    if not ks:
        raise InputError(f"schedule={schedule!r} is out of range: at least one TRG step is needed")
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise InputError(f"schedule={_shown(ks)} is out of range: every entry must be an "
                             f"integer >= 1 (got {k!r})")
    return [int(k) for k in ks]


def _shown(ks):
    """A schedule's entries for a message: Python ints and floats as such, others by repr."""
    return "[" + ", ".join(repr(int(k)) if isinstance(k, numbers.Integral) and not isinstance(k, bool)
                           else repr(k) for k in ks) + "]"


def check_order(order):
    """Order of the derivatives wanted: 1 (lnZ/N and u) or 2 (also c), else InputError."""
    if isinstance(order, bool) or order not in (1, 2):
        raise InputError(f"order={order!r} is out of range: order must be 1 (lnZ/N and u) "
                         f"or 2 (also c)")
    return int(order)


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


def check_finite_matrix(M, name="M"):
    """Refuse a concrete matrix (or tensor) with an inf or nan entry; return it as a NumPy array.

    LAPACK's SVD does not return on some matrices with an ``inf`` (JAX's ``jnp.linalg.svd``
    of a 4 x 4 Gaussian matrix with one ``inf`` entry never returned) and gives NaN or "did
    not converge" on others, so every SVD in the package checks its input first.  Raises
    InputError, one line naming ``name``, the first non-finite entry and its index.
    """
    A = np.asarray(M)
    if np.iscomplexobj(A) or not np.issubdtype(A.dtype, np.number):
        return A                          # the callers refuse these with their own message
    bad = ~np.isfinite(A)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InputError(f"{name} has a non-finite entry ({float(A[where])!r} at {list(where)}): an SVD "
                         f"needs finite numbers")
    return A


def check_depths(name, values, low, high):
    """Increasing integers in [low, high], at least one, as a list (depths, orders, steps of
    a sweep); raises InputError naming ``name`` and the range."""
    try:
        ds = [check_int(name, d, low, high) for d in values]
    except TypeError:
        raise InputError(f"{name}={values!r} is not a sequence of integers") from None
    if not ds or any(b <= a for a, b in zip(ds, ds[1:])):
        raise InputError(f"{name}={list(values)!r} is out of range: give increasing integers in [{low}, {high}]")
    return ds


def checked(*together, **each):
    """Mark a public function whose input is checked where it enters (the module docstring).

    ``each`` maps an argument's name to its check (a function of the value that returns it
    converted or raises InputError); ``together`` are checks of several arguments, each
    called with the arguments its own parameters name (after ``each``'s) and returning a
    dict of the values it converts, or None.  Defaults are checked as given values are.
    The function returned checks, then calls its attribute ``trusted``, the body unchanged;
    its ``checks`` attribute holds ``each``.
    """
    def mark(body):
        signature = inspect.signature(body)
        unknown = [n for n in each if n not in signature.parameters]
        if unknown:
            raise TypeError(f"{body.__qualname__} has no argument {', '.join(unknown)} to check")
        joint = [(check, tuple(inspect.signature(check).parameters)) for check in together]

        @functools.wraps(body)
        def public(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            given = bound.arguments
            for name, check in public.checks.items():
                given[name] = check(given[name])
            for check, names in joint:
                given.update(check(**{n: given[n] for n in names}) or {})
            return public.trusted(*bound.args, **bound.kwargs)

        public.trusted, public.checks = body, dict(each)
        return public
    return mark
