"""Timing helpers: caps stop sweeps, hard timeouts kill and report."""
import time

import pytest

from trgad import InputError, timing


def test_time_call_counts_repeats():
    calls = []
    t = timing.time_call(lambda: calls.append(1) or len(calls), warmup=2, repeats=3)
    assert len(calls) == 5 and len(t.times) == 3 and t.value == 5
    assert t.min <= t.median


def test_capped_sweep_stops_after_first_measurement_over_cap():
    seen = []

    def measure(n):
        seen.append(n)
        return {"n": n, "seconds": 0.01 * 2 ** n}

    sweep = timing.capped_sweep(measure, range(1, 30), cap_seconds=0.1)
    assert seen == [1, 2, 3, 4]           # 0.16 s at n = 4 passes the cap
    assert sweep.stopped_at == 4 and not sweep.completed
    full = timing.capped_sweep(measure, range(1, 3), cap_seconds=10)
    assert full.completed and len(full.rows) == 2


def test_run_with_timeout_returns_value():
    res = timing.run_with_timeout("trgad.exact:torus_exact", {"beta": 0.3, "steps": 1}, timeout=60)
    assert res.returned and res.value["sites"] == 2
    assert "returned" in res.message


def test_run_with_timeout_kills_and_reports():
    t0 = time.perf_counter()
    res = timing.run_with_timeout("time:sleep", args=[30], timeout=2)
    elapsed = time.perf_counter() - t0
    assert not res.returned and res.value is None
    assert elapsed < 10
    assert res.message == "did not return within 2 s (killed)"


def test_run_with_timeout_reports_failure():
    res = timing.run_with_timeout("trgad.exact:torus_exact", {"beta": -1, "steps": 1}, timeout=60)
    assert not res.returned and "beta=-1" in res.error


def test_bad_caps():
    with pytest.raises(InputError, match="cap_seconds"):
        timing.capped_sweep(lambda n: {"seconds": 0}, [1], cap_seconds=0)
    with pytest.raises(InputError, match="repeats"):
        timing.time_call(lambda: 1, repeats=0)
