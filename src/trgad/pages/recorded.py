"""Figures recorded elsewhere, quoted as reference data (never recomputed here).

Two sources, each labelled wherever a page shows its figures:

1. **The source report** (everything except the computegraph-rs section below): the one-page
   report "整张图求导，几步之后就停不下来" ("Differentiating the whole graph: after a few steps
   it never stops"), a page of a Chinese series that places it on its TRG line, at
   「分段求导得内能」 (the internal energy by staged differentiation).  Its runs: JAX 0.12.0.1
   (CPU, x64); tenferro-rs 0.8.0 (CPU, native, a single thread), the whole-graph binary a
   release build with ``CpuEngine::serial()``; chi = 16, truncation schedule
   [2, 4, 4, 16, ...], beta = 0.3; on an M2 Max (macOS 27, rustc 1.99.0, load average 2.4
   to 3.0).  The book builds tenferro-rs itself and measures it on the machine that builds
   it (:mod:`trgad.harness.tenferro`); the report's numbers, from another machine, are shown
   beside those, always labelled as recorded elsewhere.
2. **computegraph-rs** (the library tenferro-rs builds its keys on, the public repository
   tensor4all/computegraph-rs): the history of its key type, read from the commits cited in
   :data:`COMPUTEGRAPH_HISTORY`, and timings measured by this project's authors on its code
   (:data:`COMPUTEGRAPH_EQ_MS`); the machine of those timings was not recorded.

The book's appendix (book/source-report.md) presents the report: its setup, tables, fix and
advice.  :data:`SOURCE` is the label the chapters put on its figures (Markdown, linking there).
"""

SOURCE = ("recorded elsewhere: [the source report](source-report.md) (JAX 0.12.0.1 and "
          "tenferro-rs 0.8.0 on an Apple M2 Max), not measured by this build")

#: The report's title, in Chinese as published and in this book's translation.
TITLE = "整张图求导，几步之后就停不下来"
TITLE_EN = "Differentiating the whole graph: after a few steps it never stops"

#: The report's setup, as it states it: (item, value) pairs.
SETUP = [
    ("JAX", "0.12.0.1, CPU, x64"),
    ("tenferro-rs", "0.8.0, CPU, native, one thread"),
    ("machine", "Apple M2 Max, macOS 27, rustc 1.99.0"),
    ("load average during the runs", "2.4 to 3.0"),
    ("TRG", "chi = 16, truncation schedule [2, 4, 4, 16, ...], beta = 0.3"),
    ("code, tenferro-rs side", "binary `p25_whole_graph` (release, `CpuEngine::serial()`); "
     "the staged program `ising_trg` of the series' hands-on page"),
    ("code, JAX side", "script `p25_whole_graph.py`"),
]

#: JAX whole graph: steps -> (eqns, make_jaxpr(grad) ms, first jit(grad) call ms, grad).
JAX_WHOLE = {
    1: (266, 39.06, 104.86, 1.667309214024311),
    4: (837, 68.01, 252.37, 0.844054073623855),
    5: (1038, 68.52, 361.30, 0.744793433247367),
    20: (4053, 211.57, 1104.63, 0.704498679529762),
}

#: tenferro-rs whole graph: steps -> (ad.grad ms, drop ms, grad ops, run ms, grad).
#: 5 steps: killed by `timeout 60` (exit 124), ad.grad had not returned.
TENFERRO_WHOLE = {
    1: (4.36, 0.21, 266, 17.867, 1.667309214024311),
    2: (5.27, 3.63, 465, 0.622, 1.277612005080206),
    3: (88.68, 84.98, 665, 1.835, 1.023802944795145),
    4: (2088.32, 2093.47, 863, 3.564, 0.844054073623855),
}
TENFERRO_HANG = {"steps": 5, "timeout_seconds": 60, "exit": 124}
#: The last row the killed 5-step run had printed, its own 4-step row (the report elides the
#: rows above it; same columns as :data:`TENFERRO_WHOLE`).
TENFERRO_HANG_LAST_ROW = (4, (2092.07, 2082.67, 863, 2.267, 0.844054073623855))
#: The report's word on the eager backward: it uses the same transform and takes "about
#: 7 s" per call for the whole graph at 4 steps.
TENFERRO_EAGER_BACKWARD = {"steps": 4, "seconds_per_call_about": 7}
#: Where the report compares tenferro-rs's whole-graph gradients with JAX's, bit for bit:
#: steps -> "identical" or "last digit differs" (its JAX table lists only 1, 4, 5, 20 steps).
TENFERRO_VS_JAX_BITS = {1: "identical", 2: "identical", 3: "last digit differs", 4: "identical"}

#: tenferro-rs mul chain y <- (y*y)/2: layers -> (ad.grad ms, drop ms, grad ops).
TENFERRO_CHAIN = {16: (4.13, 4.00, 81), 20: (62.46, 62.08, 101), 24: (1004.20, 1004.57, 121),
                  25: (2013.58, 2003.01, 126)}
#: JAX, the same chain with 30 layers: make_jaxpr(grad) in ms.
JAX_CHAIN_30_MS = 7.0

#: tenferro-rs staged run (eager), 20 steps at chi = 16, beta = 0.3 (value and gradient: the
#: minimum of 3 runs after a first one).  ``c`` is a finite difference ("差分") of two more
#: gradients (step ``h``; the report does not say which difference), not included in the time.
TENFERRO_STAGED = {"steps": 20, "chi": 16, "beta": 0.3, "lnz_per_site": 0.790559063800966,
                   "u": -0.704498679529762, "c": 0.286288378175, "value_and_grad_ms": 555.8,
                   "h": 1e-5, "ks": [2, 4, 4] + [16] * 17, "repeats": 3}

#: The report's detection rule: time ``ad.grad`` after each added step; a ratio of
#: successive times that stays above this is exponential growth.
DETECT_RATIO = 2


# --- computegraph-rs (tensor4all/computegraph-rs) ---------------------------------------

#: Who measured :data:`COMPUTEGRAPH_EQ_MS` and :data:`COMPUTEGRAPH_HISTORY`'s timings.
COMPUTEGRAPH_SOURCE = ("measured by this book's authors on tensor4all/computegraph-rs "
                       "(machine not recorded), not in the source report")

#: ``==`` between two independently built copies of the mul-chain key (fan-out 2) on the
#: computegraph-rs code after 691def2 (Arc keys with a 64-bit fingerprint, recursive
#: unmemoised equality): depth -> milliseconds.
COMPUTEGRAPH_EQ_MS = {14: 0.15, 16: 1.3, 18: 5.5, 20: 17.6, 22: 74}

#: The key type of computegraph-rs (``src/types.rs``) over its history:
#: (commit or range, date, representation, cost).  Commits of the public repository.
COMPUTEGRAPH_HISTORY = [
    ("76aeccc to 8306196", "2026-04-03 on",
     "children held by value (`Vec<GlobalValKey>`), derived Clone/Eq/Hash",
     "hash, eq, clone and drop all recurse over the full tree, no memo; a key is physically "
     "a tree (measured on 8306196, mul chain depth 20: build 8.9 s, materialize 37.6 s, "
     "drop 2.1 s)"),
    ("c20e891", "2026-05-19",
     "\"Optimize global graph key hashing (#3)\": op key behind an `Arc` with a precomputed "
     "64-bit fingerprint",
     "hash O(1); `==` is hand-written: pointer shortcut, else full recursive comparison of "
     "primitive, mode and inputs, no memo"),
    ("691def2", "2026-06-01", "\"rename graph API terminology (#4)\": `ValueKey` / "
     "`OperationKey`", "same logic"),
]


# --- the source report: two more of its figures (book/source-report.md) ------------------

#: The cap of the report's tenferro-rs whole-graph sweep: it stopped after the step count
#: whose ``ad.grad`` took longer than this (it stopped after 4 steps), in milliseconds.
TENFERRO_SWEEP_CAP_MS = 1500
#: The number of layers of the JAX chain timed in :data:`JAX_CHAIN_30_MS`.
JAX_CHAIN_LAYERS = 30

#: The by-value keys' costs on 8306196 as numbers (the figures of the first row of
#: :data:`COMPUTEGRAPH_HISTORY`, the same measurement, source :data:`COMPUTEGRAPH_SOURCE`): the
#: mul chain of ``depth`` layers, seconds to build it, to materialize it and to drop it.
COMPUTEGRAPH_BY_VALUE = {"commit": "8306196", "depth": 20, "build_s": 8.9, "materialize_s": 37.6,
                         "drop_s": 2.1}


# ---- the same trap elsewhere (book/elsewhere.md, trgad.topics.elsewhere and .nesting) ----------

#: jax-ml/jax #8193 as printed in the thread (October 2021, the JAX of then; machine not
#: stated): nesting depth -> seconds of ``jax.linearize``.  Recorded elsewhere, quoted.
RECORDED_8193_SECONDS = {7: 0.3668365478515625, 8: 0.5641067028045654, 9: 0.9860150814056396,
                         10: 2.0171751976013184, 11: 4.0435779094696045, 12: 7.562690019607544}


#: Where :data:`RECORDED_8193_SECONDS` comes from.
RECORDED_8193_SOURCE = "https://github.com/jax-ml/jax/issues/8193"

#: What other projects reported, each row resting on the threads it links (read by this
#: book's authors; nothing here is measured by the book).  Keys: ``system``, ``identifies``
#: (how it identifies or compares values), ``affected`` (what the thread reports), ``fix``
#: (what was adopted, or the thread's state), ``sources`` ((label, url) pairs).
RECORDED = (
    {"system": "SymbolicUtils.jl (Julia CAS)",
     "identifies": "hash-consing, structural `isequal`",
     "affected": "`isequal` of equal, distinct copies: exponential in depth",
     "fix": "a memo of compared pairs (#1052), keyed by the objects, not their ids (#1055)",
     "sources": (("#1049", "https://github.com/JuliaSymbolics/SymbolicUtils.jl/issues/1049"),
                 ("#1052", "https://github.com/JuliaSymbolics/SymbolicUtils.jl/pull/1052"),
                 ("#1055", "https://github.com/JuliaSymbolics/SymbolicUtils.jl/pull/1055"))},
    {"system": "pytato (lazy arrays)",
     "identifies": "structural `==`",
     "affected": "exponential (#163); quadratic with a memo rebuilt per use (#322)",
     "fix": "a memoising comparison, identity first: 7 min to 3 s (#322)",
     "sources": (("#163", "https://github.com/inducer/pytato/issues/163"),
                 ("#322", "https://github.com/inducer/pytato/pull/322"))},
    {"system": "snyk dep-graph",
     "identifies": "content hash",
     "affected": "O(2^n) on n stacked diamonds",
     "fix": "a memoised Merkle hash",
     "sources": (("#169", "https://github.com/snyk/dep-graph/pull/169"),)},
    {"system": "cargo",
     "identifies": "recursive fingerprint hash",
     "affected": "exponential blow-up",
     "fix": "the memoised hash, Merkle-style",
     "sources": (("#4521", "https://github.com/rust-lang/cargo/pull/4521"),)},
    {"system": "Apache TVM",
     "identifies": "`StructuralHash`",
     "affected": "none reported (a design PR)",
     "fix": "a DAG hashed as a DAG (occurrence index)",
     "sources": (("#5160", "https://github.com/apache/tvm/pull/5160"),)},
    {"system": "hevm (symbolic EVM)",
     "identifies": "derived structural `Eq`",
     "affected": "914-node DAG held as a 601,664-node tree, 22 GB",
     "fix": "hash-consing, pointer equality (an open RFC)",
     "sources": (("#1085", "https://github.com/argotorg/hevm/pull/1085"),)},
    {"system": "PyTorch autograd",
     "identifies": "a tape, by identity",
     "affected": "nested `autograd.grad`: about 3x per order",
     "fix": "none (issue open)",
     "sources": (("#111563", "https://github.com/pytorch/pytorch/issues/111563"),)},
    {"system": "JAX (2019)",
     "identifies": "tracers, by identity",
     "affected": "nested `jvp`: exponential in the order",
     "fix": "CSE discussed; Taylor mode (`jet`) today",
     "sources": (("#520", "https://github.com/jax-ml/jax/issues/520"),)},
    {"system": "Lean 4 kernel",
     "identifies": "`is_def_eq` cache (union-find)",
     "affected": "unsound: a non-transitive check closed under transitivity",
     "fix": "a plain cache keyed on the query pair",
     "sources": (("#14806", "https://github.com/leanprover/lean4/pull/14806"),)},
)


#: The rows this book measures (book/elsewhere.md), without their verdicts, which the page
#: computes: name -> ``system``, ``identifies``, ``fix``, ``sources`` as in :data:`RECORDED`.
MEASURED = {
    "autograd": {
        "system": "HIPS autograd: mul chain (tape nodes)",
        "identifies": "node objects, by identity",
        "fix": "none needed",
        "sources": (("autograd/core.py", "https://github.com/HIPS/autograd/blob/master/autograd/core.py"),)},
    "sympy_eq": {
        "system": "SymPy `==`: two copies of the mul chain (calls)",
        "identifies": "structure: hash cached, `==` without memo",
        "fix": "its constructor cache (LRU) returns the same object",
        "sources": (("basic.py", "https://github.com/sympy/sympy/blob/master/sympy/core/basic.py"),
                    ("cache.py", "https://github.com/sympy/sympy/blob/master/sympy/core/cache.py"))},
    "tuple_eq": {
        "system": "CPython tuple `==`: shared sub-tuples (leaf calls)",
        "identifies": "element by element, identity shortcut",
        "fix": "3.14 caches `hash`, not `==`",
        "sources": (("#131525", "https://github.com/python/cpython/issues/131525"),)},
    "sympy_chain": {
        "system": "SymPy `diff`: mul chain (`count_ops`)",
        "identifies": "structure, rewritten (y*y becomes y**2)",
        "fix": "algebra: the fan-out becomes an exponent",
        "sources": (("mul.py", "https://github.com/sympy/sympy/blob/master/sympy/core/mul.py"),)},
    "sympy_tree": {
        "system": "SymPy `diff`: logistic map (tree nodes)",
        "identifies": "structure; a DAG in memory, walked as a tree",
        "fix": "`cse` (next row)",
        "sources": (("Baydin et al. 2.2", "https://jmlr.org/papers/v18/17-468.html"),)},
    "sympy_cse": {
        "system": "the same after `sympy.cse` (operations)",
        "identifies": "shared subexpressions named once",
        "fix": "this is the fix",
        "sources": (("cse_main.py", "https://github.com/sympy/sympy/blob/master/sympy/simplify/cse_main.py"),)},
    "jax_grad": {
        "system": "JAX `grad` nested n times (equations)",
        "identifies": "tracers, by identity",
        "fix": "Taylor mode (next row)",
        "sources": (("#520", "https://github.com/jax-ml/jax/issues/520"),)},
    "jax_jet": {
        "system": "JAX `jet` to order n (equations)",
        "identifies": "one Taylor series per value",
        "fix": "this is the fix (no `svd` rule; ignores `custom_jvp`)",
        "sources": (("jet.py", "https://github.com/jax-ml/jax/blob/main/jax/experimental/jet.py"),
                    ("#2431", "https://github.com/jax-ml/jax/issues/2431"))},
    "jax_cond": {
        "system": "JAX today: nested `cond` under `vmap`, `linearize` (CPU time)",
        "identifies": "tracers, by identity",
        "fix": "jaxpr transformations cached by jaxpr (2022)",
        "sources": (("#8184", "https://github.com/jax-ml/jax/issues/8184"),
                    ("#8193", "https://github.com/jax-ml/jax/issues/8193"),
                    ("#9196", "https://github.com/jax-ml/jax/pull/9196"),
                    ("#9228", "https://github.com/jax-ml/jax/pull/9228"))},
}
