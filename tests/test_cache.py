"""trgad.cache: where the persistent compilation cache lives, and that a second process reuses it."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trgad import cache

CHILD = """
import json, jax
hits = []
jax.monitoring.register_event_listener(lambda e, **kw: hits.append(e) if e.endswith("cache_hits") else None)
import trgad, jax.numpy as jnp
from trgad import trg, cache
f = jax.jit(jax.value_and_grad(lambda b: trg.lnz_per_site(b, [2, 4])))
v, g = f(0.3)
print(json.dumps({"dir": str(cache.directory()), "hits": len(hits), "u": -float(g)}))
"""


def _child(env):
    r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_folder_from_the_environment(tmp_path):
    assert cache.root({"TRGAD_CACHE_DIR": str(tmp_path)}) == tmp_path
    assert cache.root({"TRGAD_CACHE_DIR": ""}) is None and cache.directory({"TRGAD_CACHE_DIR": " "}) is None
    assert cache.root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "trgad"
    assert cache.root({}) == Path.home() / ".cache" / "trgad"
    assert cache.directory({"TRGAD_CACHE_DIR": str(tmp_path)}) == tmp_path / cache.key()


def test_key_names_the_compiler_and_the_source():
    import jax
    k = cache.key()
    assert k.startswith(f"jax-{jax.__version__}-jaxlib-") and len(k.rsplit("-", 1)[1]) == 16


def test_a_second_process_loads_what_the_first_compiled(tmp_path):
    env = dict(os.environ, TRGAD_CACHE_DIR=str(tmp_path))
    first = _child(env)
    files = set(os.listdir(first["dir"]))
    assert first["hits"] == 0 and files, "the first process writes its programs"
    second = _child(env)
    assert second["hits"] >= 1 and second["u"] == first["u"]
    assert set(os.listdir(second["dir"])) == files, "nothing new compiled"


@pytest.mark.slow      # a second interpreter; test_a_second_process_loads_what_the_first_compiled stays quick
def test_empty_setting_turns_it_off(tmp_path):
    env = dict(os.environ, TRGAD_CACHE_DIR="", XDG_CACHE_HOME=str(tmp_path))
    out = _child(env)
    assert out["dir"] == "None" and not (tmp_path / "trgad").exists()
