"""The package's compile options (trgad.runtime.compiled.COMPILER_OPTIONS, setup, jit) and its
ahead-of-time compilation side by side (trgad.runtime.compiled.SideBySide)."""
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

from trgad.runtime import cache, compiled
from trgad.physics import trg, whole


def test_setup_leaves_named_options_to_xla_flags(monkeypatch):
    monkeypatch.setattr(compiled, "COMPILER_OPTIONS",
                        {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 0})
    env = {"XLA_FLAGS": "--xla_backend_optimization_level=3 --xla_dump_to=/tmp/x"}
    assert compiled.setup(env) == {"xla_cpu_use_fusion_emitters": False}
    assert env == {"XLA_FLAGS": "--xla_backend_optimization_level=3 --xla_dump_to=/tmp/x"}


def test_options_drop_what_this_xla_does_not_know(monkeypatch):
    monkeypatch.setattr(compiled, "COMPILER_OPTIONS", {"xla_no_such_option_here": True,
                                                       "xla_backend_optimization_level": 0})
    monkeypatch.setattr(compiled, "XLA_DEFAULTS", {"xla_no_such_option_here": False,
                                                   "xla_backend_optimization_level": 3})
    assert compiled.options() == {"xla_backend_optimization_level": 0}
    assert compiled.defaults() == {"xla_backend_optimization_level": 3}


def test_importing_trgad_runs_a_jitted_gradient_without_touching_xla_flags():
    """The pinned JAX (0.12.0.1) aborted in XLA's flag parser when trgad put an option this
    XLA no longer has into XLA_FLAGS; a user's own XLA_FLAGS stays as it was."""
    env = dict(os.environ, XLA_FLAGS="--xla_backend_optimization_level=1")
    code = ("import os, jax, trgad; from trgad.runtime import compiled; "
            "print(os.environ['XLA_FLAGS']); print(sorted(compiled.options())); "
            "print(float(compiled.jit(jax.grad(lambda x: x * x))(3.0)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    flags, names, grad = out.stdout.split("\n")[:3]
    assert flags == "--xla_backend_optimization_level=1" and grad == "6.0"
    assert "xla_backend_optimization_level" not in names


# order 2 (XLA's defaults compile reverse over reverse slowly) in the slow tier; its quick twin
# is order 1, the same oracle on the first derivative
@pytest.mark.parametrize("order", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_programs_agree_with_xla_defaults_to_rounding(order):
    """Oracle: the same program compiled by jax.jit with XLA's default options."""
    # reverse over reverse of 4 steps costs XLA's defaults ~15 s to compile: 2 steps at order 2
    f = whole.lnz_fn(trg.truncation_schedule(4, 4 if order == 1 else 2, 0.3))
    f = jax.value_and_grad(f) if order == 1 else jax.grad(jax.grad(f))
    ours = [float(x) for x in jax.tree_util.tree_leaves(compiled.jit(f)(0.3))]
    default = jax.jit(f, compiler_options=compiled.defaults())
    ref = [float(x) for x in jax.tree_util.tree_leaves(default(0.3))]
    assert ours == pytest.approx(ref, rel=1e-12, abs=0)


def test_side_by_side_compiles_ahead_and_skips_what_exists():
    program = compiled.Compiled(lambda x: (2.0 * x, jnp.sum(x)))
    with compiled.SideBySide() as ahead:
        out = ahead.submit(program, jax.ShapeDtypeStruct((3,), jnp.float64))
        assert not program.executables          # stored when the block ends
    assert [o.shape for o in out] == [(3,), ()]
    assert len(program.executables) == 1
    y, total = program(jnp.arange(3.0))
    assert total == 3.0 and list(y) == [0.0, 2.0, 4.0] and len(program.executables) == 1
    with compiled.SideBySide() as ahead:
        again = ahead.submit(program, jnp.ones(3))
    assert [o.shape for o in again] == [(3,), ()] and len(program.executables) == 1


def test_side_by_side_stores_nothing_when_its_block_fails():
    program = compiled.Compiled(lambda x: 3.0 * x)
    with pytest.raises(ValueError, match="the block's own error"):
        with compiled.SideBySide() as ahead:
            ahead.submit(program, jax.ShapeDtypeStruct((2,), jnp.float64))
            raise ValueError("the block's own error")
    assert program.executables == {}


def test_pin_to_one_cpu_before_the_back_end_and_refused_after(tmp_path):
    code = ("import os, jax, jax.numpy as jnp\n"
            "from trgad.runtime import compiled\n"
            "cpus = sorted(os.sched_getaffinity(0))\n"
            "cpu = compiled.pin_to_one_cpu(len(cpus) + 1)\n"
            "assert cpu == cpus[(len(cpus) + 1) % len(cpus)] and os.sched_getaffinity(0) == {cpu}\n"
            "print(jax.config.jax_compilation_cache_dir)\n"
            "float(jnp.ones(2).sum())\n"
            "try:\n    compiled.pin_to_one_cpu(0)\nexcept RuntimeError as e:\n    print('refused', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True,
                         env=dict(os.environ, TRGAD_CACHE_DIR=str(tmp_path))).stdout
    folder, out = out.split("\n", 1)
    assert folder == str(tmp_path / cache.key() / "cpus-1"), "the cache follows the CPU count"
    assert out.startswith("refused pin_to_one_cpu: JAX's back end has started")
    with pytest.raises(ValueError, match="slot=-1"):
        compiled.pin_to_one_cpu(-1)
