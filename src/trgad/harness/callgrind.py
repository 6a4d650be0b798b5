"""Exact call counts from valgrind's callgrind: a small reader of its output files.

Callgrind (valgrind's call-graph tool) counts every call a program makes, whatever else the
machine is doing: the counts of a deterministic program are the same integers in every run.
Its output format ("Callgrind Format Specification", valgrind's manual) is line based:
``fn=`` names the function whose costs follow, ``cfn=`` the function it calls, and the
``calls=N ...`` line after it says how many calls that caller made to it.  Names are
compressed: the first use of a name is ``(id) name``, later uses ``(id)`` alone.  A function
that calls itself appears as ``name'2`` (callgrind's name for the recursive level).

:func:`call_counts` reads a file into ``{(caller, callee): calls}``; :func:`calls_to`
splits the calls of one function into the calls made from outside it and those it makes
into itself (the recursion).
"""
from __future__ import annotations

import re
from collections import Counter

_NAME = re.compile(r"\((\d+)\)(?: (.*))?$")


def call_counts(path) -> Counter:
    """``{(caller, callee): number of calls}`` of one callgrind output file.

    Only ``fn=``, ``cfn=`` and ``calls=`` lines matter; the cost lines are skipped.  Raises
    ValueError naming the line when a compressed name is used before it is defined."""
    names: dict[str, str] = {}
    counts: Counter = Counter()
    caller = callee = None

    def name(text, lineno):
        m = _NAME.match(text)
        if not m:
            return text
        ident, given = m.groups()
        if given is not None:
            names[ident] = given
        elif ident not in names:
            raise ValueError(f"{path}:{lineno}: name ({ident}) used before it is defined")
        return names[ident]

    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if line.startswith("fn="):
                caller = name(line[3:].rstrip("\n"), lineno)
            elif line.startswith("cfn="):
                callee = name(line[4:].rstrip("\n"), lineno)
            elif line.startswith("calls="):
                counts[(caller, callee)] += int(line[6:].split()[0])
    return counts


def _base(function):
    """``f'2`` -> ``f`` (callgrind's recursion suffix)."""
    return re.sub(r"'\d+$", "", function)


def calls_to(counts, function):
    """The calls of ``function`` (a demangled name, exactly as callgrind prints it):
    ``(outside, recursive, callers)`` - calls from other functions, calls it made into
    itself, and ``[(caller, calls), ...]`` of the outside ones, most first."""
    outside, recursive, callers = 0, 0, Counter()
    for (caller, callee), n in counts.items():
        if _base(callee) != function:
            continue
        if caller is not None and _base(caller) == function:
            recursive += n
        else:
            outside += n
            callers[caller] += n
    return outside, recursive, callers.most_common()
