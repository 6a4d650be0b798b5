"""The harness's programs run directly (tenferro-harness/src/args.rs, main.rs) and its
staged crate (tenferro-harness/staged/): help printed, every value checked in the Python
CLI's words, an option given twice or two modes refused, a write failure one line and
exit 5; the crate's own tests under cargo; its staged u equal to JAX's.

The harness is built by README's install; without it these tests fail (in CI) or skip."""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import trgad  # noqa: F401
from trgad.harness import tenferro
from trgad.physics import staged, trg

if not tenferro.available():
    if os.environ.get("CI"):
        raise RuntimeError("trgad-tenferro is not installed: pip install -r requirements.txt builds it")
    pytest.skip("trgad-tenferro is not installed (pip install -r requirements.txt)", allow_module_level=True)

HARNESS = Path(__file__).resolve().parent.parent / "tenferro-harness"


def run(*args, **kwargs):
    return subprocess.run([tenferro.binary(), *args], capture_output=True, text=True, timeout=60, **kwargs)


@pytest.mark.parametrize("args", [["-h"], ["--help"], ["whole", "--help"], ["chain", "-h"],
                                  ["staged", "--schedule", "2", "-h"]])
def test_help_is_printed_with_the_exit_statuses(args):
    r = run(*args)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.startswith("usage: ") and "5 the result could not be" in r.stdout
    assert "src/main.rs" not in r.stdout                  # a file that is not installed


@pytest.mark.parametrize("args,needle", [
    (["chain", "--depth", "3", "--depth", "4"], "argument --depth: given more than once"),
    (["whole", "--schedule", "2", "--keep", "--keep"], "argument --keep: given more than once"),
    (["whole", "--schedule", "2", "--eager", "--keep"], "argument --keep: not allowed with argument --eager"),
    (["whole", "--schedule", "2", "--forward", "--eager"], "not allowed with argument --eager"),
    (["chain", "--depth", "3", "--x0", "1e-400"], "x0='1e-400' is out of range"),
    (["chain", "--depth", "3", "--x0", "1e-310"], "x0='1e-310' is out of range"),
    (["chain", "--depth", "3", "--x0", "-1000001"], "x0='-1000001' is out of range"),
    (["chain", "--depth", "65"], "depth='65' is out of range: depth must be an integer in [1, 64]"),
    (["chain", "--depth", "9" * 5000], "is out of range: depth must be an integer in [1, 64]"),
    (["chain", "--depth", "x" * 100000], "(100000 characters) is not an integer"),
    (["whole", "--schedule", "2", "--beta", "0"], "beta='0' is out of range: beta must be in [1e-10, 350]"),
    (["whole", "--schedule", "2,99"], "step 1 keeps 99"),
    (["chain"], "the following arguments are required: --depth"),
    (["chain", "--depth", "3", "--bogus", "1"], "unrecognized arguments: --bogus"),
    (["chain", "--depth"], "argument --depth: expected one argument"),
    (["nothing"], "argument command: invalid choice: 'nothing'"),
])
def test_program_refuses_in_one_line(args, needle):
    r = run(*args)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and len(lines[0]) < 400, r.stderr


@pytest.mark.parametrize("args,grad", [(["--x0", "0"], 0.0), (["--x0", "-0e5"], 0.0),
                                       (["--x0=-1"], -0.5), (["--x0", "-1"], -0.5)])
def test_zero_and_negative_points_are_taken(args, grad):
    r = run("chain", "--depth", "2", *args)          # y = x**4 / 8: dy/dx = x**3 / 2
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["grad"] == grad


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_full_stdout_is_one_line_and_exit_five():
    with open("/dev/full", "w") as full:
        r = subprocess.run([tenferro.binary(), "chain", "--depth", "2"], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 5, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "the result could not be written to stdout" in lines[0], r.stderr


def test_a_closed_pipe_is_one_line_and_exit_five():
    # (a stdout closed before the start is /dev/null to a Rust program: its runtime opens it)
    # the pipe's reading end is closed before the program starts, so its write fails for sure
    read, write = os.pipe()
    os.close(read)
    try:
        piped = subprocess.run([tenferro.binary(), "chain", "--depth", "2"], stdout=write,
                               stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write)
    assert piped.returncode == 5, piped
    lines = piped.stderr.strip().splitlines()
    assert len(lines) == 1 and "could not be written to stdout" in lines[0], piped.stderr


def test_staged_u_equals_jax_staged_u():
    ks = trg.truncation_schedule(16, 6, 0.3)
    out = tenferro.staged(6, 0.3, 16, repeats=1)
    lnz, dlnz = staged.value_and_grad_jax(0.3, ks)
    assert out["u"] == pytest.approx(-float(dlnz), abs=1e-12)
    assert out["lnz_per_site"] == pytest.approx(float(lnz), abs=1e-12)


def test_forward_mode_equals_reverse():
    fwd, rev = tenferro.whole(2, 0.3, 16, forward=True), tenferro.whole(2, 0.3, 16)
    assert fwd["mode"] == "forward" and fwd["transform_ms"] > 0
    assert fwd["grad"] == pytest.approx(rev["grad"], abs=1e-12)


@pytest.mark.slow
def test_staged_crate_cargo_test():
    """The crate's own tests (staged/tests/toy.rs): a two-tensor state's value and derivative
    against their closed form, the whole graph detected exponential, the staged loop not."""
    cargo = shutil.which("cargo") or os.path.expanduser("~/.cargo/bin/cargo")
    if not os.path.exists(cargo):
        pytest.fail("cargo is not installed (README: rustup)")
    env = dict(os.environ)
    env.setdefault("CARGO_TARGET_DIR", str(HARNESS / "target"))     # where pip's build left the crates
    r = subprocess.run([cargo, "test", "--locked", "--ignore-rust-version", "--release", "--",
                        "--test-threads=1"],                     # two timings never side by side
                       cwd=HARNESS / "staged", env=env, capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    assert "test result: ok. 4 passed; 0 failed" in r.stdout, r.stdout[-3000:]




@pytest.mark.slow
def test_staged_crate_example_trg_gives_jax_u_and_detects_the_whole_graph():
    """staged/examples/trg.rs, the crate's use the ten-minute page shows: the TRG's lnZ/N and
    u by value_and_grad equal to JAX's staged pass, and detect calls ad.grad of the whole
    graph (0.8.0 at 2 to 4 steps) exponential."""
    cargo = shutil.which("cargo") or os.path.expanduser("~/.cargo/bin/cargo")
    if not os.path.exists(cargo):
        pytest.fail("cargo is not installed (README: rustup)")
    env = dict(os.environ)
    env.setdefault("CARGO_TARGET_DIR", str(HARNESS / "target"))
    ks = trg.truncation_schedule(16, 6, 0.3)
    r = subprocess.run([cargo, "run", "--locked", "--ignore-rust-version", "--release", "-q",
                        "--example", "trg", "--", ",".join(map(str, ks))],
                       cwd=HARNESS / "staged", env=env, capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    lnz, u = (float(v) for v in
              re.fullmatch(r"lnZ/N = (\S+), u = (\S+)\nwhole graph: exponential\n", r.stdout).groups())
    jax_lnz, jax_dlnz = staged.value_and_grad_jax(0.3, ks)
    assert lnz == pytest.approx(float(jax_lnz), abs=1e-12)
    assert u == pytest.approx(-float(jax_dlnz), abs=1e-12)
    assert re.search(r"(?m)^exponential: .* at depths \[2, 3, 4\]", r.stderr), r.stderr
