"""Builds the harness's programs (pyproject.toml lists them).  One addition to setuptools-rust:
before cargo runs, ``fixed/prepare.py`` prepares the patched computegraph that
``trgad-tenferro-fixed`` builds against (cargo resolves ``[patch]`` paths before any build
script could run, so this cannot be a ``build.rs``)."""
import sys
from pathlib import Path

from setuptools import setup
from setuptools_rust import build_rust

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixed"))
import prepare  # noqa: E402


class build_rust_prepared(build_rust):
    def run(self):
        try:
            prepare.prepare()
        except prepare.PrepareError as e:
            sys.exit(f"trgad-tenferro-fixed: {e}")
        super().run()


setup(cmdclass={"build_rust": build_rust_prepared})
