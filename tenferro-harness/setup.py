"""Builds the harness's programs (pyproject.toml lists them).  One addition to setuptools-rust:
before cargo runs, ``fixed/prepare.py`` prepares the patched computegraph that
``trgad-tenferro-fixed`` builds against (cargo resolves ``[patch]`` paths before any build
script could run, so this cannot be a ``build.rs``).  One line per program goes to stderr
before cargo starts, so that ``pip install -v`` (which shows a build's output; plain ``pip
install`` shows only a spinner) says which of the three programs a long cold build is on."""
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

    #: Programs built in this process: setuptools-rust runs build_rust a second time while
    #: it packs the wheel (cargo then finds everything fresh), which is said as a check.
    done = set()

    def run_for_extension(self, ext):
        n = self.extensions.index(ext) + 1
        if ext.name in self.done:
            what = "checking that cargo finds it built (seconds)"
        else:
            what = ("building it with cargo (cold, all three took ~36 min on 2 quiet cores, "
                    "~71 min on busy ones; with cargo's target folder kept, seconds)")
        print(f"trgad-tenferro: program {n} of {len(self.extensions)}, {ext.name}: {what}",
              file=sys.stderr, flush=True)
        super().run_for_extension(ext)
        self.done.add(ext.name)


setup(cmdclass={"build_rust": build_rust_prepared})
