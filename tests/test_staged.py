"""Staged differentiation (one VJP per TRG step): values against the whole graph, the keyed
engine (trgad.keyed.keyed_trg), the exact small tori and Onsager; no NaN deep or near beta_c; the
command line."""
import json
import math

import pytest

import trgad
from trgad.keyed import keyed_trg
from trgad.physics import modes, staged, trg, whole, heat
from trgad.pages import recorded
from trgad.physics import exact

BETA = 0.3


# staged20 and whole20: session fixtures (tests/conftest.py), beta = 0.3, chi = 16, 20 steps

@pytest.mark.slow
def test_staged_u_equals_whole_graph_u_at_20_steps(staged20, whole20):
    lnz, dlnz = staged20
    lnz_w, dlnz_w = whole20
    assert abs(dlnz - dlnz_w) < 1e-12
    assert abs(lnz - lnz_w) < 1e-12
    # the source report's recorded figures (tenferro-rs staged and JAX whole graph)
    assert lnz == pytest.approx(recorded.TENFERRO_STAGED["lnz_per_site"], abs=1e-15)
    assert -dlnz == pytest.approx(recorded.TENFERRO_STAGED["u"], abs=1e-13)


def test_few_programs_for_many_steps(schedule20, fresh_programs):
    # chi = 16: (D, k) in {(2, 2), (2, 4), (4, 4), (4, 16), (16, 16)}, all met by step 4
    six = staged.value_and_grad_jax(BETA, schedule20[:6])
    assert staged.compiled_shapes() == [(2, 2), (2, 4), (4, 4), (4, 16), (16, 16)]
    twenty = staged.value_and_grad_jax(BETA, schedule20)
    assert staged.compiled_shapes() == [(2, 2), (2, 4), (4, 4), (4, 16), (16, 16)]
    assert six != twenty and -twenty[1] == pytest.approx(exact.onsager(BETA)["u"], abs=1e-5)


def test_full_size_steps_follow_the_input_bond_dimension(schedule20):
    # chi = 16: inputs of steps 0-3 have D = 2, 2, 4, 4; step 3 keeps 16 but its input is D = 4.
    assert schedule20[:4] == [2, 4, 4, 16]
    assert staged.full_size_steps(schedule20) == list(range(4, 20))
    assert staged.full_size_steps(schedule20[:10]) == list(range(4, 10))
    assert staged.full_size_steps([2]) == [0]


def test_engine_per_step_rows_carry_primal_time():
    r = keyed_trg.value_and_grad_engine(BETA, trg.truncation_schedule(16, 5, BETA))
    steps = [row for row in r["per_step"] if row["stage"].startswith("step")]
    assert len(steps) == 5 and all(row["primal_seconds"] > 0 for row in steps)
    assert sum(row["primal_seconds"] for row in steps) <= r["primal_seconds"]


@pytest.mark.parametrize("steps", [1, 2, 3, 4])
def test_staged_matches_exact_torus(steps):
    ex = exact.torus_exact(BETA, steps)
    lnz, dlnz = staged.value_and_grad_jax(BETA, trg.truncation_schedule(16, steps, BETA))
    assert lnz == pytest.approx(ex["lnz_per_site"], abs=1e-12)
    assert dlnz == pytest.approx(ex["dlnz"], abs=1e-12)


def test_staged_jax_equals_staged_engine():
    sched = trg.truncation_schedule(16, 8, BETA)
    lnz, dlnz = staged.value_and_grad_jax(BETA, sched)
    r = keyed_trg.value_and_grad_engine(BETA, sched, keys="structural")
    assert r["lnz_per_site"] == pytest.approx(lnz, abs=1e-11)
    assert r["dlnz"] == pytest.approx(dlnz, abs=1e-11)
    # every step's transform sees one step only: the same key visits per (16, 16) step
    visits = [row["key_visits"] for row in r["per_step"] if row["stage"].startswith("step")]
    assert len(visits) == 8 and len(set(visits[:4])) == 1


@pytest.mark.slow
def test_specific_heat_close_to_onsager(schedule20):
    c = heat.specific_heat(BETA, schedule20)
    assert abs(c - exact.onsager(BETA)["c"]) < 1e-3
    assert c == pytest.approx(recorded.TENFERRO_STAGED["c"], abs=1e-8)  # the source report's c


@pytest.mark.slow
def test_no_nan_deep_and_near_critical_point():
    lnz, dlnz = staged.value_and_grad_jax(BETA, trg.truncation_schedule(16, 32, BETA))
    assert math.isfinite(lnz) and math.isfinite(dlnz)
    assert -dlnz == pytest.approx(exact.onsager(BETA)["u"], abs=1e-5)
    beta = exact.BETA_C * 0.999
    lnz, dlnz = staged.value_and_grad_jax(beta, trg.truncation_schedule(16, 30, beta))
    assert math.isfinite(lnz) and math.isfinite(dlnz)
    assert -dlnz == pytest.approx(exact.onsager(beta)["u"], abs=1e-2)


def test_bad_input():
    with pytest.raises(trgad.InputError):
        staged.value_and_grad_jax(-0.3, [2])
    with pytest.raises(trgad.InputError):
        staged.value_and_grad_jax(BETA, [])
    with pytest.raises(trgad.InputError):
        heat.specific_heat(BETA, [2], h=1.0)
    with pytest.raises(trgad.InputError):
        keyed_trg.specific_heat(BETA, [2], h=1.0)
    with pytest.raises(trgad.InputError, match=r"schedule=\[2, 0\]"):
        staged.value_and_grad_jax(BETA, [2, 0])
    with pytest.raises(trgad.InputError):
        keyed_trg.value_and_grad_engine(BETA, [2], keys="pointer")


@pytest.mark.parametrize("engine", ["jax", "keyed"])
def test_fd_specific_heat_names_its_step(engine):
    c_exact = BETA**2 * exact.torus_exact(BETA, 3)["d2lnz"]
    if engine == "jax":
        out = modes.value_and_derivatives(BETA, [2, 4, 4], "staged", order=2, c_method="fd")
        assert modes.value_and_derivatives(BETA, [2], "staged")["c"] is None
    else:
        out = keyed_trg.staged_derivatives(BETA, [2, 4, 4], order=2)
        assert keyed_trg.staged_derivatives(BETA, [2])["c"] is None
        assert out["keys"] == "structural" and out["key_visits"] > 0
    assert out["fd_step"] == heat.FD_STEP          # the source report's h at beta = 0.3
    assert out["c_method"] == "fd"
    assert out["c"] == pytest.approx(c_exact, rel=1e-6)
    assert abs(out["u"] + exact.torus_exact(BETA, 3)["dlnz"]) < 1e-12


def test_exact_specific_heat_is_the_default():
    out = modes.value_and_derivatives(BETA, [2, 4, 4], "staged", order=2)
    assert out["c_method"] == "exact" and out["fd_step"] is None
    assert abs(out["c"] - BETA**2 * exact.torus_exact(BETA, 3)["d2lnz"]) < 1e-12
    assert abs(out["u"] + exact.torus_exact(BETA, 3)["dlnz"]) < 1e-12
    assert heat.specific_heat_exact(BETA, [2, 4, 4]) == out["c"]


@pytest.mark.parametrize("steps", [1, 3, 4])
def test_staged_second_derivative_matches_exact_torus(steps):
    ex = exact.torus_exact(BETA, steps)
    lnz, dlnz, d2 = staged.value_grad_hess_jax(BETA, trg.truncation_schedule(16, steps, BETA))
    assert abs(lnz - ex["lnz_per_site"]) < 1e-12 and abs(dlnz - ex["dlnz"]) < 1e-12
    assert d2 == pytest.approx(ex["d2lnz"], rel=1e-12)


def test_second_order_programs_per_shape(fresh_programs):
    staged.value_grad_hess_jax(BETA, [2, 4, 4, 16, 16, 16])
    assert sorted(staged.compiled_second_order_shapes()) == [(2, 2), (2, 4), (4, 4), (4, 16), (16, 16)]
    assert staged.compiled_shapes() == []


@pytest.mark.parametrize("order", [1, 2])
def test_compile_ahead_compiles_what_the_pass_runs(order, fresh_programs):
    # the shapes come from the schedule alone: the pass itself then compiles nothing new
    sched = [2, 4, 4]                     # (D, k) = (2, 2), (2, 4), (4, 4); nothing truncated
    staged.compile_ahead(sched, order)
    before = len(staged.executables())
    assert before == (3 + 2 if order == 2 else 2 * 3 + 4)   # per shape, plus the two ends
    run = staged.value_grad_hess_jax if order == 2 else staged.value_and_grad_jax
    out = run(BETA, sched)
    assert len(staged.executables()) == before
    assert abs(out[1] - exact.torus_exact(BETA, 3)["dlnz"]) < 1e-12


def test_compile_ahead_refuses_a_bad_order():
    with pytest.raises(trgad.InputError, match="order"):
        staged.compile_ahead([2, 4], order=3)


@pytest.mark.parametrize("beta", [1e-10, 1e-6, 350.0])
def test_fd_step_keeps_both_points_positive_and_distinct(beta):
    h = heat.fd_step(beta)
    assert 0 < beta - h < beta < beta + h


def test_cli_staged_specific_heat_json(cli):
    r = cli("trg", "--method", "staged", "--steps", "4", "--specific-heat", "--c-method", "fd", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["method"] == "staged" and out["c_method"] == "fd"
    assert out["u"] == pytest.approx(-exact.torus_exact(BETA, 4)["dlnz"], abs=1e-12)
    assert out["c"] == pytest.approx(BETA**2 * exact.torus_exact(BETA, 4)["d2lnz"], rel=1e-6)


def test_cli_staged_engine_json(cli):
    r = cli("trg", "--method", "staged", "--engine", "keyed", "--steps", "3", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["c"] is None
    assert out["u"] == pytest.approx(-exact.torus_exact(BETA, 3)["dlnz"], abs=1e-12)
    for key in ("transform_seconds", "key_visits", "derivative_ops", "run_seconds"):
        assert key in out


@pytest.mark.parametrize("args,needle", [
    (["--method", "magic"], "method='magic'"),
    (["--method", ""], "method=''"),
    (["--method", "staged", "--keys", "nope"], "keys='nope'"),
    (["--method", "whole", "--c-method", "fd"], "--c-method fd needs --method staged"),
    (["--method", "staged", "--c-method", "taylor"], "c-method='taylor'"),
    (["--method", "forward_mode", "--engine", "keyed"], "method='forward_mode' needs --engine jax"),
    (["--method", "forward", "--engine", "keyed"], "method='forward' needs --engine jax"),
    (["--method", "staged", "--engine", "keyed", "--specific-heat"], "--c-method fd"),
])
def test_cli_bad_method_is_one_line_exit_2(cli, args, needle):
    cli.assert_error(cli("trg", "--steps", "2", *args), 2, needle)


def test_step_programs_are_public_and_shared(fresh_programs):
    # what the staged chapter times: one step's programs and the forward pass's residuals
    sched = [2, 4, 4, 4]
    stages = staged.step_residuals(BETA, sched)
    assert [tuple(T.shape) for T, _ in stages] == [(2,) * 4, (2,) * 4, (4,) * 4, (4,) * 4]
    step, pullback = staged.step_programs(4, 4)
    assert staged.step_programs(4, 4) == (step, pullback)        # built once per (D, k)
    (T_next, ln), res = step(stages[-1][0])
    assert len(res) == len(stages[-1][1]) and all((a == b).all() for a, b in zip(res, stages[-1][1]))
    # the pullback of (Tbar, 1) is the VJP of the step, against jax.vjp of trg_step itself
    import jax
    ct = (jax.numpy.ones_like(T_next), jax.numpy.asarray(1.0))
    _, vjp = jax.vjp(lambda t: trg.trg_step(t, 4, trg.JAX), stages[-1][0])
    assert abs(pullback(res, ct) - vjp(ct)[0]).max() < 1e-12
    # compiled only as called: the init's and 3 shapes' step programs, the (4, 4) pullback
    assert len(staged.executables()) == 1 + 3 + 1
    lnz, _ = staged.value_and_grad_jax(BETA, sched)
    assert lnz == pytest.approx(whole.value_and_grad(BETA, sched)[0], abs=1e-13)
