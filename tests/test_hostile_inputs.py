"""Hostile inputs, second round: timeouts that hold, every value of a documented range,
non-finite and extreme matrices, verdicts within their detection limit, what users type.

Oracles: exact enumeration of the small tori,
the closed forms of the probe's rule, characteristic polynomials of path matrices, JAX
against the keyed engine, and the processes the operating system lists.
"""
import json
import math
import os
import textwrap
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trgad import cli as trgad_cli
from trgad.keyed import chain, keyed_trg
from trgad.physics import exact, ising, modes, staged, svd, trg, heat, svdrules
from trgad.growth import probe, userstep, verdict
from trgad.runtime import timing, validate
from trgad.keyed import engine as keyed
from trgad.runtime.validate import BETA_MIN, InputError


def one_error_line(capsys, status_expected, status, needle):
    """cli.main's status, nothing on stdout, one stderr line holding ``needle``."""
    out = capsys.readouterr()
    assert status == status_expected, out.err
    assert out.out == ""
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and lines[0].startswith("trgad: error:"), out.err
    return lines[0]


def alive(pid):
    """Whether process ``pid`` exists and is not a zombie (Linux /proc, else a signal 0)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


# ---------------------------------------------------------------------------------------
# 1. A timeout holds whatever the child does
# ---------------------------------------------------------------------------------------

CHILD_STEPS = textwrap.dedent("""\
    import json, os, subprocess, sys, time

    def _spawn(what, pidfile):
        p = subprocess.Popen(["sleep", what])
        with open(pidfile, "w") as f:
            f.write(str(p.pid))

    def loop_with_grandchild(what, pidfile):
        _spawn(what, pidfile)
        while True:
            pass

    def return_with_grandchild(what, pidfile):
        _spawn(what, pidfile)
        return 1.5

    def imitate(x):
        print('\\n@@RESULT@@{"fake": true}')
        print(json.dumps({"value": "fake"}))
        sys.stderr.write('{"value": "fake"}\\n')
        return x * 2

    def exits(code):
        sys.exit(code)

    def interrupts():
        raise KeyboardInterrupt

    def hard_exit():
        os._exit(0)

    def grandchild(x):
        _spawn("infinity", os.environ["TRGAD_TEST_PIDFILE"])
        while True:
            pass

    def shift(s):
        return tuple(s[1:]) + (s[0] + s[1],)

    def exit0(x):
        sys.exit(0)

    def exit_on_engine_values(x):
        if not isinstance(x, float):
            raise SystemExit(3)
        return x * 0.5

    def liar(x):
        print('\\n@@RESULT@@{"verdict": "polynomial"}')
        print('{"value": {"verdict": "polynomial"}}')
        return x * x
    """)


@pytest.fixture
def child_steps(tmp_path, monkeypatch):
    """A module ``hostile_steps`` importable here and in child processes (sys.path is passed on)."""
    (tmp_path / "hostile_steps.py").write_text(CHILD_STEPS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("what", ["25", "infinity"])
def test_timeout_ends_the_child_and_its_grandchildren(child_steps, what):
    pidfile = child_steps / f"pid-{what}"
    t0 = time.perf_counter()
    res = timing.run_with_timeout("hostile_steps:loop_with_grandchild", args=[what, str(pidfile)], timeout=5)
    elapsed = time.perf_counter() - t0
    assert not res.returned and res.message == "did not return within 5 s (killed)"
    assert elapsed < 5 + 1.5            # reading the output never waits for the grandchild
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 2      # init reaps the orphan; give it a moment
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def test_a_child_that_returns_leaves_nothing_running(child_steps):
    pidfile = child_steps / "pid-return"
    res = timing.run_with_timeout("hostile_steps:return_with_grandchild", args=["infinity", str(pidfile)],
                                  timeout=30)
    assert res.returned and res.value == 1.5
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 2
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def test_the_result_channel_cannot_be_imitated_by_prints(child_steps):
    res = timing.run_with_timeout("hostile_steps:imitate", args=[21], timeout=30)
    assert res.returned and res.value == 42


@pytest.mark.parametrize("target,args,error", [
    ("hostile_steps:exits", [0], "SystemExit: 0"),
    ("hostile_steps:exits", [3], "SystemExit: 3"),
    ("hostile_steps:interrupts", [], "KeyboardInterrupt"),
    ("hostile_steps:hard_exit", [], "the child exited with status 0 without a result"),
])
def test_a_child_that_exits_or_interrupts_itself_is_a_one_line_failure(child_steps, target, args, error):
    res = timing.run_with_timeout(target, args=args, timeout=30)
    assert not res.returned and res.input_error is None and res.error == error


@pytest.mark.slow
def test_cli_probe_timeout_with_a_grandchild_holding_the_pipes(cli_process, child_steps):
    # the case with `sleep infinity`: the command used never to return.  The timeout
    # leaves the child time to import JAX and start the grandchild on a loaded machine.
    pidfile = child_steps / "pid-cli"
    env_before = os.environ.get("TRGAD_TEST_PIDFILE")
    os.environ["TRGAD_TEST_PIDFILE"] = str(pidfile)
    try:
        r = cli_process("probe", "--graph", "hostile_steps:grandchild", "--x0", "1", "--timeout", "15",
                        "--budget", "1", timeout=120, cwd=child_steps)
    finally:
        if env_before is None:
            del os.environ["TRGAD_TEST_PIDFILE"]
        else:
            os.environ["TRGAD_TEST_PIDFILE"] = env_before
    cli_process.assert_error(r, 3, "did not return within 15 s")
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 2
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


# ---------------------------------------------------------------------------------------
# 2. Every value inside a documented range gives a finite, right answer
# ---------------------------------------------------------------------------------------

def every_path(beta, schedule):
    """(lnZ/N, d lnZ/N / d beta, c or None) by every method and engine, by name."""
    out = {}
    for method in modes.METHODS:
        r = modes.value_and_derivatives(beta, schedule, method, order=2)
        out[method] = (r["lnz_per_site"], -r["u"], r["c"])
    out["staged fd"] = (*staged.value_and_grad_jax(beta, schedule), heat.specific_heat(beta, schedule))
    kw = keyed_trg.trg_whole(beta, schedule, keys="interned")
    out["keyed whole"] = (kw["lnz_per_site"], -kw["u"], None)
    ks = keyed_trg.value_and_grad_engine(beta, schedule, keys="interned")
    out["keyed staged"] = (ks["lnz_per_site"], ks["dlnz"], None)
    out["jit"] = (float(jax.jit(lambda b: trg.lnz_per_site(b, schedule))(beta)),
                  float(jax.jit(jax.grad(lambda b: trg.lnz_per_site(b, schedule)))(beta)), None)
    return out


# second order by every method and engine: the quick tier at 1 step and the ends of the
# range, the slow tier at 3 steps and inside the range too
INSIDE = [pytest.param(b, marks=pytest.mark.slow) for b in (0.3, 0.44, 1.0, 200.0)]


@pytest.mark.parametrize("beta", [BETA_MIN, validate.BETA_MAX] + INSIDE)
@pytest.mark.parametrize("steps", [1, pytest.param(3, marks=pytest.mark.slow)])
def test_every_path_at_the_ends_of_the_range_equals_exact_enumeration(beta, steps):
    ref = exact.torus_exact(beta, steps)
    schedule = trg.truncation_schedule(16, steps, beta)
    c_ref = beta * beta * ref["d2lnz"]
    for name, (lnz, dlnz, c) in every_path(beta, schedule).items():
        assert lnz == pytest.approx(ref["lnz_per_site"], rel=1e-14), name
        assert abs(dlnz - ref["dlnz"]) < 1e-13 * max(1.0, abs(ref["dlnz"])), name
        if c is not None:
            assert math.isfinite(c), name
            tol = 5e-5 if name == "staged fd" else 1e-11
            assert abs(c - c_ref) <= tol * max(1.0, abs(c_ref)), name


@pytest.mark.parametrize("beta", [0.0, -0.0, -0.3, 1e-310, math.nextafter(BETA_MIN, 0), math.inf, -math.inf,
                                  math.nan, math.nextafter(validate.BETA_MAX, math.inf)])
def test_beta_outside_the_range_is_refused_wherever_it_is_concrete(beta):
    for call in (lambda: trg.truncation_schedule(16, 2, beta), lambda: trg.lnz_per_site(beta, [2, 4]),
                 lambda: trg.lnz_terms(beta, [2, 4]), lambda: modes.value_and_derivatives(beta, [2], "whole"),
                 lambda: heat.specific_heat(beta, [2]), lambda: exact.torus_exact(beta, 2),
                 lambda: trg.lnz_per_site(jnp.asarray(beta), [2, 4])):
        with pytest.raises(InputError, match=r"out of range: beta must be in \[1e-10, 350\]"):
            call()


def test_the_fd_points_stay_in_the_range(monkeypatch):
    seen = []
    real = staged.value_and_grad_jax.trusted

    def record(b, schedule):
        seen.append(b)
        return real(b, schedule)

    monkeypatch.setattr(staged.value_and_grad_jax, "trusted", record)
    for beta in (BETA_MIN, 1.5 * BETA_MIN, 3 * BETA_MIN, validate.BETA_MAX):
        seen.clear()
        c = heat.specific_heat(beta, trg.truncation_schedule(16, 2, beta))
        assert math.isfinite(c) and abs(c) < 1e-15
        assert len(seen) == 2 and all(BETA_MIN <= b <= validate.BETA_MAX for b in seen) and seen[0] > seen[1]


@pytest.mark.slow
def test_cli_trg_at_the_smallest_beta_and_below(capsys):
    b = repr(BETA_MIN)
    for method in ("whole", "forward"):
        assert trgad_cli.main(["trg", "--beta", b, "--steps", "3", "--chi", "4", "--method", method,
                               "--specific-heat", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["lnz_per_site"] == pytest.approx(math.log(2), rel=1e-15)
        assert out["u"] == pytest.approx(-2 * BETA_MIN, rel=1e-6) and abs(out["c"]) < 1e-15
    assert trgad_cli.main(["trg", "--beta", b, "--steps", "3", "--method", "staged", "--specific-heat",
                           "--c-method", "fd", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert abs(out["c"]) < 1e-15 and out["fd_step"] == BETA_MIN / 2
    status = trgad_cli.main(["trg", "--beta", "1e-11", "--steps", "3", "--chi", "4", "--json"])
    one_error_line(capsys, 2, status, "beta='1e-11' is out of range: beta must be in [1e-10, 350]")


@pytest.mark.parametrize("engine", ["jax", "keyed"])
def test_chain_at_the_smallest_normal_x0_and_a_subnormal_one(engine):
    # fan-out 2, one layer: d(x*x/2)/dx = x, which a flushed x0 would give as 0
    r = chain.run(1, 2, engine=engine, keys="interned", x0=4 * BETA_MIN)
    assert r["grad"] == r["analytic_grad"] == 4 * BETA_MIN
    r = chain.run(1, 2, engine=engine, keys="interned", x0=BETA_MIN)
    # JAX flushes the subnormal intermediate x/2 too: an absolute error below BETA_MIN
    assert abs(r["grad"] - BETA_MIN) <= (BETA_MIN if engine == "jax" else 0.0)
    assert chain.run(1, 2, engine=engine, keys="interned", x0=0.0)["grad"] == 0.0
    with pytest.raises(InputError, match=r"x0=1e-310 is out of range: x0 must be 0 or a finite number"):
        chain.run(1, 2, engine=engine, x0=1e-310)


def test_cli_subnormal_x0_is_refused_before_any_child(capsys):
    status = trgad_cli.main(["chain", "--engine", "jax", "--x0", "1e-310"])
    one_error_line(capsys, 2, status, "x0='1e-310' is out of range")
    status = trgad_cli.main(["probe", "--graph", "power", "--x0", "0.5,-1e-310"])
    one_error_line(capsys, 2, status, "x0='-1e-310' is out of range")


def test_repeated_subexpressions_are_differentiated_once_on_the_keyed_engine():
    # the engine deduplicates equal keys (CSE); it used to run the duplicate op's rule again
    # and count the cotangent twice: d(2|x|)/dx came out -4 at x = -0.3
    def f(x, ops_exp, ops_sqrt):
        return abs(x) + abs(x) + ops_exp(x) * ops_sqrt(x * x) + ops_exp(x) * 3.0 + x * x * (x * x)

    for strategy in ("structural", "interned", "memo"):
        x = keyed.leaf(-0.3, strategy)
        y = f(x, keyed.exp, keyed.sqrt)
        ref = float(jax.grad(lambda t: f(t, jnp.exp, jnp.sqrt))(-0.3))
        assert float(keyed.grad(y, x).run()) == pytest.approx(ref, rel=1e-14)
        assert float(keyed.jvp([y], x, 1.0).run()[0]) == pytest.approx(ref, rel=1e-14)


# ---------------------------------------------------------------------------------------
# 3. Non-finite or extreme matrices
# ---------------------------------------------------------------------------------------

def gaussian(m=4, n=4, seed=0):
    return np.random.default_rng(seed).normal(size=(m, n))


@pytest.fixture
def no_lapack(monkeypatch):
    """Every SVD entry point the package uses fails loudly if it is reached."""
    def reached(*args, **kwargs):
        raise AssertionError("LAPACK was handed the matrix")
    monkeypatch.setattr(jnp.linalg, "svd", reached)
    monkeypatch.setattr(np.linalg, "svd", reached)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # the non-finite input this test feeds in on purpose
@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_non_finite_matrices_are_refused_before_any_svd(no_lapack, bad):
    M = gaussian()
    M[1, 2] = bad
    T = ising.initial_tensor(0.3, trg.NUMPY).copy()
    T[0, 1, 0, 1] = bad
    calls = {
        "truncated_svd": lambda: svd.truncated_svd(M, 2),
        "balanced_split": lambda: svd.balanced_split(jnp.asarray(M), 2),
        "svd_tangent (NumPy)": lambda: svdrules.svd_tangent(np, M, np.eye(4)[:, :2], np.ones(2), np.eye(4)[:2], M),
        "engine svd": lambda: keyed.svd(keyed.leaf(M, "interned"), 2),
        "cut_spectra": lambda: trg.cut_spectra(T, 2, chi=4),
        "split_spectra": lambda: trg.split_spectra(T),
        "trg_step (NumPy)": lambda: trg.trg_step(T, 2, trg.NUMPY),
    }
    for name, call in calls.items():
        with pytest.raises(InputError, match=r"has a non-finite entry \(") as err:
            call()
        assert "\n" not in str(err.value), name


def test_under_jit_a_non_finite_matrix_gives_nan_and_never_hangs(tmp_path, monkeypatch):
    # JAX's own SVD of this matrix does not return (run in a child, with a hard timeout)
    (tmp_path / "svd_inf.py").write_text(textwrap.dedent("""\
        import math
        import jax, numpy as np
        from trgad.physics import svd

        def jitted(which):
            M = np.random.default_rng(0).normal(size=(4, 4))
            M[0, 0] = math.inf
            f = {"svd": svd.truncated_svd, "split": svd.balanced_split,
                 "reverse": svd.balanced_split_reverse}[which]
            out = jax.jit(lambda m: f(m, 2))(M)
            g = jax.jit(jax.grad(lambda m: sum(x.sum() for x in f(m, 2))))(M)
            return [bool(np.all(np.isnan(np.asarray(x)))) for x in (*out, g)]
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    for which, n_out in (("svd", 3), ("split", 2), ("reverse", 2)):
        res = timing.run_with_timeout("svd_inf:jitted", args=[which], timeout=120)
        assert res.returned, res.message
        assert res.value == [True] * (n_out + 1)


@pytest.mark.parametrize("scale", [1e200, 1e-200, 1e300, 1e-300, 2.0 ** 1000])
def test_cut_spectra_do_not_depend_on_the_scale_of_t(capfd, scale):
    T0 = ising.initial_tensor(0.3, trg.NUMPY)
    ref = trg.cut_spectra(T0, 4, chi=16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cuts = trg.cut_spectra(T0 * scale, 4, chi=16)
    assert [(c.k, c.rank) for c in cuts] == [(c.k, c.rank) for c in ref]
    for c, r in zip(cuts, ref):
        np.testing.assert_allclose(c.a, r.a, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(c.b, r.b, rtol=1e-12, atol=1e-15)
    assert "DLASCL" not in "".join(capfd.readouterr())        # LAPACK prints this on bad scaling
    with pytest.raises(InputError, match="all zeros"):
        trg.cut_spectra(T0 * 0.0, 2)


def test_complex_and_malformed_matrices_are_refused_in_one_line():
    M = gaussian() + 1j * gaussian(seed=1)
    for call in (lambda: svd.truncated_svd(M, 2), lambda: svd.balanced_split(M, 2),
                 lambda: jax.jit(lambda m: svd.truncated_svd(m, 2))(jnp.asarray(M))):
        with pytest.raises(InputError, match="complex128: the truncated SVD .* real matrices only"):
            call()
    with pytest.raises(InputError, match=r"shape \(4,\)"):
        svd.truncated_svd(gaussian()[0], 2)
    U, s, Vh = svd.truncated_svd(np.diag([3, 2, 1]), 2)            # integers: converted
    assert s.tolist() == [3.0, 2.0]


# ---------------------------------------------------------------------------------------
# 4. A verdict never claims more than the probe could see
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("depths", [list(range(2, 41, 2)), [4, 8, 16, 32, 64, 128], list(range(1, 17)),
                                    [3, 5, 9, 13, 30], [1, 2, 3], [2, 3, 5, 6]])
def test_detection_limit_is_the_smallest_base_the_rule_calls_exponential(depths):
    limit = verdict.detection_limit(depths)
    assert limit > 1
    above, below = limit * (1 + 1e-9), limit / (1 + 1e-9)
    assert verdict.classify(depths, [above ** d for d in depths]).verdict == "exponential"
    assert verdict.classify(depths, [below ** d for d in depths]).verdict == "polynomial"
    assert verdict.classify(depths, [above ** d for d in depths]).detection_limit == limit
    assert math.isnan(verdict.detection_limit(depths[:2]))


def test_detection_limit_of_the_default_depths():
    assert verdict.detection_limit(probe.DEPTHS) == 2 ** (6 / 40)
    assert verdict.depth_to_detect(1.0757660660868364) == 57
    assert verdict.depth_to_detect(1.0) is None


def test_shift_step_is_undetermined_not_polynomial_at_the_default_depths():
    def shift(s):
        return tuple(s[1:]) + (s[0] + s[1],)

    x0 = (1.0,) * 10
    rho = probe.path_growth(shift, x0)
    assert rho ** 10 == pytest.approx(rho + 1, rel=1e-12)      # s_{n+10} = s_n + s_{n+1}
    assert rho == pytest.approx(1.0758, abs=1e-4)
    g = probe.growth(shift, x0, budget=60)
    assert g.depths[-1] == 40 and g.detection_limit == pytest.approx(2 ** (6 / 40))
    assert rho < g.detection_limit
    assert g.verdict == "undetermined" and "path count" in g.rule and str(verdict.depth_to_detect(rho)) in g.rule
    deep = probe.growth(shift, x0, depths=range(4, 161, 4), budget=120)
    assert deep.verdict == "exponential" and deep.detection_limit < rho
    # interned keys do not walk paths: their polynomial verdict stands
    assert probe.growth(shift, x0, keys="interned", budget=60).verdict == "polynomial"


def test_cli_probe_reports_the_limit_and_undetermined(capsys, child_steps):
    x0 = ",".join(["1"] * 10)
    assert trgad_cli.main(["probe", "--graph", "hostile_steps:shift", "--x0", x0, "--budget", "30",
                           "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "undetermined" and out["path_growth"] == pytest.approx(1.0758, abs=1e-4)
    assert out["detection_limit"] == pytest.approx(2 ** (6 / 40))
    assert "only if b > 1.11" in out["detection"]
    assert trgad_cli.main(["probe", "--graph", "hostile_steps:shift", "--x0", x0, "--budget", "30"]) == 0
    text = capsys.readouterr().out
    assert "detection_limit=1.1095" in text and "verdict=undetermined" in text


# ---------------------------------------------------------------------------------------
# 5. The command line reads what users type
# ---------------------------------------------------------------------------------------

def test_negative_option_values_are_values():
    f = trgad_cli.values_may_be_negative
    assert f(["chain", "--x0", "-1e-3"]) == ["chain", "--x0=-1e-3"]
    assert f(["probe", "--x0", "-0.5,0.3", "--json"]) == ["probe", "--x0=-0.5,0.3", "--json"]
    assert f(["trg", "--beta", "-inf", "-h"]) == ["trg", "--beta=-inf", "-h"]
    assert f(["trg", "--beta=-1", "--json"]) == ["trg", "--beta=-1", "--json"]


@pytest.mark.parametrize("argv,needle", [
    (["trg", "--beta", "-1e-3"], "beta='-1e-3' is out of range: beta must be in [1e-10, 350]"),
    (["trg", "--beta", "-inf"], "beta='-inf' is out of range"),
    (["bench", "--beta", "-1e-300"], "beta='-1e-300' is out of range"),
    (["trg", "--chi", "-4"], "chi='-4' is out of range"),
    (["chain", "--depth", "-3"], "depth='-3' is out of range"),
    (["chain", "--x0", "-1e-320"], "x0='-1e-320' is out of range"),
    (["probe", "--graph", "user:f", "--x0", "-0.5,-1e-310"], "x0='-1e-310' is out of range"),
    (["probe", "--budget", "-1e-3"], "budget='-1e-3' is out of range"),
    (["trg", "--json", "-1"], "--json"),
])
def test_negative_numbers_reach_the_range_message(capsys, argv, needle):
    one_error_line(capsys, 2, trgad_cli.main(argv), needle)


def test_cli_chain_takes_a_negative_x0(capsys):
    assert trgad_cli.main(["chain", "--x0", "-1e-3", "--depth", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["grad"] == pytest.approx(chain.analytic_grad(3, 2, -1e-3), rel=1e-12) and out["grad"] < 0


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # the overflow this test feeds in on purpose
def test_probe_non_finite_grads_are_null_with_a_note(capsys):
    assert trgad_cli.main(["probe", "--graph", "newton", "--x0", "0", "--budget", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)        # strict JSON: no NaN in it
    assert out["grads"] and all(g is None for g in out["grads"])
    assert "not a finite number" in out["note"] and out["verdict"] in ("exponential", "undetermined")
    # the same rule as the chain's (README): null and a note, the measurement still stands
    r = chain.run(30, 2, x0=10.0, keys="interned")
    assert r["grad"] is None and "overflows" in r["note"]


def test_a_path_that_is_not_a_python_file(tmp_path):
    (tmp_path / "code.txt").write_text("def step(x):\n    return x\n")
    for spec, needle in (("/etc/passwd:step", "is not a Python file: /etc/passwd"),
                         (f"{tmp_path}:step", "is a directory"),
                         (f"{tmp_path / 'code.txt'}:step", "is not a Python file")):
        with pytest.raises(InputError, match=needle) as err:
            userstep.load_step(spec)
        assert "NoneType" not in str(err.value)


def test_cli_probe_etc_passwd(capsys):
    status = trgad_cli.main(["probe", "--graph", "/etc/passwd:step", "--x0", "1"])
    one_error_line(capsys, 2, status, "graph='/etc/passwd:step' is not a Python file")


@pytest.mark.parametrize("exc", [SystemExit(0), SystemExit(3), KeyboardInterrupt(), GeneratorExit()])
def test_a_step_that_exits_or_interrupts_itself_is_bad_input_naming_it(exc):
    def step(x):
        raise exc
    with pytest.raises(InputError, match=f"graph='mine:step' fails on x0=1.0: {type(exc).__name__}"):
        userstep.check_step(step, 1.0, "mine:step")
    with pytest.raises(InputError, match="step function .*step' failed on the keyed engine's values"):
        probe.growth(step, 1.0)


def test_a_module_that_exits_on_import_is_bad_input(tmp_path):
    (tmp_path / "leaves.py").write_text("import sys\nsys.exit(5)\n")
    with pytest.raises(InputError, match="does not import: SystemExit: 5"):
        userstep.load_step(f"{tmp_path / 'leaves.py'}:step")


@pytest.mark.parametrize("graph,needle", [
    ("hostile_steps:exit0", "graph='hostile_steps:exit0' fails on x0=1.0: SystemExit: 0"),
    ("hostile_steps:exit_on_engine_values", "'exit_on_engine_values' failed on the keyed engine's values"),
])
def test_cli_step_that_calls_sys_exit_is_status_2(capsys, child_steps, graph, needle):
    one_error_line(capsys, 2, trgad_cli.main(["probe", "--graph", graph, "--x0", "1"]), needle)


@pytest.mark.slow      # spends its 20 s budget; quick twin: test_the_result_channel_cannot_be_imitated_by_prints
def test_cli_result_is_the_childs_not_the_users_prints(capsys, child_steps):
    assert trgad_cli.main(["probe", "--graph", "hostile_steps:liar", "--x0", "0.9", "--budget", "20",
                           "--json"]) == 0
    out = capsys.readouterr().out
    assert len(out.strip().splitlines()) == 1
    r = json.loads(out)
    assert r["graph"] == "hostile_steps:liar" and r["verdict"] == "exponential"   # x used twice: base 2
