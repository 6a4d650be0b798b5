//! The crate on the book's TRG (the harness's ../../src/trg.rs): u = -d(lnZ/N)/d beta at
//! beta 0.3, chi 16, staged; then `detect` on `ad.grad` of the whole graph at 2 to 4 steps.
//!
//!     cargo run --release --example trg [-- SCHEDULE]     (SCHEDULE: "2,4,4,16,16", ...)
//!
//! The book shows the parts between the `// [book: ...]` markers (book/tenminutes.md); the
//! slow test tests/test_tenferro_program.py runs it and checks u against the harness's.

#[allow(dead_code)] // the harness's TRG: this example uses its steps, not its whole graph
#[path = "../../src/trg.rs"]
mod trg;

use staged::{Res, detect};
use tenferro_cpu::CpuEngine;
use trg::{Ops, Traced, bond};

// [book: trg loop]
fn init<O: Ops>(o: &mut O, beta: &O::T) -> Res<(Vec<O::T>, O::T)> {
    Ok((vec![trg::initial_tensor(o, beta)?], o.scale(beta, 2.0)?)) // T_0, 2 beta
}
fn step<O: Ops>(o: &mut O, ks: &[usize], i: usize, t: &[O::T]) -> Res<(Vec<O::T>, O::T)> {
    let (next, ln_norm) = trg::trg_step(o, &t[0], bond(ks, i), ks[i])?;
    Ok((vec![next], o.scale(&ln_norm, 0.5f64.powi(i as i32))?)) // T_i+1, ln||T_i|| / 2^i
}
fn finish<O: Ops>(o: &mut O, ks: &[usize], t: &[O::T]) -> Res<O::T> {
    let ln_tr = trg::ln_torus_trace(o, &t[0], bond(ks, ks.len()))?;
    o.scale(&ln_tr, 0.5f64.powi(ks.len() as i32)) // ln tr T_n / 2^n
}
// [book: end]

fn main() -> Res<()> {
    let ks: Vec<usize> = match std::env::args().nth(1) {
        Some(s) => s.split(',').map(str::parse).collect::<Result<_, _>>()?,
        None => [2, 4, 4].into_iter().chain([16; 17]).collect(),
    };
    if ks.len() < 4 {
        return Err(format!("the schedule has {} steps; it needs 4 or more", ks.len()).into());
    }
    // [book: staged call]
    let (rt, mut engine) = (staged::eager_runtime()?, CpuEngine::serial());
    let (lnz, dlnz) = staged::value_and_grad(&rt, &mut engine, 0.3, ks.len(),
        |s, b| init(s, b), |s, i, t| step(s, &ks, i, t), |s, t| finish(s, &ks, t))?;
    println!("lnZ/N = {lnz:.15}, u = {:.15}", -dlnz);
    // [book: end]
    // [book: detect call]
    let ad = staged::ad_context()?;
    let verdict = detect::detect(&[2, 3, 4], 1, |n| {
        detect::whole_grad_seconds(&ad, 0.3, n, |b| init(&mut Traced, b),
            |i, t| step(&mut Traced, &ks, i, t), |t| finish(&mut Traced, &ks[..n], t))
    })?; // prints "exponential: ..." (0.8.0, 0.9.0) or "not exponential: ..."
    // [book: end]
    println!("whole graph: {}", if verdict.exponential { "exponential" } else { "not exponential" });
    Ok(())
}
