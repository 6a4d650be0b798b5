"""The command line: JSON output and one-line errors for bad input."""
import json
import subprocess
import sys

import pytest


def run(*args):
    return subprocess.run([sys.executable, "-m", "trgad", *args], capture_output=True, text=True, timeout=600)


def test_trg_json_keys_and_values():
    r = run("trg", "--beta", "0.3", "--chi", "16", "--steps", "4", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("beta", "chi", "steps", "schedule", "lnz_per_site", "u", "method", "engine", "seconds"):
        assert key in out
    assert out["schedule"] == [2, 4, 4, 16]
    assert out["method"] == "whole" and out["engine"] == "jax"
    assert out["u"] == pytest.approx(-0.844054073623855, rel=1e-12)


def test_trg_human_summary():
    r = run("trg", "--steps", "2")
    assert r.returncode == 0 and "lnZ/N=" in r.stdout and "u=" in r.stdout


@pytest.mark.parametrize("args,needle", [
    (["--beta", "0"], "beta=0.0"),
    (["--beta", "-1"], "beta=-1.0"),
    (["--beta", "inf"], "beta=inf"),
    (["--beta", "nan"], "beta=nan"),
    (["--beta", "warm"], "beta='warm'"),
    (["--chi", "1"], "chi=1"),
    (["--chi", "2.5"], "chi='2.5'"),
    (["--steps", "0"], "steps=0"),
    (["--steps", "x"], "steps='x'"),
    (["--engine", "torch"], "engine='torch'"),
    (["--method", "magic"], "method='magic'"),
    (["--steps", "65"], "steps=65"),
    (["--timeout", "0"], "timeout=0.0"),
])
def test_trg_bad_input_is_one_line(args, needle):
    r = run("trg", *args)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_keyed_whole_graph_is_capped_by_timeout():
    # 5 steps with structural keys does not return (the book's phenomenon): the command
    # gives up after --timeout, kills its child process, says so and exits 3.
    r = run("trg", "--steps", "5", "--engine", "keyed", "--timeout", "2", "--json")
    assert r.returncode == 3 and r.stdout == ""
    last = r.stderr.strip().splitlines()[-1]
    assert "did not return within 2 s" in last and "--method staged" in last
    assert "Traceback" not in r.stderr


def test_keyed_whole_graph_within_timeout_returns_json():
    r = run("trg", "--steps", "2", "--engine", "keyed", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["keys"] == "structural" and out["u"] == pytest.approx(-1.277612005080206, rel=1e-12)
