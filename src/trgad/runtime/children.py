"""Child processes with a hard timeout, and every way of stopping them.

* :func:`run_with_timeout` - a function run in a fresh Python process, killed after a time.
* :func:`run_command`, :func:`run_commands` - one program, or several side by side (the
  three callgrind runs of ``tenferro count``), the same way.
* :func:`stop_on_signals` - the command line's handlers: SIGTERM and SIGHUP raise
  :class:`Stopped` (SIGINT, KeyboardInterrupt) in the main thread, once, so the ``finally``
  that ends the children and removes their temporary folders runs whatever stops the
  command.

Each child runs in a session of its own (``start_new_session``: the terminal's Ctrl-C and
hang-up reach this process, not the child), and whenever the wait ends - the children
exit, the timeout passes, an exception or a signal arrives - every child's whole process
group is killed (SIGKILL) before the call returns or raises: nothing a call started
outlives it.  Signals that arrive while children are started or ended are held until that
is done (:func:`held`), so a Ctrl-C never leaves a child started but not yet watched.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from .validate import check_timeout, checked

#: The signals :func:`stop_on_signals` turns into an exception in the main thread.
STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")

# What the handlers of stop_on_signals know: whether they are installed, whether one already
# raised (later signals are ignored: the command is stopping), how deep held() is nested,
# and a signal that came while held.
_state = {"installed": False, "stopping": False, "held": 0, "pending": None}


class Stopped(BaseException):
    """SIGTERM or SIGHUP asked this process to stop (``signum``): raised in the main thread
    by :func:`stop_on_signals`'s handler, a BaseException so that no ``except Exception``
    swallows it and every ``finally`` on the way out runs."""

    def __init__(self, signum):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


def _raise_for(signum):
    _state["stopping"] = True
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Stopped(signum)


def _handler(signum, frame):
    if _state["stopping"]:
        return                      # the first signal is being handled: nothing to add
    if _state["held"]:
        _state["pending"] = signum
        return
    _raise_for(signum)


@contextlib.contextmanager
def stop_on_signals(exiting=False):
    """While inside, SIGINT raises KeyboardInterrupt and SIGTERM, SIGHUP raise
    :class:`Stopped` in the main thread, once (later signals are ignored while the command
    stops); the previous handlers are back afterwards, unless ``exiting`` (the process ends
    after the block: ``python -m trgad``), when every later signal is ignored, so a second
    Ctrl-C cannot turn a clean stop into a traceback.  Outside the main thread, or nested,
    it does nothing."""
    if _state["installed"] or threading.current_thread() is not threading.main_thread():
        yield
        return
    numbers = [getattr(signal, name) for name in STOP_SIGNALS if hasattr(signal, name)]
    before = {n: signal.signal(n, _handler) for n in numbers}
    _state.update(installed=True, stopping=False, held=0, pending=None)
    try:
        yield
    finally:
        if exiting:     # ignored, not ours: Python's exit puts its own handlers back to the default
            for n in before:
                signal.signal(n, signal.SIG_IGN)
        else:
            for n, h in before.items():
                signal.signal(n, h)
            _state.update(installed=False, stopping=False, held=0, pending=None)


@contextlib.contextmanager
def held():
    """Signals handled by :func:`stop_on_signals` wait until the block is done, then raise:
    around starting children (so each is watched before a signal can end the wait) and
    ending them (so every group is killed before the exception goes on)."""
    _state["held"] += 1
    try:
        yield
    finally:
        _state["held"] -= 1
        pending = _state["pending"]
        if not _state["held"] and pending is not None and not _state["stopping"]:
            _state["pending"] = None
            _raise_for(pending)


def signal_name(status):
    """``"SIGKILL"`` for a child's status -9 (killed by that signal), else None."""
    if status is None or status >= 0:
        return None
    try:
        return signal.Signals(-status).name
    except ValueError:
        return f"signal {-status}"


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
mod, _, name = sys.argv[1].partition(":")   # a function, or its attribute: f.trusted
args, kwargs = json.loads(sys.argv[2])
del sys.argv[1:]
def one_line(e):
    text = str(e).strip().splitlines()
    return (type(e).__name__ + ": " + (text[0] if text else "")).rstrip(": ")
def bad_input(e):  # trgad.runtime.validate.InputError, without importing trgad for other targets
    return any(c.__name__ == "InputError" and c.__module__ == "trgad.runtime.validate" for c in type(e).__mro__)
try:
    fn = importlib.import_module(mod)
    for part in name.split("."):
        fn = getattr(fn, part)
    result = fn(*args, **kwargs)
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


def _high_water_mib(pid):
    """The peak resident memory of process ``pid`` so far, MiB: Linux's ``VmHWM`` (the
    high-water mark of the program's own memory since its exec), or None (no /proc, or the
    process has exited).  Not ``ru_maxrss`` from ``wait4``: Linux carries the forking
    process's resident size into the child's, so every child would show at least this
    Python's."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) / 1024       # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def _last_line(file):
    file.seek(0)
    lines = file.read().decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else ""


def _run_all(runs, timeout, env):
    """Start every ``(cmd, out, err)`` of ``runs`` in a session of its own (stdout, stderr
    to the files ``out``, ``err``), wait until all have exited or ``timeout`` s pass, then
    kill every process group whatever happened (an exception, a signal), so nothing the
    runs started survives.  Returns (killed, seconds, [exit status, ...], [peak MiB, ...]),
    the statuses None when killed, each peak the largest :func:`_high_water_mib` read while
    it ran, every 10 ms (a high-water mark: a peak in a run's last 10 ms can be missed; None
    when none was read).  Raises OSError when a program cannot be started (those started
    are ended first)."""
    t0 = time.perf_counter()
    procs, killed = [], False
    peaks = []
    try:
        with held():
            for cmd, out, err in runs:
                procs.append(subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                              env=env, start_new_session=True))
        peaks = [None] * len(procs)
        while not all(_exited(p) for p in procs):
            for i, p in enumerate(procs):
                now = _high_water_mib(p.pid)
                if now is not None and (peaks[i] is None or now > peaks[i]):
                    peaks[i] = now
            if time.perf_counter() - t0 > timeout:
                killed = True
                break
            time.sleep(0.01)
        seconds = time.perf_counter() - t0
    finally:
        with held():
            for p in procs:
                _end_group(p)
    return killed, seconds, [None if killed else p.returncode for p in procs], peaks


@checked(timeout=check_timeout)
def run_with_timeout(target: str, kwargs: dict | None = None, timeout: float = 20.0,
                     args: list | None = None) -> SubprocessResult:
    """Run ``module:function(*args, **kwargs)`` (or ``module:function.trusted``) in a fresh Python
    process; kill it after ``timeout`` s.

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
    import tempfile

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")])
    with tempfile.TemporaryDirectory(prefix="trgad-run-") as tmp, \
            tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        result_path = os.path.join(tmp, "result.json")
        cmd = [sys.executable, "-c", _RUNNER, result_path, target, json.dumps([args or [], kwargs or {}])]
        killed, seconds, (status,), _ = _run_all([(cmd, out, err)], timeout, env)
        if killed:
            return SubprocessResult(False, seconds, timeout)
        try:
            with open(result_path) as f:
                message = json.loads(f.read())
        except (OSError, ValueError):
            why = _last_line(err) or (f"the child was killed by {signal_name(status)}" if signal_name(status)
                                      else f"the child exited with status {status} without a result")
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
    status: int | None        # exit status (-N: killed by signal N); None when killed at the timeout
    stdout: str               # everything it printed on stdout
    last_error: str           # the last line it printed on stderr
    peak_rss_mib: float | None = None  # its peak resident memory, MiB (VmHWM); None if unread


def run_command(cmd: list, timeout: float) -> CommandResult:
    """Run the program ``cmd`` (argv) in a session of its own; kill its whole process group
    after ``timeout`` s (as :func:`run_with_timeout` does), and in any case when it ends, so
    nothing it started survives the call.  ``timeout`` is trusted: trgad's callers checked it
    (:func:`trgad.runtime.validate.check_timeout`).  Raises OSError when the program cannot be
    started."""
    return run_commands([cmd], timeout)[0]


def run_commands(cmds: list, timeout: float) -> list:
    """:func:`run_command` for several programs at once, side by side, under one
    ``timeout`` (past it, all are killed and none has ``returned``): one
    :class:`CommandResult` each, in order.  One wait for all, in this thread, so a Ctrl-C or
    a signal ends every one of them at once."""
    import tempfile

    with contextlib.ExitStack() as files:
        pairs = [(files.enter_context(tempfile.TemporaryFile()), files.enter_context(tempfile.TemporaryFile()))
                 for _ in cmds]
        killed, seconds, statuses, peaks = _run_all(
            [(cmd, out, err) for cmd, (out, err) in zip(cmds, pairs)], timeout, None)
        results = []
        for (out, err), status, peak in zip(pairs, statuses, peaks):
            out.seek(0)
            results.append(CommandResult(not killed, seconds, timeout, status,
                                         out.read().decode("utf-8", "replace"), _last_line(err), peak))
        return results
