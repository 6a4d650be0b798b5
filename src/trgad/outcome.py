"""How a command of ``python -m trgad`` ends: its exit statuses, the result it prints and
what happens when that cannot be written.

* :data:`STATUSES` - the exit statuses, the end of every ``--help``.
* :func:`emit` - print a result (one JSON object or a line of text) after checking that
  every number in it is finite (:class:`NotFinite`, status 4).
* :func:`write` - print and flush stdout now: a full disk (``/dev/full``), a closed pipe
  (``| head -c0``) or a stdout that was closed before the command started is
  :class:`Unwritable` (status 5, one line on stderr), never a traceback or a silent 0.
"""
from __future__ import annotations

import json
import math
import os
import sys

#: The exit statuses, as every --help ends.
STATUSES = """exit status: 0 ok, 1 internal error (TRGAD_DEBUG=1 shows the traceback), 2 bad input,
  3 timeout or failed child, 4 non-finite result, 5 the result could not be written (stdout
  closed or full, or a closed pipe), 128+N stopped by signal N (130 Ctrl-C, 129 SIGHUP,
  143 SIGTERM) after ending every process it started."""
#: The status of a result that could not be written.
UNWRITABLE = 5


class NotFinite(Exception):
    """A result that is not a finite number (exit status 4)."""


class Unwritable(Exception):
    """The result could not be written to stdout (exit status :data:`UNWRITABLE`)."""


def check_stdout():
    """Raise Unwritable when this process has no stdout (started with it closed: Python
    then prints nothing, without a word), before any work is done."""
    if sys.stdout is None:
        raise Unwritable("stdout is closed")


def write(text):
    """``print(text)`` and flush now, so that a write that fails is known here: Unwritable,
    and the process's stdout pointed at /dev/null so that its exit does not try again."""
    check_stdout()
    try:
        print(text)
        sys.stdout.flush()
    except OSError as e:
        _drop_stdout()
        raise Unwritable(f"{type(e).__name__}: {e}") from None


def _drop_stdout():
    """Point file descriptor 1 at /dev/null (the real stdout only), so that what is still
    buffered is flushed there at exit instead of failing a second time."""
    if sys.stdout is not sys.__stdout__:
        return
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):
        pass


def _non_finite(value, path=""):
    """The first field of ``value`` (dicts and lists walked) that is a non-finite float."""
    if isinstance(value, float) and not math.isfinite(value):
        return path or "result"
    if not isinstance(value, (dict, list, tuple)):
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for k, v in items:
        found = _non_finite(v, f"{path}.{k}" if path else str(k))
        if found:
            return found
    return None


def _lookup(out, path):
    for k in path.split("."):
        out = out[int(k)] if isinstance(out, list) else out[k]
    return out


def emit(out, as_json, text, inputs):
    """Print ``out`` (JSON or ``text(out)``) after checking every number in it is finite
    (NotFinite naming ``inputs`` and the field); returns 0."""
    bad = _non_finite(out)
    if bad:
        raise NotFinite(f"{inputs}: {bad} is not a finite number ({_lookup(out, bad)!r})")
    write(json.dumps(out, allow_nan=False) if as_json else text(out))
    return 0


def line(out):
    """A result as one line of ``key=value`` pairs."""
    return " ".join(f"{k}={v}" for k, v in out.items())
