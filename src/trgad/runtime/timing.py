"""Timing helpers shared by the chapters, the benchmark and the command line.

* :func:`time_call` - warm-up, repeats, min and median (wall clock, ``time.perf_counter``).
* :func:`capped_sweep` - run a measurement for growing sizes, stop once one passes a cap.
* :func:`time_grad_transform` - JAX's ``make_jaxpr(grad(f))``, timed (wall or CPU clock).
* :func:`count_eqns` - the size of a jaxpr, nested jaxprs included.
* :func:`run_with_timeout` - run a function in a fresh Python process with a hard timeout
  and report "did not return within T s" instead of hanging; :func:`run_command`, the same
  for a program (the tenferro-rs harness).

The demonstrations in this book grow exponentially; these helpers are how no page ever
waits longer than it says.
"""
from __future__ import annotations

import dataclasses
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Iterable

import jax

from .validate import AD_MODES, check_choice, check_int, check_positive, check_timeout


@dataclasses.dataclass
class Timing:
    """Wall-clock times of repeated calls, in seconds; ``value`` is the last call's result,
    ``fastest`` the result of the call that took ``min`` (its figures belong to that time)."""

    times: list
    value: Any = None
    fastest: Any = None

    @property
    def min(self) -> float:
        return min(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def block(x):
    """Wait for JAX's asynchronous dispatch to finish (no-op for other values)."""
    return jax.block_until_ready(x)


def time_grad_transform(f, x, repeats=1, clock=time.perf_counter, mode="reverse"):
    """Trace and transform ``jax.grad(f)`` at ``x`` (``jax.make_jaxpr``), timed; with
    ``mode="forward_mode"`` the forward-mode derivative ``jax.jvp(f, (x,), (1.0,))`` instead
    (``mode`` is one of :data:`trgad.runtime.validate.AD_MODES`; "forward" is a deprecated alias).

    Returns ``(seconds, closed_jaxpr)``: the minimum over ``repeats`` calls of ``clock``'s
    difference (``time.perf_counter``: wall time; ``time.process_time``: this process's CPU
    time, which other processes on the machine do not inflate), with Python's garbage
    collector paused during each call (as ``timeit`` does), and the jaxpr of the gradient.
    Every repeat traces and transforms ``f`` afresh (JAX caches the jaxpr of a function it has
    traced before, so repeating ``make_jaxpr`` on one function object would time the cache).
    This is JAX's counterpart of the keyed engine's transform: tracing plus the reverse-mode
    transform, no compilation.
    """
    return time_grad_transform_unchecked(f, x, check_int("repeats", repeats, 1), clock,
                                         check_choice("mode", mode, AD_MODES))


def time_grad_transform_unchecked(f, x, repeats=1, clock=time.perf_counter, mode="reverse"):
    """:func:`time_grad_transform` for a caller that checked ``repeats`` and ``mode``."""
    best, jaxpr = math.inf, None
    for _ in range(repeats):
        # A fresh function per repeat: make_jaxpr of the same function object is a cache hit
        # from the second call on (microseconds), which would time JAX's cache, not the transform.
        fresh = lambda y: f(y)  # noqa: E731
        derivative = jax.grad(fresh) if mode == "reverse" else (lambda y: jax.jvp(fresh, (y,), (1.0,))[1])
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            t0 = clock()
            jaxpr = jax.make_jaxpr(derivative)(x)
            best = min(best, clock() - t0)
        finally:
            if was_enabled:
                gc.enable()
    return best, jaxpr


def count_eqns(jaxpr, nested=True):
    """Number of equations in a jaxpr (a ``Jaxpr`` or ``ClosedJaxpr``).

    With ``nested`` (default) every equation counts once at its own level, and the equations
    of each sub-jaxpr held in an equation's parameters are added, recursively: the body of
    ``jit``/``pjit``, the ``call_jaxpr`` of ``custom_vjp_call``/``custom_jvp_call``, the
    bodies of ``scan`` and ``while``, every branch of ``cond``.  So ``jit(f)`` inside ``g``
    counts 1 (the call) plus f's equations.  ``nested=False`` gives ``len(jaxpr.eqns)``.
    """
    root = jaxpr.jaxpr if hasattr(jaxpr, "jaxpr") else jaxpr
    if not nested:
        return len(root.eqns)
    total, stack = 0, [root]
    while stack:
        current = stack.pop()
        total += len(current.eqns)
        for eqn in current.eqns:
            stack.extend(_sub_jaxprs(list(eqn.params.values())))
    return total


def _sub_jaxprs(values):
    """The jaxprs among equation parameters (Jaxpr, ClosedJaxpr, or tuples of them)."""
    found, todo = [], list(values)
    while todo:
        v = todo.pop()
        if hasattr(v, "eqns"):
            found.append(v)
        elif hasattr(v, "jaxpr") and hasattr(v.jaxpr, "eqns"):
            found.append(v.jaxpr)
        elif isinstance(v, (tuple, list)):
            todo.extend(v)
    return found


def time_call(fn: Callable[[], Any], *, warmup: int = 1, repeats: int = 3) -> Timing:
    """Time ``fn()`` after ``warmup`` untimed calls, ``repeats`` times.

    JAX results are waited for (``block_until_ready``) inside the timed region.  Returns a
    :class:`Timing` whose ``value`` is the last result and ``fastest`` the result of the
    fastest timed call, so that figures a result carries (e.g. per-step times) can be taken
    from the same call as ``Timing.min``.  Raises InputError for warmup < 0 or repeats < 1.
    """
    return time_call_unchecked(fn, warmup=check_int("warmup", warmup, 0),
                               repeats=check_int("repeats", repeats, 1))


def time_call_unchecked(fn, *, warmup=1, repeats=3):
    """:func:`time_call` for a caller that checked ``warmup`` and ``repeats``."""
    value = None
    for _ in range(warmup):
        value = block(fn())
    times, fastest = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = block(fn())
        times.append(time.perf_counter() - t0)
        if times[-1] == min(times):
            fastest = value
    return Timing(times, value, fastest)


@dataclasses.dataclass
class Sweep:
    """Result of :func:`capped_sweep`: the rows measured and where it stopped."""

    rows: list
    stopped_at: Any = None     # the parameter whose measurement passed the cap (None: all ran)
    cap_seconds: float = 0.0

    @property
    def completed(self) -> bool:
        return self.stopped_at is None


def capped_sweep(measure: Callable[[Any], dict], params: Iterable, cap_seconds: float,
                 key: str = "seconds") -> Sweep:
    """Call ``measure(p)`` for each p in ``params`` until one result's ``key`` exceeds the cap.

    ``measure`` returns a dict (one table row) containing ``key`` in seconds.  The row that
    passed the cap is kept (it did return); no larger parameter is tried.  Use this for
    growth that may be exponential: the worst case costs about cap_seconds times the growth
    factor of one step.  Raises InputError for a cap that is not a positive number.
    """
    return capped_sweep_unchecked(measure, params, check_positive("cap_seconds", cap_seconds), key)


def capped_sweep_unchecked(measure, params, cap_seconds, key="seconds"):
    """:func:`capped_sweep` for a caller that checked ``cap_seconds``."""
    rows = []
    for p in params:
        row = measure(p)
        rows.append(row)
        if row[key] > cap_seconds:
            return Sweep(rows, stopped_at=p, cap_seconds=cap_seconds)
    return Sweep(rows, None, cap_seconds)


@dataclasses.dataclass
class SubprocessResult:
    """Outcome of :func:`run_with_timeout`."""

    returned: bool
    seconds: float            # wall time until return or until the process was killed
    timeout: float
    value: Any = None         # the function's JSON-serialisable result, if it returned
    error: str | None = None  # one line: the exception the function raised, or why the child failed
    input_error: str | None = None  # the message of an InputError the function raised

    @property
    def message(self) -> str:
        if self.returned:
            return f"returned in {self.seconds:.2f} s"
        if self.input_error:
            return f"bad input: {self.input_error}"
        if self.error:
            return f"failed: {self.error}"
        return f"did not return within {self.timeout:g} s (killed)"


# The child: argv = [runner, result file, target, json args].  The result file is named by
# the parent and removed from sys.argv before the target is imported, so nothing the target
# prints (stdout and stderr go to files the parent only reads for a failure's last line)
# can pass for a result.  os._exit ends the child at once, without atexit handlers of user
# code or interpreter teardown.
_RUNNER = """
import importlib, json, os, sys
result_path = sys.argv.pop(1)
mod, _, name = sys.argv[1].partition(":")
args, kwargs = json.loads(sys.argv[2])
del sys.argv[1:]
def one_line(e):
    text = str(e).strip().splitlines()
    return (type(e).__name__ + ": " + (text[0] if text else "")).rstrip(": ")
def bad_input(e):  # trgad.runtime.validate.InputError, without importing trgad for other targets
    return any(c.__name__ == "InputError" and c.__module__ == "trgad.runtime.validate" for c in type(e).__mro__)
try:
    result = getattr(importlib.import_module(mod), name)(*args, **kwargs)
    text = json.dumps({"value": result}, allow_nan=False)
except BaseException as e:
    if bad_input(e):
        text = json.dumps({"input_error": (str(e).splitlines() or [""])[0]})
    else:
        text = json.dumps({"error": one_line(e)})
with open(result_path, "w") as f:
    f.write(text)
sys.stdout.flush(); sys.stderr.flush()
os._exit(0)
"""


def _end_group(proc):
    """SIGKILL the child's process group, then reap the child.  Called before the child is
    reaped (:func:`_exited` does not reap), so its pid is still its group's id and cannot
    have been reused: grandchildren the child started, which stay in its group, go too."""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:   # not after SIGKILL; never hang on it
        pass


def _exited(proc):
    """Whether the child has exited, without reaping it (so its pid stays its group's id;
    where ``os.waitid`` is missing, ``poll`` reaps it)."""
    if not hasattr(os, "waitid"):
        return proc.poll() is not None
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def _last_line(file):
    file.seek(0)
    lines = file.read().decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else ""


def _run_capped(cmd, timeout, out, err, env):
    """Start ``cmd`` in a session of its own (stdout, stderr to the files ``out``, ``err``),
    wait until it exits or ``timeout`` s pass, then kill its process group whatever
    happened, so nothing the run started survives it.  Returns (killed, seconds, exit
    status), the status None when killed."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                            start_new_session=True)
    killed = False
    try:
        while not _exited(proc):
            if time.perf_counter() - t0 > timeout:
                killed = True
                break
            time.sleep(0.01)
        seconds = time.perf_counter() - t0
    finally:
        _end_group(proc)
    return killed, seconds, None if killed else proc.returncode


def run_with_timeout(target: str, kwargs: dict | None = None, timeout: float = 20.0,
                     args: list | None = None) -> SubprocessResult:
    """Run ``module:function(*args, **kwargs)`` in a fresh Python process; kill it after ``timeout`` s.

    The function must return something JSON-serialisable without NaN or infinities (else
    ``error`` says so).  An :class:`trgad.InputError` raised in the child comes back as
    ``input_error`` (its one-line message); any other exception, ``SystemExit`` and
    ``KeyboardInterrupt`` included, as ``error`` ("Type: first line").  The child gets this
    process's environment (and ``sys.path``), so it imports the same ``trgad``.  The time
    includes the child's start-up and imports (JAX's among them).

    The child runs in a session of its own (``start_new_session``), and whenever it ends,
    returns, fails, is interrupted or passes ``timeout``, its whole process group is killed
    (SIGKILL): processes the function started go with it (unless they left the group with a
    session of their own), and this call returns within a fraction of a second of the limit.
    Its stdout and stderr go to temporary files (a grandchild holding them open cannot delay
    the return); its result comes back in a temporary file this process names, so nothing
    the function prints can pass for a result.  Raises InputError for a timeout outside (0, TIMEOUT_MAX].
    """
    return run_with_timeout_unchecked(target, kwargs, check_timeout(timeout), args)


def run_with_timeout_unchecked(target, kwargs, timeout, args=None):
    """:func:`run_with_timeout` for a caller that checked ``timeout`` (the command line)."""
    import tempfile

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")])
    with tempfile.TemporaryDirectory(prefix="trgad-run-") as tmp, \
            tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        result_path = os.path.join(tmp, "result.json")
        cmd = [sys.executable, "-c", _RUNNER, result_path, target, json.dumps([args or [], kwargs or {}])]
        killed, seconds, status = _run_capped(cmd, timeout, out, err, env)
        if killed:
            return SubprocessResult(False, seconds, timeout)
        try:
            with open(result_path) as f:
                message = json.loads(f.read())
        except (OSError, ValueError):
            why = _last_line(err) or f"the child exited with status {status} without a result"
            return SubprocessResult(False, seconds, timeout, error=why)
    if "input_error" in message:
        return SubprocessResult(False, seconds, timeout, input_error=message["input_error"])
    if "error" in message:
        return SubprocessResult(False, seconds, timeout, error=message["error"])
    return SubprocessResult(True, seconds, timeout, value=message["value"])


@dataclasses.dataclass
class CommandResult:
    """Outcome of :func:`run_command`."""

    returned: bool            # exited before the timeout (whatever its status)
    seconds: float            # wall time until exit or until the process group was killed
    timeout: float
    status: int | None        # exit status; None when killed
    stdout: str               # everything it printed on stdout
    last_error: str           # the last line it printed on stderr


def run_command(cmd: list, timeout: float) -> CommandResult:
    """Run the program ``cmd`` (argv) in a session of its own; kill its whole process group
    after ``timeout`` s (as :func:`run_with_timeout` does), and in any case when it ends, so
    nothing it started survives the call.  ``timeout`` is trusted: trgad's callers checked it
    (:func:`trgad.runtime.validate.check_timeout`).  Raises OSError when the program cannot be
    started."""
    import tempfile

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        killed, seconds, status = _run_capped(cmd, timeout, out, err, None)
        out.seek(0)
        return CommandResult(not killed, seconds, timeout, None if killed else status,
                             out.read().decode("utf-8", "replace"), _last_line(err))


# ---- one rule for ties and leads, book-wide ---------------------------------------------

#: Two timings whose ratio is within this relative distance of 1 are a tie: on a shared
#: 2-core machine the same program's repeated timings move by about this much, so a
#: smaller gap says nothing about which is faster.
TIE_RTOL = 0.10


def tie(a: float, b: float, rtol: float = TIE_RTOL) -> bool:
    """Whether timings ``a`` and ``b`` (seconds, > 0) are a tie: max/min <= 1 + ``rtol``."""
    a, b = check_positive("a", a), check_positive("b", b)
    return max(a, b) / min(a, b) <= 1.0 + rtol


def faster(a: float, b: float, rtol: float = TIE_RTOL) -> bool:
    """Whether ``a`` is faster than ``b`` by more than a tie: b / a > 1 + ``rtol``.  The one
    rule the book's sentences "X is faster than Y" are asserted with (:func:`tie` otherwise)."""
    a, b = check_positive("a", a), check_positive("b", b)
    return b / a > 1.0 + rtol
