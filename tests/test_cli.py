"""The command line: JSON output, extreme beta, one-line errors for bad input, exit statuses.

``cli`` runs ``trgad.cli.main`` in this process (tests/conftest.py); ``cli_process`` runs
``python -m trgad`` as a real process, kept for one end-to-end run of ``trg`` and one of a
bad command line (the other commands' end-to-end runs are in test_chain, test_probe and
test_bench)."""
import json
import math
import sys

import pytest

from trgad import cli as trgad_cli
from trgad.pages import recorded
from trgad.runtime import validate


def strict_json(text):
    """json.loads that refuses NaN and Infinity (which json.dumps writes by default)."""
    def refuse(token):
        raise AssertionError(f"non-finite number {token} in the JSON output")
    return json.loads(text, parse_constant=refuse)


def test_trg_json_keys_and_values(cli_process):
    r = cli_process("trg", "--beta", "0.3", "--chi", "16", "--steps", "4", "--json")
    assert r.returncode == 0, r.stderr
    out = strict_json(r.stdout)
    for key in ("beta", "chi", "steps", "schedule", "lnz_per_site", "u", "method", "engine", "seconds"):
        assert key in out
    assert out["schedule"] == [2, 4, 4, 16]
    assert out["method"] == "whole" and out["engine"] == "jax"
    assert out["u"] == pytest.approx(-recorded.TENFERRO_WHOLE[4][4], rel=1e-12)


# second order by every method: the quick tier keeps staged
@pytest.mark.parametrize("method", [pytest.param("whole", marks=pytest.mark.slow), "staged", pytest.param("forward_mode", marks=pytest.mark.slow),
                                    pytest.param("checkpoint", marks=pytest.mark.slow), pytest.param("forward", marks=pytest.mark.slow)])
def test_trg_every_method_json_with_exact_specific_heat(cli, method):
    from trgad.physics import exact

    r = cli("trg", "--steps", "3", "--method", method, "--specific-heat", "--json")
    assert r.returncode == 0, r.stderr
    out = strict_json(r.stdout)
    ex = exact.torus_exact(0.3, 3)
    # "forward" is the deprecated alias of forward_mode (accepted for one release)
    assert out["method"] == ("forward_mode" if method == "forward" else method) and out["c_method"] == "exact"
    assert abs(out["u"] + ex["dlnz"]) < 1e-12
    assert abs(out["c"] - 0.09 * ex["d2lnz"]) < 1e-12


def test_trg_human_summary(cli):
    r = cli("trg", "--steps", "2")
    assert r.returncode == 0 and "lnZ/N=" in r.stdout and "u=" in r.stdout


@pytest.mark.slow      # quick twin: test_beta.test_large_beta_two_ground_states[200.0]
def test_trg_beta_200_was_a_linalg_traceback(cli):
    # the 64-site torus at beta = 200: its two ground states, lnZ/N = 2 beta + ln(2)/64, u = -2
    r = cli("trg", "--beta", "200", "--steps", "6", "--json")
    assert r.returncode == 0, r.stderr
    out = strict_json(r.stdout)
    assert out["lnz_per_site"] == pytest.approx(400 + math.log(2) / 64, rel=1e-15)
    assert out["u"] == -2.0


@pytest.mark.parametrize("beta", [pytest.param("1e-10", marks=pytest.mark.slow), "350"])
def test_trg_beta_at_the_ends_of_the_range(cli, beta):
    b = float(beta)
    r = cli("trg", "--beta", beta, "--steps", "5", "--method", "staged", "--specific-heat", "--json")
    assert r.returncode == 0, r.stderr
    out = strict_json(r.stdout)
    if b < 1:   # high temperature: lnZ/N = ln 2 + O(beta^2), u = -2 tanh beta, c ~ 2 beta^2
        assert out["lnz_per_site"] == pytest.approx(math.log(2), rel=1e-15)
        assert out["u"] == pytest.approx(-2 * b, rel=1e-6) and abs(out["c"]) < 1e-15
    else:       # the two ground states: 2 beta + ln(2)/32; u = -2 exactly; c below 1e-300
        assert out["lnz_per_site"] == pytest.approx(2 * b + math.log(2) / 32, rel=1e-15)
        assert out["u"] == -2.0 and abs(out["c"]) < 1e-300


@pytest.mark.parametrize("args,needle", [
    (["--beta", "0"], "beta='0'"),
    (["--beta", "-1"], "beta='-1'"),
    (["--beta", "inf"], "beta='inf'"),
    (["--beta", "nan"], "beta='nan'"),
    (["--beta", "1e308"], "beta must be in [1e-10, 350]"),
    (["--beta", "1e-20"], "beta='1e-20' is out of range: beta must be in [1e-10, 350]"),
    (["--beta", "warm"], "beta='warm'"),
    (["--chi", "1"], "chi='1'"),
    (["--chi", "33"], "chi must be an integer in [2, 32]"),
    (["--chi", "2.5"], "chi='2.5'"),
    (["--steps", "0"], "steps='0'"),
    (["--steps", "x"], "steps='x'"),
    (["--steps", "65"], "steps='65'"),
    (["--engine", "torch"], "engine='torch'"),
    (["--keys", "hashed"], "keys='hashed'"),
    (["--method", "magic"], "method='magic'"),
    (["--timeout", "0"], "timeout='0'"),
    (["--timeout", "1e9"], "timeout must be a finite number in (0, 86400]"),
    (["--c-method", "fd"], "--c-method fd needs --method staged"),
    (["--method", "backward"], "method='backward'"),
    (["--no-such-flag"], "--no-such-flag"),
])
def test_trg_bad_input_is_one_line(cli, args, needle):
    cli.assert_error(cli("trg", *args), 2, needle)


def test_memo_keys_are_accepted(cli):
    # the command line used to drop the engine's third key strategy
    r = cli("trg", "--steps", "2", "--engine", "keyed", "--keys", "memo", "--json")
    assert r.returncode == 0, r.stderr
    assert strict_json(r.stdout)["u"] == pytest.approx(-recorded.TENFERRO_WHOLE[2][4], rel=1e-12)


def test_keyed_whole_graph_is_capped_by_timeout(cli):
    # 5 steps with structural keys does not return (the book's phenomenon): the command
    # gives up after --timeout, kills its child process, says so and exits 3.
    r = cli("trg", "--steps", "5", "--engine", "keyed", "--timeout", "2", "--json")
    assert r.returncode == 3 and r.stdout == ""
    last = r.stderr.strip().splitlines()[-1]
    assert "did not return within 2 s" in last and "--method staged" in last
    assert "Traceback" not in r.stderr


def test_keyed_whole_graph_within_timeout_returns_json(cli):
    r = cli("trg", "--steps", "2", "--engine", "keyed", "--json")
    assert r.returncode == 0, r.stderr
    out = strict_json(r.stdout)
    assert out["keys"] == "structural" and out["u"] == pytest.approx(-recorded.TENFERRO_WHOLE[2][4], rel=1e-12)


@pytest.mark.parametrize("args,needle", [
    (["--repeats", "0"], "repeats='0'"),
    (["--repeats", "101"], "repeats must be an integer in [1, 100]"),
    (["--chi", "64"], "chi='64'"),
    (["--beta", "-0.3"], "beta='-0.3'"),
])
def test_bench_bad_input_is_one_line(cli, args, needle):
    cli.assert_error(cli("bench", *args), 2, needle)


def test_no_command_and_unknown_command(cli, cli_process):
    cli.assert_error(cli_process(), 2, "command")          # a real process's exit status
    cli.assert_error(cli(), 2, "command")
    cli.assert_error(cli("fly"), 2, "fly")


# In-process checks of the exit statuses that good input cannot reach any more.

def test_non_finite_result_exits_4_naming_the_input(monkeypatch, capsys):
    from trgad.physics import modes

    def nan_u(beta, ks, method, order=1, c_method="exact"):
        return {"lnz_per_site": 0.5, "u": math.nan, "c": None, "c_method": None, "fd_step": None,
                "compile_seconds": 0.0}

    monkeypatch.setattr(modes.value_and_derivatives, "trusted", nan_u)
    assert trgad_cli.main(["trg", "--steps", "2", "--beta", "0.25", "--json"]) == 4
    captured = capsys.readouterr()
    assert captured.out == ""
    line, = captured.err.strip().splitlines()
    assert "beta=0.25" in line and "u is not a finite number (nan)" in line


def test_unexpected_exception_is_one_line_exit_1(monkeypatch, capsys):
    from trgad.physics import trg

    def broken(*args, **kwargs):
        raise RuntimeError("something odd\nsecond line")

    monkeypatch.setattr(trg.truncation_schedule, "trusted", broken)
    assert trgad_cli.main(["trg", "--steps", "2"]) == 1
    line, = capsys.readouterr().err.strip().splitlines()
    assert "RuntimeError: something odd" in line and "TRGAD_DEBUG" in line


def test_beta_max_keeps_the_site_tensor_a_normal_float():
    # e^{-2 beta} stays above the smallest normal float64 (XLA on the CPU flushes below it)
    assert math.exp(-2 * validate.BETA_MAX) > sys.float_info.min > math.exp(-2 * 355.0)
    assert validate.check_beta(validate.BETA_MAX) == validate.BETA_MAX


@pytest.mark.parametrize("command", ["trg", "chain", "probe", "bench"])
def test_help_takes_its_ranges_from_validate(command, capsys):
    with pytest.raises(SystemExit):
        trgad_cli.main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--json" in text                               # every command: the shared parent
    if command in ("trg", "bench"):
        assert f"[{validate.BETA_MIN!r}, {validate.format_bound(validate.BETA_MAX)}]" in text
        assert f"[{validate.CHI_MIN}, {validate.CHI_MAX}]" in text and f"[1, {validate.MAX_STEPS}]" in text
    if command != "bench":
        assert f"(0, {validate.format_bound(validate.TIMEOUT_MAX)}]" in text and "structural" in text
    if command == "chain":
        assert f"<= {validate.CHAIN_MAX_OPS}" in text
    if command == "probe":
        assert f"(0, {validate.format_bound(validate.BUDGET_MAX)}]" in text
    if command == "bench":
        assert f"[1, {validate.REPEATS_MAX}]" in text


@pytest.mark.parametrize("command", [["trg"], ["chain"], ["probe"], ["bench"], ["tenferro", "whole"],
                                     ["tenferro", "chain"], ["tenferro", "staged"], ["tenferro", "count"]])
def test_every_help_ends_in_the_exit_statuses(command, capsys):
    """README says each command's --help gives the exit statuses."""
    with pytest.raises(SystemExit):
        trgad_cli.main([*command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert text.endswith(" ".join(trgad_cli.STATUSES.split()))
    assert "2 bad input" in text and "3 timeout" in text and "4 non-finite" in text


def test_format_bound_is_exact():
    assert float(validate.format_bound(validate.BETA_MAX)) == validate.BETA_MAX
    assert validate.format_bound(86400.0) == "86400" and validate.format_bound(0.3) == "0.3"
