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
into itself (the recursion); :func:`count_inside` runs a program under callgrind once per
place counted, side by side, and reads the files.
"""
from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections import Counter

from ..runtime.children import run_commands, signal_name


class CallgrindError(RuntimeError):
    """A callgrind run that could not start, failed or passed its timeout; one line."""

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


def failure(result):
    """How a run (:class:`trgad.runtime.children.CommandResult`) that exited other than 0
    ended, for a message: ``failed (exit 2): <its last line on stderr>`` or ``was killed by
    SIGKILL: ...``."""
    name = signal_name(result.status)
    how = f"was killed by {name}" if name else f"failed (exit {result.status})"
    return f"{how}: {result.last_error or 'no message'}"


def count_inside(valgrind, cmd, functions, callee, timeout, label, optional=()):
    """Calls of ``callee`` made while each function of ``functions`` (``{place: demangled
    name}``) runs, in one callgrind run of ``cmd`` per place, all side by side
    (:func:`trgad.runtime.children.run_commands`: one wait, so a Ctrl-C, a signal or the
    ``timeout`` ends them all at once, and their temporary folders ``trgad-callgrind-*``
    go): ``{place: calls_to(...)}``.  A place not in ``optional`` must appear in its file
    (else the program lacks the function).  Raises CallgrindError naming ``label``."""
    with contextlib.ExitStack() as folders:
        outs = {w: os.path.join(folders.enter_context(tempfile.TemporaryDirectory(prefix="trgad-callgrind-")),
                                "callgrind.out") for w in functions}
        cmds = [[valgrind, "--tool=callgrind", f"--callgrind-out-file={outs[w]}", "--dump-instr=no",
                 f"--toggle-collect={f}", *cmd] for w, f in functions.items()]
        try:
            results = run_commands(cmds, timeout)
        except OSError as e:
            raise CallgrindError(f"valgrind could not be started: {e}") from None
        found = {}
        for (where, function), result in zip(functions.items(), results):
            if not result.returned:
                raise CallgrindError(f"callgrind of {label} did not return within {timeout:g} s "
                                     f"(process groups killed)")
            if result.status != 0 or not os.path.isfile(outs[where]):
                raise CallgrindError(f"callgrind of {label} {failure(result)}")
            try:
                counts = call_counts(outs[where])
            except ValueError as e:
                raise CallgrindError(f"callgrind of {label} wrote a file it cannot read: {e}") from None
            if where not in optional and not any(caller == function for caller, _ in counts):
                raise CallgrindError(f"{cmd[0]} has no function {function}: it was built from an older "
                                     f"harness (reinstall: pip install -r requirements.txt)")
            found[where] = calls_to(counts, callee)
        return found
