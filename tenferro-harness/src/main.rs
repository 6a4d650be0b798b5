//! trgad-tenferro: the book's measurements of tenferro-rs 0.8.0, one JSON object per run.
//!
//!     trgad-tenferro whole  --schedule 2,4,4 [--beta 0.3] [--eager | --forward | --keep]
//!     trgad-tenferro chain  --depth 20 [--fanout 2] [--x0 2]
//!     trgad-tenferro staged --schedule 2,4,4,16,... [--beta 0.3] [--repeats 3]
//!
//! `whole`: lnZ/N of the TRG (src/trg.rs) as one traced graph; times `ad.grad` (the
//! transform), compiling, preparing and running the gradient program, and, apart, dropping
//! the gradient graph (`--keep`: not dropped, freed by the exit); counts the program's
//! operations.  `--eager`: the same graph built in an eager session and differentiated by
//! `backward()`.  `--forward`: forward mode, `ad.jvp` with tangent 1, timed as `ad.grad`.
//! `chain`: y <- y^K / K to depth D (each value used K times per layer).  `staged`: the
//! staged crate (staged/): one eager graph per TRG step on fresh leaves, one VJP per step.
//! Everything runs on `CpuEngine::serial()` (one thread), as in the source report.  Bad
//! arguments: one line on stderr, exit status 2 (src/args.rs; `--help` lists the options).
//! The Python side (trgad.harness.tenferro) runs this program as a child process with a
//! hard timeout.

mod args;
mod trg;

use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use serde_json::{Value, json};
use tenferro_ad::{AdContext, EagerTensor, Tensor};
use tenferro_cpu::CpuEngine;
use tenferro_runtime::{ExecutionEngine, GraphCompiler, Runtime, TracedTensor};

use args::{Command, How};
use staged::{ad_context, eager_runtime, scalar_of};
use trg::{Res, Traced};

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// A time in ms, or null (JSON has no NaN) for one not measured.
fn opt(x: f64) -> Value {
    if x.is_finite() { json!(x) } else { Value::Null }
}

fn cpu_runtime(engine: &CpuEngine) -> Res<Runtime> {
    let mut builder = Runtime::builder();
    builder.register_engine(tenferro_cpu::runtime_engine_registration(engine)?)?;
    let id = tenferro_cpu::runtime_engine_id()?;
    builder.install_extension_module(tenferro_linalg::extension_module::<CpuEngine>(id)?)?;
    Ok(builder.build()?)
}

/// The scalar a traced graph computes, and the milliseconds its three phases took.
struct Ran {
    value: f64,
    ops: usize,
    compile_ms: f64,
    prepare_ms: f64,
    run_ms: f64,
}

fn run_scalar(out: &TracedTensor) -> Res<Ran> {
    let t = Instant::now();
    let program = GraphCompiler::new().compile(out)?;
    let compile_ms = ms(t);
    let ops = program.program().operations().len();
    let mut engine = CpuEngine::serial();
    let runtime = cpu_runtime(&engine)?;
    let t = Instant::now();
    let prepared = runtime.prepare(&program, &[], &[engine.target()])?;
    let prepare_ms = ms(t);
    let t = Instant::now();
    let mut outputs = runtime.run(&mut [&mut engine], &prepared, &[])?;
    let tensor = outputs.remove(0).into_tensor(&mut engine)?;
    let run_ms = ms(t);
    let value = tensor.as_slice::<f64>()?[0];
    Ok(Ran { value, ops, compile_ms, prepare_ms, run_ms })
}

/// `ad.grad(y, x)` under a name of ours, never inlined: `trgad tenferro count` has callgrind
/// count calls inside it alone (`--toggle-collect=trgad_tenferro::transform`).
#[inline(never)]
fn transform(ad: &AdContext, y: &TracedTensor, x: &TracedTensor) -> Res<TracedTensor> {
    Ok(ad.grad(y, x)?)
}

/// `ad.jvp(y, x, dx)`, forward mode, under a name of ours, never inlined (callgrind:
/// `--toggle-collect=trgad_tenferro::forward`).
#[inline(never)]
fn forward(ad: &AdContext, y: &TracedTensor, x: &TracedTensor, dx: &TracedTensor) -> Res<TracedTensor> {
    Ok(ad.jvp(y, x, dx)?)
}

/// The eager graph's `backward()` under a name of ours, never inlined (callgrind:
/// `--toggle-collect=trgad_tenferro::backward`).
#[inline(never)]
fn backward(y: &EagerTensor, engine: &mut CpuEngine) -> Res<()> {
    y.backward(engine)?;
    Ok(())
}

/// Dropping the gradient graph under a name of ours, never inlined (callgrind counts inside
/// it alone, `--toggle-collect=trgad_tenferro::release`).
#[inline(never)]
fn release(g: TracedTensor) {
    drop(g)
}

/// `ad.grad` (or, `forward`, `ad.jvp` with tangent 1) of lnZ/N as one traced graph.
/// `keep`: leave the gradient graph alive (`drop_ms` null) and let the process's exit free
/// it, for sizes whose drop would cost as much as the transform again.
fn whole(schedule: &[usize], beta: f64, keep: bool, forward_mode: bool) -> Res<Value> {
    let start = Instant::now();
    let x = TracedTensor::from_vec_col_major(vec![], vec![beta])?;
    let lnz = trg::lnz_per_site(&mut Traced, &x, schedule)?;
    let primal = run_scalar(&lnz)?;
    let ad = ad_context()?;
    // one line, flushed, so that a run killed inside ad.grad shows when it went in
    let what = if forward_mode { "ad.jvp" } else { "ad.grad" };
    args::say(&format!("trgad-tenferro: {what} started at {:.1} ms", ms(start)));
    let t = Instant::now();
    let g = if forward_mode {
        forward(&ad, &lnz, &x, &TracedTensor::from_vec_col_major(vec![], vec![1.0])?)?
    } else {
        transform(&ad, &lnz, &x)?
    };
    let transform_ms = ms(t);
    let ran = run_scalar(&g)?;
    let drop_ms = if keep {
        std::mem::forget((g, lnz, x, ad));
        f64::NAN
    } else {
        let t = Instant::now();
        release(g);
        ms(t)
    };
    Ok(json!({
        "mode": if forward_mode { "forward" } else { "whole" }, "steps": schedule.len(),
        "schedule": schedule, "beta": beta, "lnz_per_site": primal.value, "primal_ops": primal.ops,
        "primal_compile_ms": primal.compile_ms, "transform_ms": transform_ms, "drop_ms": opt(drop_ms),
        "grad_ops": ran.ops, "compile_ms": ran.compile_ms, "prepare_ms": ran.prepare_ms,
        "run_ms": ran.run_ms, "grad": ran.value,
    }))
}

fn whole_eager(schedule: &[usize], beta: f64) -> Res<Value> {
    let rt = eager_runtime()?;
    let mut engine = CpuEngine::serial();
    let x = rt.variable_from(Tensor::from_vec_col_major(vec![], vec![beta])?)?;
    let t = Instant::now();
    let lnz = rt.with_eager_session(&mut engine, |s| trg::lnz_per_site(s, &x, schedule))?;
    let forward_ms = ms(t);
    let t = Instant::now();
    backward(&lnz, &mut engine)?;
    let backward_ms = ms(t);
    let grad = x.grad()?.ok_or("beta has no gradient")?;
    let grad = grad.as_slice::<f64>()?[0];
    let value = scalar_of(&lnz, &mut engine)?;
    let t = Instant::now();
    drop(lnz);
    let drop_ms = ms(t);
    Ok(json!({
        "mode": "eager", "steps": schedule.len(), "schedule": schedule, "beta": beta,
        "lnz_per_site": value, "forward_ms": forward_ms, "backward_ms": backward_ms,
        "drop_ms": drop_ms, "grad": grad,
    }))
}

fn chain(depth: usize, fanout: usize, x0: f64) -> Res<Value> {
    let x = TracedTensor::from_vec_col_major(vec![], vec![x0])?;
    let k = TracedTensor::from_vec_col_major(vec![], vec![fanout as f64])?;
    let mut y = x.clone();
    for _ in 0..depth {
        let mut p = y.clone();
        for _ in 1..fanout {
            p = (&p * &y)?;
        }
        y = (&p / &k)?;
    }
    let ad = ad_context()?;
    let t = Instant::now();
    let g = transform(&ad, &y, &x)?;
    let transform_ms = ms(t);
    let ran = run_scalar(&g)?;
    let t = Instant::now();
    release(g);
    let drop_ms = ms(t);
    Ok(json!({
        "mode": "chain", "depth": depth, "fanout": fanout, "x0": x0, "transform_ms": transform_ms,
        "drop_ms": drop_ms, "grad_ops": ran.ops, "run_ms": ran.run_ms, "grad": ran.value,
    }))
}

/// One staged pass: (lnZ/N, d lnZ/N / d beta).
/// By the staged crate (../staged/src/lib.rs): the state is the one tensor T_i; the terms
/// are 2 beta, ln||T_i|| / 2^i per step and ln tr T_n / 2^n (trgad.physics.trg.lnz_from_steps).
fn staged_once(rt: &std::sync::Arc<tenferro_ad::EagerRuntime>, ks: &[usize], beta: f64) -> Res<(f64, f64)> {
    let n = ks.len();
    let mut engine = CpuEngine::serial();
    staged::value_and_grad(
        rt,
        &mut engine,
        beta,
        n,
        |s, b| Ok((vec![trg::initial_tensor(s, b)?], trg::Ops::scale(s, b, 2.0)?)),
        |s, i, t| {
            let (next, ln) = trg::trg_step(s, &t[0], trg::bond(ks, i), ks[i])?;
            Ok((vec![next], trg::Ops::scale(s, &ln, 0.5f64.powi(i as i32))?))
        },
        |s, t| {
            let ln_tr = trg::ln_torus_trace(s, &t[0], trg::bond(ks, n))?;
            trg::Ops::scale(s, &ln_tr, 0.5f64.powi(n as i32))
        },
    )
}

fn staged(schedule: &[usize], beta: f64, repeats: usize) -> Res<Value> {
    let rt = eager_runtime()?;
    let t = Instant::now();
    let (lnz, grad) = staged_once(&rt, schedule, beta)?;
    let first_ms = ms(t);
    let mut min_ms = f64::INFINITY;
    for _ in 0..repeats {
        let t = Instant::now();
        let again = staged_once(&rt, schedule, beta)?;
        min_ms = min_ms.min(ms(t));
        if again != (lnz, grad) {
            return Err("a repeated staged pass gave other values".into());
        }
    }
    Ok(json!({
        "mode": "staged", "steps": schedule.len(), "schedule": schedule, "beta": beta,
        "lnz_per_site": lnz, "grad": grad, "u": -grad, "first_ms": first_ms, "min_ms": opt(min_ms),
        "repeats": repeats,
    }))
}

/// Write the result as one line on stdout: 0, or 5 after one line on stderr when it cannot
/// be written (a full disk, a closed pipe: Rust ignores SIGPIPE).  A stdout closed before
/// the start is /dev/null to a Rust program (its runtime opens it there), as with `>/dev/null`.
fn emit(out: &Value) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{out}").and_then(|_| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            args::say(&format!("trgad-tenferro: the result could not be written to stdout: {e}"));
            ExitCode::from(5)
        }
    }
}

fn main() -> ExitCode {
    // a panic inside tenferro-rs: one line naming it (the default hook ends on a hint)
    std::panic::set_hook(Box::new(|info| {
        args::say(&format!("trgad-tenferro: panic: {}", info.to_string().replace('\n', " ")))
    }));
    let command = match args::parse(std::env::args_os().skip(1)) {
        Ok(c) => c,
        Err(msg) => {
            args::say(&format!("trgad-tenferro: error: {msg}"));
            return ExitCode::from(2);
        }
    };
    let result = match command {
        Command::Help(text) => {
            return match std::io::stdout().lock().write_all(text.as_bytes()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(_) => ExitCode::from(5),
            };
        }
        Command::Whole { schedule, beta, how: How::Grad { keep } } => whole(&schedule, beta, keep, false),
        Command::Whole { schedule, beta, how: How::Forward } => whole(&schedule, beta, false, true),
        Command::Whole { schedule, beta, how: How::Eager } => whole_eager(&schedule, beta),
        Command::Chain { depth, fanout, x0 } => chain(depth, fanout, x0),
        Command::Staged { schedule, beta, repeats } => staged(&schedule, beta, repeats),
    };
    match result {
        Ok(out) => emit(&out),
        Err(e) => {
            args::say(&format!("trgad-tenferro: tenferro-rs failed: {e}"));
            ExitCode::from(1)
        }
    }
}
