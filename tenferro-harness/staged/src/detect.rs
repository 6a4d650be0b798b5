//! Is `ad.grad` of your loop's whole graph exponential in its steps?  Time it at growing
//! depths and read one line.
//!
//! [`whole_grad_seconds`] traces `depth` steps of your loop as one graph (the same three
//! closures as [`crate::value_and_grad`], on traced tensors) and times `ad.grad` of the
//! value; [`detect`] measures at each depth (any measure: [`crate::value_and_grad`]'s time
//! for the staged loop), applies the per-step rule of the book's chapter "How to detect it"
//! (trgad.growth.verdict), prints the verdict in one line on stderr and returns it.  Where
//! valgrind is installed it prints, on a second line, the callgrind command that counts
//! the instructions inside each `ad.grad` ([`transform`]) instead of timing them: counts
//! are exact, timings are not.

use std::time::Instant;

use tenferro_ad::AdContext;
use tenferro_runtime::TracedTensor;

use crate::Res;

/// Per-step growth a verdict "exponential" needs at least (trgad.growth.verdict.THRESHOLD).
pub const THRESHOLD: f64 = 1.5;
/// Degree of the largest polynomial never called exponential (trgad.growth.verdict.POLY_DEGREE):
/// between depths d1 < d2 a cubic grows at most (d2/d1)^3.
pub const DEGREE: i32 = 3;

/// `ad.grad(y, x)`, never inlined, under a name callgrind can count inside
/// (`--toggle-collect=staged::detect::transform`).
#[inline(never)]
pub fn transform(ad: &AdContext, y: &TracedTensor, x: &TracedTensor) -> Res<TracedTensor> {
    Ok(ad.grad(y, x)?)
}

/// The loop's value as one traced graph of `depth` steps from the traced parameter `x`.
pub fn trace<I, S, F>(x: &TracedTensor, depth: usize, mut init: I, mut step: S, mut finish: F) -> Res<TracedTensor>
where
    I: FnMut(&TracedTensor) -> Res<(Vec<TracedTensor>, TracedTensor)>,
    S: FnMut(usize, &[TracedTensor]) -> Res<(Vec<TracedTensor>, TracedTensor)>,
    F: FnMut(&[TracedTensor]) -> Res<TracedTensor>,
{
    let (mut state, mut value) = init(x)?;
    for i in 0..depth {
        let (next, term) = step(i, &state)?;
        value = (&value + &term)?;
        state = next;
    }
    Ok((&value + &finish(&state)?)?)
}

/// Seconds `ad.grad` of the loop's value takes on the whole graph of `depth` steps at `x`
/// (the gradient graph is dropped after, untimed).
pub fn whole_grad_seconds<I, S, F>(ad: &AdContext, x: f64, depth: usize, init: I, step: S, finish: F) -> Res<f64>
where
    I: FnMut(&TracedTensor) -> Res<(Vec<TracedTensor>, TracedTensor)>,
    S: FnMut(usize, &[TracedTensor]) -> Res<(Vec<TracedTensor>, TracedTensor)>,
    F: FnMut(&[TracedTensor]) -> Res<TracedTensor>,
{
    let x = TracedTensor::from_vec_col_major(vec![], vec![x])?;
    let y = trace(&x, depth, init, step, finish)?;
    let t = Instant::now();
    let g = transform(ad, &y, &x)?;
    let seconds = t.elapsed().as_secs_f64();
    drop(g);
    Ok(seconds)
}

/// What [`detect`] measured and concluded.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub depths: Vec<usize>,
    /// The fastest of the repeats at each depth.
    pub seconds: Vec<f64>,
    /// Growth per step between consecutive depths: (m2 / m1)^(1 / (d2 - d1)).
    pub per_step: Vec<f64>,
    pub exponential: bool,
    /// The one line [`detect`] printed.
    pub line: String,
}

/// Measure at each of `depths` (increasing, at least three; the fastest of `repeats`
/// calls of `measure(depth)`, in seconds), print the verdict in one line on stderr and
/// return it.  Exponential when each of the last two per-step growths exceeds both
/// [`THRESHOLD`] and the most a cubic can grow there, (d2/d1)^(3/(d2-d1)).
pub fn detect(depths: &[usize], repeats: usize, mut measure: impl FnMut(usize) -> Res<f64>) -> Res<Verdict> {
    if depths.len() < 3 || depths.windows(2).any(|w| w[0] >= w[1]) || depths[0] == 0 || repeats == 0 {
        return Err("detect needs three or more increasing depths >= 1 and repeats >= 1".into());
    }
    let mut seconds = Vec::with_capacity(depths.len());
    for &d in depths {
        let mut best = f64::INFINITY;
        for _ in 0..repeats {
            best = best.min(measure(d)?);
        }
        seconds.push(best);
    }
    let per_step: Vec<f64> = (1..depths.len())
        .map(|j| (seconds[j] / seconds[j - 1]).powf(1.0 / (depths[j] - depths[j - 1]) as f64))
        .collect();
    let bound = |j: usize| {
        let (d1, d2) = (depths[j - 1] as f64, depths[j] as f64);
        THRESHOLD.max((d2 / d1).powf(DEGREE as f64 / (d2 - d1)))
    };
    let n = depths.len();
    let exponential = (n - 2..n).all(|j| per_step[j - 1] > bound(j));
    let times: Vec<String> = seconds.iter().map(|s| format!("{:.3} ms", s * 1e3)).collect();
    let growth: Vec<String> = per_step.iter().map(|r| format!("x{r:.2}")).collect();
    let line = format!(
        "{}: {} at depths {:?} (per step {}){}",
        if exponential { "exponential" } else { "not exponential" },
        times.join(", "),
        depths,
        growth.join(", "),
        if exponential { "; stage it: staged::value_and_grad" } else { "" }
    );
    eprintln!("{line}");
    if let Some(hint) = callgrind_hint() {
        eprintln!("{hint}");
    }
    Ok(Verdict { depths: depths.to_vec(), seconds, per_step, exponential, line })
}

/// Where valgrind is on PATH: the command that reruns this program under callgrind,
/// counting only inside [`transform`] and writing one file per call (each depth and
/// repeat, in order), and how to read each file's total.
pub fn callgrind_hint() -> Option<String> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find(|p| p.join("valgrind").is_file())?;
    let args: Vec<String> = std::env::args().map(|a| format!("'{}'", a.replace('\'', "'\\''"))).collect();
    let f = "staged::detect::transform";
    Some(format!(
        "count instead of time: valgrind --tool=callgrind --toggle-collect={f} --dump-after={f} \
         --callgrind-out-file=cg.out {} && grep -H totals: cg.out*",
        args.join(" ")
    ))
}
