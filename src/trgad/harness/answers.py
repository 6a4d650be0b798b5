"""What the harness's answers must be before anything of them is used or printed.

* :func:`program_answer` - the one JSON object a ``trgad-tenferro`` program prints on its
  last line of stdout, for the command it was given: every field of its mode present, of
  its type and in its range (times finite and >= 0, operation counts whole and >= 0, a
  number null only where the program prints null for a non-finite one), and the arguments
  it echoes (steps, schedule, beta, depth, fanout, x0, repeats) equal to those it was
  given.  Fields it does not list are dropped.
* :func:`kept_count` - a count of :func:`trgad.harness.tenferro.count` kept on disk: the
  entry holds the key it was stored under, the arguments it counts, whole counts >= 0 and
  callers that add up to the calls from outside.

Each raises :class:`BadAnswer` with one line saying what is wrong (the value cut, never
echoed whole); the callers turn it into a failed run (exit status 3) or, for a kept count,
count again.  Source of the fields: ``tenferro-harness/src/main.rs`` (its ``format!`` of
each mode).
"""
from __future__ import annotations

import json
import math

from ..runtime.validate import shown


class BadAnswer(ValueError):
    """An answer that is not what it must be; the message is one line."""


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _whole(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _ms(v):
    return _number(v) and v >= 0


def _ms_or_null(v):
    return v is None or _ms(v)


def _number_or_null(v):
    return v is None or _number(v)


def _schedule(v):
    return isinstance(v, list) and len(v) > 0 and all(_whole(k) and k >= 1 for k in v)


#: Every mode's fields and what each must be ("a time", "a whole number", ...: the words of
#: the message), the program's ``format!`` of that mode field for field.
_KINDS = {"time": _ms, "time or null": _ms_or_null, "whole number": _whole,
          "finite number or null": _number_or_null, "finite number": _number,
          "schedule": _schedule}
_LATTICE = {"steps": "whole number", "schedule": "schedule", "beta": "finite number",
            "lnz_per_site": "finite number or null"}
FIELDS = {
    "whole": {**_LATTICE, "primal_ops": "whole number", "primal_compile_ms": "time",
              "transform_ms": "time", "drop_ms": "time or null", "grad_ops": "whole number",
              "compile_ms": "time", "prepare_ms": "time", "run_ms": "time",
              "grad": "finite number or null"},
    "eager": {**_LATTICE, "forward_ms": "time", "backward_ms": "time", "drop_ms": "time",
              "grad": "finite number or null"},
    "chain": {"depth": "whole number", "fanout": "whole number", "x0": "finite number",
              "transform_ms": "time", "drop_ms": "time", "grad_ops": "whole number",
              "run_ms": "time", "grad": "finite number or null"},
    "staged": {**_LATTICE, "grad": "finite number or null", "u": "finite number or null",
               "first_ms": "time", "min_ms": "time or null", "repeats": "whole number"},
}
FIELDS["forward"] = FIELDS["whole"]          # whole --forward: ad.jvp, timed as ad.grad is


def _refuse_constant(name):
    raise BadAnswer(f"it holds {name}, which JSON has no number for")


def parse(line):
    """``line`` as JSON (NaN and Infinity refused; nesting too deep for Python is one
    line too); raises BadAnswer."""
    try:
        return json.loads(line, parse_constant=_refuse_constant)
    except RecursionError:
        raise BadAnswer("its JSON is nested too deeply to read") from None
    except ValueError as e:
        if isinstance(e, BadAnswer):
            raise
        raise BadAnswer(f"it is not JSON ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None


def program_answer(line, mode, given):
    """The answer ``line`` of a program run in ``mode`` (a key of :data:`FIELDS`) with the
    arguments ``given`` (``{"steps": 3, "schedule": [...], "beta": 0.3}``, ...): the JSON
    object, its fields checked and only those kept.  Raises BadAnswer."""
    out = parse(line)
    if not isinstance(out, dict):
        raise BadAnswer(f"it is not a JSON object but {shown(out)}")
    if out.get("mode") != mode:
        raise BadAnswer(f"its mode is {shown(out.get('mode'))}, not {mode!r}")
    kept = {"mode": mode}
    for name, kind in FIELDS[mode].items():
        if name not in out:
            raise BadAnswer(f"it has no {name}")
        if not _KINDS[kind](out[name]):
            raise BadAnswer(f"its {name} is {shown(out[name])}, not a {kind}" + (" >= 0" if "time" in kind else ""))
        kept[name] = out[name]
    if "schedule" in kept and kept["steps"] != len(kept["schedule"]):
        raise BadAnswer(f"its steps {kept['steps']} are not the {len(kept['schedule'])} of its schedule")
    for name, value in given.items():
        if kept[name] != value:
            raise BadAnswer(f"its {name} is {shown(kept[name])}, but it was given {shown(value)}")
    return kept


#: The fields of a kept count (:func:`trgad.harness.tenferro.count`) besides the arguments and
#: the callers: of ``ad.grad`` and the drop, or (its args with ``--eager``) of ``backward()``.
COUNT_FIELDS = ("eq_calls_transform", "eq_calls_drop", "eq_nested_transform", "eq_nested_drop",
                "eq_nested_registry")
EAGER_COUNT_FIELDS = ("eq_calls_backward", "eq_nested_backward")


def kept_count(entry, key, arguments):
    """The count kept in ``entry`` (``{"key": ..., "count": {...}}``), if it was stored under
    ``key`` and counts ``arguments`` (graph, version, build, args): whole counts >= 0, the
    nested calls no more than all calls, each ``callers_*`` a list of ``[function, calls
    >= 1]`` adding up to the calls from outside.  Raises BadAnswer."""
    if not isinstance(entry, dict) or set(entry) != {"key", "count"}:
        raise BadAnswer(f"it is {shown(entry)}, not a kept count")
    if entry["key"] != key:
        raise BadAnswer("it was stored under another key")
    out = entry["count"]
    eager = "--eager" in arguments["args"]
    fields, places = (EAGER_COUNT_FIELDS, ("backward",)) if eager else (COUNT_FIELDS, ("transform", "drop"))
    if not isinstance(out, dict) or set(out) != {*arguments, *fields, *(f"callers_{w}" for w in places)}:
        raise BadAnswer(f"its count is {shown(out)}, not the fields of a count")
    for name, value in arguments.items():
        if out[name] != value:
            raise BadAnswer(f"its {name} is {shown(out[name])}, not {shown(value)}")
    for name in fields:
        if not _whole(out[name]):
            raise BadAnswer(f"its {name} is {shown(out[name])}, not a whole number >= 0")
    for where in places:
        callers = out[f"callers_{where}"]
        if not (isinstance(callers, list) and all(
                isinstance(c, list) and len(c) == 2 and isinstance(c[0], str) and _whole(c[1]) and c[1] >= 1
                for c in callers)):
            raise BadAnswer(f"its callers_{where} is {shown(callers)}, not [[function, calls], ...]")
        nested, calls = out[f"eq_nested_{where}"], out[f"eq_calls_{where}"]
        if nested > calls or sum(c[1] for c in callers) != calls - nested:
            raise BadAnswer(f"its {where} counts do not add up")
    return out
