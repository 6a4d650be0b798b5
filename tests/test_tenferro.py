"""tenferro-rs 0.8.0 itself, through the book's harness (tenferro-harness/, trgad.harness.tenferro):
its gradients against JAX's, its gradient program linear in the steps, its transform
exponential, the capped run killed with nothing left running, the staged VJPs equal to the
whole graph (the programs run directly: test_tenferro_program.py).

The harness is built by README's install; without it these tests fail (in CI) or skip."""
import os
import time
from pathlib import Path

import jax
import pytest

import trgad  # noqa: F401
from trgad.harness import tenferro
from trgad.physics import trg
from trgad.runtime.validate import InputError

from conftest import assert_error

if not tenferro.available():
    if os.environ.get("CI"):
        raise RuntimeError("trgad-tenferro is not installed: pip install -r requirements.txt builds it")
    pytest.skip("trgad-tenferro is not installed (pip install -r requirements.txt)", allow_module_level=True)

BETA, CHI = 0.3, 16
SCHEDULE = trg.truncation_schedule(CHI, 5, BETA)


@pytest.fixture(scope="module")
def whole_runs():
    """tenferro-rs's whole-graph ad.grad at 1 to 4 steps (4 takes seconds: transform and drop)."""
    return {n: tenferro.whole(n, BETA, CHI) for n in (1, 2, 3, 4)}


def jax_grad(n):
    return float(jax.jit(jax.grad(lambda b: trg.lnz_per_site(b, SCHEDULE[:n])))(BETA))


def test_gradients_equal_jax(whole_runs):
    for n, out in whole_runs.items():
        assert out["returned"] and out["steps"] == n and out["schedule"] == SCHEDULE[:n]
        assert out["grad"] == pytest.approx(jax_grad(n), abs=1e-12), n
        assert out["lnz_per_site"] == pytest.approx(float(trg.lnz_per_site(BETA, SCHEDULE[:n])), abs=1e-12)


def test_gradient_program_is_linear_and_transform_exponential(whole_runs):
    ops = [whole_runs[n]["grad_ops"] for n in (1, 2, 3, 4)]
    steps_added = [b - a for a, b in zip(ops, ops[1:])]
    assert max(steps_added) < 1.25 * min(steps_added), ops       # about the same per step
    ms = {n: whole_runs[n]["transform_ms"] for n in whole_runs}
    assert ms[4] / ms[3] > 4, ms                                   # the report: x24 from 3 to 4
    assert whole_runs[4]["run_ms"] < whole_runs[4]["transform_ms"] / 10
    assert whole_runs[4]["drop_ms"] > ms[4] / 4                   # the drop: the same order


def test_capped_run_is_killed_with_nothing_left():
    cap, beta = 3.0, 0.30000000123      # a beta of its own: other workers run the same schedule
    t0 = time.perf_counter()
    out = tenferro.whole(5, beta, CHI, timeout=cap)
    assert time.perf_counter() - t0 < cap + 5
    assert out["returned"] is False and out["timeout_s"] == cap
    assert cap <= out["seconds"] < cap + 1
    assert 0 < out["transform_started_ms"] < 1e3 * cap      # killed inside ad.grad
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit()
            and f"--beta {beta!r}" in _cmdline(p)]
    assert left == []


def _cmdline(proc):
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_chain_base_two():
    runs = {d: min((tenferro.chain(d, 2, 2.0) for _ in range(3)), key=lambda r: r["transform_ms"])
            for d in (16, 18, 20)}                       # the fastest of three: timings are noisy
    for d, out in runs.items():
        assert out["grad"] == 2.0 ** d and out["returned"]
    base = (runs[20]["transform_ms"] / runs[16]["transform_ms"]) ** (1 / 4)
    assert base == pytest.approx(2.0, rel=0.2), runs
    assert runs[20]["grad_ops"] - runs[18]["grad_ops"] == runs[18]["grad_ops"] - runs[16]["grad_ops"]


def test_chain_fanout_three_gradient():
    out = tenferro.chain(5, 3, 1.8)
    y, g = 1.8, 1.0
    for _ in range(5):
        g, y = g * y * y, y ** 3 / 3
    assert out["grad"] == pytest.approx(g, rel=1e-12)


def test_staged_equals_whole(whole_runs):
    out = tenferro.staged(4, BETA, CHI, repeats=1)
    assert out["u"] == pytest.approx(-whole_runs[4]["grad"], abs=1e-12)
    assert out["lnz_per_site"] == pytest.approx(whole_runs[4]["lnz_per_site"], abs=1e-12)
    assert out["first_ms"] > 0 and out["min_ms"] > 0


@pytest.mark.parametrize("beta", [1e-10, 350.0])
def test_the_ends_of_the_book_beta_range_equal_jax(beta):
    # the harness takes trgad's range (trgad.runtime.validate), and computes it as JAX does
    from trgad.physics import staged

    ks = trg.truncation_schedule(4, 3, beta)
    out = tenferro.staged(3, beta, 4, repeats=1)
    lnz, dlnz = staged.value_and_grad_jax(beta, ks)
    assert out["lnz_per_site"] == pytest.approx(float(lnz), rel=1e-12)
    assert out["u"] == pytest.approx(-float(dlnz), rel=1e-9, abs=1e-22)


@pytest.mark.slow
def test_staged_twenty_steps_equals_jax():
    from trgad.physics import modes

    schedule = trg.truncation_schedule(CHI, 20, BETA)
    out = tenferro.staged(20, BETA, CHI, repeats=1)
    ref = modes.value_and_derivatives(BETA, schedule, "whole")
    assert out["u"] == pytest.approx(ref["u"], abs=1e-12)
    assert out["lnz_per_site"] == pytest.approx(ref["lnz_per_site"], abs=1e-12)


@pytest.mark.slow
def test_eager_backward_equals_traced():
    out = tenferro.whole(3, BETA, CHI, eager=True)
    assert out["grad"] == pytest.approx(jax_grad(3), abs=1e-12)
    assert out["backward_ms"] > 0


@pytest.mark.parametrize("call", [lambda: tenferro.whole(0), lambda: tenferro.whole(2, beta=-0.3),
                                  lambda: tenferro.whole(2, chi=1), lambda: tenferro.chain(65),
                                  lambda: tenferro.chain(3, 9), lambda: tenferro.whole(2, timeout=0),
                                  lambda: tenferro.staged(2, repeats=0)])
def test_bad_input_refused_before_a_child_starts(call):
    with pytest.raises(InputError):
        call()


@pytest.mark.parametrize("args,needle", [(["whole", "--steps", "0"], "steps"),
                                         (["whole", "--steps", "2", "--beta", "0"], "beta"),
                                         (["chain", "--depth", "x"], "depth"),
                                         (["staged", "--timeout", "-1"], "timeout")])
def test_cli_refuses_bad_arguments_in_one_line(cli, args, needle):
    assert_error(cli("tenferro", *args), 2, needle)


def test_cli_timeout_exit_three(cli):
    r = cli("tenferro", "whole", "--steps", "5", "--timeout", "1", "--json")
    assert r.returncode == 3 and '"returned": false' in r.stdout
    assert "did not return within 1 s" in r.stderr


def test_cli_non_finite_gradient_exits_four(cli):
    r = cli("tenferro", "chain", "--depth", "12", "--x0", "3")     # 3**(2**12) overflows
    assert r.returncode == 4 and "grad is not a finite number" in r.stderr
