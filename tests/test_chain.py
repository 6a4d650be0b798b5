"""The mul chain: library entry point, analytic oracle, and the command line."""
import json
import math

import pytest

import trgad  # noqa: F401
from trgad.keyed import chain
from trgad.pages import recorded
from trgad.runtime.validate import CHAIN_MAX_OPS, InputError

JSON_KEYS = {"depth", "fanout", "engine", "keys", "transform_seconds", "key_visits", "derivative_ops", "grad"}


def product_oracle(depth, fanout, x0):
    """d y_D / d x0 as the product of the per-layer derivatives y_d**(K-1) (plain floats)."""
    y, g = x0, 1.0
    for _ in range(depth):
        g *= y ** (fanout - 1)
        y = y ** fanout / fanout
    return g


@pytest.mark.parametrize("depth,fanout,x0", [(1, 1, 1.1), (5, 1, -2.0), (1, 2, 1.1), (6, 2, 1.9),
                                             (10, 2, 2.0), (5, 3, 1.8), (4, 3, -1.7), (3, 4, 1.5)])
def test_analytic_grad_equals_product_of_layer_derivatives(depth, fanout, x0):
    assert chain.analytic_grad(depth, fanout, x0) == pytest.approx(product_oracle(depth, fanout, x0), rel=1e-12)


def test_analytic_grad_at_the_fixed_point_and_extremes():
    assert chain.analytic_grad(20, 2, 2.0) == pytest.approx(2.0 ** 20, rel=1e-12)   # y = 2 is fixed
    assert chain.analytic_grad(12, 3, math.sqrt(3)) == pytest.approx(3.0 ** 12, rel=1e-10)
    assert chain.analytic_grad(30, 2, 1.1) == 0.0          # underflows: y decays to 0
    assert chain.analytic_grad(30, 2, 2.5) == math.inf     # overflows
    assert chain.analytic_grad(3, 2, 0.0) == 0.0


@pytest.mark.parametrize("engine,keys", [("keyed", "structural"), ("keyed", "interned"),
                                         ("keyed", "memo"), ("jax", "structural")])
@pytest.mark.parametrize("fanout,x0", [(2, 1.9), (3, 1.8)])
def test_run_gradient_and_fields(engine, keys, fanout, x0):
    depth = 8
    out = chain.run(depth, fanout, engine=engine, keys=keys, x0=x0)
    assert JSON_KEYS <= set(out)
    json.dumps(out)
    assert out["grad"] == pytest.approx(product_oracle(depth, fanout, x0), rel=1e-11)
    assert out["analytic_grad"] == pytest.approx(out["grad"], rel=1e-10)
    assert out["derivative_ops"] > 0 and out["transform_seconds"] >= 0
    if engine == "keyed":
        assert out["keys"] == keys and isinstance(out["key_visits"], int) and out["key_visits"] > 0
    else:
        assert out["keys"] is None and out["key_visits"] is None


def test_derivative_program_is_linear_in_depth():
    sizes = [chain.run(d, 2, keys="interned")["derivative_ops"] for d in (5, 6, 7, 8)]
    assert len({b - a for a, b in zip(sizes, sizes[1:])}) == 1


@pytest.mark.parametrize("kwargs", [dict(depth=0, fanout=2), dict(depth=3, fanout=0),
                                    dict(depth=1, fanout=CHAIN_MAX_OPS + 1),
                                    dict(depth=1000, fanout=1000),
                                    dict(depth=3, fanout=2, x0=math.nan),
                                    dict(depth=3, fanout=2, engine="tenferro"),
                                    dict(depth=3, fanout=2, keys="pointer")])
def test_run_rejects_bad_input(kwargs):
    with pytest.raises(InputError):
        chain.run(**kwargs)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # the overflow this test feeds in on purpose
def test_overflowing_derivative_is_null_with_a_note():
    out = chain.run(30, 2, keys="interned", x0=2.5)
    assert out["grad"] is None and out["analytic_grad"] is None and "overflows" in out["note"]
    json.dumps(out, allow_nan=False)
    assert "note" not in chain.run(3, 2, keys="interned", x0=2.5)


@pytest.mark.slow      # the largest chain the caps allow; the smaller chains stay quick
def test_largest_chain_allowed_runs():
    # depth * fanout = CHAIN_MAX_OPS: y = x**K / K, dy/dx = 1 at x = 1 (rounding of 10**5 products)
    out = chain.run(1, CHAIN_MAX_OPS, keys="interned", x0=1.0)
    assert out["analytic_grad"] == 1.0 and out["grad"] == pytest.approx(1.0, rel=1e-11)


def test_cli_chain_json(cli_process):
    # end to end, as a real process (the other command-line checks call cli.main in process)
    r = cli_process("chain", "--depth", "6", "--fanout", "3", "--keys", "interned", "--x0", "1.8", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert JSON_KEYS <= set(out)
    assert out["grad"] == pytest.approx(product_oracle(6, 3, 1.8), rel=1e-11)


@pytest.mark.parametrize("args,needle", [
    (["--depth", "0"], "depth='0'"),
    (["--fanout", "0"], "fanout='0'"),
    (["--depth", "two"], "depth='two'"),
    (["--depth", "1", "--fanout", "100000000"], "fanout='100000000'"),   # used to hang
    (["--depth", "400", "--fanout", "400"], "depth * fanout must be <= 100000"),
    (["--x0", "inf"], "x0='inf'"),
    (["--x0", "nan"], "x0='nan'"),
    (["--timeout", "-5"], "timeout='-5'"),
    (["--engine", "tenferro"], "engine='tenferro'"),
    (["--keys", "pointer"], "keys='pointer'"),
])
def test_cli_chain_bad_input_exits_2_with_one_line(cli, args, needle):
    cli.assert_error(cli("chain", *args), 2, needle)


def test_cli_chain_structural_is_capped_by_timeout(cli):
    # 2**30 key visits would take hours: the child process is killed after --timeout
    r = cli("chain", "--depth", "30", "--timeout", "2", "--json")
    cli.assert_error(r, 3, "did not return within 2 s")
    assert "--keys interned" in r.stderr


def test_cli_chain_memo_keys(cli):
    r = cli("chain", "--depth", "8", "--keys", "memo", "--x0", "1.9", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["keys"] == "memo" and out["grad"] == pytest.approx(product_oracle(8, 2, 1.9), rel=1e-11)


def test_cli_trg_keyed_engine(cli):
    r = cli("trg", "--engine", "keyed", "--keys", "interned", "--steps", "2", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["u"] == pytest.approx(-recorded.TENFERRO_WHOLE[2][4], rel=1e-12)   # = JAX's, see test_engine
    for key in ("transform_seconds", "key_visits", "derivative_ops", "run_seconds"):
        assert key in out
