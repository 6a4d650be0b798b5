"""What ``import trgad`` changes in a process (the list in the package docstring), and that a
thread count the user names for BLAS wins."""
import json
import os
import subprocess
import sys

import pytest

CHILD = """
import json, jax, threadpoolctl, trgad
blas = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
print(json.dumps({"x64": jax.config.jax_enable_x64, "blas": blas}))
"""
NAMES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _child(**env):
    clean = {k: v for k, v in os.environ.items() if k not in NAMES}
    # on every CPU: OpenBLAS runs no more threads than the CPUs it may use (a test worker has one)
    r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                       env=clean | env, timeout=120,
                       preexec_fn=lambda: os.sched_setaffinity(0, range(os.cpu_count())))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("env, threads", [({}, 1), ({"OPENBLAS_NUM_THREADS": "2"}, 2),
                                          ({"OMP_NUM_THREADS": "2"}, 2)])
def test_float64_always_and_one_blas_thread_unless_the_user_names_a_count(env, threads):
    if os.cpu_count() < 2:
        pytest.skip("one CPU: BLAS runs one thread whatever is asked")
    out = _child(**env)
    assert out["x64"] is True
    assert out["blas"] and set(out["blas"]) == {threads}
