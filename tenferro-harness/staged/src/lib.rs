//! Staged differentiation for tenferro-rs (0.8.0, 0.9.0): the value of a coarse-graining
//! loop (TRG, HOTRG, CTMRG) and its derivative with respect to one parameter, one VJP per
//! step; and [`detect`], which tells whether `ad.grad` of the loop's whole graph grows
//! exponentially with the steps (it does in 0.8.0 and 0.9.0: the book's subject).
//!
//! A loop is three closures on an eager session ([`EagerSession`]):
//!
//! - `init(s, x)`: the state from the parameter `x` (a TRG's one tensor; two or more for
//!   HOTRG's or CTMRG's), and the value's first term (the TRG's 2 beta; a zero scalar if
//!   none);
//! - `step(s, i, state)`: step `i`'s new state and its term of the value, a scalar (the
//!   TRG's ln ||T_i|| / 2^i: the norm divided out, weighted as it enters lnZ/N);
//! - `finish(s, state)`: the last term (the TRG's ln tr T_n / 2^n).
//!
//! The value is the sum of the terms.  [`value_and_grad`] runs each step on fresh leaves
//! holding the previous state's numbers, so no graph reaches back past one step; then it
//! walks back, one pullback per step: the cotangent of a step's inputs is the gradient of
//! its term plus <new state, the new state's cotangent>.  The harness's `staged` mode
//! (../src/main.rs) runs the book's TRG with it; the Python side is trgad.physics.staged.

pub mod detect;

use std::sync::Arc;

use tenferro_ad::{AdContext, EagerRuntime, EagerSession, EagerTensor, Tensor};
use tenferro_cpu::CpuEngine;

pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// A state: the tensors one step hands to the next.
pub type State = Vec<EagerTensor>;

/// An AD context that knows tenferro-linalg's rules (the SVD's among them).
pub fn ad_context() -> Res<AdContext> {
    let rules = tenferro_linalg::semantic_ad_rules()?;
    Ok(AdContext::builder().with_semantic_extension_rules(rules)?.build()?)
}

/// An eager runtime with tenferro-linalg's operations and rules, for the CPU engine.
pub fn eager_runtime() -> Res<Arc<EagerRuntime>> {
    let rt = EagerRuntime::with_ad_context(&ad_context()?)?;
    let id = tenferro_cpu::runtime_engine_id()?;
    rt.install_extension_module(tenferro_linalg::extension_module::<CpuEngine>(id)?)?;
    Ok(rt)
}

/// The number a scalar eager tensor holds.
pub fn scalar_of(t: &EagerTensor, engine: &mut CpuEngine) -> Res<f64> {
    if !t.shape().is_empty() {
        return Err(format!("a term of the value has shape {:?}, not a scalar's", t.shape()).into());
    }
    Ok(t.to_tensor(engine)?.as_slice::<f64>()?[0])
}

// [book: value_and_grad]
/// The value of `init`, `steps` times `step`, then `finish` at `x` (see the crate's doc),
/// and its derivative with respect to `x`: `(value, d value / d x)`.
pub fn value_and_grad<I, S, F>(
    rt: &Arc<EagerRuntime>,
    engine: &mut CpuEngine,
    x: f64,
    steps: usize,
    mut init: I,
    mut step: S,
    mut finish: F,
) -> Res<(f64, f64)>
where
    I: FnMut(&mut EagerSession<'_>, &EagerTensor) -> Res<(State, EagerTensor)>,
    S: FnMut(&mut EagerSession<'_>, usize, &[EagerTensor]) -> Res<(State, EagerTensor)>,
    F: FnMut(&mut EagerSession<'_>, &[EagerTensor]) -> Res<EagerTensor>,
// [book: end]
{
    let param = rt.variable_from(Tensor::from_vec_col_major(vec![], vec![x])?)?;
    let (first, first_term) = rt.with_eager_session(engine, |s| init(s, &param))?;
    let mut value = scalar_of(&first_term, engine)?;
    // forward: (leaves, new state, term) of every step, the finish's with no new state
    let mut stages: Vec<(State, State, EagerTensor)> = Vec::with_capacity(steps + 1);
    let mut state = first.clone();
    for i in 0..steps {
        let leaves = fresh_leaves(rt, engine, &state)?;
        let (next, term) = rt.with_eager_session(engine, |s| step(s, i, &leaves))?;
        value += scalar_of(&term, engine)?;
        state = next.clone();
        stages.push((leaves, next, term));
    }
    let leaves = fresh_leaves(rt, engine, &state)?;
    let term = rt.with_eager_session(engine, |s| finish(s, &leaves))?;
    value += scalar_of(&term, engine)?;
    stages.push((leaves, vec![], term));
    // backward: one pullback per stage, the last first
    let mut cotangent: State = vec![];
    for (leaves, next, term) in stages.iter().rev() {
        cotangent = pull_back(rt, engine, term, next, &cotangent, leaves)?;
    }
    let grad = pull_back(rt, engine, &first_term, &first, &cotangent, &[param])?;
    Ok((value, scalar_of(&grad[0], engine)?))
}

/// Variables holding `state`'s numbers, with no graph behind them.
fn fresh_leaves(rt: &Arc<EagerRuntime>, engine: &mut CpuEngine, state: &[EagerTensor]) -> Res<State> {
    state.iter().map(|t| Ok(rt.variable_from(t.to_tensor(engine)?)?)).collect()
}

/// A constant (no gradient tracked) holding `tensor`.
fn constant(rt: &Arc<EagerRuntime>, tensor: Tensor) -> Res<EagerTensor> {
    Ok(EagerTensor::from_tensor_in(tensor, rt.clone())?)
}

/// The cotangents of `inputs` for one stage: the gradient of term + sum_k <outputs_k,
/// cotangent_k> (the cotangents held constant), one VJP of that scalar per input; zeros
/// for an input it does not depend on.
fn pull_back(
    rt: &Arc<EagerRuntime>,
    engine: &mut CpuEngine,
    term: &EagerTensor,
    outputs: &[EagerTensor],
    cotangent: &[EagerTensor],
    inputs: &[EagerTensor],
) -> Res<State> {
    if outputs.len() != cotangent.len() {
        // a step that changed the number of state tensors: zip would drop some silently
        return Err(format!("a step returned {} state tensors, the state has {}",
                           outputs.len(), cotangent.len()).into());
    }
    let linear = rt.with_eager_session(engine, |s| -> Res<EagerTensor> {
        let mut total = term.clone();
        for (y, c) in outputs.iter().zip(cotangent) {
            let axes: Vec<usize> = (0..y.shape().len()).collect();
            let yc = s.mul(y, c)?;
            let inner = s.reduce_sum(&yc, Some(&axes))?;
            total = s.add(&total, &inner)?;
        }
        Ok(total)
    })?;
    let one = constant(rt, Tensor::from_vec_col_major(vec![], vec![1.0])?)?;
    let mut out = Vec::with_capacity(inputs.len());
    for input in inputs {
        let ct = match rt.vjp_optional(engine, &linear, input, &one)? {
            Some(g) => g.to_tensor(engine)?,
            None => {
                let n = input.shape().iter().product();
                Tensor::from_vec_col_major(input.shape().to_vec(), vec![0.0; n])?
            }
        };
        out.push(constant(rt, ct)?);
    }
    Ok(out)
}
