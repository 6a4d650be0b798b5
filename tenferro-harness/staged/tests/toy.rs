//! A two-tensor loop whose value and derivative are known in closed form, staged and whole.
//!
//! State (a, b), two vectors of 2: a_0 = (1, e^x), b_0 = (e^(x/8), e^(-x/8)), first term x;
//! step: n = ||a||, a <- (a / n) * b, b <- b * b, term ln n; finish: ln sum(a).  The norms
//! telescope: a_n = a_0 * b_0^(2^n - 1) / (n_0 ... n_{n-1}), so with M = 2^n - 1, c = x / 8,
//!
//!     value = x + ln(e^(M c) + e^(x - M c)),
//!     d value / dx = 1 + (M/8 e^(M c) + (1 - M/8) e^(x - M c)) / (e^(M c) + e^(x - M c)).
//!
//! b <- b * b uses each b twice, so the whole graph's keys double with every step: 0.8.0's
//! `ad.grad` is exponential in the steps, the staged loop linear.

use staged::detect::{self, Verdict};
use staged::{Res, State};
use tenferro_ad::{EagerSession, EagerTensor};
use tenferro_cpu::CpuEngine;
use tenferro_runtime::{ExecutionEngine, GraphCompiler, Runtime, TracedTensor};
use tenferro_tensor::Tensor;

fn exact(x: f64, steps: usize) -> (f64, f64) {
    let (m, c) = ((1u64 << steps) as f64 - 1.0, x / 8.0);
    let (p, q) = ((m * c).exp(), (x - m * c).exp());
    (x + (p + q).ln(), 1.0 + (m / 8.0 * p + (1.0 - m / 8.0) * q) / (p + q))
}

fn vec2(s: &mut EagerSession<'_>, v: [f64; 2]) -> Res<EagerTensor> {
    Ok(s.constant_from(Tensor::from_vec_col_major(vec![2], v.to_vec())?)?)
}

fn init(s: &mut EagerSession<'_>, x: &EagerTensor) -> Res<(State, EagerTensor)> {
    let xx = s.broadcast_in_dim(x, &[2], &[])?;
    let (ka, kb) = (vec2(s, [0.0, 1.0])?, vec2(s, [0.125, -0.125])?);
    let (ea, eb) = (s.mul(&xx, &ka)?, s.mul(&xx, &kb)?);
    Ok((vec![s.exp(&ea)?, s.exp(&eb)?], x.clone()))
}

fn step(s: &mut EagerSession<'_>, _i: usize, st: &[EagerTensor]) -> Res<(State, EagerTensor)> {
    let n = s.reduce_sum_squares(&st[0], Some(&[0usize][..]))?;
    let n = s.sqrt(&n)?;
    let nn = s.broadcast_in_dim(&n, &[2], &[])?;
    let a = s.div(&st[0], &nn)?;
    Ok((vec![s.mul(&a, &st[1])?, s.mul(&st[1], &st[1])?], s.log(&n)?))
}

fn finish(s: &mut EagerSession<'_>, st: &[EagerTensor]) -> Res<EagerTensor> {
    let total = s.reduce_sum(&st[0], Some(&[0usize][..]))?;
    Ok(s.log(&total)?)
}

fn traced_init(x: &TracedTensor) -> Res<(Vec<TracedTensor>, TracedTensor)> {
    let xx = x.broadcast_in_dim(&[2], &[])?;
    let ka = TracedTensor::from_vec_col_major(vec![2], vec![0.0, 1.0])?;
    let kb = TracedTensor::from_vec_col_major(vec![2], vec![0.125, -0.125])?;
    Ok((vec![(&xx * &ka)?.exp()?, (&xx * &kb)?.exp()?], x.clone()))
}

fn traced_step(_i: usize, st: &[TracedTensor]) -> Res<(Vec<TracedTensor>, TracedTensor)> {
    let n = st[0].reduce_sum_squares(None)?.sqrt()?;
    let a = (&st[0] / &n.broadcast_in_dim(&[2], &[])?)?;
    Ok((vec![(&a * &st[1])?, (&st[1] * &st[1])?], n.log()?))
}

fn traced_finish(st: &[TracedTensor]) -> Res<TracedTensor> {
    Ok(st[0].reduce_sum(None)?.log()?)
}

#[test]
fn two_tensor_state_value_and_derivative_exact() -> Res<()> {
    let rt = staged::eager_runtime()?;
    let mut engine = CpuEngine::serial();
    for (x, steps) in [(0.3, 0), (0.3, 1), (0.3, 6), (-0.7, 5), (0.05, 10)] {
        let (value, grad) = staged::value_and_grad(&rt, &mut engine, x, steps, init, step, finish)?;
        let (v, g) = exact(x, steps);
        assert!((value - v).abs() < 1e-10, "x={x} steps={steps}: value {value} != {v}");
        assert!((grad - g).abs() < 1e-10, "x={x} steps={steps}: derivative {grad} != {g}");
    }
    Ok(())
}

#[test]
fn traced_whole_graph_is_the_same_computation() -> Res<()> {
    // the traced closures compute the same value: ad.grad of the whole graph, run
    let ad = staged::ad_context()?;
    let x = TracedTensor::from_vec_col_major(vec![], vec![0.3])?;
    let y = detect::trace(&x, 4, traced_init, traced_step, traced_finish)?;
    let g = detect::transform(&ad, &y, &x)?;
    let grad = run_scalar(&g)?;
    assert!((grad - exact(0.3, 4).1).abs() < 1e-10, "{grad}");
    Ok(())
}

/// Compile and run a traced scalar on the CPU (as the harness's src/main.rs does).
fn run_scalar(out: &TracedTensor) -> Res<f64> {
    let program = GraphCompiler::new().compile(out)?;
    let mut engine = CpuEngine::serial();
    let mut builder = Runtime::builder();
    builder.register_engine(tenferro_cpu::runtime_engine_registration(&engine)?)?;
    let id = tenferro_cpu::runtime_engine_id()?;
    builder.install_extension_module(tenferro_linalg::extension_module::<CpuEngine>(id)?)?;
    let runtime = builder.build()?;
    let prepared = runtime.prepare(&program, &[], &[engine.target()])?;
    let mut outputs = runtime.run(&mut [&mut engine], &prepared, &[])?;
    let tensor = outputs.remove(0).into_tensor(&mut engine)?;
    Ok(tensor.as_slice::<f64>()?[0])
}

const DEPTHS: [usize; 4] = [4, 8, 12, 16];

#[test]
fn detect_calls_the_whole_graph_exponential() -> Res<()> {
    let ad = staged::ad_context()?;
    let v: Verdict = detect::detect(&DEPTHS, 3, |d| {
        detect::whole_grad_seconds(&ad, 0.001, d, traced_init, traced_step, traced_finish)
    })?;
    assert!(v.exponential, "{}", v.line);
    assert!(v.line.starts_with("exponential: "), "{}", v.line);
    Ok(())
}

#[test]
fn detect_calls_the_staged_loop_not_exponential() -> Res<()> {
    let rt = staged::eager_runtime()?;
    let mut engine = CpuEngine::serial();
    let v = detect::detect(&DEPTHS, 3, |d| {
        let t = std::time::Instant::now();
        staged::value_and_grad(&rt, &mut engine, 0.001, d, init, step, finish)?;
        Ok(t.elapsed().as_secs_f64())
    })?;
    assert!(!v.exponential, "{}", v.line);
    assert!(v.per_step.iter().all(|&r| r < 1.5), "{:?}", v.per_step);
    Ok(())
}
