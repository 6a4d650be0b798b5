"""trgad.runtime.cache: where the persistent compilation cache lives, that a second process reuses it,
and that it never makes a process wrong or stops it (no home, an unwritable or broken cache,
another CPU count, the user's own JAX settings)."""
import json
import os
import pwd
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trgad.runtime import cache

CHILD = """
import json, os, jax
hits = []
jax.monitoring.register_event_listener(lambda e, **kw: hits.append(e) if e.endswith("cache_hits") else None)
import trgad, jax.numpy as jnp
from trgad.physics import trg
from trgad.runtime import cache
f = jax.jit(jax.value_and_grad(lambda b: trg.lnz_per_site(b, [2, 4])))
v, g = f(0.3)
print(json.dumps({"dir": str(cache.directory()), "hits": len(hits), "u": -float(g),
                  "cpus": len(os.sched_getaffinity(0))}))
"""


#: ``python -m trgad --help`` as under a uid without a passwd entry and without HOME (a
#: container's arbitrary uid): Python's ``Path.home()`` then raises "Could not determine home
#: directory".
NO_HOME = """
import os, pwd, runpy, sys
os.environ.pop("HOME", None)
def no_entry(uid):
    raise KeyError(f"getpwuid(): uid not found: {uid}")
pwd.getpwuid = no_entry
sys.argv = ["trgad", "--help"]
runpy.run_module("trgad", run_name="__main__")
"""


def _child(env, prefix=(), cpus=None):
    """Run CHILD (``prefix`` before the command; on ``cpus`` only, where given)."""
    r = subprocess.run([*prefix, sys.executable, "-c", CHILD], capture_output=True, text=True,
                       env=env, timeout=300,
                       preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]) | {"stderr": r.stderr}


def _unprivileged():
    """The command prefix under which a child cannot write into a folder of mode 0o555: none
    for a user; for root, another uid that may still read every file (setpriv)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("root without setpriv: no way to run a child that a folder's mode stops")
    return ["setpriv", "--reuid=54321", "--regid=54321", "--clear-groups",
            "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]


def test_folder_from_the_environment(tmp_path):
    assert cache.root({"TRGAD_CACHE_DIR": str(tmp_path)}) == tmp_path
    assert cache.root({"TRGAD_CACHE_DIR": ""}) is None and cache.directory({"TRGAD_CACHE_DIR": " "}) is None
    assert cache.root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "trgad"
    assert cache.root({}) == Path.home() / ".cache" / "trgad"
    cpus = f"cpus-{len(os.sched_getaffinity(0))}"
    assert cache.directory({"TRGAD_CACHE_DIR": str(tmp_path)}) == tmp_path / cache.key() / cpus


def test_no_home_directory_means_no_cache(monkeypatch):
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: (_ for _ in ()).throw(KeyError(uid)))
    assert cache.root({}) is None and cache.directory({}) is None
    assert cache.root({"XDG_CACHE_HOME": "/x"}) == Path("/x/trgad")


def test_no_home_directory_never_stops_the_package():
    env = {k: v for k, v in os.environ.items() if k not in (cache.ENV, "XDG_CACHE_HOME")}
    r = subprocess.run([sys.executable, "-c", NO_HOME], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("usage:"), r.stderr
    assert r.stderr == ""


def test_an_unwritable_folder_is_left_alone(tmp_path):
    prefix = _unprivileged()
    (tmp_path / cache.key()).mkdir()
    folders = (tmp_path / cache.key(), tmp_path)
    for folder in folders:
        folder.chmod(0o555)
    try:
        out = _child(dict(os.environ, TRGAD_CACHE_DIR=str(tmp_path)), prefix)
    finally:
        for folder in folders:
            folder.chmod(0o755)
    assert out["stderr"] == "" and os.listdir(tmp_path / cache.key()) == []


SETTINGS = """
import jax
{before}
import trgad
c = jax.config
print(c.jax_compilation_cache_dir, c.jax_persistent_cache_min_compile_time_secs,
      c.jax_persistent_cache_min_entry_size_bytes)
"""


@pytest.mark.parametrize("env, before, expected", [
    ({}, "", "{ours} 0.0 0"),
    ({"JAX_COMPILATION_CACHE_DIR": "{own}"}, "", "{own} 1.0 0"),
    ({}, "jax.config.update('jax_compilation_cache_dir', '{own}')", "{own} 1.0 0"),
    ({"JAX_ENABLE_COMPILATION_CACHE": "0"}, "", "None 1.0 0"),
    ({"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "5",
      "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "4096"}, "", "{ours} 5.0 4096"),
    ({}, "jax.config.update('jax_persistent_cache_min_compile_time_secs', 2.5)", "{ours} 2.5 0"),
])
def test_the_users_own_cache_settings_are_kept(tmp_path, env, before, expected):
    ours = tmp_path / "trgad" / cache.key() / f"cpus-{len(os.sched_getaffinity(0))}"
    names = {"own": str(tmp_path / "own"), "ours": str(ours)}
    env = dict(os.environ, TRGAD_CACHE_DIR=str(tmp_path / "trgad"),
               **{k: v.format(**names) for k, v in env.items()})
    r = subprocess.run([sys.executable, "-c", SETTINGS.format(before=before.format(**names))],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == expected.format(**names).split()
    assert (tmp_path / "trgad").exists() == ("{ours}" in expected)


def test_key_names_the_compiler_the_source_and_xla_flags():
    import jax
    k = cache.key({})
    assert k.startswith(f"jax-{jax.__version__}-jaxlib-") and len(k.rsplit("-", 1)[1]) == 16
    assert cache.KEY_NAME.fullmatch(k), "old folders of this package are found by their name"
    flags = "--xla_cpu_use_thunk_runtime=false"
    assert cache.key({"XLA_FLAGS": " "}) == k != cache.key({"XLA_FLAGS": flags})


def test_a_program_compiled_on_one_cpu_is_not_loaded_on_two(tmp_path):
    """XLA's CPU compiler splits loops into as many parts as the compiling process has CPUs
    (test workers and the book's build run on one CPU each, ``python -m trgad`` on all)."""
    env = dict(os.environ, TRGAD_CACHE_DIR=str(tmp_path))
    one = _child(env, cpus={min(os.sched_getaffinity(0))})
    two = _child(env, cpus=range(os.cpu_count()))
    if two["cpus"] < 2:
        pytest.skip("one CPU only")
    assert one["cpus"] == 1 and one["hits"] == 0 and two["hits"] == 0
    assert Path(one["dir"]).name == "cpus-1" and Path(two["dir"]).name == f"cpus-{two['cpus']}"
    assert len(os.listdir(one["dir"])) == len(os.listdir(two["dir"])) == 1, "one program each"


def test_a_second_process_loads_what_the_first_compiled_even_after_a_move(tmp_path):
    first = _child(dict(os.environ, TRGAD_CACHE_DIR=str(tmp_path / "a")))
    files = set(os.listdir(first["dir"]))
    assert first["hits"] == 0 and files, "the first process writes its programs"
    (tmp_path / "a").rename(tmp_path / "b")         # JAX's key holds no path of the cache
    second = _child(dict(os.environ, TRGAD_CACHE_DIR=str(tmp_path / "b")))
    assert second["hits"] >= 1 and second["u"] == first["u"]
    assert set(os.listdir(second["dir"])) == files, "nothing new compiled"


def test_old_key_folders_are_removed_and_nothing_else(tmp_path):
    day, now = 24 * 3600, time.time()
    made = {f"jax-0.1-jaxlib-0.1-{i:016x}": now - age for i, age in
            enumerate([2 * day, 3 * day, 1 * 3600, 4 * day, 5 * day])}
    made |= {"callgrind": now - 9 * day, "cargo-target": now - 9 * day, "jax-0.1-notes": now - 9 * day}
    for name, mtime in made.items():
        (tmp_path / name).mkdir()
        os.utime(tmp_path / name, (mtime, mtime))
    (tmp_path / "jax-0.1-jaxlib-0.1-ffffffffffffffff").write_text("a file of the user's")
    r = subprocess.run([sys.executable, "-c", "import trgad"], capture_output=True, text=True,
                       env=dict(os.environ, TRGAD_CACHE_DIR=str(tmp_path)), timeout=120)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    kept = {cache.key(), "jax-0.1-jaxlib-0.1-0000000000000000",     # this one and the newest
            "jax-0.1-jaxlib-0.1-0000000000000002",                   # used within a day
            "callgrind", "cargo-target", "jax-0.1-notes", "jax-0.1-jaxlib-0.1-ffffffffffffffff"}
    assert set(os.listdir(tmp_path)) == kept


def test_a_broken_entry_costs_a_warning_and_a_compile_never_a_wrong_number(tmp_path):
    """What the cache module's docstring states: JAX warns, compiles again, keeps the file."""
    env = dict(os.environ, TRGAD_CACHE_DIR=str(tmp_path))
    first = _child(env)
    (entry,) = Path(first["dir"]).glob("*-cache")
    whole = entry.read_bytes()
    entry.write_bytes(whole[:len(whole) // 2])      # as left by a full disk or a killed run
    second = _child(env)
    assert "Error reading persistent compilation cache entry" in second["stderr"]
    assert second["hits"] == 0 and second["u"] == first["u"]
    assert entry.read_bytes() == whole[:len(whole) // 2], "JAX keeps the broken file"


@pytest.mark.slow      # a second interpreter; test_a_second_process_loads_... stays quick
def test_empty_setting_turns_it_off(tmp_path):
    env = dict(os.environ, TRGAD_CACHE_DIR="", XDG_CACHE_HOME=str(tmp_path))
    out = _child(env)
    assert out["dir"] == "None" and not (tmp_path / "trgad").exists()
