"""JAX's persistent compilation cache, shared by the book's pages, the tests and the command line.

A compiled program (XLA executable) is written to disk the first time any process compiles
it, and every later process on the machine loads it instead of compiling it again: the
20-step whole graph that one chapter compiles is not compiled again by the next chapter,
the test run or ``python -m trgad``.  Tracing and lowering still happen in every process
(the cache is looked up by the lowered program), except for trgad's own derivative
programs, whose lowered form :mod:`trgad.runtime.exports` keeps in this folder too; every
number is still computed: the cache holds programs, never results.

Where (:func:`directory`): ``$TRGAD_CACHE_DIR`` if set; ``TRGAD_CACHE_DIR=`` (set but empty)
turns the cache off; otherwise ``$XDG_CACHE_HOME/trgad`` (default ``~/.cache/trgad``).  No
place for it - no home directory, a folder that cannot be made or written - means no cache,
never an error: a cache may make a process quicker, never stop it.

Inside it, one folder per key (:func:`key`): the versions of jax and jaxlib and a hash of the
package's source and of ``XLA_FLAGS``, so a changed compiler or package never meets an old
entry; in that, one folder per CPU count (``cpus-N``, :func:`directory`).  Why: JAX's own
key covers the program, the compile options and ``XLA_FLAGS``, not the number of CPUs,
which XLA's CPU compiler builds into the program (it splits loops into that many parts), so
what a process pinned to one CPU (a test worker) compiled must not be loaded by one on two.
The count is read when trgad is imported and again by
:func:`trgad.runtime.compiled.pin_to_one_cpu` (:func:`follow_cpus`), which must run before
JAX's back end starts; a process that changes its CPUs otherwise after importing trgad may
load a program compiled for the old count.

An entry that cannot be loaded (cut short by a full disk or a killed run: JAX writes an
entry in place) is not repaired: JAX warns ("Error reading persistent compilation cache
entry"), compiles the program again and gives the same numbers (``tests/test_cache.py``
measures it), but keeps the broken file, so that program is compiled in every process.
Repairing it would take JAX's private read function; the remedy is removing the folder.

Importing trgad removes old key folders: all but the newest :data:`KEEP`, unless used within
a day (never anything else).  Remove the folder to clear it (``rm -rf ~/.cache/trgad``).
Moved or reached through a symbolic link, it still serves: neither key holds its path.

What importing trgad sets in JAX, and only when the user has not: ``jax_compilation_cache_dir``
(the folder above), ``jax_persistent_cache_min_compile_time_secs`` 0 (every program of the
process is kept, the user's own too: the book's are many and quick to compile).  Where
the user names a cache folder or turns JAX's cache off (``JAX_COMPILATION_CACHE_DIR``,
``JAX_ENABLE_COMPILATION_CACHE``, or ``jax.config.update`` before importing trgad), trgad
changes nothing; a compile-time threshold the user set is kept.

Measurements of a first call, compilation included (the benchmark's ``first_seconds``),
run inside :func:`disabled`, so a warm cache never makes a first call look cheap.
Source: JAX documentation, "Persistent compilation cache".
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import time
from importlib import metadata
from pathlib import Path

import jax
from jax.experimental.compilation_cache import compilation_cache as _jax_cache

#: Environment variable naming the cache folder; set but empty, it turns the cache off.
ENV = "TRGAD_CACHE_DIR"

#: Key folders kept under the top folder: the newest KEEP (this process's among them) and any
#: used in the last KEEP_SECONDS; :func:`setup` removes the others, and only folders whose
#: name is a key (:data:`KEY_NAME`).
KEEP, KEEP_SECONDS = 3, 24 * 3600
KEY_NAME = re.compile(r"jax-[\w.+]+-jaxlib-[\w.+]+-[0-9a-f]{16}")

#: JAX's setting of the compile time below which a program is not kept, and its default
#: (``jax/_src/config.py``): a value other than the default is the user's, and is kept.
_MIN_SECONDS_ENV, _JAX_MIN_SECONDS = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", 1.0


def key(environ=None) -> str:
    """The folder name for this jax, jaxlib, package source and ``XLA_FLAGS`` (``environ``,
    default ``os.environ``): ``jax-X-jaxlib-Y-<hash>``."""
    environ = os.environ if environ is None else environ
    h = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    for path in sorted(package.rglob("*.py")):
        h.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    flags = environ.get("XLA_FLAGS", "").strip()
    if flags:
        h.update(b"XLA_FLAGS\0" + flags.encode())
    return f"jax-{jax.__version__}-jaxlib-{metadata.version('jaxlib')}-{h.hexdigest()[:16]}"


def root(environ=None) -> Path | None:
    """The cache's top folder from the environment (see the module docstring), or None when
    ``TRGAD_CACHE_DIR`` is set but empty (cache off) or the folder is under a home directory
    that cannot be found (a uid without a passwd entry and no ``HOME``: no cache, as in plain
    JAX, rather than a package that cannot be imported)."""
    environ = os.environ if environ is None else environ
    if ENV in environ:
        value = environ[ENV].strip()
        if not value:
            return None
    else:
        value = (environ.get("XDG_CACHE_HOME", "").strip() or "~/.cache") + "/trgad"
    try:
        return Path(value).expanduser()
    except RuntimeError:            # pathlib: "Could not determine home directory."
        return None


def directory(environ=None) -> Path | None:
    """Where this process's compiled programs go: ``root() / key() / "cpus-N"``, N the CPUs
    it may run on now, or None (off)."""
    top = root(environ)
    return None if top is None else top / key(environ) / f"cpus-{_cpus()}"


#: The folder :func:`setup` gave JAX last (None: JAX's cache setting is not trgad's).
_OURS = None


def setup() -> Path | None:
    """Point JAX's persistent compilation cache at :func:`directory` and have it keep every
    program, however quick to compile (``jax_persistent_cache_min_compile_time_secs`` 0,
    unless the user set it); called when ``trgad`` is imported.  Returns the folder, or None
    when JAX's cache is the user's (``JAX_COMPILATION_CACHE_DIR`` or ``jax.config`` names a
    folder, or turns the cache off: nothing is changed), when trgad's is off, or when its
    folder cannot be created or written (then JAX compiles as usual, without a word)."""
    global _OURS
    now = jax.config.jax_compilation_cache_dir
    theirs = now is not None and now != _OURS
    if theirs or not jax.config.jax_enable_compilation_cache:
        return None
    path = directory()
    if path is None or not _writable(path):
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    _OURS = str(path)
    if (_MIN_SECONDS_ENV not in os.environ
            and jax.config.jax_persistent_cache_min_compile_time_secs == _JAX_MIN_SECONDS):
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    _prune(path.parent)
    return path


def follow_cpus() -> Path | None:
    """After this process's CPUs changed (:func:`trgad.runtime.compiled.pin_to_one_cpu`),
    point JAX's cache at the folder of the new count, if the folder in use is trgad's.
    Returns the folder in use, or None (not trgad's)."""
    if _OURS is None or jax.config.jax_compilation_cache_dir != _OURS:
        return None
    path = setup()
    _jax_cache.reset_cache()           # JAX opens its folder once, at the first compile
    return path


def _prune(folder):
    """Mark ``folder`` (this process's key folder) used now, and remove the key folders beside
    it that are older than the newest :data:`KEEP` and unused for :data:`KEEP_SECONDS`.  Why:
    each source version gets a folder and nothing else ever removes one; the day's grace keeps
    the folders of several working copies in use at once from removing each other's."""
    try:
        os.utime(folder)
        others = sorted(((e.stat(follow_symlinks=False).st_mtime, e.path)
                         for e in os.scandir(folder.parent)
                         if e.name != folder.name and KEY_NAME.fullmatch(e.name)
                         and e.is_dir(follow_symlinks=False)), reverse=True)
    except OSError:                     # another process removing them meanwhile
        return
    for mtime, path in others[KEEP - 1:]:
        if mtime < time.time() - KEEP_SECONDS:
            shutil.rmtree(path, ignore_errors=True)


def _cpus() -> int:
    """The number of CPUs this thread may run on (all of them where the OS has no affinity)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _writable(path) -> bool:
    """Whether ``path`` is (or can be made) a folder this process may write in: where it may
    not, JAX would warn about every entry it fails to write."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)


@contextlib.contextmanager
def disabled():
    """Compile without the persistent cache inside the block (neither read nor written), so
    that a timed first call includes its compilation; the cache is back on afterwards."""
    was = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)
    _jax_cache.reset_cache()
    try:
        yield
    finally:
        jax.config.update("jax_enable_compilation_cache", was)
        _jax_cache.reset_cache()
