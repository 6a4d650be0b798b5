"""tenferro-rs itself: the book's Rust harness, run as a child process.

:mod:`~trgad.harness.tenferro` (builds and runs the harness, parses its answers),
:mod:`~trgad.harness.answers` (what its answers must be),
:mod:`~trgad.harness.callgrind` (instruction counts under valgrind), :mod:`~trgad.harness.rows`
(the benchmark's tenferro-rs rows).  Imports the JAX core
and the runtime.
"""
