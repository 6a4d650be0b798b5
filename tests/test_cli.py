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
])
def test_trg_bad_input_is_one_line(args, needle):
    r = run("trg", *args)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr
