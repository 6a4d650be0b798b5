"""Command line: ``python -m trgad {trg,chain,probe,bench} ...``.

Every bad input ends with one line on stderr naming the value and the allowed range, and
exit status 2; no traceback.  ``--json`` prints one JSON object on stdout.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from .timing import run_with_timeout
from .validate import InputError, check_beta, check_chi, check_choice, check_finite, check_int, check_positive, check_steps

ENGINES = ("jax", "keyed")
KEYS = ("structural", "interned")
METHODS = ("whole", "staged")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise InputError(message)


def _parser():
    p = _Parser(prog="python -m trgad",
                description="Whole-graph vs staged differentiation of the Ising TRG (trgad).")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    t = sub.add_parser("trg", help="lnZ/N and u = -d(lnZ/N)/d beta of the Ising model by TRG")
    t.add_argument("--beta", default="0.3", help="inverse temperature > 0 (default 0.3)")
    t.add_argument("--chi", default="16", help="bond dimension >= 2 (default 16)")
    t.add_argument("--steps", default="20", help="TRG steps in [1, 64]; 2**steps sites (default 20)")
    t.add_argument("--engine", default="jax", help="jax | keyed (default jax)")
    t.add_argument("--keys", default="structural",
                   help="keyed engine: structural | interned (default structural)")
    t.add_argument("--timeout", default="60",
                   help="keyed engine, whole graph: give up after this many seconds (default 60)")
    t.add_argument("--method", default="whole", help="whole | staged (default whole)")
    t.add_argument("--specific-heat", action="store_true", help="also compute c (staged method)")
    t.add_argument("--json", action="store_true", help="print one JSON object")

    c = sub.add_parser("chain", help="the mul chain y <- y**K / K, differentiated at x0")
    c.add_argument("--depth", default="20", help="layers >= 1 (default 20)")
    c.add_argument("--fanout", default="2", help="uses of each value per layer, >= 1 (default 2)")
    c.add_argument("--engine", default="keyed", help="keyed | jax (default keyed)")
    c.add_argument("--keys", default="structural", help="structural | interned (default structural)")
    c.add_argument("--x0", default="1.1", help="point of differentiation (default 1.1)")
    c.add_argument("--json", action="store_true", help="print one JSON object")

    q = sub.add_parser("probe", help="does the transform grow exponentially with depth?")
    q.add_argument("--graph", default="chain", help="chain | trg | power | newton | evolve")
    q.add_argument("--engine", default="keyed", help="keyed | jax (default keyed)")
    q.add_argument("--keys", default="structural", help="structural | interned (default structural)")
    q.add_argument("--budget", default="20", help="time budget in seconds (default 20)")
    q.add_argument("--json", action="store_true", help="print one JSON object")

    b = sub.add_parser("bench", help="forward vs whole-graph vs staged timings, one run")
    b.add_argument("--chi", default="16")
    b.add_argument("--steps", default="20")
    b.add_argument("--beta", default="0.3")
    b.add_argument("--repeats", default="3", help="timed repeats after a warm-up (default 3)")
    b.add_argument("--json", action="store_true")
    return p


def _cmd_trg(a):
    beta, chi, steps = check_beta(a.beta), check_chi(a.chi), check_steps(a.steps)
    engine = check_choice("engine", a.engine, ENGINES)
    keys = check_choice("keys", a.keys, KEYS)
    method = check_choice("method", a.method, METHODS)
    timeout = check_positive("timeout", a.timeout)
    from . import trg

    schedule = trg.truncation_schedule(chi, steps, beta)
    out = {"beta": beta, "chi": chi, "steps": steps, "schedule": schedule,
           "method": method, "engine": engine}
    t0 = time.perf_counter()
    if engine == "jax" and method == "whole":
        if a.specific_heat:
            raise InputError("--specific-heat needs --method staged")
        from . import whole

        lnz, dlnz = whole.value_and_grad(beta, schedule)
        out.update(lnz_per_site=lnz, u=-dlnz, c=None)
    elif method == "staged":
        from . import staged

        res = staged.run(beta, schedule, engine=engine, keys=keys, specific_heat=a.specific_heat)
        out.update(res)
    else:
        if a.specific_heat:
            raise InputError("--specific-heat needs --method staged")
        if keys == "structural" and steps >= 4:
            print(f"trgad: note: steps={steps} with structural keys is the exponential case this "
                  f"book is about; 3 steps take seconds, 4 may not return within --timeout "
                  f"{timeout:g} s", file=sys.stderr)
        out["keys"] = keys
        # In a child process with a hard timeout: the exponential case must not hang the shell.
        run = run_with_timeout("trgad.whole:trg_whole", {"beta": beta, "schedule": schedule, "keys": keys},
                               timeout=timeout)
        if not run.returned:
            why = run.error or f"did not return within {timeout:g} s (process killed)"
            print(f"trgad: error: whole-graph transform, keyed engine, {keys} keys, steps={steps}: "
                  f"{why}; try --method staged, --keys interned or a larger --timeout", file=sys.stderr)
            return 3
        out.update(run.value)
    out["seconds"] = time.perf_counter() - t0
    if a.json:
        print(json.dumps(out))
    else:
        c = out.get("c")
        c_text = "" if c is None else f"  c={c:.10f}"
        print(f"TRG {method} ({engine}) beta={beta} chi={chi} steps={steps} schedule={schedule}")
        print(f"lnZ/N={out['lnz_per_site']:.15f}  u={out['u']:.15f}{c_text}  ({out['seconds']:.2f} s)")
    return 0


def _cmd_chain(a):
    depth = check_int("depth", a.depth, 1)
    fanout = check_int("fanout", a.fanout, 1)
    engine = check_choice("engine", a.engine, ENGINES)
    keys = check_choice("keys", a.keys, KEYS)
    x0 = check_finite("x0", a.x0)
    from . import chain

    out = chain.run(depth, fanout, engine=engine, keys=keys, x0=x0)
    if a.json:
        print(json.dumps(out))
    else:
        print(" ".join(f"{k}={v}" for k, v in out.items()))
    return 0


def _cmd_probe(a):
    graph = check_choice("graph", a.graph, ("chain", "trg", "power", "newton", "evolve"))
    engine = check_choice("engine", a.engine, ENGINES)
    keys = check_choice("keys", a.keys, KEYS)
    budget = check_positive("budget", a.budget)
    from . import probe

    out = probe.run_builtin(graph, engine=engine, keys=keys, budget=budget)
    if a.json:
        print(json.dumps(out))
    else:
        print(" ".join(f"{k}={v}" for k, v in out.items()))
    return 0


def _cmd_bench(a):
    from . import bench

    out = bench.run(check_chi(a.chi), check_steps(a.steps), check_beta(a.beta),
                    repeats=check_int("repeats", a.repeats, 1))
    print(json.dumps(out) if a.json else bench.format(out))
    return 0


def main(argv=None):
    """Entry point; returns the exit status (0 ok, 2 bad input, 3 a capped run timed out)."""
    try:
        a = _parser().parse_args(argv)
        return {"trg": _cmd_trg, "chain": _cmd_chain, "probe": _cmd_probe, "bench": _cmd_bench}[a.command](a)
    except InputError as e:
        print(f"trgad: error: {e}", file=sys.stderr)
        return 2
