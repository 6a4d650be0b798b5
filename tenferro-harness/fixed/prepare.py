"""Prepare the patched computegraph that ``fixed/Cargo.toml`` builds against.

computegraph 0.1.0 is taken exactly as cargo downloaded it from crates.io for tenferro-rs
0.8.0 (``../Cargo.lock``): its ``.crate`` in cargo's registry cache, its sha256 checked
against the lock's checksum, unpacked into ``../build/`` and patched strictly with
``computegraph.diff`` (``git apply``: no fuzz, a context mismatch is an error).  Nothing from
upstream is committed; ``[patch.crates-io]`` in ``fixed/Cargo.toml`` points at the result.

This runs before cargo starts (cargo resolves patch paths before any build script could run):
the harness's ``setup.py`` calls :func:`prepare` from ``pip install``; by hand, ``python
tenferro-harness/fixed/prepare.py``.  Errors: :class:`PrepareError`, one line naming the file.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
HARNESS = HERE.parent
DIFF = HERE / "computegraph.diff"
CRATE, VERSION = "computegraph", "0.1.0"
#: Where the patched crate is unpacked (``fixed/Cargo.toml``'s patch path).
PREPARED = HARNESS / "build" / f"{CRATE}-{VERSION}-fixed"


class PrepareError(RuntimeError):
    """The patched crate could not be prepared; the message is one line."""


def _cargo(*args):
    cargo = os.environ.get("CARGO", "cargo")
    try:
        done = subprocess.run([cargo, *args], capture_output=True, text=True, check=False)
    except OSError as e:
        raise PrepareError(f"cargo could not be started ({e}): install Rust (rustup.rs)") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise PrepareError(f"cargo {args[0]} failed for {HARNESS / 'Cargo.toml'}: {last}")
    return done.stdout


def _checksum():
    """computegraph's sha256 as ``../Cargo.lock`` records it."""
    lock = tomllib.loads((HARNESS / "Cargo.lock").read_text())
    for package in lock["package"]:
        if package["name"] == CRATE and package["version"] == VERSION:
            return package["checksum"]
    raise PrepareError(f"{HARNESS / 'Cargo.lock'} has no {CRATE} {VERSION}")


def _downloaded():
    """The ``.crate`` cargo downloaded (``cargo fetch`` makes sure it is there)."""
    manifest = str(HARNESS / "Cargo.toml")
    _cargo("fetch", "--locked", "--manifest-path", manifest)
    meta = json.loads(_cargo("metadata", "--locked", "--format-version", "1",
                             "--manifest-path", manifest))
    for package in meta["packages"]:
        if package["name"] == CRATE and package["version"] == VERSION:
            # <CARGO_HOME>/registry/src/<index>/computegraph-0.1.0/Cargo.toml ->
            # <CARGO_HOME>/registry/cache/<index>/computegraph-0.1.0.crate
            src = Path(package["manifest_path"]).parent
            return src.parent.parent.parent / "cache" / src.parent.name / f"{src.name}.crate"
    raise PrepareError(f"cargo metadata lists no {CRATE} {VERSION} for {manifest}")


def prepare():
    """Unpack, verify and patch computegraph into :data:`PREPARED`; returns its path.  Done
    again only when the diff changed (a stamp holds the diff's sha256)."""
    stamp = PREPARED / ".trgad-diff-sha256"
    wanted = hashlib.sha256(DIFF.read_bytes()).hexdigest()
    if stamp.is_file() and stamp.read_text() == wanted:
        return PREPARED
    crate = _downloaded()
    if not crate.is_file():
        raise PrepareError(f"{crate} is missing after cargo fetch")
    got, expected = hashlib.sha256(crate.read_bytes()).hexdigest(), _checksum()
    if got != expected:
        raise PrepareError(f"{crate}: sha256 {got} is not {HARNESS / 'Cargo.lock'}'s {expected}")
    work = PREPARED.with_name(PREPARED.name + ".tmp")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with tarfile.open(crate) as tar:
        tar.extractall(work, filter="data")
    unpacked = work / f"{CRATE}-{VERSION}"
    # git apply outside any repository (the ceiling stops it finding this one): strict, no fuzz
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(work))
    try:
        done = subprocess.run(["git", "apply", "--whitespace=nowarn", str(DIFF)], cwd=unpacked,
                              env=env, capture_output=True, text=True, check=False)
    except OSError as e:
        raise PrepareError(f"git could not be started to apply {DIFF} ({e})") from None
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["no message"])[0]
        raise PrepareError(f"{DIFF} does not apply to {CRATE} {VERSION} as published: {first}")
    (unpacked / stamp.name).write_text(wanted)
    shutil.rmtree(PREPARED, ignore_errors=True)
    unpacked.rename(PREPARED)
    shutil.rmtree(work, ignore_errors=True)
    return PREPARED


if __name__ == "__main__":
    try:
        print(prepare())
    except PrepareError as e:
        print(f"prepare: {e}", file=sys.stderr)
        sys.exit(1)
