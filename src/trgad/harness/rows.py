"""tenferro-rs's rows of the benchmark (:mod:`trgad.bench`), measured beside JAX's: the
book's Rust harness run as a child process (:mod:`trgad.harness.tenferro`), its staged pass
and its whole graph's ``ad.grad`` at the most steps that finish within a cap.  Kept apart
from the JAX rows so that the harness layer owns everything that starts the harness."""
from functools import partial

from ..pages import caps
from ..runtime.timing import capped_sweep
from ..runtime.validate import (InputError, check_beta, check_chi, check_repeats, check_steps,
                                check_timeout, checked)
from . import tenferro

#: The tenferro-rs rows of ``run(...)["tenferro"]`` (:func:`tenferro_rows`), beside JAX's.
TENFERRO_ROWS = ("tenferro_staged", "tenferro_whole")


@checked(beta=check_beta, chi=check_chi, steps=check_steps, repeats=check_repeats,
         cap_seconds=partial(check_timeout, name="cap_seconds"))
def tenferro_rows(beta, chi, steps, repeats=3, cap_seconds=caps.TENFERRO_HANG_SECONDS):
    """tenferro-rs :data:`trgad.harness.tenferro.VERSION`'s rows beside JAX's, at (beta, chi, steps);
    the harness runs as a child, single-threaded (:mod:`trgad.harness.tenferro`).  Seconds, wall clock.

    * ``tenferro_staged``: the staged value and gradient of ``steps`` steps, one VJP per step
      (:func:`trgad.harness.tenferro.staged`): ``first_seconds`` (the first pass; tenferro-rs compiles
      nothing ahead), ``steady_seconds`` (the fastest of ``repeats`` after it), ``value``;
    * ``tenferro_whole``: ``ad.grad`` of the whole graph at 1, 2, ... ``steps`` steps, each run
      killed after ``cap_seconds``, up to the first whose transform passes the cap
      (:func:`trgad.runtime.timing.capped_sweep`; a killed run counts its child's seconds):
      ``steps`` (the most steps whose run finished within the cap, 0 if none),
      ``transform_seconds`` and ``value`` there, ``stopped_at`` (the steps that passed the
      cap, None if none did), ``killed`` (whether that run was killed), ``cap_seconds``.

    ``value`` is [lnZ/N, d(lnZ/N)/d beta].  Every row has ``available``; without the harness,
    or when it fails or refuses the input, False with ``reason`` (one line) and no figures.
    Raises InputError for beta, chi, steps, repeats or cap_seconds out of range.
    """
    def staged_row():
        r = tenferro.staged.trusted(steps, beta, chi, repeats=repeats)
        if not r["returned"]:
            raise tenferro.TenferroError(f"the staged pass did not return within {r['timeout_s']:g} s")
        return {"steps": steps, "first_seconds": r["first_ms"] / 1e3,
                "steady_seconds": r["min_ms"] / 1e3, "value": [r["lnz_per_site"], r["grad"]]}

    def measure(n):
        w = tenferro.whole.trusted(n, beta, chi, keep=True, timeout=cap_seconds)
        if not w["returned"]:
            return {"steps": n, "seconds": w["seconds"], "killed": True}
        return {"steps": n, "seconds": w["transform_ms"] / 1e3, "killed": False,
                "value": [w["lnz_per_site"], w["grad"]]}

    def whole_row():
        sweep = capped_sweep.trusted(measure, range(1, steps + 1), cap_seconds)
        done = [r for r in sweep.rows if not r["killed"] and r["seconds"] <= cap_seconds]
        last = done[-1] if done else {"steps": 0, "seconds": None, "value": None}
        return {"steps": last["steps"], "transform_seconds": last["seconds"], "value": last["value"],
                "stopped_at": sweep.stopped_at, "killed": sweep.rows[-1]["killed"],
                "cap_seconds": cap_seconds}

    rows = {}
    for name, row in zip(TENFERRO_ROWS, (staged_row, whole_row)):
        try:
            rows[name] = dict(available=True, **row())
        except (tenferro.TenferroError, InputError) as e:
            rows[name] = {"available": False, "reason": (str(e).strip().splitlines() or [repr(e)])[0]}
    return rows
