"""Lowered programs kept on disk, so that a second process neither traces nor lowers them.

JAX's persistent compilation cache (:mod:`trgad.runtime.cache`) saves a process the compilation of a
program another process compiled, but it is looked up by the lowered program, so every
process still traces the derivative program and lowers it to StableHLO; for the 20-step
second-order programs that is a good part of a first call.  :func:`lower` keeps the lowered
program itself: the first time a program is asked for it is traced, lowered and serialised
with JAX's own export (``jax.export.export``, ``Exported.serialize``) into a file; every
later process deserialises it (``jax.export.deserialize``) and lowers only a call of it
(``Exported.call``), which JAX's persistent cache then finds compiled.  The first process
compiles that same call, from the bytes it wrote, so the two processes run one executable
and give the same numbers to the last bit.  Results are never stored: every number is
computed.

Where: ``cache.directory() / "exported"``, one file per program.  Off (nothing read or
written; the program is still exported and loaded back in memory, so that it compiles to
the same executable as with the store on) where trgad's cache folder is off or cannot
be written (:func:`trgad.runtime.cache.root`: ``TRGAD_CACHE_DIR=`` empty, no home directory), where
JAX's compilation cache is off (``JAX_ENABLE_COMPILATION_CACHE=0``, or inside
:func:`trgad.runtime.cache.disabled`, so timed first calls stay real first calls), and where JAX
cannot serialise (its optional ``flatbuffers`` missing: then plain ``jax.jit(fn).lower``).  Where the user names JAX's cache
folder (``JAX_COMPILATION_CACHE_DIR``), executables go there and the exported programs to
trgad's folder.

Keyed on (:func:`manifest`): the caller's ``key``, which names the function and every value
it closes over (the method, the order, the truncation schedule), the function's name, the
tree, shapes and dtypes of the arguments, the compile options, JAX's tracing configuration
(x64 among it), the back end, and :func:`trgad.runtime.cache.key` (jax and jaxlib versions, a hash
of the package source as imported and of ``XLA_FLAGS``).  The file holds that manifest, the
program's output tree, shapes and dtypes, its length and SHA-256, then JAX's bytes.  What is read is
used only if all of it matches what is asked for; a file that is cut short, altered or does
not match its name is named in one line on stderr, removed and built again.  A file that
cannot be written (full disk, read-only folder) is skipped without a word: the store may
make a process quicker, never stop it.  Source: JAX documentation, "Exporting and
serializing staged-out computations".
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
import sys
import tempfile
from importlib import metadata

import jax

from . import cache

#: The subfolder of :func:`trgad.runtime.cache.directory` that holds the files, and their suffix.
FOLDER, SUFFIX = "exported", ".jaxexport"
#: The first line of every file: the format, raised when the layout below changes.
MAGIC = b"trgad-exported-program 1\n"
#: :func:`trgad.runtime.cache.key` when the package was imported: the source that runs.  Read once,
#: as :func:`trgad.runtime.cache.setup` reads it: files edited under a running process are not its
#: code (restart it, as for any change to the package).
SOURCE_KEY = cache.key()


class Broken(Exception):
    """A stored file that cannot be used (its one-line reason)."""


def folder():
    """The folder of exported programs now, or None when the store is off (see the module
    docstring); created on first use."""
    if not jax.config.jax_enable_compilation_cache or not _serialisable():
        return None
    top = cache.root()
    if top is None:
        return None
    path = top / SOURCE_KEY / FOLDER
    return path if _writable(str(path)) else None


@functools.cache
def _serialisable():
    return importlib.util.find_spec("flatbuffers") is not None


def _writable(path):
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)


def specs(args):
    """``args`` (a pytree of arrays, Python numbers or ``jax.ShapeDtypeStruct``) as a pytree of
    ``jax.ShapeDtypeStruct`` (a Python float stays weakly typed, as ``jax.jit`` traces it)."""
    def spec(x):
        if isinstance(x, jax.ShapeDtypeStruct):
            return x
        weak = getattr(x, "weak_type", type(x) in (int, float, complex))
        return jax.ShapeDtypeStruct(jax.numpy.shape(x), jax.dtypes.result_type(x), weak_type=weak)
    return jax.tree_util.tree_map(spec, args)


def describe(tree):
    """Tree structure, shapes and dtypes of a pytree of arrays or avals, as JSON-ready text
    (weak typing left out: an exported program does not keep it)."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    return {"tree": str(treedef), "leaves": [[list(x.shape), str(x.dtype)] for x in leaves]}


#: JAX settings left out of :func:`_tracing_config`: the caches' and the logs', which change
#: no trace (and the cache folder differs between processes that share programs).
_UNTRACED = re.compile(r"jax_(compilation_cache|persistent_cache|enable_compilation_cache|"
                       r"raise_persistent_cache|explain_cache|log_|logging|debug_log)")


def _tracing_config():
    """JAX's configuration (``jax.config.values``, every setting but the caches' and logs'),
    as text: among it all that changes what a trace gives (``enable_x64``, promotion rules,
    matmul precision, ...); values without a stable text (objects named by their address)
    are left out.  More than JAX's own trace context, so never less: a setting that changes
    no trace costs at most a program traced again."""
    return sorted(f"{name}={value!r}" for name, value in jax.config.values.items()
                  if not _UNTRACED.match(name) and " at 0x" not in repr(value))


def manifest(key, fn, args, options):
    """Everything the stored program depends on (see the module docstring), JSON-ready."""
    return {"key": repr(key),
            "function": f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', '')}",
            "args": describe(args), "options": repr(sorted(options.items())),
            "x64": bool(jax.config.jax_enable_x64), "tracing": _tracing_config(),
            "backend": jax.default_backend(), "jax": jax.__version__,
            "jaxlib": metadata.version("jaxlib"),
            "source": SOURCE_KEY}


def path_of(where, meta):
    """The file of the program with manifest ``meta`` in folder ``where``: a label from the
    key, then a hash of the whole manifest."""
    label = re.sub(r"[^\w.]+", "-", meta["key"]).strip("-")[:48]
    digest = hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()[:32]
    return where / f"{label}-{digest}{SUFFIX}"


def lower(fn, args, key, options, prepare=None):
    """The lowering of a call of ``fn``'s exported program (``jax.export``, serialised and
    loaded back): read from the store under ``key``, or traced, exported and (store on)
    stored now.  A ``jax.stages.Lowered`` whose ``compile()`` gives an executable taking the
    same arguments and returning the same tree of shapes and dtypes as ``jax.jit(fn)``.

    With the store off (:func:`folder` None: inside :func:`trgad.runtime.cache.disabled`
    too) the program still takes the same way, only nothing is read or written, so one
    program is compiled to one executable whichever way it was built (XLA's temporaries of
    a call of an exported program can differ from those of the plain ``jax.jit`` by a
    buffer).  Where JAX cannot serialise (no ``flatbuffers``) or export ``fn``, it is the
    plain ``jax.jit(fn, compiler_options=options).lower(*args)``.

    ``args``: a tuple of arrays, Python numbers or ``jax.ShapeDtypeStruct`` (pytrees of
    them).  ``key``: hashable with a stable ``repr``, naming ``fn`` and every value it closes
    over that the package source does not fix.  ``options``: XLA compile options (a dict).
    ``prepare``: called with no arguments before ``fn`` is traced, never when the program
    is loaded (trgad's staged pullback reads what tracing its step program recorded).
    Raises what tracing ``fn`` raises."""
    if not _serialisable():
        if prepare is not None:
            prepare()
        return jax.jit(fn, compiler_options=options).lower(*args)
    where = folder()
    asked = specs(tuple(args))
    meta = manifest(key, fn, asked, options)
    path = None if where is None else path_of(where, meta)
    exported = None
    if path is not None:
        try:
            exported = read(path, meta)
        except FileNotFoundError:
            pass
        except Broken as why:
            _drop(path, why)
    if exported is None:
        if prepare is not None:
            prepare()
        try:
            payload = jax.export.export(jax.jit(fn))(*asked).serialize()
        except Exception:           # noqa: BLE001 - not exportable: the plain way says why
            return jax.jit(fn, compiler_options=options).lower(*args)
        exported = jax.export.deserialize(payload)
        if path is not None:
            write(path, meta, exported, payload)
    return _call_of(exported, options)


def _call_of(exported, options):
    """The lowered ``jax.jit`` of a call of ``exported``, for its own input shapes."""
    def exported_program(*args):
        return exported.call(*args)
    avals = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in exported.in_avals]
    args, _ = jax.tree_util.tree_unflatten(exported.in_tree, avals)
    return jax.jit(exported_program, compiler_options=options).lower(*args)


def read(path, meta):
    """The exported program stored at ``path`` for manifest ``meta``.  Raises
    FileNotFoundError when there is none (or it cannot be read), Broken (one-line reason)
    when it is cut short or altered, does not match ``meta``, or JAX cannot load it."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as e:            # unreadable: build it, leave the file alone
        raise FileNotFoundError(str(e)) from None
    if not data.startswith(MAGIC):
        raise Broken("not a file of this format")
    head, newline, payload = data[len(MAGIC):].partition(b"\n")
    try:
        header = json.loads(head) if newline else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or not {"manifest", "out", "bytes", "sha256"} <= set(header):
        raise Broken("no readable header")
    if header["manifest"] != json.loads(json.dumps(meta)):
        raise Broken("its manifest is not the program's asked for")
    if len(payload) != header["bytes"]:
        raise Broken(f"cut short: {len(payload)} of {header['bytes']} bytes")
    if hashlib.sha256(payload).hexdigest() != header["sha256"]:
        raise Broken("altered: its SHA-256 does not match")
    try:
        exported = jax.export.deserialize(bytearray(payload))
    except Exception as e:          # noqa: BLE001 - JAX's own check of its bytes
        raise Broken(f"JAX cannot load it: {type(e).__name__}") from None
    inputs, named = jax.tree_util.tree_unflatten(exported.in_tree, exported.in_avals)
    if named or describe(inputs) != meta["args"]:
        raise Broken("its arguments are not the shapes and dtypes asked for")
    if describe(_outputs(exported)) != header["out"]:
        raise Broken("its results are not the shapes and dtypes it was stored with")
    if meta["backend"] not in exported.platforms or exported.nr_devices != 1:
        raise Broken(f"made for {', '.join(exported.platforms)} on {exported.nr_devices} devices")
    return exported


def _outputs(exported):
    return jax.tree_util.tree_unflatten(exported.out_tree, exported.out_avals)


def write(path, meta, exported, payload):
    """Store ``payload`` (``exported``, serialised) at ``path`` with its manifest ``meta``:
    written beside it under a temporary name, then renamed, so no reader ever sees half a
    file.  Returns whether it was stored (False where it cannot be written: nothing is
    left behind and nothing is said)."""
    header = {"manifest": meta, "out": describe(_outputs(exported)), "bytes": len(payload),
              "sha256": hashlib.sha256(payload).hexdigest()}
    data = MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + bytes(payload)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        os.fchmod(fd, 0o644)            # as JAX's own cache files, not mkstemp's 0o600
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return True
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return False


def _drop(path, why):
    """Remove the broken file ``path`` and say so in one line on stderr."""
    try:
        path.unlink()
        done = "removed"
    except FileNotFoundError:       # another process removed it meanwhile
        done = "removed"
    except OSError:
        done = "could not remove"
    print(f"trgad: {done} a broken exported program, traced again: {path} ({why})",
          file=sys.stderr)
