//! trgad-tenferro: the book's measurements of tenferro-rs 0.8.0, one JSON object per run.
//!
//!     trgad-tenferro whole  --schedule 2,4,4 [--beta 0.3] [--eager | --keep]
//!     trgad-tenferro chain  --depth 20 [--fanout 2] [--x0 2]
//!     trgad-tenferro staged --schedule 2,4,4,16,... [--beta 0.3] [--repeats 3]
//!
//! `whole`: lnZ/N of the TRG (src/trg.rs) as one traced graph; times `ad.grad` (the
//! transform), compiling, preparing and running the gradient program, and, apart, dropping
//! the gradient graph (`--keep`: not dropped, freed by the exit); counts the program's
//! operations.  `--eager`: the same graph built in
//! an eager session and differentiated by `backward()`.  `chain`: y <- y^K / K to depth D
//! (each value used K times per layer).  `staged`: one eager graph per TRG step on a fresh
//! leaf, one VJP per step, the cotangent passed back by hand along both paths.
//! Everything runs on `CpuEngine::serial()` (one thread), as in the source report.  Bad
//! arguments: one line on stderr, exit status 2.  The Python side (`trgad.tenferro`) runs
//! this program as a child process with a hard timeout.

mod trg;

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::Instant;

use tenferro_ad::{AdContext, EagerRuntime, EagerTensor, Tensor};
use tenferro_cpu::CpuEngine;
use tenferro_runtime::{ExecutionEngine, GraphCompiler, Runtime, TracedTensor};

use trg::{Res, Traced};

/// The book's range of beta (trgad.runtime.validate.BETA_MIN, BETA_MAX): where the TRG
/// resolves u and c, and e^(-2 beta) is still a normal float.
const BETA_MIN: f64 = 1e-10;
const BETA_MAX: f64 = 350.0;

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// A JSON number (null for a non-finite one).
fn num(x: f64) -> String {
    if x.is_finite() { format!("{x:?}") } else { "null".into() }
}

fn list(xs: &[usize]) -> String {
    format!("[{}]", xs.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", "))
}

fn cpu_runtime(engine: &CpuEngine) -> Res<Runtime> {
    let mut builder = Runtime::builder();
    builder.register_engine(tenferro_cpu::runtime_engine_registration(engine)?)?;
    let id = tenferro_cpu::runtime_engine_id()?;
    builder.install_extension_module(tenferro_linalg::extension_module::<CpuEngine>(id)?)?;
    Ok(builder.build()?)
}

fn ad_context() -> Res<AdContext> {
    let rules = tenferro_linalg::semantic_ad_rules()?;
    Ok(AdContext::builder().with_semantic_extension_rules(rules)?.build()?)
}

fn eager_runtime() -> Res<std::sync::Arc<EagerRuntime>> {
    let rt = EagerRuntime::with_ad_context(&ad_context()?)?;
    let id = tenferro_cpu::runtime_engine_id()?;
    rt.install_extension_module(tenferro_linalg::extension_module::<CpuEngine>(id)?)?;
    Ok(rt)
}

/// The scalar a traced graph computes, and the seconds its three phases took.
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

/// Dropping the gradient graph under a name of ours, never inlined (callgrind counts inside
/// it alone, `--toggle-collect=trgad_tenferro::release`).
#[inline(never)]
fn release(g: TracedTensor) {
    drop(g)
}

fn scalar_of(t: &EagerTensor) -> Res<f64> {
    let v = t.to_tensor(&mut CpuEngine::serial())?;
    Ok(v.as_slice::<f64>()?[0])
}

/// `keep`: leave the gradient graph alive (`drop_ms` null) and let the process's exit free
/// it, for sizes whose drop would cost as much as the transform again.
fn whole(schedule: &[usize], beta: f64, keep: bool) -> Res<String> {
    let start = Instant::now();
    let x = TracedTensor::from_vec_col_major(vec![], vec![beta])?;
    let lnz = trg::lnz_per_site(&mut Traced, &x, schedule)?;
    let primal = run_scalar(&lnz)?;
    let ad = ad_context()?;
    // one line, flushed, so that a run killed inside ad.grad shows when it went in
    eprintln!("trgad-tenferro: ad.grad started at {:.1} ms", ms(start));
    let t = Instant::now();
    let g = transform(&ad, &lnz, &x)?;
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
    Ok(format!(
        "{{\"mode\": \"whole\", \"steps\": {}, \"schedule\": {}, \"beta\": {}, \"lnz_per_site\": {}, \
         \"primal_ops\": {}, \"primal_compile_ms\": {}, \"transform_ms\": {}, \"drop_ms\": {}, \"grad_ops\": {}, \"compile_ms\": {}, \
         \"prepare_ms\": {}, \"run_ms\": {}, \"grad\": {}}}",
        schedule.len(), list(schedule), num(beta), num(primal.value), primal.ops,
        num(primal.compile_ms), num(transform_ms),
        num(drop_ms), ran.ops, num(ran.compile_ms), num(ran.prepare_ms), num(ran.run_ms), num(ran.value)
    ))
}

fn whole_eager(schedule: &[usize], beta: f64) -> Res<String> {
    let rt = eager_runtime()?;
    let mut engine = CpuEngine::serial();
    let x = rt.variable_from(Tensor::from_vec_col_major(vec![], vec![beta])?)?;
    let t = Instant::now();
    let lnz = rt.with_eager_session(&mut engine, |s| trg::lnz_per_site(s, &x, schedule))?;
    let forward_ms = ms(t);
    let t = Instant::now();
    lnz.backward(&mut engine)?;
    let backward_ms = ms(t);
    let grad = x.grad()?.ok_or("beta has no gradient")?;
    let grad = grad.as_slice::<f64>()?[0];
    let value = scalar_of(&lnz)?;
    let t = Instant::now();
    drop(lnz);
    let drop_ms = ms(t);
    Ok(format!(
        "{{\"mode\": \"eager\", \"steps\": {}, \"schedule\": {}, \"beta\": {}, \"lnz_per_site\": {}, \
         \"forward_ms\": {}, \"backward_ms\": {}, \"drop_ms\": {}, \"grad\": {}}}",
        schedule.len(), list(schedule), num(beta), num(value), num(forward_ms), num(backward_ms),
        num(drop_ms), num(grad)
    ))
}

fn chain(depth: usize, fanout: usize, x0: f64) -> Res<String> {
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
    Ok(format!(
        "{{\"mode\": \"chain\", \"depth\": {depth}, \"fanout\": {fanout}, \"x0\": {}, \"transform_ms\": {}, \
         \"drop_ms\": {}, \"grad_ops\": {}, \"run_ms\": {}, \"grad\": {}}}",
        num(x0), num(transform_ms), num(drop_ms), ran.ops, num(ran.run_ms), num(ran.value)
    ))
}

/// One staged pass: (lnZ/N, d lnZ/N / d beta).
fn staged_once(
    rt: &std::sync::Arc<EagerRuntime>,
    schedule: &[usize],
    beta: f64,
) -> Res<(f64, f64)> {
    let mut eng = CpuEngine::serial();
    let b = rt.variable_from(Tensor::from_vec_col_major(vec![], vec![beta])?)?;
    let t0 = rt.with_eager_session(&mut eng, |s| trg::initial_tensor(s, &b))?;
    // forward: each step on a fresh leaf, so no graph reaches back past it
    let mut cur = t0.clone();
    let mut steps = Vec::with_capacity(schedule.len());
    let mut lnz = 2.0 * beta;
    for (i, &k) in schedule.iter().enumerate() {
        let leaf = rt.variable_from(cur.to_tensor(&mut eng)?)?;
        let d = trg::bond(schedule, i);
        let (next, ln) =
            rt.with_eager_session(&mut eng, |s| trg::trg_step(s, &leaf, d, k))?;
        lnz += scalar_of(&ln)? * 0.5f64.powi(i as i32);
        cur = next.clone();
        steps.push((leaf, next, ln));
    }
    let n = schedule.len();
    let last = rt.variable_from(cur.to_tensor(&mut eng)?)?;
    let d_last = trg::bond(schedule, n);
    let ln_tr =
        rt.with_eager_session(&mut eng, |s| trg::ln_torus_trace(s, &last, d_last))?;
    lnz += scalar_of(&ln_tr)? * 0.5f64.powi(n as i32);
    // backward: T_i reaches lnZ through T_{i+1} and through ln||T_i|| / 2^i
    let seed = |x: f64| {
        let t = Tensor::from_vec_col_major(vec![], vec![x])?;
        EagerTensor::from_tensor_in(t, rt.clone())
    };
    let mut ct = rt.vjp(&mut eng, &ln_tr, &last, &seed(0.5f64.powi(n as i32))?)?;
    for (i, (leaf, next, ln)) in steps.iter().enumerate().rev() {
        let a = rt.vjp(&mut eng, next, leaf, &ct)?;
        let c = rt.vjp(&mut eng, ln, leaf, &seed(0.5f64.powi(i as i32))?)?;
        ct = rt.with_eager_session(&mut eng, |s| s.add(&a, &c))?;
    }
    let g = rt.vjp(&mut eng, &t0, &b, &ct)?;
    Ok((lnz, scalar_of(&g)? + 2.0))
}

fn staged(schedule: &[usize], beta: f64, repeats: usize) -> Res<String> {
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
    Ok(format!(
        "{{\"mode\": \"staged\", \"steps\": {}, \"schedule\": {}, \"beta\": {}, \"lnz_per_site\": {}, \
         \"grad\": {}, \"u\": {}, \"first_ms\": {}, \"min_ms\": {}, \"repeats\": {repeats}}}",
        schedule.len(), list(schedule), num(beta), num(lnz), num(grad), num(-grad), num(first_ms),
        if repeats > 0 { num(min_ms) } else { "null".into() }
    ))
}

// ---- arguments: --name value pairs, checked here, one line on failure ----

struct Args(HashMap<String, String>);

impl Args {
    fn parse(words: &[String], allowed: &[&str]) -> Result<Args, String> {
        let mut map = HashMap::new();
        let mut it = words.iter();
        while let Some(w) = it.next() {
            let name = w.strip_prefix("--").ok_or(format!("unexpected argument {w:?}"))?;
            if !allowed.contains(&name) {
                return Err(format!("unknown option --{name} (allowed: --{})", allowed.join(", --")));
            }
            let value = if name == "eager" || name == "keep" { "1".to_string() } else {
                it.next().ok_or(format!("--{name} needs a value"))?.clone()
            };
            map.insert(name.to_string(), value);
        }
        Ok(Args(map))
    }
    fn int(&self, name: &str, default: Option<usize>, lo: usize, hi: usize) -> Result<usize, String> {
        let v = match self.0.get(name) {
            Some(s) => s.parse::<usize>().map_err(|_| format!("--{name} {s:?} is not a whole number"))?,
            None => default.ok_or(format!("--{name} is required"))?,
        };
        if v < lo || v > hi {
            return Err(format!("--{name} {v} is out of range [{lo}, {hi}]"));
        }
        Ok(v)
    }
    fn real(&self, name: &str, default: f64, lo: f64, hi: f64) -> Result<f64, String> {
        let v = match self.0.get(name) {
            Some(s) => s.parse::<f64>().map_err(|_| format!("--{name} {s:?} is not a number"))?,
            None => default,
        };
        if !(v >= lo && v <= hi) {
            return Err(format!("--{name} {v} is out of range [{lo}, {hi}]"));
        }
        Ok(v)
    }
    /// The truncation schedule: comma-separated kept values, k <= D*D at every step.
    fn schedule(&self) -> Result<Vec<usize>, String> {
        let s = self.0.get("schedule").ok_or("--schedule is required (e.g. 2,4,4,16)")?;
        let ks: Vec<usize> = s
            .split(',')
            .map(|w| w.trim().parse::<usize>())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("--schedule {s:?} is not a comma-separated list of whole numbers"))?;
        if ks.is_empty() || ks.len() > 64 {
            return Err(format!("--schedule has {} steps, allowed 1 to 64", ks.len()));
        }
        for (i, &k) in ks.iter().enumerate() {
            let d = trg::bond(&ks, i);
            if k < 1 || k > (d * d).min(64) {
                return Err(format!("--schedule step {i} keeps {k}: allowed 1 to {} (D = {d})", (d * d).min(64)));
            }
        }
        Ok(ks)
    }
}

fn main() -> ExitCode {
    // a panic inside tenferro-rs: one line naming it (the default hook ends on a hint)
    std::panic::set_hook(Box::new(|info| {
        eprintln!("trgad-tenferro: panic: {}", info.to_string().replace('\n', " "))
    }));
    let words: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: trgad-tenferro whole|chain|staged [--options]; see src/main.rs";
    let Some((cmd, rest)) = words.split_first() else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let parsed: Result<Box<dyn FnOnce() -> Res<String>>, String> = (|| match cmd.as_str() {
        "whole" => {
            let a = Args::parse(rest, &["schedule", "beta", "eager", "keep"])?;
            let (ks, beta) = (a.schedule()?, a.real("beta", 0.3, BETA_MIN, BETA_MAX)?);
            if a.0.contains_key("eager") {
                Ok(Box::new(move || whole_eager(&ks, beta)) as Box<dyn FnOnce() -> Res<String>>)
            } else {
                let keep = a.0.contains_key("keep");
                Ok(Box::new(move || whole(&ks, beta, keep)) as Box<dyn FnOnce() -> Res<String>>)
            }
        }
        "chain" => {
            let a = Args::parse(rest, &["depth", "fanout", "x0"])?;
            let (d, k) = (a.int("depth", None, 1, 64)?, a.int("fanout", Some(2), 1, 8)?);
            let x0 = a.real("x0", 2.0, -1e6, 1e6)?;
            Ok(Box::new(move || chain(d, k, x0)) as Box<dyn FnOnce() -> Res<String>>)
        }
        "staged" => {
            let a = Args::parse(rest, &["schedule", "beta", "repeats"])?;
            let (ks, beta) = (a.schedule()?, a.real("beta", 0.3, BETA_MIN, BETA_MAX)?);
            let repeats = a.int("repeats", Some(3), 0, 100)?;
            Ok(Box::new(move || staged(&ks, beta, repeats)) as Box<dyn FnOnce() -> Res<String>>)
        }
        other => Err(format!("unknown command {other:?}; {usage}")),
    })();
    let job = match parsed {
        Ok(job) => job,
        Err(msg) => {
            eprintln!("trgad-tenferro: {msg}");
            return ExitCode::from(2);
        }
    };
    match job() {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("trgad-tenferro: tenferro-rs failed: {e}");
            ExitCode::from(1)
        }
    }
}
