"""The benchmark (trgad.bench): five rows with the figures the README reads, the values
they time, growth with steps, tenferro-rs's rows beside JAX's, and the command line."""
import json
import math

import pytest

from trgad import InputError, bench
from trgad.runtime import compiled, timing
from trgad.physics import modes, staged, stepcost, trg
from trgad.harness import rows, tenferro
from trgad.physics import exact


@pytest.fixture(scope="module")
def small():
    return bench.run(chi=4, steps=5, beta=0.3, repeats=1, engine=False, with_tenferro=False)


def test_six_rows(small):
    assert list(small["methods"]) == list(bench.ROWS)
    assert bench.ROWS == bench.PRIMALS + tuple(m for m in bench.ROWS[2:] if m in modes.METHODS)
    assert set(bench.ROWS[2:]) == set(modes.METHODS)
    for name, row in small["methods"].items():
        assert row["first_seconds"] > 0 and row["steady_seconds"] > 0 and row["temp_bytes"] >= 0, name
    st = small["methods"]["staged"]
    # chi = 4, 5 steps, schedule [2, 4, 4, 4, 4]: (D, k) = (2, 2), (2, 4), (4, 4)
    assert small["schedule"] == [2, 4, 4, 4, 4] and st["compiled_programs"] == 3
    assert st["peak_temp_bytes"] <= st["temp_bytes"]
    assert st["residual_bytes"] > 0


def test_every_ratio_names_its_yardstick(small):
    m = small["methods"]
    for name in ("whole", "staged", "checkpoint", "forward_mode"):
        for base in bench.PRIMALS:
            assert small[f"{name}_over_{base}"] == m[name]["steady_seconds"] / m[base]["steady_seconds"]
            assert small[f"{name}_first_over_{base}_first"] == m[name]["first_seconds"] / m[base]["first_seconds"]
        floor = bench.FLOOR_OF[name]
        assert small[f"{name}_over_{floor}"] == m[name]["steady_seconds"] / small["floors"][floor]
    assert small["checkpoint_temp_over_whole_temp"] == m["checkpoint"]["temp_bytes"] / m["whole"]["temp_bytes"]
    # no ratio without its yardstick in its name
    assert not [k for k in small if k.endswith("_over_primal") or k.endswith("_over_floor")]
    assert set(small["targets"]) == set(bench.TARGETS) and set(bench.TARGET_REASONS) == set(bench.TARGETS)
    for key, t in small["targets"].items():
        assert t["met"] == (t["value"] <= t["bound"]) and t["reason"] == bench.TARGET_REASONS[key]
    assert small["all_targets_met"] == all(t["met"] for t in small["targets"].values())
    assert not set(bench.NOT_KEPT) & set(bench.TARGETS)
    for key, t in small["targets_not_kept"].items():
        assert t["value"] == small[key] and t["reason"] == bench.NOT_KEPT[key]


def test_the_floor_is_one_step_in_its_parts(small):
    """The steady state's floors from one full-size step (chi 4: D = k = 4) timed in its
    parts.  XLA's count of the arithmetic around the SVDs is exact: the pullback adds more
    than the step's own (the einsum's reverse alone is twice its forward)."""
    f, fl = small["step_costs"], small["floors"]
    assert (f["D"], f["k"]) == (4, 4)
    assert f["vjp_flops"] > 2 * f["step_flops"] > 0
    rf, pb, step = f["residual_forward_seconds"], f["pullback_seconds"], f["step_seconds"]
    assert f["floor"] == (rf + pb) / step
    assert (f["residual_share"], f["pullback_share"]) == (rf / step - 1, pb / step)
    # the steps of the measured shape: input D and kept k the largest k (D is 2 first)
    counts = [stepcost.steps_of_measured_shape(ks)
              for ks in ((2, 4, 4, 4), (2, 4, 4, 16, 16), (2, 4, 4, 16))]
    assert counts == [2, 1, 0]          # the last: D = 4 where k grows to 16, not measured
    n = fl["steps"]
    assert n == stepcost.steps_of_measured_shape(tuple(small["schedule"])) == 3
    assert fl == bench.floors(f, small["methods"]["scanned_primal"]["steady_seconds"], n,
                              fl["staged_dispatch_seconds"])
    for name in ("pullback", "contraction_pullback", "split_pullback", "jvp", "staged_dispatch"):
        assert 0 < f.get(f"{name}_seconds", fl.get(f"{name}_seconds", 0)) < math.inf, name


def test_floors_add_up_the_parts():
    """The floors by hand: 4 steps of 10 ms forward, 12 ms saving residuals, 3 ms pullback,
    15 ms jvp, in a scanned primal of 50 ms (bookkeeping 10 ms), dispatch 7 ms."""
    costs = {"step_seconds": 0.010, "residual_forward_seconds": 0.012, "pullback_seconds": 0.003,
             "jvp_seconds": 0.015}
    fl = bench.floors(costs, 0.050, 4, 0.007)
    assert fl["bookkeeping_seconds"] == pytest.approx(0.010, abs=1e-15)
    assert fl["reverse_floor"] == pytest.approx(4 * 0.015 + 0.010, abs=1e-15)
    assert fl["staged_floor"] == pytest.approx(4 * 0.015 + 0.017, abs=1e-15)
    assert fl["forward_floor"] == pytest.approx(4 * 0.015 + 0.010, abs=1e-15)


def test_the_step_programs_compute_the_step():
    """Each part of the split floor computes what it is named for: the forward with
    residuals returns the step's output, the pullback from residuals the cotangent of the
    fused forward-and-pullback program, the jvp's primal the step's, the jvp's tangent the
    central difference of the step along T (its tangent)."""
    import jax.numpy as jnp

    ks = (2, 4, 4, 4)
    info, calls = stepcost.step_programs(0.3, ks)
    assert info["tensors"] == stepcost.steps_of_measured_shape(ks) == 2      # one per step timed
    steps, saved, tangents = calls["step"](), calls["residual_forward"](), calls["jvp"]()
    for (T1_step, ln_step), ((T1, ln), _), ((Tp, lnp), (dT, dln)) in zip(steps, saved, tangents):
        assert jnp.allclose(T1, T1_step, rtol=1e-13, atol=1e-15) and abs(ln - ln_step) < 1e-13
        assert jnp.allclose(Tp, T1_step, rtol=1e-13, atol=1e-15)
        assert abs(dln - 1.0) < 1e-12        # ln||T|| along T itself: d ln||(1 + h) T|| / dh = 1
        assert jnp.max(jnp.abs(dT)) < 1e-8   # T_next is built from T / ||T||: blind to scaling T
    # the first step's pullback from residuals: the fused program's cotangent
    assert jnp.allclose(calls["pullback"]()[0][0], calls["vjp"]()[1], rtol=1e-12, atol=1e-14)


@pytest.mark.slow
def test_second_order_rows_and_their_ratios():
    out = bench.run(chi=4, steps=3, beta=0.3, repeats=1, engine=False, names=("scanned_primal",),
                    second_order=True)
    rows = out["second_order"]
    assert list(rows) == list(modes.METHODS)
    cs = [r["c"] for r in rows.values()]
    assert max(cs) - min(cs) < 1e-10 * max(cs)          # every exact method, one c
    firsts = [r["first_seconds"] for r in rows.values()]
    primal = out["methods"]["scanned_primal"]["first_seconds"]
    assert out["second_order_fastest_first_over_scanned_primal_first"] == min(firsts) / primal
    assert out["second_order_slowest_first_over_scanned_primal_first"] == max(firsts) / primal
    assert "floors" not in out and out["targets"] == {}       # no derivative row, no floor


def test_staged_memory_counts_each_program_once(fresh_programs):
    sched = trg.truncation_schedule(4, 8, 0.3)
    staged.value_and_grad_jax(0.3, sched)
    total_8, largest, n = bench.staged_memory()
    staged.value_and_grad_jax(0.3, sched + [4] * 8)        # more steps, no new shape
    assert bench.staged_memory() == (total_8, largest, n)
    assert n == 2 * 3 + 4                                 # 3 shapes x (step, pullback) + init, trace


@pytest.mark.slow
def test_second_order_costs_compiles_each_program_once(monkeypatch, fresh_programs):
    import jax

    sched = [2, 4]                                       # 2 steps: the exact 4-site torus
    compiles = []
    compile_ = jax.stages.Lowered.compile
    monkeypatch.setattr(jax.stages.Lowered, "compile", lambda self, *a, **k: compiles.append(1) or compile_(self, *a, **k))
    alone = 0
    for name in ("staged", "forward_mode"):              # each first call alone, from empty caches
        compiled.clear()
        modes.value_and_derivatives(0.3, sched, name, order=2)
        alone, compiles[:] = alone + len(compiles), []
    assert alone > 2
    out = bench.second_order_costs(0.3, sched, names=("staged", "forward"), repeats=2)
    assert list(out) == ["staged", "forward_mode"]      # the deprecated alias, renamed
    c_exact = 0.3**2 * exact.torus_exact(0.3, 2)["d2lnz"]
    for name, row in out.items():
        assert row["c"] == pytest.approx(c_exact, rel=1e-10), name
    assert len(compiles) == alone                        # first calls only: no recompilation


@pytest.mark.slow
def test_cli_bench_json_has_the_yardsticks_the_split_floor_and_the_verdict(cli):
    r = cli("bench", "--chi", "4", "--steps", "5", "--repeats", "1", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert list(out["methods"]) == list(bench.ROWS)
    assert {"residual_forward_seconds", "pullback_seconds", "step_seconds"} <= set(out["step_costs"])
    assert {"reverse_floor", "staged_floor", "forward_floor"} <= set(out["floors"])
    assert out["all_targets_met"] in (True, False) and set(out["targets"]) == set(bench.TARGETS)
    p = out["many_parameters"]
    assert p["n_params"] == 16 and p["jacfwd"]["passes"] == 1 and p["max_abs_difference"] < 1e-12
    assert "engine_staged_ratio" in out and "targets" in out
    assert list(out["tenferro"]) == list(bench.TENFERRO_ROWS)


def test_summary_names_every_row(small):
    text = bench.summary(small)
    assert all(name in text for name in bench.ROWS) and "target" in text


@pytest.mark.slow
def test_subset_of_methods_runs_only_those():
    out = bench.run(chi=4, steps=4, beta=0.3, repeats=1, engine=False,
                    names=("scanned_primal", "whole", "staged"))
    assert list(out["methods"]) == ["scanned_primal", "whole", "staged"]
    m = out["methods"]
    assert out["staged_over_whole"] == m["staged"]["steady_seconds"] / m["whole"]["steady_seconds"]
    assert out["staged_first_over_whole_first"] == m["staged"]["first_seconds"] / m["whole"]["first_seconds"]
    # ratios of methods that did not run are absent, and so are their targets
    assert "forward_mode_over_scanned_primal" not in out and "checkpoint_temp_over_whole_temp" not in out
    assert "whole_over_unrolled_primal" not in out
    assert out["targets"] == {} and set(out["targets_not_kept"]) == set(bench.NOT_KEPT)
    text = bench.summary(out, targets=False)
    assert "target" not in text and "staged over whole" in text
    assert "target" in bench.summary(out)
    with pytest.raises(InputError):
        bench.run(chi=4, steps=4, repeats=1, engine=False, names=("scanned_primal", "backward"))
    with pytest.raises(InputError):
        bench.methods(0.3, [2, 4], names=())


def test_rows_carry_the_values_they_timed(small):
    """Each row's value is what its program computes: lnZ/N and d(lnZ/N)/d beta against the
    whole graph's jax.value_and_grad and the staged pass, computed here afresh."""
    from trgad.physics import whole

    sched = small["schedule"]
    lnz, dlnz = whole.value_and_grad(0.3, sched)
    m = small["methods"]
    assert m["unrolled_primal"]["value"] == pytest.approx([lnz], rel=1e-13)
    assert m["scanned_primal"]["value"] == pytest.approx([lnz], rel=1e-13)
    assert m["whole"]["value"] == pytest.approx([lnz, dlnz], rel=1e-13)
    for name in ("staged", "checkpoint", "forward_mode"):
        assert m[name]["value"] == pytest.approx([lnz, dlnz], rel=1e-11), name
    assert m["staged"]["value"] == list(staged.value_and_grad_jax(0.3, sched))


def test_fastest_keeps_the_result_of_the_fastest_call(monkeypatch):
    # a fake clock: the timed calls (after one warm-up) take 5, 1 and 3 s
    ticks = iter([0.0, 5.0, 10.0, 11.0, 20.0, 23.0])
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(ticks))
    calls = iter(range(4))
    t = timing.time_call(lambda: next(calls), warmup=1, repeats=3)
    assert (t.min, t.fastest) == (1.0, 2)   # call 0 is the warm-up


def test_engine_rows_come_from_one_call():
    # each step's figures are parts of the call whose total is reported beside them
    sched = trg.truncation_schedule(4, 6, 0.3)
    out = bench.engine_rows(0.3, sched, repeats=2, engine_steps=(3, 6))
    for n in (3, 6):
        assert out[f"engine_step_cost_{n}"] * out[f"engine_full_size_steps_{n}"] <= out[f"engine_staged_{n}"]
        assert out[f"engine_transform_{n}"] <= out[f"engine_staged_{n}"]


@pytest.mark.skipif(not tenferro.available(), reason="trgad-tenferro is not installed")
def test_tenferro_rows_compute_jax_values():
    """tenferro-rs's staged pass and its whole graph give JAX's lnZ/N and derivative."""
    sched = trg.truncation_schedule(4, 3, 0.3)
    out = rows.tenferro_rows(0.3, 4, 3, repeats=1)
    st, wh = out["tenferro_staged"], out["tenferro_whole"]
    assert st["available"] and wh["available"]
    assert st["value"] == pytest.approx(list(staged.value_and_grad_jax(0.3, sched)), abs=1e-12)
    assert 0 < st["steady_seconds"] and 0 < st["first_seconds"]
    # three steps finish far within the cap: the walk ends at the steps asked for
    assert (wh["steps"], wh["stopped_at"], wh["killed"]) == (3, None, False)
    assert wh["value"] == pytest.approx(st["value"], abs=1e-12) and wh["transform_seconds"] > 0


def _fake_harness(monkeypatch, transform_ms, killed_from=None):
    """tenferro's staged and whole runs (the twins the rows call) replaced: the transform at n steps takes
    transform_ms[n - 1]; from ``killed_from`` steps on the run is killed at its timeout."""
    calls = []

    def whole(n, beta, chi, *, keep=False, timeout=60.0):
        calls.append(n)
        if killed_from is not None and n >= killed_from:
            return {"returned": False, "timeout_s": timeout, "seconds": timeout + 0.01}
        return {"returned": True, "transform_ms": transform_ms[n - 1], "lnz_per_site": 1.0, "grad": 2.0}

    def staged_(steps, beta, chi, *, repeats=3, timeout=60.0):
        return {"returned": True, "first_ms": 300.0, "min_ms": 100.0, "lnz_per_site": 1.0, "grad": 2.0}

    monkeypatch.setattr(tenferro.whole, "trusted", whole)
    monkeypatch.setattr(tenferro.staged, "trusted", staged_)
    return calls


def test_tenferro_whole_stops_at_the_first_run_past_its_cap(monkeypatch):
    calls = _fake_harness(monkeypatch, [10.0, 100.0, 1000.0, 3000.0, 20.0])
    wh = rows.tenferro_rows(0.3, 4, 5, cap_seconds=2.0)["tenferro_whole"]
    assert calls == [1, 2, 3, 4]                      # no run past the first over the cap
    assert (wh["steps"], wh["transform_seconds"], wh["stopped_at"], wh["killed"]) == (3, 1.0, 4, False)
    calls = _fake_harness(monkeypatch, [10.0] * 5, killed_from=2)
    wh = rows.tenferro_rows(0.3, 4, 5, cap_seconds=2.0)["tenferro_whole"]
    assert calls == [1, 2] and (wh["steps"], wh["stopped_at"], wh["killed"]) == (1, 2, True)
    _fake_harness(monkeypatch, [10.0] * 5, killed_from=1)
    wh = rows.tenferro_rows(0.3, 4, 5, cap_seconds=2.0)["tenferro_whole"]
    assert (wh["steps"], wh["transform_seconds"], wh["stopped_at"]) == (0, None, 1)
    assert "ad.grad at 0 steps, 1 steps passed" in bench.summary(
        {"chi": 4, "steps": 5, "beta": 0.3, "repeats": 1, "methods": {}, "tenferro": {"tenferro_whole": wh}})


def test_tenferro_ratios_are_quotients_of_one_run(monkeypatch):
    _fake_harness(monkeypatch, [10.0, 100.0, 5000.0])
    out = bench.run(chi=4, steps=3, repeats=1, engine=False, names=("whole", "staged"))
    m, rust = out["methods"], out["tenferro"]
    assert rust["tenferro_staged"]["steady_seconds"] == 0.1 and rust["tenferro_whole"]["steps"] == 2
    for key, (a, fa, b, fb) in bench.TENFERRO_RATIOS.items():
        assert out[key] == rust[a][fa] / m[b][fb], key
        assert key not in out["targets"] and key.replace("_", " ") in bench.summary(out)


def test_without_the_harness_the_rows_say_so(monkeypatch):
    monkeypatch.setenv("TRGAD_TENFERRO_BIN", "/nonexistent/trgad-tenferro")
    out = bench.run(chi=4, steps=3, repeats=1, engine=False, names=("scanned_primal",))
    for name in bench.TENFERRO_ROWS:
        assert out["tenferro"][name] == {"available": False, "reason": out["tenferro"][name]["reason"]}
        assert "TRGAD_TENFERRO_BIN" in out["tenferro"][name]["reason"]
    assert not any(key in out for key in bench.TENFERRO_RATIOS)
    assert "not measured: TRGAD_TENFERRO_BIN" in bench.summary(out)
