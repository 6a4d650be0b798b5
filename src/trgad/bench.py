"""The benchmark: forward-only vs whole-graph gradient vs staged, one run.

All figures come from one process, so their ratios are meaningful even on a noisy, shared
machine; absolute times are not.  ``python -m trgad bench`` prints them.
"""
from __future__ import annotations

import time

from . import staged, trg, whole
from .timing import block, time_call
from .validate import check_repeats


def run(chi=16, steps=20, beta=0.3, repeats=3):
    """Measure, at one (chi, steps, beta):

    * ``forward_first`` / ``forward``: ``jax.jit(lnZ/N)`` first call (with compilation) and
      steady state (min of ``repeats`` after a warm-up), seconds;
    * ``whole_first`` / ``whole``: the same for ``jax.jit(jax.value_and_grad(lnZ/N))``;
    * ``whole_over_forward``: ratio of the steady-state times;
    * ``staged_*``: the staged value-and-gradient (:func:`trgad.staged.bench`).

    Raises InputError for chi, steps, beta or repeats out of range (:mod:`trgad.validate`).
    """
    import jax

    repeats = check_repeats(repeats)
    schedule = trg.truncation_schedule(chi, steps, beta)
    out = {"chi": chi, "steps": steps, "beta": beta, "repeats": repeats, "schedule": schedule}

    def first_and_steady(fn):
        t0 = time.perf_counter()
        block(fn(beta))
        first = time.perf_counter() - t0
        return first, time_call(lambda: fn(beta), warmup=1, repeats=repeats).min

    out["forward_first"], out["forward"] = first_and_steady(jax.jit(whole.lnz_fn(schedule)))
    out["whole_first"], out["whole"] = first_and_steady(jax.jit(jax.value_and_grad(whole.lnz_fn(schedule))))
    out["whole_over_forward"] = out["whole"] / out["forward"]
    out.update(staged.bench(beta, schedule, repeats=repeats))
    out["staged_over_whole"] = out["staged"] / out["whole"]
    out["staged_over_forward"] = out["staged"] / out["forward"]
    out["staged_first_over_whole_first"] = out["staged_first"] / out["whole_first"]
    return out


def summary(out):
    """Human-readable lines for :func:`run`'s result."""
    lines = [f"chi={out['chi']} steps={out['steps']} beta={out['beta']} (min of {out['repeats']} after a warm-up)"]
    for key, label in (("forward", "forward lnZ/N, jit"), ("whole", "whole-graph value_and_grad, jit"),
                       ("staged", "staged value_and_grad")):
        if key in out:
            lines.append(f"{label:32s} first {out[key + '_first']:7.3f} s  steady {out[key]:7.3f} s")
    lines.append(f"{'whole over forward':32s} {out['whole_over_forward']:.2f}")
    for key in ("staged_over_whole", "staged_over_forward", "staged_first_over_whole_first",
                "engine_staged_ratio", "engine_linear_ratio", "engine_step_cost_ratio"):
        if key in out:
            lines.append(f"{key.replace('_', ' '):32s} {out[key]:.2f}")
    return "\n".join(lines)
