"""Figures recorded elsewhere, quoted as reference data (never recomputed here).

Source: the one-page report "整张图求导，几步之后就停不下来" (shared/seed, restated in
shared/notes/mission.md): JAX 0.12.0.1 (CPU, x64) and tenferro-rs 0.8.0 (CPU, native,
single thread, release build, ``CpuEngine::serial()``), chi = 16, ks = [2, 4, 4, 16, ...],
beta = 0.3, on an Apple M2 Max (macOS 27, rustc 1.99.0, load average 2.4 to 3.0).
tenferro-rs cannot be installed here, so these numbers are shown beside the ones this book
computes, always labelled as recorded elsewhere.
"""

SOURCE = ("recorded elsewhere: the source report (JAX 0.12.0.1 and tenferro-rs 0.8.0 on an "
          "Apple M2 Max), not measured by this build")

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

#: tenferro-rs mul chain y <- (y*y)/2: layers -> (ad.grad ms, drop ms, grad ops).
TENFERRO_CHAIN = {16: (4.13, 4.00, 81), 20: (62.46, 62.08, 101), 24: (1004.20, 1004.57, 121),
                  25: (2013.58, 2003.01, 126)}
#: JAX, the same chain with 30 layers: make_jaxpr(grad) in ms.
JAX_CHAIN_30_MS = 7.0

#: tenferro-rs staged run, 20 steps (value and gradient, min of 3 after a warm-up).
TENFERRO_STAGED = {"steps": 20, "lnz_per_site": 0.790559063800966, "u": -0.704498679529762,
                   "c": 0.286288378175, "value_and_grad_ms": 555.8, "h": 1e-5}
