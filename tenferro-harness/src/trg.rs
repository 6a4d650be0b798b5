//! The book's Levin-Nave TRG (trgad.physics.trg in Python), written once for two tenferro-rs
//! back ends: traced tensors (one graph, `ad.grad`) and an eager session (the staged VJPs).
//! Each back end's [`Ops`] says only what differs: the elementwise operations, alike but for
//! the call's form, are written by a macro.
//!
//! Conventions as in trgad.physics.trg: T[l, u, r, d]; before step i, T_i is divided by its
//! Frobenius norm; sublattice A splits (l, u | r, d), sublattice B (u, r | d, l), each half
//! carrying sqrt(s); the plaquette contraction "pqD,qrC,Brs,Asp->ABCD" gives T_{i+1}. The
//! site tensor is scaled by e^{-2 beta} and lnZ/N gets 2 beta back, for beta > 0:
//!
//!     lnZ/N = 2 beta + sum_i ln||T_i|| / 2^i + ln tr T_n / 2^n.
//!
//! Storage is column-major (tenferro-rs's convention); a reshape of (l, u, r, d) to
//! (l u, r d) groups the same legs as NumPy's, so the singular values and the tensors
//! built from them are the same.

use tenferro_ad::{EagerSession, EagerTensor};
use tenferro_linalg::{EagerSessionLinalgExt, TracedTensorLinalgExt};
use tenferro_runtime::TracedTensor;
use tenferro_tensor::{DotGeneralConfig, SliceConfig, Tensor};

pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The few operations the TRG needs, for one kind of tensor.
pub trait Ops {
    type T: Clone;
    fn constant(&mut self, shape: &[usize], data: Vec<f64>) -> Res<Self::T>;
    fn add(&mut self, a: &Self::T, b: &Self::T) -> Res<Self::T>;
    fn mul(&mut self, a: &Self::T, b: &Self::T) -> Res<Self::T>;
    fn div(&mut self, a: &Self::T, b: &Self::T) -> Res<Self::T>;
    fn exp(&mut self, a: &Self::T) -> Res<Self::T>;
    fn expm1(&mut self, a: &Self::T) -> Res<Self::T>;
    fn log(&mut self, a: &Self::T) -> Res<Self::T>;
    fn sqrt(&mut self, a: &Self::T) -> Res<Self::T>;
    fn sum_squares(&mut self, a: &Self::T) -> Res<Self::T>;
    fn sum(&mut self, a: &Self::T) -> Res<Self::T>;
    fn diag(&mut self, a: &Self::T) -> Res<Self::T>;
    fn broadcast(&mut self, a: &Self::T, shape: &[usize], dims: &[usize]) -> Res<Self::T>;
    fn reshape(&mut self, a: &Self::T, shape: &[usize]) -> Res<Self::T>;
    fn transpose(&mut self, a: &Self::T, perm: &[usize]) -> Res<Self::T>;
    /// The leading block a[0..limits[0], 0..limits[1], ...].
    fn head(&mut self, a: &Self::T, limits: &[usize]) -> Res<Self::T>;
    /// Thin SVD: (U, S, V^T).
    fn svd(&mut self, a: &Self::T) -> Res<(Self::T, Self::T, Self::T)>;
    /// dot_general without batch dimensions: a's free legs, then b's.
    fn contract(&mut self, a: &Self::T, b: &Self::T, ca: &[usize], cb: &[usize]) -> Res<Self::T>;

    fn scalar(&mut self, x: f64) -> Res<Self::T> {
        self.constant(&[], vec![x])
    }
    fn scale(&mut self, a: &Self::T, x: f64) -> Res<Self::T> {
        let c = self.scalar(x)?;
        self.mul(a, &c)
    }
}

fn config(ca: &[usize], cb: &[usize]) -> DotGeneralConfig {
    DotGeneralConfig {
        lhs_contracting_dims: ca.into(),
        rhs_contracting_dims: cb.into(),
        lhs_batch_dims: [].as_slice().into(),
        rhs_batch_dims: [].as_slice().into(),
    }
}

fn head_config(limits: &[usize]) -> SliceConfig {
    SliceConfig { starts: vec![0; limits.len()], limits: limits.to_vec(), strides: vec![1; limits.len()] }
}

/// Traced tensors: every operation adds a node to one graph.
pub struct Traced;

macro_rules! traced_ops {
    (unary: $($u:ident => $m:ident),*; binary: $($b:ident => $op:tt),*) => {
        $(fn $u(&mut self, a: &TracedTensor) -> Res<TracedTensor> { Ok(a.$m()?) })*
        $(fn $b(&mut self, a: &TracedTensor, b: &TracedTensor) -> Res<TracedTensor> { Ok((a $op b)?) })*
    };
}

impl Ops for Traced {
    type T = TracedTensor;
    traced_ops!(unary: exp => exp, expm1 => expm1, log => log, sqrt => sqrt;
                binary: add => +, mul => *, div => /);
    fn constant(&mut self, shape: &[usize], data: Vec<f64>) -> Res<TracedTensor> {
        Ok(TracedTensor::from_vec_col_major(shape.to_vec(), data)?)
    }
    fn sum_squares(&mut self, a: &TracedTensor) -> Res<TracedTensor> {
        Ok(a.reduce_sum_squares(None)?)
    }
    fn sum(&mut self, a: &TracedTensor) -> Res<TracedTensor> {
        Ok(a.reduce_sum(None)?)
    }
    fn diag(&mut self, a: &TracedTensor) -> Res<TracedTensor> {
        Ok(a.extract_diag(0, 1)?)
    }
    fn broadcast(&mut self, a: &TracedTensor, shape: &[usize], dims: &[usize]) -> Res<TracedTensor> {
        Ok(a.broadcast_in_dim(shape, dims)?)
    }
    fn reshape(&mut self, a: &TracedTensor, shape: &[usize]) -> Res<TracedTensor> {
        Ok(a.reshape(shape.to_vec())?)
    }
    fn transpose(&mut self, a: &TracedTensor, perm: &[usize]) -> Res<TracedTensor> {
        Ok(a.transpose(perm)?)
    }
    fn head(&mut self, a: &TracedTensor, limits: &[usize]) -> Res<TracedTensor> {
        Ok(a.slice(head_config(limits))?)
    }
    fn svd(&mut self, a: &TracedTensor) -> Res<(TracedTensor, TracedTensor, TracedTensor)> {
        Ok(a.svd()?)
    }
    fn contract(&mut self, a: &TracedTensor, b: &TracedTensor, ca: &[usize], cb: &[usize]) -> Res<TracedTensor> {
        Ok(a.dot_general(b, config(ca, cb))?)
    }
}

macro_rules! eager_ops {
    ($($name:ident($($arg:ident),*)),*) => {
        $(fn $name(&mut self, $($arg: &EagerTensor),*) -> Res<EagerTensor> {
            Ok(EagerSession::$name(self, $($arg),*)?)
        })*
    };
}

/// An eager session: every operation runs at once and records its pullback.
impl Ops for EagerSession<'_> {
    type T = EagerTensor;
    eager_ops!(exp(a), expm1(a), log(a), sqrt(a), add(a, b), mul(a, b), div(a, b));
    fn constant(&mut self, shape: &[usize], data: Vec<f64>) -> Res<EagerTensor> {
        Ok(self.constant_from(Tensor::from_vec_col_major(shape.to_vec(), data)?)?)
    }
    fn sum_squares(&mut self, a: &EagerTensor) -> Res<EagerTensor> {
        let axes: Vec<usize> = (0..a.shape().len()).collect();
        Ok(self.reduce_sum_squares(a, Some(&axes))?)
    }
    fn sum(&mut self, a: &EagerTensor) -> Res<EagerTensor> {
        let axes: Vec<usize> = (0..a.shape().len()).collect();
        Ok(self.reduce_sum(a, Some(&axes))?)
    }
    fn diag(&mut self, a: &EagerTensor) -> Res<EagerTensor> {
        Ok(self.extract_diag(a, 0, 1)?)
    }
    fn broadcast(&mut self, a: &EagerTensor, shape: &[usize], dims: &[usize]) -> Res<EagerTensor> {
        Ok(self.broadcast_in_dim(a, shape, dims)?)
    }
    fn reshape(&mut self, a: &EagerTensor, shape: &[usize]) -> Res<EagerTensor> {
        Ok(EagerSession::reshape(self, a, shape.to_vec())?)
    }
    fn transpose(&mut self, a: &EagerTensor, perm: &[usize]) -> Res<EagerTensor> {
        Ok(EagerSession::transpose(self, a, perm)?)
    }
    fn head(&mut self, a: &EagerTensor, limits: &[usize]) -> Res<EagerTensor> {
        Ok(self.slice(a, head_config(limits))?)
    }
    fn svd(&mut self, a: &EagerTensor) -> Res<(EagerTensor, EagerTensor, EagerTensor)> {
        Ok(EagerSessionLinalgExt::svd(self, a)?)
    }
    fn contract(&mut self, a: &EagerTensor, b: &EagerTensor, ca: &[usize], cb: &[usize]) -> Res<EagerTensor> {
        Ok(self.dot_general(a, b, config(ca, cb))?)
    }
}

/// Ising site tensor T~ = T e^{-2 beta}, shape (2, 2, 2, 2), from a scalar beta > 0:
/// e^2 M0 + e o M1 + o^2 M2 with e = 1 + e^{-2 beta}, o = -expm1(-2 beta) and the masks
/// M_j = 1/2 where l + u + r + d = 2 j, else 0 (trgad.physics.ising.initial_tensor).
pub fn initial_tensor<O: Ops>(ops: &mut O, beta: &O::T) -> Res<O::T> {
    let m2b = ops.scale(beta, -2.0)?;
    let one = ops.scalar(1.0)?;
    let e_m2b = ops.exp(&m2b)?;
    let even = ops.add(&one, &e_m2b)?;
    let em1 = ops.expm1(&m2b)?;
    let odd = ops.scale(&em1, -1.0)?;
    let shape = [2, 2, 2, 2];
    let mut total: Option<O::T> = None;
    for (j, (a, b)) in [(&even, &even), (&even, &odd), (&odd, &odd)].into_iter().enumerate() {
        let mask: Vec<f64> = (0..16usize)
            .map(|i| if (i.count_ones() as usize) == 2 * j { 0.5 } else { 0.0 })
            .collect();
        let m = ops.constant(&shape, mask)?;
        let w = ops.mul(a, b)?;
        let w = ops.broadcast(&w, &shape, &[])?;
        let term = ops.mul(&w, &m)?;
        total = Some(match total {
            None => term,
            Some(t) => ops.add(&t, &term)?,
        });
    }
    Ok(total.expect("three terms"))
}

/// Truncated SVD of a (D D, D D) matrix into halves U sqrt(S) (D, D, k) and
/// sqrt(S) V^T (k, D, D).
fn split<O: Ops>(ops: &mut O, m: &O::T, d: usize, k: usize) -> Res<(O::T, O::T)> {
    let (u, s, vt) = ops.svd(m)?;
    // the SVD's outputs carry symbolic extents, and a slice's VJP needs constant ones: a
    // reshape to the shape they have (D D, D D) states them
    let n = d * d;
    let (u, s, vt) = (ops.reshape(&u, &[n, n])?, ops.reshape(&s, &[n])?, ops.reshape(&vt, &[n, n])?);
    let (u, s, vt) = (ops.head(&u, &[n, k])?, ops.head(&s, &[k])?, ops.head(&vt, &[k, n])?);
    let r = ops.sqrt(&s)?;
    let r_cols = ops.broadcast(&r, &[n, k], &[1])?;
    let r_rows = ops.broadcast(&r, &[k, n], &[0])?;
    let left = ops.mul(&u, &r_cols)?;
    let right = ops.mul(&r_rows, &vt)?;
    Ok((ops.reshape(&left, &[d, d, k])?, ops.reshape(&right, &[k, d, d])?))
}

/// One Levin-Nave step: T (D, D, D, D), not normalised -> (T_next (k, k, k, k), ln ||T||).
pub fn trg_step<O: Ops>(ops: &mut O, t: &O::T, d: usize, k: usize) -> Res<(O::T, O::T)> {
    let sq = ops.sum_squares(t)?;
    let norm = ops.sqrt(&sq)?;
    let norm_b = ops.broadcast(&norm, &[d, d, d, d], &[])?;
    let t = ops.div(t, &norm_b)?;
    let ma = ops.reshape(&t, &[d * d, d * d])?;
    let (a1, a2) = split(ops, &ma, d, k)?;
    let tb = ops.transpose(&t, &[1, 2, 3, 0])?;
    let mb = ops.reshape(&tb, &[d * d, d * d])?;
    let (b1, b2) = split(ops, &mb, d, k)?;
    // "pqD,qrC,Brs,Asp->ABCD" in three contractions
    let x = ops.contract(&b1, &a1, &[1], &[0])?; // [p, D, r, C]
    let y = ops.contract(&b2, &a2, &[2], &[1])?; // [B, r, A, p]
    let z = ops.contract(&x, &y, &[0, 2], &[3, 1])?; // [D, C, B, A]
    let next = ops.transpose(&z, &[3, 2, 1, 0])?;
    Ok((next, ops.log(&norm)?))
}

/// ln tr T = ln sum_ab T[a, b, a, b] for T (k, k, k, k).
pub fn ln_torus_trace<O: Ops>(ops: &mut O, t: &O::T, k: usize) -> Res<O::T> {
    let m = ops.reshape(t, &[k * k, k * k])?;
    let dg = ops.diag(&m)?;
    let tr = ops.sum(&dg)?;
    ops.log(&tr)
}

/// Bond dimension of T_i: 2 before the first step, then the k kept at the step before.
pub fn bond(schedule: &[usize], i: usize) -> usize {
    if i == 0 { 2 } else { schedule[i - 1] }
}

/// lnZ/N as one graph of `ops`, for beta > 0 and the truncation schedule; the terms are
/// summed in trgad.physics.trg.lnz_from_steps's order (the trace's first), so that the rounding
/// can match JAX's.
pub fn lnz_per_site<O: Ops>(ops: &mut O, beta: &O::T, schedule: &[usize]) -> Res<O::T> {
    let mut t = initial_tensor(ops, beta)?;
    let mut ln_norms = Vec::with_capacity(schedule.len());
    for (i, &k) in schedule.iter().enumerate() {
        let (next, ln) = trg_step(ops, &t, bond(schedule, i), k)?;
        ln_norms.push(ln);
        t = next;
    }
    let n = schedule.len();
    let ln_tr = ln_torus_trace(ops, &t, bond(schedule, n))?;
    let mut total = ops.scale(&ln_tr, 0.5f64.powi(n as i32))?;
    for (i, ln) in ln_norms.iter().enumerate() {
        let term = ops.scale(ln, 0.5f64.powi(i as i32))?;
        total = ops.add(&total, &term)?;
    }
    let weight = ops.scale(beta, 2.0)?;
    ops.add(&total, &weight)
}
