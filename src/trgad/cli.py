"""Command line: ``python -m trgad {trg,chain,probe,bench,tenferro} ...``.

Every parameter is checked against its range (:mod:`trgad.runtime.validate`) before any work starts;
the exit statuses (:data:`trgad.outcome.STATUSES`) end every command's ``--help``.
Every run that may grow exponentially (``trg --engine keyed`` on the whole graph, ``chain``,
``probe``) runs in a child process killed after ``--timeout``; SIGINT, SIGTERM and SIGHUP
end every child process group too (:func:`trgad.runtime.children.stop_on_signals`).  ``--json``
prints one JSON object on stdout (:mod:`trgad.outcome`).  ``python -m trgad --help`` says the same for users (:data:`EPILOG`).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from . import bench
from .growth import graphs, userstep
from .harness import tenferro
from .keyed import keyed_trg, keys as keyed_keys
from .outcome import STATUSES, UNWRITABLE, NotFinite, Unwritable, check_stdout, emit as _emit, line as _line, write
from .physics import modes, trg
from .runtime.children import Stopped, stop_on_signals
from .runtime.timing import run_with_timeout
from .runtime.validate import (BETA_MAX, BETA_MIN, BUDGET_MAX, CHAIN_MAX_OPS, CHI_MAX, CHI_MIN, ENGINES,
                               MAX_STEPS, REPEATS_MAX, TIMEOUT_MAX, X0_MIN, InputError, check_beta,
                               check_chain, check_chi, check_choice, check_engine, check_point,
                               check_positive, check_steps, check_timeout, format_bound, shown)

#: Default --timeout, seconds.
TIMEOUT = 60.0
#: The --engine each command uses unless told.
ENGINE_DEFAULT = {"trg": "jax", "chain": "keyed", "probe": "keyed"}


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, epilog=None, **kwargs):        # every --help ends in the statuses
        super().__init__(*args, epilog=epilog or STATUSES, **kwargs)

    def error(self, message):  # one line, no usage dump, a long value cut
        raise InputError(message if len(message) <= 200 else f"{message[:200]}... ({len(message)} characters)")


def _parents():
    """The options shared by subcommands, each defined once: (json, lattice, keyed).

    ``json``: --json (every subcommand); ``lattice``: --beta, --chi, --steps (trg, bench);
    ``keyed``: --engine, --keys, --timeout (trg, chain, probe; --engine has no default here:
    each command picks its own, :data:`ENGINE_DEFAULT`).  The ranges in the help come from
    :mod:`trgad.runtime.validate`."""
    json_ = argparse.ArgumentParser(add_help=False)
    json_.add_argument("--json", action="store_true", help="print one JSON object")
    lattice = argparse.ArgumentParser(add_help=False)
    lattice.add_argument("--beta", default="0.3",
                         help=f"inverse temperature in [{BETA_MIN!r}, {format_bound(BETA_MAX)}] (default 0.3)")
    lattice.add_argument("--chi", default="16", help=f"bond dimension in [{CHI_MIN}, {CHI_MAX}] (default 16)")
    lattice.add_argument("--steps", default="20",
                         help=f"TRG steps in [1, {MAX_STEPS}]; 2**steps sites (default 20)")
    keyed = argparse.ArgumentParser(add_help=False)
    keyed.add_argument("--engine", default=None,
                       help=f"{' | '.join(ENGINES)} (default: "
                            + ", ".join(f"{v} for {k}" for k, v in ENGINE_DEFAULT.items()) + ")")
    keyed.add_argument("--keys", default="structural",
                       help=f"keyed engine's value keys: {' | '.join(keyed_keys.STRATEGIES)} (default structural)")
    keyed.add_argument("--timeout", default=str(TIMEOUT),
                       help=f"kill a run that may grow exponentially (trg: the keyed engine's whole "
                            f"graph) after this many seconds, in (0, {format_bound(TIMEOUT_MAX)}] "
                            f"(default {TIMEOUT:g})")
    return json_, lattice, keyed


#: What ``python -m trgad --help`` says after the commands: how bad input and runs that may
#: not return are handled (the one place the command line documents it).
EPILOG = f"""\
bad input: every value is checked before any work starts; one outside its range ends with
  one line on stderr naming the value as typed and the allowed range (each command's --help
  gives the ranges, from trgad.runtime.validate), exit status 2, never a traceback.  Negative
  numbers are values (--x0 -1e-3).  A probe's module:function that does not import, is not
  a Python file, lacks the function or fails on --x0 (any exception, sys.exit included) is
  bad input too.
runs that may not return (trg --engine keyed on the whole graph, chain, probe, tenferro's
  programs) run in a child process in a session of its own; after --timeout seconds its
  whole process group is killed and the command says so in one line: exit status 3 (also
  when the child fails).  Ctrl-C, SIGTERM and SIGHUP end every child process group and
  remove the temporary folders too, then exit 128+N in one line.
non-finite numbers are never printed (--json never holds NaN or Infinity): a result that is
  not finite (trg's lnZ/N, u, c; bench) exits 4 naming it; a derivative beside a measured
  transform (chain's grad, probe's grads) is null with a "note".
{STATUSES}
ranges: beta in [{BETA_MIN!r}, {format_bound(BETA_MAX)}] (where the TRG resolves u and c:
  below it u is lost to rounding, above it e^(-2 beta) is no longer a normal float); chi in [{CHI_MIN}, {CHI_MAX}]
  (an SVD costs chi**6); steps in [1, {MAX_STEPS}] (step i weighs 2**-i); depth * fanout <=
  {CHAIN_MAX_OPS} (memory); timeout in (0, {format_bound(TIMEOUT_MAX)}] s; budget in (0,
  {format_bound(BUDGET_MAX)}] s, below the timeout; repeats in [1, {REPEATS_MAX}].
"""


def _parser():
    p = _Parser(prog="python -m trgad",
                description="Whole-graph vs staged differentiation of the Ising TRG (trgad).",
                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    json_, lattice, keyed = _parents()

    t = sub.add_parser("trg", parents=[lattice, keyed, json_],
                       help="lnZ/N and u = -d(lnZ/N)/d beta of the Ising model by TRG")
    t.add_argument("--method", default="whole",
                   help=f"{' | '.join(modes.METHODS)} (default whole; 'forward' is a deprecated "
                        f"alias of forward_mode)")
    t.add_argument("--specific-heat", action="store_true", help="also compute c by an exact second derivative")
    t.add_argument("--c-method", default="exact",
                   help=f"{' | '.join(modes.C_METHODS)}: c by an exact second derivative or, staged "
                        f"only, by a central difference of two gradients (default exact)")

    c = sub.add_parser("chain", parents=[keyed, json_],
                       help="the mul chain y <- y**K / K, differentiated at x0")
    c.add_argument("--depth", default="20", help=f"layers >= 1 (default 20); depth * fanout <= {CHAIN_MAX_OPS}")
    c.add_argument("--fanout", default="2", help="uses of each value per layer, >= 1 (default 2)")
    c.add_argument("--x0", default="1.1", help="point of differentiation: 0 or a finite number of magnitude "
                                               f">= {X0_MIN!r} (default 1.1)")

    q = sub.add_parser("probe", parents=[keyed, json_],
                       help="does the transform grow exponentially with depth?")
    q.add_argument("--graph", default="chain",
                   help=f"{' | '.join(graphs.GRAPHS)} | module:function | file.py:function")
    q.add_argument("--x0", default=None,
                   help="starting state: a number or comma-separated numbers (needed for module:function)")
    q.add_argument("--budget", default="20",
                   help=f"time budget in (0, {format_bound(BUDGET_MAX)}] seconds, below --timeout (default 20)")

    b = sub.add_parser("bench", parents=[lattice, json_], help="every mode of differentiation timed, one run")
    b.add_argument("--repeats", default="3",
                   help=f"timed repeats after a warm-up, in [1, {REPEATS_MAX}] (default 3)")
    b.add_argument("--no-second-order", action="store_true",
                   help="skip the slowest parts: c by every exact method, the gradient in 16 parameters")
    f = sub.add_parser("tenferro", help=f"tenferro-rs {tenferro.VERSION} itself (the book's Rust harness)")
    fsub = f.add_subparsers(dest="what", required=True, parser_class=_Parser)
    cap = argparse.ArgumentParser(add_help=False)
    cap.add_argument("--timeout", default=str(TIMEOUT), help=f"kill the run (its whole process group) after "
                     f"this many seconds, in (0, {format_bound(TIMEOUT_MAX)}] (default {TIMEOUT:g})")
    trg_args = argparse.ArgumentParser(add_help=False)
    trg_args.add_argument("--beta", default="0.3",
                          help=f"inverse temperature in [{BETA_MIN!r}, {format_bound(BETA_MAX)}] (default 0.3)")
    trg_args.add_argument("--chi", default="16", help=f"bond dimension in [{CHI_MIN}, {CHI_MAX}] (default 16)")
    release = argparse.ArgumentParser(add_help=False)
    release.add_argument("--release", default=tenferro.VERSION, help=f"tenferro-rs release, one of "
                         f"{', '.join(tenferro.VERSIONS)} (default {tenferro.VERSION})")
    build = argparse.ArgumentParser(add_help=False)
    build.add_argument("--build", default="stock", help=f"stock (the crates as published) or fixed "
                       f"({tenferro.VERSION} with computegraph's key equality patched; default stock)")
    fw = fsub.add_parser("whole", parents=[trg_args, release, build, cap, json_], help="ad.grad of the whole TRG graph")
    fw.add_argument("--steps", required=True, help=f"TRG steps in [1, {MAX_STEPS}]")
    fw.add_argument("--eager", action="store_true", help="eager graph and backward() instead of ad.grad")
    fw.add_argument("--keep", action="store_true", help="do not drop the gradient graph (the exit frees it)")
    fc = fsub.add_parser("chain", parents=[release, build, cap, json_], help="ad.grad of the mul chain y <- y**K / K")
    ranges = tenferro.CHAIN_RANGES                     # the program's ranges, one source
    fc.add_argument("--depth", required=True, help=f"layers, an integer {ranges['depth']}")
    fc.add_argument("--fanout", default="2", help=f"uses of each value per layer, an integer {ranges['fanout']} (default 2)")
    fc.add_argument("--x0", default="2", help=f"point: {ranges['x0']} (default 2: the gradient is 2**depth)")
    fs = fsub.add_parser("staged", parents=[trg_args, build, cap, json_], help="one VJP per TRG step, value and u")
    fs.add_argument("--steps", default="20", help=f"TRG steps in [1, {MAX_STEPS}] (default 20)")
    fs.add_argument("--repeats", default="3", help=f"timed passes after the first, in [1, {REPEATS_MAX}] (default 3)")
    fk = fsub.add_parser("count", parents=[release, build, json_],
                         help="exact calls of the key equality in ad.grad and in the drop (valgrind's callgrind)")
    fk.add_argument("--graph", required=True, help="chain (takes --depth, --fanout) or trg (--steps, --beta, "
                                                   "--chi); a value the graph does not take is refused")
    fk.add_argument("--depth", help=f"chain: layers, an integer {ranges['depth']}")
    fk.add_argument("--fanout", help=f"chain: uses of each value per layer, an integer {ranges['fanout']} (default 2)")
    fk.add_argument("--steps", help=f"trg: TRG steps in [1, {MAX_STEPS}]")
    fk.add_argument("--beta", help=f"trg: inverse temperature in [{BETA_MIN!r}, {format_bound(BETA_MAX)}] (default 0.3)")
    fk.add_argument("--chi", help=f"trg: bond dimension in [{CHI_MIN}, {CHI_MAX}] (default 16)")
    fk.add_argument("--timeout", default=str(tenferro.COUNT_TIMEOUT_SECONDS),
                    help=f"kill a callgrind run after this many seconds, in (0, {TIMEOUT_MAX:g}] (default {tenferro.COUNT_TIMEOUT_SECONDS:g})")
    return p


def _cmd_tenferro(a):
    # the public functions of trgad.harness.tenferro check every argument, the timeout included
    if a.what == "count":
        return _emit(_count(a), a.json, _line, "tenferro count")
    if a.what == "whole":
        out = tenferro.whole(a.steps, a.beta, a.chi, eager=a.eager, keep=a.keep, version=a.release,
                             build=a.build, timeout=a.timeout)
    elif a.what == "chain":
        out = tenferro.chain(a.depth, a.fanout, a.x0, version=a.release, build=a.build, timeout=a.timeout)
    else:
        out = tenferro.staged(a.steps, a.beta, a.chi, repeats=a.repeats, build=a.build, timeout=a.timeout)
    if not out["returned"]:
        print(f"trgad: error: tenferro {a.what} did not return within {out['timeout_s']:g} s "
              f"(process group killed)", file=sys.stderr)
        if a.json:
            write(json.dumps(out))
        return 3
    missing = [k for k in ("grad", "lnz_per_site", "u") if k in out and out[k] is None]
    if missing:     # the program prints null for a number that is not finite
        raise NotFinite(f"tenferro {a.what}: {missing[0]} is not a finite number")
    return _emit(out, a.json, _line, f"tenferro {a.what}")


#: The values ``tenferro count`` takes for each graph; the first is required.
COUNT_TAKES = {"chain": ("depth", "fanout"), "trg": ("steps", "beta", "chi")}


def _count(a):
    graph = check_choice("--graph", a.graph, tuple(COUNT_TAKES))
    takes = COUNT_TAKES[graph]
    if getattr(a, takes[0]) is None:
        raise InputError(f"--graph {graph} needs --{takes[0]}")
    for other in sorted({n for names in COUNT_TAKES.values() for n in names} - set(takes)):
        if getattr(a, other) is not None:     # given but not used: refused, never ignored
            raise InputError(f"--graph {graph} takes no --{other} (given {shown(getattr(a, other))}); "
                             f"it takes --{', --'.join(takes)}")
    given = {n: getattr(a, n) for n in takes if getattr(a, n) is not None}
    return tenferro.count(graph, **given, version=a.release, build=a.build, timeout=a.timeout)


def _in_child(target, kwargs, timeout, what, hint):
    """Run ``target`` in a child process; its value, or an exit status after one line."""
    run = run_with_timeout.trusted(target, kwargs, timeout)
    if run.returned:
        return run.value, 0
    if run.input_error:
        raise InputError(run.input_error)
    why = f"failed: {run.error}" if run.error else f"did not return within {timeout:g} s (process killed)"
    print(f"trgad: error: {what}: {why}; {hint}", file=sys.stderr)
    return None, 3


def _cmd_trg(a):
    beta, chi, steps = check_beta(a.beta), check_chi(a.chi), check_steps(a.steps)
    engine = check_engine(a.engine or ENGINE_DEFAULT["trg"])
    keys = check_choice("keys", a.keys, keyed_keys.STRATEGIES)
    method = modes.check_method(a.method)
    c_method = check_choice("c-method", a.c_method, modes.C_METHODS)
    timeout = check_timeout(a.timeout)
    if engine == "keyed" and method not in ("whole", "staged"):
        raise InputError(f"method={a.method!r} needs --engine jax (the keyed engine runs whole and staged)")
    if c_method == "fd" and method != "staged":
        raise InputError(f"--c-method fd needs --method staged (method {method} gives c exactly)")
    if a.specific_heat and engine == "keyed" and (method != "staged" or c_method != "fd"):
        raise InputError("--specific-heat on the keyed engine needs --method staged --c-method fd "
                         "(the engine has first derivatives only)")
    order = 2 if a.specific_heat else 1
    inputs = f"trg beta={a.beta} chi={chi} steps={steps}"
    schedule = trg.truncation_schedule.trusted(chi, steps, beta)
    out = {"beta": beta, "chi": chi, "steps": steps, "schedule": schedule,
           "method": method, "engine": engine}
    t0 = time.perf_counter()
    if engine == "jax":
        r = modes.value_and_derivatives.trusted(beta, tuple(schedule), method, order, c_method)
        out.update({k: r[k] for k in ("lnz_per_site", "u", "c", "c_method", "fd_step", "compile_seconds")})
    elif method == "staged":
        r = keyed_trg.staged_derivatives.trusted(beta, schedule, keys, order)
        out.update({k: v for k, v in r.items() if k not in ("method", "order", "seconds")})
    else:
        if keys == "structural" and steps >= 4:
            print(f"trgad: note: steps={steps} with structural keys is the exponential case this "
                  f"book is about; 3 steps take seconds, 4 may not return within --timeout "
                  f"{timeout:g} s", file=sys.stderr)
        out["keys"] = keys
        value, status = _in_child("trgad.keyed.keyed_trg:trg_whole.trusted", {"beta": beta, "schedule": schedule, "keys": keys},
                                  timeout, f"whole-graph transform, keyed engine, {keys} keys, steps={steps}",
                                  "try --method staged, --keys interned or a larger --timeout")
        if status:
            return status
        out.update(value)
    out["seconds"] = time.perf_counter() - t0

    def text(o):
        c = o.get("c")
        c_text = "" if c is None else f"  c={c:.10f}"
        return (f"TRG {method} ({engine}) beta={beta} chi={chi} steps={steps} schedule={schedule}\n"
                f"lnZ/N={o['lnz_per_site']:.15f}  u={o['u']:.15f}{c_text}  ({o['seconds']:.2f} s)")
    return _emit(out, a.json, text, inputs)


def _cmd_chain(a):
    depth, fanout = check_chain(a.depth, a.fanout)
    engine = check_engine(a.engine or ENGINE_DEFAULT["chain"])
    keys = check_choice("keys", a.keys, keyed_keys.STRATEGIES)
    x0 = check_point("x0", a.x0)
    timeout = check_timeout(a.timeout)
    kwargs = {"depth": depth, "fanout": fanout, "engine": engine, "keys": keys, "x0": x0}
    out, status = _in_child("trgad.keyed.chain:run.trusted", kwargs, timeout,
                            f"chain depth={depth} fanout={fanout}, {engine} engine"
                            + (f", {keys} keys" if engine == "keyed" else ""),
                            "try a smaller --depth" + (", --keys interned" if engine == "keyed" else "")
                            + " or a larger --timeout")
    if status:
        return status
    return _emit(out, a.json, _line, f"chain depth={depth} fanout={fanout} x0={a.x0}")


def _cmd_probe(a):
    engine = check_engine(a.engine or ENGINE_DEFAULT["probe"])
    keys = check_choice("keys", a.keys, keyed_keys.STRATEGIES)
    budget = check_positive("budget", a.budget, BUDGET_MAX)
    timeout = check_timeout(a.timeout)
    if budget >= timeout:
        raise InputError(f"budget={a.budget.strip()!r} is out of range: budget must be below --timeout "
                         f"({timeout:g} s), which kills the probe")
    graph = a.graph
    x0 = None if a.x0 is None else userstep.parse_x0(a.x0)
    if graph not in graphs.GRAPHS:
        if ":" not in graph:
            raise InputError(f"graph={graph!r} is not known: choose one of {', '.join(graphs.GRAPHS)}, "
                             f"or give module:function")
        if x0 is None:
            raise InputError(f"graph={graph!r} needs --x0, the starting state (e.g. --x0 0.9,0.8)")
        module, _, name = graph.rpartition(":")
        if module.endswith(".py") or os.sep in module:
            graph = f"{os.path.abspath(module)}:{name}"     # the child may not share the cwd
        # the user's code is imported and run only in the child, under --timeout; a spec that
        # does not import or a step that fails on x0 comes back as an InputError (exit 2)
    elif graph == "trg" and x0 is not None:
        raise InputError("--x0 is not used with --graph trg (the TRG is probed by steps at beta = 0.3)")
    kwargs = {"graph": graph, "x0": list(x0) if isinstance(x0, tuple) else x0,
              "engine": engine, "keys": keys, "budget": budget, "label": a.graph}
    out, status = _in_child("trgad.growth.probe:run.trusted", kwargs, timeout, f"probe graph={a.graph} on {engine}",
                            "try a smaller --budget or a larger --timeout")
    if status:
        return status
    return _emit(out, a.json, _line, f"probe graph={a.graph}")


def _cmd_bench(a):
    slow = not a.no_second_order     # bench.run, public, checks chi, steps, beta and repeats
    out = bench.run(a.chi, a.steps, a.beta, repeats=a.repeats, second_order=slow, many_parameters=slow)
    return _emit(out, a.json, bench.summary, f"bench chi={out['chi']} steps={out['steps']} beta={a.beta}")


def values_may_be_negative(argv):
    """argv with each option value that starts with one "-" attached to its option:
    ``["--x0", "-1e-3"]`` -> ``["--x0=-1e-3"]``.

    argparse reads "-1e-3", "-0.5,0.3" or "-inf" after an option as another option ("expected
    one argument"); every option here is long ("--name"), so a word with a single leading
    "-" (other than "-h") is a value: a negative number, or text the option's check then
    names.  After a flag (``--json``) the joined word is refused by argparse as before."""
    out = []
    for word in argv:
        if (out and word.startswith("-") and not word.startswith("--") and word != "-h"
                and out[-1].startswith("--") and "=" not in out[-1]):
            out[-1] = f"{out[-1]}={word}"
        else:
            out.append(word)
    return out


def main(argv=None, *, exiting=False):
    """Entry point; returns the exit status (:data:`trgad.outcome.STATUSES`: 0 ok, 1 an
    internal error, 2 bad input, 3 a capped run timed out or failed in its child process, 4
    a result that is not finite, 5 a result that could not be written, 128+N stopped by
    signal N).  SIGINT, SIGTERM and SIGHUP raise where the command is, so the child
    processes it started are ended and its temporary folders removed before it returns
    (:func:`trgad.runtime.children.stop_on_signals`; ``exiting``: the process ends when this
    returns, ``python -m trgad``, and later signals are ignored until it does)."""
    with stop_on_signals(exiting):
        return _main(argv)


def _main(argv):
    commands = {"trg": _cmd_trg, "chain": _cmd_chain, "probe": _cmd_probe, "bench": _cmd_bench,
                "tenferro": _cmd_tenferro}
    try:
        a = _parser().parse_args(values_may_be_negative(sys.argv[1:] if argv is None else list(argv)))
        check_stdout()                  # nowhere to print the result: say so before the work
        return commands[a.command](a)
    except (InputError, NotFinite, tenferro.TenferroError) as e:
        print(f"trgad: error: {e}", file=sys.stderr)
        return 2 if isinstance(e, InputError) else 4 if isinstance(e, NotFinite) else 3
    except Unwritable as e:
        print(f"trgad: error: the result could not be written to stdout ({e})", file=sys.stderr)
        return UNWRITABLE
    except (ArithmeticError, np.linalg.LinAlgError) as e:
        print(f"trgad: error: numerical failure, {type(e).__name__}: {e}", file=sys.stderr)
        return 4
    except KeyboardInterrupt:
        print("trgad: interrupted (every process it started is ended)", file=sys.stderr)
        return 130
    except Stopped as e:
        print(f"trgad: stopped by {e} (every process it started is ended)", file=sys.stderr)
        return 128 + e.signum
    except Exception as e:  # one line, never a traceback (TRGAD_DEBUG=1 shows it)
        if os.environ.get("TRGAD_DEBUG"):
            raise
        text = (str(e).strip().splitlines() or [""])[0]
        print(f"trgad: error: internal error, {type(e).__name__}: {text} "
              f"(TRGAD_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 1
