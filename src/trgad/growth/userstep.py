"""A user's step function for the probe: ``module:function`` or ``file.py:function``, and x0.

Used by :func:`trgad.growth.probe.run` (``python -m trgad probe --graph mystep:step --x0 0.9,0.8``).
Everything here turns a failure of the user's code into a one-line :class:`InputError`:
any exception, ``SystemExit`` (``sys.exit``) and ``KeyboardInterrupt`` included, since a
step that exits or interrupts itself is as much bad input as one that raises.
"""
from __future__ import annotations

import importlib
import importlib.util
import math
import os

from .graphs import GRAPHS
from ..runtime.validate import InputError, check_point, checked

#: Most components of a state tuple (each is one leaf of the unrolled graph).
MAX_STATE = 100


def one_line(e):
    """``Type: first line of the message`` of an exception."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


def check_state(x0):
    """x0, a number or a tuple/list of 1 to :data:`MAX_STATE` numbers, each 0 or finite with
    magnitude >= the smallest normal float64 (:func:`trgad.runtime.validate.check_point`):
    the number or a tuple of them as floats; InputError otherwise."""
    items = x0 if isinstance(x0, (tuple, list)) else (x0,)
    if not items or len(items) > MAX_STATE:
        raise InputError(f"x0={x0!r} is out of range: give a number or 1 to {MAX_STATE} numbers")
    state = tuple(check_point("x0", v) for v in items)
    return state if isinstance(x0, (tuple, list)) else state[0]


@checked(x0=check_state)
def as_state(x0):
    """x0 as a tuple of floats (a scalar state is a 1-tuple), and whether it was a tuple
    (x0 checked by :func:`check_state`)."""
    return (tuple(x0), True) if isinstance(x0, (tuple, list)) else ((x0,), False)


def parse_x0(text):
    """``--x0`` text: one number ("1.5") or comma-separated numbers ("0.9,0.8" -> a tuple),
    each as :func:`trgad.runtime.validate.check_point` accepts; InputError naming the text otherwise."""
    parts = [p.strip() for p in str(text).split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise InputError(f"x0={text!r} is not a number or a comma-separated list of numbers") from None
    if len(values) > MAX_STATE:
        raise InputError(f"x0={text!r} is out of range: give 1 to {MAX_STATE} numbers")
    values = [check_point("x0", p) for p in parts]     # names the number as typed
    return values[0] if len(values) == 1 else tuple(values)


def load_step(spec, label=None):
    """The function named by ``spec``: "module:function" (importable from the current
    directory or sys.path) or "path/to/file.py:function".  Raises InputError (one line,
    naming ``label``, default ``spec``) if the spec is malformed, the path is not a Python
    file (a directory, or a file Python cannot import, such as one not named ``*.py``), the
    module does not import (any exception, ``SystemExit`` included), or the name is not a
    callable."""
    shown = spec if label is None else label
    module_name, sep, name = str(spec).rpartition(":")
    if not sep or not module_name or not name.isidentifier():
        raise InputError(f"graph={shown!r} is not known: choose one of {', '.join(GRAPHS)}, "
                         f"or give module:function")
    try:
        if module_name.endswith(".py") or os.sep in module_name:
            path = os.path.abspath(module_name)
            if os.path.isdir(path):
                raise InputError(f"graph={shown!r} is not a Python file: {path} is a directory")
            if not os.path.isfile(path):
                raise InputError(f"graph={shown!r} does not import: no file {path}")
            where = importlib.util.spec_from_file_location(f"_trgad_user_{abs(hash(path))}", path)
            if where is None or where.loader is None:
                raise InputError(f"graph={shown!r} is not a Python file: {path} (give path/to/file.py:function)")
            module = importlib.util.module_from_spec(where)
            where.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except InputError:
        raise
    except BaseException as e:   # the user's module failed to import (or exited, or interrupted itself)
        raise InputError(f"graph={shown!r} does not import: {one_line(e)}") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise InputError(f"graph={shown!r}: {module_name} has no function {name!r}")
    return fn


def check_step(step, x0, spec):
    """Run ``step`` once on plain floats at ``x0``; InputError (one line, naming ``spec``) if
    it fails (any exception, ``SystemExit`` and ``KeyboardInterrupt`` included) or returns
    something that is not a state of the same shape with finite numbers.  ``x0`` is trusted
    (:func:`as_state` or :func:`parse_x0` checked it)."""
    state, is_tuple = as_state.trusted(x0)
    try:
        out = step(state if is_tuple else state[0])
        values = list(out) if is_tuple else [out]
        if len(values) != len(state):
            raise ValueError(f"returned {len(values)} values for {len(state)}")
        finite = all(math.isfinite(float(v)) for v in values)
    except BaseException as e:  # the user's step failed, exited or interrupted itself on plain floats
        raise InputError(f"graph={spec!r} fails on x0={x0!r}: {one_line(e)}") from None
    if not finite:
        raise InputError(f"graph={spec!r} gives a non-finite state at x0={x0!r}")
