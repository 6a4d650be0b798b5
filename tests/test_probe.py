"""The growth probe: the verdict rule on exact cost sequences, verdicts on known graphs (exact
key visits), a slow exponential, the time budget, a user's own step, bad input."""
import json
import math
import random
import textwrap
import time

import jax
import numpy as np
import pytest

import trgad
from trgad.growth import probe, verdict, graphs
from trgad.keyed.chain import analytic_grad
from trgad.physics import exact


def chain(y):
    return (y * y) / 2.0


def swap_square(state):
    """(x, y) -> (y, x*x): x is used twice every other layer, so paths double every two
    layers (base sqrt 2 per layer) and each per-layer ratio stays below 1.5."""
    x, y = state
    return y, x * x


# ---------------------------------------------------------------------------------------
# The verdict rule on exact, synthetic cost sequences
# ---------------------------------------------------------------------------------------

DEPTH_SETS = [list(range(2, 41, 2)), [4, 8, 16, 32, 64, 128], list(range(1, 17)), [3, 5, 9, 13, 30]]
POLYNOMIALS = [lambda d: d, lambda d: 1 + d, lambda d: 1000 + d, lambda d: d * d,
               lambda d: 100 + d**2, lambda d: d**3, lambda d: 5000 + d**3,
               lambda d: 7 + 3 * d + 0.5 * d**2 + 0.01 * d**3]


@pytest.mark.parametrize("depths", DEPTH_SETS)
@pytest.mark.parametrize("poly", range(len(POLYNOMIALS)))
def test_polynomials_up_to_degree_3_are_never_exponential(depths, poly):
    costs = [POLYNOMIALS[poly](d) for d in depths]
    assert verdict.classify(depths, costs).verdict == "polynomial"


def test_higher_degree_polynomial_is_polynomial_once_doubling_settles():
    depths = [2**k for k in range(1, 11)]
    c = verdict.classify(depths, [d**5 for d in depths])
    assert c.verdict == "polynomial" and c.rule == "doubling"
    assert c.doubling["growth"] == pytest.approx([32.0, 32.0])     # m(2d)/m(d) = 2**5


@pytest.mark.parametrize("base", [1.05, 1.2, math.sqrt(2), 1.618, 2.0, 3.0, 6.0])
def test_any_base_above_one_is_found_given_enough_depth(base):
    # the old per-layer threshold (1.5) could never flag 1.05, 1.2 or sqrt 2
    depths = list(range(2, 201, 2))
    c = verdict.classify(depths, [base**d for d in depths])
    assert c.verdict == "exponential" and c.rule == "doubling"
    assert c.base == pytest.approx(base, rel=1e-9)


def test_exponential_behind_a_large_polynomial_is_found_deeper():
    def cost(d):
        return 1e6 * d + 1.1**d
    shallow = list(range(2, 101, 2))
    assert verdict.classify(shallow, [cost(d) for d in shallow]).verdict == "polynomial"
    deep = list(range(2, 401, 2))
    assert verdict.classify(deep, [cost(d) for d in deep]).verdict == "exponential"


def test_noisy_linear_timings_stay_polynomial():
    # each time off by up to 4/3 either way, and the deepest one doubled by a spike: the
    # deepest doubling shows at most 2 * 2 * (4/3)**2 = 7.1 < 2**POLY_DEGREE = 8
    rng = random.Random(11)
    depths = [4, 8, 16, 32, 64, 128]
    for _ in range(500):
        costs = [1e-3 * d * rng.uniform(0.75, 4 / 3) for d in depths]
        costs[-1] *= 2
        assert verdict.classify(depths, costs).verdict == "polynomial"
    worst = [1e-3 * d * f for d, f in zip(depths, [1, 1, 1, 1, 0.75, 2 * 4 / 3])]
    assert verdict.classify(depths, worst).verdict == "polynomial"


def test_short_ranges_use_the_per_layer_ratio():
    # 1, 2, 3 steps (the TRG on structural keys) cannot double twice
    c = verdict.classify([1, 2, 3], [10.0, 200.0, 4000.0])
    assert c.verdict == "exponential" and c.rule == "per-layer ratio"
    assert c.ratios == pytest.approx([20.0, 20.0])
    assert verdict.classify([1, 2, 3], [1.0, 2.0, 3.0]).verdict == "polynomial"   # linear


def test_no_verdict_from_one_ratio_or_bad_costs():
    assert verdict.classify([4, 8], [1.0, 100.0]).verdict == "undetermined"
    assert verdict.classify([4], [1.0]).verdict == "undetermined"
    assert verdict.classify([2, 4, 8], [1.0, 0.0, 3.0]).verdict == "undetermined"
    assert verdict.classify([2, 4, 8], [1.0, math.nan, 3.0]).verdict == "undetermined"


# ---------------------------------------------------------------------------------------
# Verdicts on graphs (keyed engine: exact key visits)
# ---------------------------------------------------------------------------------------

def test_mul_chain_structural_is_exponential_base_2():
    g = probe.growth(chain, 1.1, depths=range(2, 15, 2), engine="keyed", keys="structural", budget=30)
    assert g.verdict == "exponential"
    assert g.base == pytest.approx(2.0, abs=0.05)
    for d, x in zip(g.depths, g.grads):
        assert x == pytest.approx(analytic_grad(d, 2, 1.1), rel=1e-12)


@pytest.mark.slow      # quick twin: test_cli_probe_users_own_step finds the same base sqrt(2)
def test_slow_exponential_base_sqrt2_is_found():
    # the example: 4.2e6 key visits at depth 40 were called "polynomial"
    g = probe.growth(swap_square, (0.9, 0.8), depths=range(2, 41, 2), keys="structural", budget=300)
    assert g.depths[-1] == 40 and g.key_visits[-1] > 4e6
    assert max(g.ratios) < 1.5                  # why a per-layer threshold of 1.5 missed it
    assert g.verdict == "exponential" and g.rule == "doubling"
    assert g.base == pytest.approx(math.sqrt(2), abs=0.01)
    assert probe.growth(swap_square, (0.9, 0.8), keys="interned").verdict == "polynomial"


def test_mul_chain_interned_is_polynomial():
    g = probe.growth(chain, 1.1, depths=range(2, 41, 2), keys="interned", budget=30)
    assert g.verdict == "polynomial" and g.base < 1.2
    assert len(g.depths) == 20


def test_mul_chain_jax_is_polynomial():
    g = probe.growth(chain, 1.1, engine="jax", depths=(4, 8, 16, 32, 64), budget=60)
    assert g.verdict == "polynomial" and g.measure == "transform_cpu_seconds"
    assert g.key_visits == [None] * len(g.depths)


def test_jax_probe_without_execution_counts_equations_only():
    depths = (4, 8, 16)
    g = probe.growth(chain, 1.1, engine="jax", depths=depths, budget=60, execute=False)
    assert g.depths == list(depths) and g.run_seconds == [None] * 3 and g.grads == [None] * 3
    ran = probe.growth(chain, 1.1, engine="jax", depths=depths, budget=60)
    assert g.derivative_ops == ran.derivative_ops          # the same jaxprs, compiled or not
    assert all(t > 0 for t in ran.run_seconds) and ran.grads[0] == pytest.approx(
        jax.grad(lambda x: graphs.chain_step(graphs.chain_step(graphs.chain_step(graphs.chain_step(x)))))(1.1))
    ops = dict(zip(depths, g.derivative_ops))               # equations per layer: one constant
    assert (ops[16] - ops[8]) == 2 * (ops[8] - ops[4])


def test_argument_used_once_is_polynomial():
    g = probe.growth(lambda x: x * 0.5 + 1.0, 0.3, depths=range(2, 31, 2), budget=30)
    assert g.verdict == "polynomial"


def test_argument_used_three_times_is_exponential_base_3():
    g = probe.growth(lambda x: x * x * x / 3.0, 0.9, depths=range(2, 13, 2), budget=60)
    assert g.verdict == "exponential"
    assert g.base == pytest.approx(3.0, abs=0.1)


# the quick tier probes the mul chain; the other built-in graphs (seconds each): slow tier
@pytest.mark.parametrize("name", ["chain"] + [pytest.param(n, marks=pytest.mark.slow) for n in ("power", "newton", "evolve")])
def test_builtin_graphs_structural_exponential_interned_polynomial(name):
    # the book's table (book/detect.md): every loop that reuses a value is exponential with
    # structural keys, every one is polynomial with interned keys
    step, x0, _ = graphs.BUILTINS[name]
    assert probe.growth(step, x0, keys="structural", budget=10).verdict == "exponential"
    assert probe.growth(step, x0, keys="interned", budget=10).verdict == "polynomial"


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
    assert g2.grads[3] == pytest.approx(exact.torus_exact(0.3, 4)["dlnz"], abs=1e-12)


# ---------------------------------------------------------------------------------------
# Path counts per step: the base a structural key walk grows by
# ---------------------------------------------------------------------------------------

# Counted by hand from each step's formula: M[i][j] = uses of input j on the ways to output i.
HAND_COUNTED = {
    "chain": [[2]],                      # y*y
    "newton": [[2]],                     # x and 2/x
    "power": [[3, 3], [3, 3]],           # each component feeds a2 and b2, each used twice
    "evolve": [[2, 1], [1, 1]],          # q2 = q + dt (p - dt q), p2 = p - dt q
}


@pytest.mark.parametrize("name", HAND_COUNTED)
def test_path_matrix_of_the_builtin_steps_is_the_hand_count(name):
    step, x0, _ = graphs.BUILTINS[name]
    assert probe.path_matrix(step, x0) == HAND_COUNTED[name]


def test_path_matrix_of_a_swap_and_a_constant():
    assert probe.path_matrix(swap_square, (0.9, 0.8)) == [[0, 1], [2, 0]]   # eigenvalues +-sqrt 2
    assert probe.path_matrix(lambda x: 3.0, 0.9) == [[0]]


@pytest.mark.parametrize("name", ["power", "evolve"])
def test_path_counts_of_unrolled_steps_are_matrix_powers(name):
    # independent of path_matrix: count the paths on the unrolled graph itself
    from trgad.keyed import engine as keyed
    from trgad.keyed.keys import path_count

    step, x0, _ = graphs.BUILTINS[name]
    M = np.array(probe.path_matrix(step, x0), dtype=object)   # exact integer products
    leaves = [keyed.leaf(v, "structural") for v in x0]
    state, power = tuple(leaves), np.identity(len(x0), dtype=object)
    for n in range(1, 9):
        state = step(state)
        power = power.dot(M)
        assert [[path_count(o.key, leaf.key) for leaf in leaves] for o in state] == power.tolist()


def test_structural_visits_grow_by_the_largest_eigenvalue_of_the_path_matrix():
    step, x0, _ = graphs.BUILTINS["evolve"]
    rho = max(abs(np.linalg.eigvals(np.array(probe.path_matrix(step, x0), dtype=float))))
    assert rho == pytest.approx((3 + 5 ** 0.5) / 2, rel=1e-12)
    g = probe.growth(step, x0, depths=range(6, 13), keys="structural", budget=60)
    assert g.ratios[-1] == pytest.approx(rho, rel=0.01)


def test_path_matrix_bad_input():
    with pytest.raises(trgad.InputError, match="not callable"):
        probe.path_matrix(3, 1.0)
    with pytest.raises(trgad.InputError, match="failed"):
        probe.path_matrix(lambda x: x.nonexistent, 1.0)


def test_split_costs_names_the_trap():
    r = probe.split_costs(chain, 1.1, 18, keys="structural")
    assert r["diagnosis"] == "trap" and r["transform_over_run"] > 10
    r = probe.split_costs(chain, 1.1, 18, keys="interned")
    assert r["diagnosis"] == "ok"


@pytest.mark.parametrize("kwargs", [
    {"step": 3}, {"depths": [4, 2]}, {"depths": []}, {"depths": ["a"]}, {"budget": 0},
    {"budget": 1e9}, {"engine": "torch"}, {"keys": "nope"}, {"x0": "a"}, {"x0": float("nan")},
    {"x0": tuple(range(101))}, {"step": lambda x: 1.0},
    {"step": lambda x: math.sin(x)}, {"step": lambda x: math.sin(x), "engine": "jax"},
    {"step": lambda s: (s[0] * 2.0,), "x0": (1.0, 2.0)}, {"step": lambda x: (x, x)},
])
def test_growth_bad_input(kwargs):
    args = {"step": chain, "x0": 1.1, **kwargs}
    with pytest.raises(trgad.InputError):
        probe.growth(**args)


def test_growth_failure_of_the_step_is_one_line_naming_it():
    def explode(x):
        raise RuntimeError("first line\nsecond line")
    with pytest.raises(trgad.InputError) as err:
        probe.growth(explode, 1.0)
    assert "'test_growth_failure_of_the_step_is_one_line_naming_it.<locals>.explode'" in str(err.value)
    assert "first line" in str(err.value) and "\n" not in str(err.value)


# ---------------------------------------------------------------------------------------
# The command line, on built-in graphs and on the user's own code
# ---------------------------------------------------------------------------------------

def test_cli_probe_json(cli_process):
    # end to end, as a real process (the other command-line checks call cli.main in process)
    r = cli_process("probe", "--graph", "newton", "--keys", "interned", "--budget", "5", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["graph"] == "newton" and out["verdict"] == "polynomial"
    for key in ("depths", "ratios", "base", "rule", "transform_seconds", "run_seconds", "key_visits"):
        assert key in out


@pytest.mark.slow
def test_cli_probe_trg_jax_is_polynomial_on_enough_depths(cli):
    r = cli("probe", "--graph", "trg", "--engine", "jax", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert len(out["depths"]) >= 3 and out["verdict"] == "polynomial"
    assert out["measure"] == "transform_cpu_seconds"


STEP_FILE = """\
def step(state):
    x, y = state
    return y, x * x
"""


def test_cli_probe_users_own_step(cli, tmp_path):
    (tmp_path / "mystep.py").write_text(STEP_FILE)
    r = cli("probe", "--graph", "mystep:step", "--x0", "0.9,0.8", "--budget", "40", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["graph"] == "mystep:step" and out["x0"] == [0.9, 0.8]
    assert out["verdict"] == "exponential" and out["base"] == pytest.approx(math.sqrt(2), abs=0.02)
    r = cli("probe", "--graph", str(tmp_path / "mystep.py") + ":step", "--x0", "0.9,0.8",
            "--keys", "interned", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verdict"] == "polynomial"


USER_FILES = {
    "broken.py": "import no_such_module_here\n",
    "syntax.py": "def step(x) return x\n",
    "steps.py": textwrap.dedent("""\
        import math, time
        def sine(x):
            return math.sin(x)
        def boom(x):
            raise RuntimeError("boom\\nmore")
        def slow(x):
            if not isinstance(x, float):
                time.sleep(60)
            return x * 1.0
        NOT_A_FUNCTION = 3
        """),
}


@pytest.mark.parametrize("args,status,needle", [
    (["--graph", "broken:step", "--x0", "1"], 2, "does not import: ModuleNotFoundError: No module named 'no_such_module_here'"),
    (["--graph", "syntax:step", "--x0", "1"], 2, "does not import: SyntaxError"),
    (["--graph", "nowhere:step", "--x0", "1"], 2, "graph='nowhere:step' does not import"),
    (["--graph", "./nowhere.py:step", "--x0", "1"], 2, "graph='./nowhere.py:step' does not import"),
    (["--graph", "steps:nope", "--x0", "1"], 2, "has no function 'nope'"),
    (["--graph", "steps:NOT_A_FUNCTION", "--x0", "1"], 2, "has no function"),
    (["--graph", "steps:boom", "--x0", "1"], 2, "fails on x0=1.0: RuntimeError: boom"),
    (["--graph", "steps:sine", "--x0", "1"], 2, "keyed engine's values"),
    (["--graph", "steps:sine", "--x0", "1", "--engine", "jax"], 2, "JAX tracers"),
    (["--graph", "steps:sine"], 2, "needs --x0"),
    (["--graph", "steps:sine", "--x0", "1,x"], 2, "x0='1,x'"),
    (["--graph", "steps:sine", "--x0", "inf"], 2, "x0='inf'"),
    (["--graph", "steps:slow", "--x0", "1", "--budget", "1", "--timeout", "3"], 3, "did not return within 3 s"),
])
def test_cli_probe_users_step_errors(cli, tmp_path, args, status, needle):
    for name, text in USER_FILES.items():
        (tmp_path / name).write_text(text)
    cli.assert_error(cli("probe", *args, cwd=tmp_path), status, needle)


@pytest.mark.parametrize("args,needle", [
    (["--graph", "spiral"], "graph='spiral'"),
    (["--engine", "torch"], "engine='torch'"),
    (["--keys", "hashed"], "keys='hashed'"),
    (["--budget", "-1"], "budget='-1'"),
    (["--budget", "soon"], "budget='soon'"),
    (["--budget", "7200"], "budget='7200'"),
    (["--budget", "90"], "budget must be below --timeout (60 s)"),
    (["--timeout", "0"], "timeout='0'"),
    (["--graph", "trg", "--x0", "1"], "--x0 is not used with --graph trg"),
    (["--depth", "3"], "--depth"),
])
def test_cli_probe_bad_input_is_one_line_exit_2(cli, args, needle):
    cli.assert_error(cli("probe", *args), 2, needle)
