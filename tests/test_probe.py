"""The growth probe: verdicts on known graphs, its time budget, bad input."""
import json
import subprocess
import sys
import time

import pytest

import trgad
from trgad import probe


def chain(y):
    return (y * y) / 2.0


def test_mul_chain_structural_is_exponential_base_2():
    g = probe.growth(chain, 1.1, depths=range(2, 15, 2), engine="keyed", keys="structural", budget=30)
    assert g.verdict == "exponential"
    assert g.base == pytest.approx(2.0, abs=0.05)
    from trgad.chain import analytic_grad
    for d, x in zip(g.depths, g.grads):
        assert x == pytest.approx(analytic_grad(d, 2, 1.1), rel=1e-12)


def test_mul_chain_interned_is_polynomial():
    g = probe.growth(chain, 1.1, depths=range(2, 41, 2), keys="interned", budget=30)
    assert g.verdict == "polynomial" and g.base < 1.2
    assert len(g.depths) == 20


def test_mul_chain_jax_is_polynomial():
    g = probe.growth(chain, 1.1, engine="jax", depths=(4, 8, 16, 32, 64), budget=60)
    assert g.verdict == "polynomial"
    assert g.key_visits == [None] * len(g.depths)


def test_argument_used_once_is_polynomial():
    g = probe.growth(lambda x: x * 0.5 + 1.0, 0.3, depths=range(2, 31, 2), budget=30)
    assert g.verdict == "polynomial"


def test_argument_used_three_times_is_exponential_base_3():
    g = probe.growth(lambda x: x * x * x / 3.0, 0.9, depths=range(2, 11, 2), budget=30)
    assert g.verdict == "exponential"
    assert g.base == pytest.approx(3.0, abs=0.1)


def test_tuple_state_time_evolution_is_exponential():
    g = probe.growth(probe.evolve_step, (1.0, 0.0), depths=range(2, 11, 2), budget=30)
    assert g.verdict == "exponential" and g.base > 2


def test_budget_holds():
    t0 = time.perf_counter()
    g = probe.growth(chain, 1.1, depths=range(2, 61, 2), keys="structural", budget=1.0)
    wall = time.perf_counter() - t0
    assert g.stopped_early and "budget" in g.stop_reason
    assert wall < 10.0          # generous: one step past the prediction at most
    assert g.depths[-1] < 40


def test_trg_by_steps_structural_exponential():
    g = probe.trg_growth(steps=(1, 2, 3), engine="keyed", keys="structural", budget=60)
    assert g.verdict == "exponential" and g.base > 4
    g2 = probe.trg_growth(steps=(1, 2, 3, 4, 5, 6), engine="keyed", keys="interned", budget=60)
    assert g2.verdict == "polynomial"
    assert g2.grads[3] == pytest.approx(trgad.torus_exact(0.3, 4)["dlnz"], abs=1e-12)


def test_split_costs_names_the_trap():
    r = probe.split_costs(chain, 1.1, 18, keys="structural")
    assert r["diagnosis"] == "trap" and r["transform_over_run"] > 10
    r = probe.split_costs(chain, 1.1, 18, keys="interned")
    assert r["diagnosis"] == "ok"


def test_classify_polynomial_bound_guards_shallow_depths():
    # a linear cost doubles from depth 1 to 2: not exponential
    assert probe.classify([1, 2, 3], [1.0, 2.0, 3.0])[3] == "polynomial"
    assert probe.classify([4, 6, 8], [16.0, 64.0, 256.0])[3] == "exponential"
    assert probe.classify([4], [1.0])[3] == "undetermined"


@pytest.mark.parametrize("kwargs", [
    {"step": 3}, {"depths": [4, 2]}, {"depths": []}, {"threshold": 1.0}, {"budget": 0},
    {"engine": "torch"}, {"keys": "nope"}, {"x0": "a"}, {"x0": float("nan")},
])
def test_growth_bad_input(kwargs):
    args = {"step": chain, "x0": 1.1, **kwargs}
    with pytest.raises(trgad.InputError):
        probe.growth(**args)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "trgad", *args], capture_output=True, text=True, timeout=600)


def test_cli_probe_json():
    r = cli("probe", "--graph", "newton", "--keys", "interned", "--budget", "5", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["graph"] == "newton" and out["verdict"] == "polynomial"
    for key in ("depths", "ratios", "base", "transform_seconds", "run_seconds", "key_visits"):
        assert key in out


@pytest.mark.parametrize("args,needle", [
    (["--graph", "spiral"], "graph='spiral'"),
    (["--engine", "torch"], "engine='torch'"),
    (["--keys", "hashed"], "keys='hashed'"),
    (["--budget", "-1"], "budget=-1.0"),
    (["--budget", "soon"], "budget='soon'"),
    (["--depth", "3"], "--depth"),
])
def test_cli_probe_bad_input_is_one_line_exit_2(args, needle):
    r = cli("probe", *args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr
