//! Element-wise, reduction and view operators against a naive f64 reference written here
//! with plain index arithmetic (no library call computes an expected value).
//!
//! Operands have random shapes (rank 0–4, dims 0–5, zeros included) and random layouts:
//! contiguous, permuted (a permutation of a contiguous tensor), sliced with steps (every
//! axis a strided sub-range of a larger tensor) or expanded (size-1 dims broadcast with
//! stride 0). Binary operands broadcast against each other from random shapes. Each case
//! runs in fast mode and in exact mode at 1 and 2 kernel threads: the values agree with
//! the reference within float32 tolerance (views and selecting reductions exactly) and the
//! exact-mode bits are identical at both thread counts.
//!
//! A further family repeats all four on large operands (`large_shape`), where the work is
//! split among threads.
//!
//! `CASES` cases per family per run (a few seconds in release); the `#[ignore]`d
//! `long_run_*` tests run `LONG_CASES` each: `cargo test --release -p om-tests --test
//! prop_reference -- --ignored`.

mod seeded;

use om_core::compute::{Compute, KernelPath, Mode, Settings};
use om_core::{Result, Tensor};
use om_ops as ops;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

const CASES: u32 = 1000;
const LONG_CASES: u32 = 200_000;

/// Cases per run of large operands (33k–100k elements, so element-wise maps and
/// reductions are split among threads and the exact-mode comparison of 1 and 2 threads has
/// teeth).
const LARGE_CASES: u32 = 32;

/// The unit roundoff of f32.
const U: f64 = f32::EPSILON as f64 / 2.0;

type TestResult = std::result::Result<(), TestCaseError>;

// ===== a tiny deterministic generator for values and layouts =====

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }

    /// A value in `[lo, hi)` rounded to f32.
    fn value(&mut self, lo: f64, hi: f64) -> f32 {
        (lo + (hi - lo) * (self.next() >> 11) as f64 / (1u64 << 53) as f64) as f32
    }

    fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut p: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            p.swap(i, self.below(i + 1));
        }
        p
    }
}

// ===== the reference representation: a shape and row-major f64 values =====

#[derive(Clone, Debug)]
struct Ref {
    shape: Vec<usize>,
    vals: Vec<f64>,
}

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Row-major multi-index of flat position `flat` in `shape`.
fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for a in (0..shape.len()).rev() {
        idx[a] = flat % shape[a];
        flat /= shape[a];
    }
    idx
}

/// Flat row-major position of `idx` in `shape`.
fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&i, &d)| acc * d + i)
}

impl Ref {
    /// A new reference of `shape` whose element at `idx` is `self`'s at `source(idx)`.
    fn gather(&self, shape: Vec<usize>, source: impl Fn(&[usize]) -> Vec<usize>) -> Ref {
        let vals = (0..numel(&shape)).map(|k| self.vals[ravel(&source(&unravel(k, &shape)), &self.shape)]).collect();
        Ref { shape, vals }
    }

    fn map(&self, f: impl Fn(f64) -> f64) -> Ref {
        Ref { shape: self.shape.clone(), vals: self.vals.iter().map(|&v| f(v)).collect() }
    }
}

/// An operand: the library's tensor and the reference it must equal.
struct Operand {
    t: Tensor,
    r: Ref,
    layout: &'static str,
}

/// Builds an operand of `shape` with values in `[lo, hi)` in layout `kind`: 0 contiguous,
/// 1 permuted, 2 sliced with steps, 3 expanded (only where a dim can be broadcast).
fn operand(shape: &[usize], kind: u8, seed: u64, lo: f64, hi: f64) -> Result<Operand> {
    let mut rng = Rng(seed);
    let r = shape.len();
    let mut base = |s: &[usize]| -> Result<(Tensor, Ref)> {
        let vals: Vec<f32> = (0..numel(s)).map(|_| rng.value(lo, hi)).collect();
        let r = Ref { shape: s.to_vec(), vals: vals.iter().map(|&v| v as f64).collect() };
        Ok((Tensor::from_vec(vals, s)?, r))
    };
    let mut rng2 = Rng(seed ^ 0xA5A5);
    match kind {
        1 if r >= 2 => {
            // permute(B, q) has shape[i] = B.shape[q[i]], element idx = B[j] with j[q[i]] = idx[i].
            let q = rng2.permutation(r);
            let mut bshape = vec![0; r];
            for i in 0..r {
                bshape[q[i]] = shape[i];
            }
            let (b, br) = base(&bshape)?;
            let t = ops::permute(&b, q.iter().map(|&a| a as isize).collect::<Vec<isize>>())?;
            let rr = br.gather(shape.to_vec(), |idx| {
                let mut j = vec![0; r];
                for i in 0..r {
                    j[q[i]] = idx[i];
                }
                j
            });
            Ok(Operand { t, r: rr, layout: "permuted" })
        }
        2 if r >= 1 => {
            let (starts, steps): (Vec<usize>, Vec<usize>) = (0..r).map(|_| (rng2.below(3), 1 + rng2.below(3))).unzip();
            let bshape: Vec<usize> = (0..r).map(|a| starts[a] + shape[a] * steps[a] + rng2.below(2)).collect();
            let (b, br) = base(&bshape)?;
            let mut t = b;
            for a in 0..r {
                let end = if shape[a] == 0 { starts[a] } else { starts[a] + (shape[a] - 1) * steps[a] + 1 };
                t = ops::slice(&t, a as isize, starts[a] as isize, end as isize, steps[a] as isize)?;
            }
            let rr = br.gather(shape.to_vec(), |idx| (0..r).map(|a| starts[a] + idx[a] * steps[a]).collect());
            Ok(Operand { t, r: rr, layout: "sliced" })
        }
        3 if r >= 1 => {
            // Broadcast a random subset of axes from size 1, after 0–1 dropped leading axes.
            let drop = rng2.below(2).min(r);
            let bshape: Vec<usize> = (drop..r).map(|a| if rng2.coin() { 1 } else { shape[a] }).collect();
            let (b, br) = base(&bshape)?;
            let t = ops::expand(&b, shape.iter().map(|&d| d as isize).collect::<Vec<isize>>())?;
            let rr = br.gather(shape.to_vec(), |idx| (drop..r).map(|a| if bshape[a - drop] == 1 { 0 } else { idx[a] }).collect());
            Ok(Operand { t, r: rr, layout: "expanded" })
        }
        _ => {
            let (t, rr) = base(shape)?;
            Ok(Operand { t, r: rr, layout: "contiguous" })
        }
    }
}

// ===== running under each setting =====

fn settings(mode: Mode, threads: usize) -> Settings {
    Settings { mode, threads, path: KernelPath::best() }
}

/// Runs `f` in fast mode and in exact mode at 1 and 2 threads; returns the fast result and
/// the exact one after checking the two exact runs agree bit for bit (including errors).
fn in_every_mode<T: PartialEq + std::fmt::Debug>(what: &str, f: impl Fn() -> T) -> std::result::Result<(T, T), TestCaseError> {
    let fast = Compute::with(settings(Mode::Fast, 1), &f);
    let exact1 = Compute::with(settings(Mode::Exact, 1), &f);
    let exact2 = Compute::with(settings(Mode::Exact, 2), &f);
    if exact1 != exact2 {
        return Err(TestCaseError::fail(format!("{what}: exact mode differs between 1 and 2 threads: {exact1:?} vs {exact2:?}")));
    }
    Ok((fast, exact1))
}

/// The library's result as shape and bits (so NaNs compare equal in the exact check).
fn observe(r: Result<Tensor>) -> std::result::Result<(Vec<usize>, Vec<u32>), String> {
    match r {
        Ok(t) => Ok((t.shape().to_vec(), t.to_vec().iter().map(|v| v.to_bits()).collect())),
        Err(e) => Err(e.to_string()),
    }
}

/// Checks an observed result against the reference, each element within `tol(i)`
/// (`0.0`: exactly); NaN must meet NaN and infinities the same infinity.
fn check(what: &str, got: &std::result::Result<(Vec<usize>, Vec<u32>), String>, want: &Ref, tol: impl Fn(usize) -> f64) -> TestResult {
    let (shape, bits) = got.as_ref().map_err(|e| TestCaseError::fail(format!("{what}: unexpected error {e}")))?;
    if *shape != want.shape {
        return Err(TestCaseError::fail(format!("{what}: shape {shape:?}, expected {:?}", want.shape)));
    }
    for (i, (&b, &w)) in bits.iter().zip(&want.vals).enumerate() {
        let g = f32::from_bits(b) as f64;
        let ok = if w.is_nan() || g.is_nan() || w.is_infinite() {
            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan())
        } else {
            (g - w).abs() <= tol(i)
        };
        if !ok {
            return Err(TestCaseError::fail(format!(
                "{what}: element {i} {:?} is {g}, expected {w} (tolerance {})",
                unravel(i, shape),
                tol(i)
            )));
        }
    }
    Ok(())
}

fn check_all(what: &str, f: impl Fn() -> Result<Tensor>, want: &Ref, tol: impl Fn(usize) -> f64) -> TestResult {
    let (fast, exact) = in_every_mode(what, || observe(f()))?;
    check(&format!("{what} (fast)"), &fast, want, &tol)?;
    check(&format!("{what} (exact)"), &exact, want, &tol)
}

/// Checks that every mode refuses (an error naming `op`), never a value or a panic.
fn check_refused(what: &str, op: &str, f: impl Fn() -> Result<Tensor>) -> TestResult {
    let (fast, _) = in_every_mode(what, || observe(f()))?;
    match fast {
        Err(e) if e.starts_with(op) => Ok(()),
        other => Err(TestCaseError::fail(format!("{what}: expected an error naming {op}, got {other:?}"))),
    }
}

// ===== element-wise =====

/// erf by its Maclaurin series (converges quickly for the |x| ≤ 3 used here).
fn erf(x: f64) -> f64 {
    let (mut term, mut sum, x2) = (x, x, x * x);
    for n in 1..200 {
        term *= -x2 / n as f64;
        let add = term / (2 * n + 1) as f64;
        sum += add;
        if add.abs() < 1e-17 {
            break;
        }
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

type UnaryOp = (&'static str, fn(&Tensor) -> Result<Tensor>, fn(f64) -> f64, bool);

/// Unary operators: name, library call, reference, and whether the input must be positive.
const UNARY: &[UnaryOp] = &[
    ("neg", |x| ops::neg(x), |v| -v, false),
    ("abs", |x| ops::abs(x), f64::abs, false),
    ("relu", |x| ops::relu(x), |v| v.max(0.0), false),
    ("sigmoid", |x| ops::sigmoid(x), sigmoid, false),
    ("tanh", |x| ops::tanh(x), f64::tanh, false),
    ("exp", |x| ops::exp(x), f64::exp, false),
    ("log", |x| ops::log(x), f64::ln, true),
    ("sqrt", |x| ops::sqrt(x), f64::sqrt, true),
    ("rsqrt", |x| ops::rsqrt(x), |v| 1.0 / v.sqrt(), true),
    ("silu", |x| ops::silu(x), |v| v * sigmoid(v), false),
    ("gelu_erf", |x| ops::gelu(x, ops::GeluForm::Erf), |v| 0.5 * v * (1.0 + erf(v / std::f64::consts::SQRT_2)), false),
    (
        "gelu_tanh",
        |x| ops::gelu(x, ops::GeluForm::Tanh),
        |v| 0.5 * v * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v)).tanh()),
        false,
    ),
    ("softplus", |x| ops::softplus(x, 1.0, 20.0), |v| v.exp().ln_1p(), false),
    ("leaky_relu", |x| ops::leaky_relu(x, 0.1), |v| if v > 0.0 { v } else { f64::from(0.1f32) * v }, false),
    ("clamp", |x| ops::clamp(x, Some(-0.5), Some(0.75)), |v| v.clamp(-0.5, 0.75), false),
    ("square", |x| ops::pow_scalar(x, 2.0), |v| v * v, false),
    ("add_scalar", |x| ops::add_scalar(x, 0.375), |v| v + 0.375, false),
    ("rsub_scalar", |x| ops::rsub_scalar(x, 1.5), |v| 1.5 - v, false),
    ("mul_scalar", |x| ops::mul_scalar(x, -2.5), |v| v * -2.5, false),
    ("div_scalar", |x| ops::div_scalar(x, 4.0), |v| v / 4.0, false),
    ("rdiv_scalar", |x| ops::rdiv_scalar(x, 2.0), |v| 2.0 / v, true),
];

/// Element-wise tolerance: a few units of f32 rounding relative to the value, plus an
/// absolute floor for results near zero (transcendental kernels are accurate to a few ulp
/// of their result, and the f32 rounding of the input feeds through the derivative).
fn elementwise_tol(want: f64) -> f64 {
    16.0 * U * want.abs() + 1e-7
}

fn unary_case(shape: Vec<usize>, kind: u8, seed: u64, which: usize) -> TestResult {
    let (name, f, reference, positive) = UNARY[which % UNARY.len()];
    let (lo, hi) = if positive { (0.125, 3.0) } else { (-3.0, 3.0) };
    let x = operand(&shape, kind, seed, lo, hi).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let want = x.r.map(reference);
    check_all(&format!("{name} of {shape:?} ({})", x.layout), || f(&x.t), &want, |i| elementwise_tol(want.vals[i]))
}

type BinaryOp = (&'static str, fn(&Tensor, &Tensor) -> Result<Tensor>, fn(f64, f64) -> f64);

const BINARY: &[BinaryOp] = &[
    ("add", |a, b| ops::add(a, b), |a, b| a + b),
    ("sub", |a, b| ops::sub(a, b), |a, b| a - b),
    ("mul", |a, b| ops::mul(a, b), |a, b| a * b),
    ("div", |a, b| ops::div(a, b), |a, b| a / b),
    ("maximum", |a, b| ops::maximum(a, b), f64::max),
    ("minimum", |a, b| ops::minimum(a, b), f64::min),
];

/// `out` with `drop` leading axes removed and the axes in `ones` set to 1.
fn broadcast_from(out: &[usize], drop: usize, ones: &[bool]) -> Vec<usize> {
    (drop..out.len()).map(|a| if ones[a] { 1 } else { out[a] }).collect()
}

/// Reads operand `r` (right-aligned with `out`, size-1 axes broadcast) at `idx` of `out`.
fn broadcast_source(r: &Ref, idx: &[usize]) -> Vec<usize> {
    let lead = idx.len() - r.shape.len();
    r.shape.iter().enumerate().map(|(a, &d)| if d == 1 { 0 } else { idx[lead + a] }).collect()
}

#[allow(clippy::too_many_arguments)]
fn binary_case(
    out: Vec<usize>,
    drops: (usize, usize),
    ones: (Vec<bool>, Vec<bool>),
    kinds: (u8, u8),
    seed: u64,
    which: usize,
) -> TestResult {
    let (name, f, reference) = BINARY[which % BINARY.len()];
    let r = out.len();
    let sa = broadcast_from(&out, drops.0.min(r), &ones.0);
    let sb = broadcast_from(&out, drops.1.min(r), &ones.1);
    let a = operand(&sa, kinds.0, seed, -3.0, 3.0).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut b = operand(&sb, kinds.1, seed.wrapping_add(1), -3.0, 3.0).map_err(|e| TestCaseError::fail(e.to_string()))?;
    if name == "div" {
        // Denominators at least 0.5 away from zero.
        let t = ops::add_scalar(&ops::abs(&b.t).map_err(|e| TestCaseError::fail(e.to_string()))?, 0.5)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        b = Operand { t, r: b.r.map(|v| (v.abs() as f32 + 0.5) as f64), layout: b.layout };
    }
    // The broadcast shape: per aligned axis, the other operand's size where one is 1.
    let rank = sa.len().max(sb.len());
    let zero_out: Vec<usize> = (0..rank)
        .map(|a| {
            let (da, db) = (aligned_dim(a, &sa, rank), aligned_dim(a, &sb, rank));
            if da == 1 {
                db
            } else {
                da
            }
        })
        .collect();
    let want = Ref {
        shape: zero_out.clone(),
        vals: (0..numel(&zero_out))
            .map(|k| {
                let idx = unravel(k, &zero_out);
                reference(
                    a.r.vals[ravel(&broadcast_source(&a.r, &idx), &a.r.shape)],
                    b.r.vals[ravel(&broadcast_source(&b.r, &idx), &b.r.shape)],
                )
            })
            .collect(),
    };
    let what = format!("{name} of {sa:?} ({}) and {sb:?} ({})", a.layout, b.layout);
    check_all(&what, || f(&a.t, &b.t), &want, |i| elementwise_tol(want.vals[i]))
}

/// Size of axis `a` of an `r`-axis output in an operand of shape `s` (1 if the operand lacks it).
fn aligned_dim(a: usize, s: &[usize], r: usize) -> usize {
    let lead = r - s.len();
    if a < lead {
        1
    } else {
        s[a - lead]
    }
}

// ===== reductions =====

/// The reduced view of `shape` over `axes` (sorted, distinct): the kept shape (with 1s when
/// `keep`), and for each output element the flat indices of its row, in row-major order.
fn rows(shape: &[usize], axes: &[usize], keep: bool) -> (Vec<usize>, Vec<Vec<usize>>) {
    let kept: Vec<usize> = (0..shape.len()).map(|a| if axes.contains(&a) { 1 } else { shape[a] }).collect();
    let mut groups = vec![Vec::new(); numel(&kept)];
    for k in 0..numel(shape) {
        let idx = unravel(k, shape);
        let out: Vec<usize> = (0..shape.len()).map(|a| if axes.contains(&a) { 0 } else { idx[a] }).collect();
        groups[ravel(&out, &kept)].push(k);
    }
    let out_shape = if keep { kept } else { (0..shape.len()).filter(|a| !axes.contains(a)).map(|a| shape[a]).collect() };
    (out_shape, groups)
}

#[derive(Clone, Copy, Debug)]
enum Reduction {
    Sum,
    Mean,
    Amax,
    Amin,
    MaxDim,
    MinDim,
    Logsumexp,
    Var(bool),
    Std(bool),
    SumAxes,
    MeanAxes,
    AmaxAxes,
    AminAxes,
    LogsumexpAxes,
    VarAxes(bool),
    StdAxes(bool),
}

const REDUCTIONS: &[Reduction] = &[
    Reduction::Sum,
    Reduction::Mean,
    Reduction::Amax,
    Reduction::Amin,
    Reduction::MaxDim,
    Reduction::MinDim,
    Reduction::Logsumexp,
    Reduction::Var(true),
    Reduction::Var(false),
    Reduction::Std(true),
    Reduction::Std(false),
    Reduction::SumAxes,
    Reduction::MeanAxes,
    Reduction::AmaxAxes,
    Reduction::AminAxes,
    Reduction::LogsumexpAxes,
    Reduction::VarAxes(true),
    Reduction::StdAxes(false),
];

fn reduction_case(shape: Vec<usize>, kind: u8, seed: u64, which: usize, axis_pick: Vec<bool>, keep: bool, all: bool) -> TestResult {
    let red = REDUCTIONS[which % REDUCTIONS.len()];
    let x = operand(&shape, kind, seed, -3.0, 3.0).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let r = shape.len();
    let multi = matches!(
        red,
        Reduction::SumAxes
            | Reduction::MeanAxes
            | Reduction::AmaxAxes
            | Reduction::AminAxes
            | Reduction::LogsumexpAxes
            | Reduction::VarAxes(_)
            | Reduction::StdAxes(_)
    );
    let single_only = matches!(red, Reduction::MaxDim | Reduction::MinDim);
    // The reduced axes: a subset for the multi-axis reductions, else one axis (or all).
    // An empty list reduces every axis, as PyTorch's `dim=[]`.
    let axes: Vec<usize> = if multi {
        let picked: Vec<usize> = (0..r).filter(|&a| axis_pick[a]).collect();
        if picked.is_empty() {
            (0..r).collect()
        } else {
            picked
        }
    } else if (all && !single_only) || r == 0 {
        (0..r).collect()
    } else {
        vec![axis_pick.iter().take(r).filter(|&&b| b).count() % r]
    };
    let whole = !multi && ((all && !single_only) || r == 0);
    if single_only && r == 0 {
        return Ok(());
    }
    let (out_shape, groups) = rows(&shape, &axes, keep);
    let out_shape = if whole && !keep { vec![] } else { out_shape };
    let len: usize = axes.iter().map(|&a| shape[a]).product();
    let axis = (!whole).then(|| axes.first().map(|&a| a as isize - if seed & 1 == 1 { r as isize } else { 0 })).flatten();
    let signed: Vec<isize> = if multi && !(0..r).any(|a| axis_pick[a]) {
        vec![]
    } else {
        axes.iter().map(|&a| if seed & 2 == 2 { a as isize - r as isize } else { a as isize }).collect()
    };
    let what = format!("{red:?} over {axes:?} (keep {keep}) of {shape:?} ({})", x.layout);
    let t = &x.t;
    let call = || -> Result<Tensor> {
        match red {
            Reduction::Sum => ops::sum(t, axis, keep),
            Reduction::Mean => ops::mean(t, axis, keep),
            Reduction::Amax => ops::amax(t, axis, keep),
            Reduction::Amin => ops::amin(t, axis, keep),
            Reduction::MaxDim => ops::max_dim(t, axis.unwrap_or(0), keep).map(|(v, _)| v),
            Reduction::MinDim => ops::min_dim(t, axis.unwrap_or(0), keep).map(|(v, _)| v),
            Reduction::Logsumexp => ops::logsumexp(t, axis, keep),
            Reduction::Var(u) => ops::var_correction(t, axis, usize::from(u), keep),
            Reduction::Std(u) => ops::std_correction(t, axis, usize::from(u), keep),
            Reduction::SumAxes => ops::sum(t, &signed[..], keep),
            Reduction::MeanAxes => ops::mean(t, &signed[..], keep),
            Reduction::AmaxAxes => ops::amax(t, &signed[..], keep),
            Reduction::AminAxes => ops::amin(t, &signed[..], keep),
            Reduction::LogsumexpAxes => ops::logsumexp(t, &signed[..], keep),
            Reduction::VarAxes(true) => ops::var(t, &signed[..], keep),
            Reduction::VarAxes(false) => ops::var_correction(t, &signed[..], 0, keep),
            Reduction::StdAxes(true) => ops::std(t, &signed[..], keep),
            Reduction::StdAxes(false) => ops::std_correction(t, &signed[..], 0, keep),
        }
    };
    let op_name = match red {
        Reduction::Sum => "sum",
        Reduction::Mean => "mean",
        Reduction::Amax => "amax",
        Reduction::Amin => "amin",
        Reduction::MaxDim => "max_dim",
        Reduction::MinDim => "min_dim",
        Reduction::Logsumexp => "logsumexp",
        Reduction::Var(_) => "var_correction",
        Reduction::Std(_) => "std_correction",
        Reduction::SumAxes => "sum",
        Reduction::MeanAxes => "mean",
        Reduction::AmaxAxes => "amax",
        Reduction::AminAxes => "amin",
        Reduction::LogsumexpAxes => "logsumexp",
        Reduction::VarAxes(true) => "var",
        Reduction::VarAxes(false) => "var_correction",
        Reduction::StdAxes(true) => "std",
        Reduction::StdAxes(false) => "std_correction",
    };
    // An empty row: PyTorch raises for the selecting reductions; this library also refuses
    // a mean or variance of nothing (PyTorch: NaN), a deliberate difference.
    if len == 0 && !matches!(red, Reduction::Sum | Reduction::SumAxes | Reduction::Logsumexp | Reduction::LogsumexpAxes) {
        return check_refused(&what, op_name, call);
    }
    let vals = |g: &Vec<usize>| g.iter().map(|&k| x.r.vals[k]).collect::<Vec<f64>>();
    let abs_sum = |g: &Vec<usize>| g.iter().map(|&k| x.r.vals[k].abs()).sum::<f64>();
    let mut tol = Vec::new();
    let want: Vec<f64> = groups
        .iter()
        .map(|g| {
            let v = vals(g);
            let n = v.len() as f64;
            let sum: f64 = v.iter().sum();
            // Recursive summation in f32 is within n·u·Σ|x| (plus the final rounding).
            let sum_tol = (n + 2.0) * U * abs_sum(g) + 1e-30;
            let (w, t) = match red {
                Reduction::Sum | Reduction::SumAxes => (sum, sum_tol),
                Reduction::Mean | Reduction::MeanAxes => (sum / n, sum_tol / n + 2.0 * U * (sum / n).abs()),
                Reduction::Amax | Reduction::MaxDim | Reduction::AmaxAxes => (v.iter().copied().fold(f64::NEG_INFINITY, f64::max), 0.0),
                Reduction::Amin | Reduction::MinDim | Reduction::AminAxes => (v.iter().copied().fold(f64::INFINITY, f64::min), 0.0),
                Reduction::Logsumexp | Reduction::LogsumexpAxes => {
                    let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let l = if v.is_empty() { f64::NEG_INFINITY } else { m + v.iter().map(|&y| (y - m).exp()).sum::<f64>().ln() };
                    (l, 16.0 * U * (l.abs() + 1.0))
                }
                Reduction::Var(u) | Reduction::Std(u) | Reduction::VarAxes(u) | Reduction::StdAxes(u) => {
                    let dof = n - if u { 1.0 } else { 0.0 };
                    let mean = sum / n;
                    let var = v.iter().map(|&y| (y - mean) * (y - mean)).sum::<f64>() / dof;
                    let sq: f64 = v.iter().map(|&y| y * y).sum();
                    let var_tol = 4.0 * (n + 4.0) * U * sq / dof.max(1.0) + 1e-30;
                    match (red, dof <= 0.0) {
                        (_, true) => (f64::NAN, 0.0),
                        (Reduction::Var(_) | Reduction::VarAxes(_), _) => (var, var_tol),
                        _ => (var.sqrt(), (var_tol / (2.0 * var.sqrt())).min(var_tol.sqrt()) + 2.0 * U * var.sqrt()),
                    }
                }
            };
            tol.push(t);
            w
        })
        .collect();
    let want = Ref { shape: out_shape, vals: want };
    check_all(&what, call, &want, |i| tol[i])?;
    if let Reduction::MaxDim | Reduction::MinDim = red {
        // The winning index: the first occurrence of the extreme (PyTorch CPU).
        let (fast, exact) = in_every_mode(&what, || {
            let f = if matches!(red, Reduction::MaxDim) { ops::max_dim } else { ops::min_dim };
            f(t, axis.unwrap_or(0), keep).map(|(_, i)| i.to_vec_i32()).map_err(|e| e.to_string())
        })?;
        let want_idx: Vec<i32> = groups
            .iter()
            .map(|g| {
                let v = vals(g);
                let best = if matches!(red, Reduction::MaxDim) {
                    v.iter().copied().fold(f64::NEG_INFINITY, f64::max)
                } else {
                    v.iter().copied().fold(f64::INFINITY, f64::min)
                };
                v.iter().position(|&y| y == best).unwrap_or(0) as i32
            })
            .collect();
        for got in [fast, exact] {
            prop_assert_eq!(got.as_ref().ok(), Some(&want_idx), "{}: indices", what);
        }
    }
    Ok(())
}

// ===== views =====

/// One random view applied to both the tensor and the reference; `None` when it does not
/// apply to the current shape.
fn view_step(t: &Tensor, r: &Ref, rng: &mut Rng) -> Option<(String, Result<Tensor>, Ref)> {
    let rank = r.shape.len();
    let shape = &r.shape;
    match rng.below(10) {
        0 if rank >= 1 => {
            let p = rng.permutation(rank);
            let want = r.gather(p.iter().map(|&a| shape[a]).collect(), |idx| {
                let mut j = vec![0; rank];
                for i in 0..rank {
                    j[p[i]] = idx[i];
                }
                j
            });
            Some((format!("permute {p:?}"), ops::permute(t, p.iter().map(|&a| a as isize).collect::<Vec<isize>>()), want))
        }
        1 if rank >= 1 => {
            let (a, b) = (rng.below(rank), rng.below(rank));
            let mut s = shape.clone();
            s.swap(a, b);
            let want = r.gather(s, |idx| {
                let mut j = idx.to_vec();
                j.swap(a, b);
                j
            });
            Some((
                format!("transpose {a} {b}"),
                ops::transpose(t, a as isize, b as isize - if rng.coin() { rank as isize } else { 0 }),
                want,
            ))
        }
        2 if rank >= 1 => {
            let a = rng.below(rank);
            let d = shape[a];
            let start = rng.below(d + 1);
            let end = start + rng.below(d - start + 1);
            let step = 1 + rng.below(3);
            let mut s = shape.clone();
            s[a] = (end - start).div_ceil(step);
            let want = r.gather(s, |idx| {
                let mut j = idx.to_vec();
                j[a] = start + idx[a] * step;
                j
            });
            Some((
                format!("slice axis {a} {start}..{end} step {step}"),
                ops::slice(t, a as isize, start as isize, end as isize, step as isize),
                want,
            ))
        }
        3 if rank >= 1 && shape.iter().any(|&d| d > 0) => {
            let a = (0..rank).filter(|&a| shape[a] > 0).nth(rng.below(rank)).or_else(|| (0..rank).find(|&a| shape[a] > 0))?;
            let i = rng.below(shape[a]);
            let mut s = shape.clone();
            s.remove(a);
            let want = r.gather(s, |idx| {
                let mut j = idx.to_vec();
                j.insert(a, i);
                j
            });
            Some((format!("select axis {a} index {i}"), ops::select(t, a as isize, i as isize), want))
        }
        4 => {
            // Broadcast size-1 axes to 0..=3 and add up to one leading axis.
            let lead = rng.below(2);
            let mut target: Vec<usize> = (0..lead).map(|_| rng.below(4)).collect();
            target.extend(shape.iter().map(|&d| if d == 1 { rng.below(4) } else { d }));
            let want = r.gather(target.clone(), |idx| idx[lead..].iter().zip(shape).map(|(&i, &d)| if d == 1 { 0 } else { i }).collect());
            let spec: Vec<isize> = target
                .iter()
                .enumerate()
                .map(|(k, &d)| if k >= lead && shape[k - lead] == d && rng.coin() { -1 } else { d as isize })
                .collect();
            Some((format!("expand to {spec:?}"), ops::expand(t, &spec), want))
        }
        5 => {
            // Reshape to a random factorisation: merge two adjacent axes, split one, or flatten.
            let mut s = shape.clone();
            match rng.below(3) {
                0 if rank >= 2 => {
                    let a = rng.below(rank - 1);
                    let m = s[a] * s[a + 1];
                    s.splice(a..a + 2, [m]);
                }
                1 if rank >= 1 => {
                    let a = rng.below(rank);
                    let f = (1..=s[a].max(1)).filter(|f| s[a] == 0 || s[a].is_multiple_of(*f)).nth(rng.below(3)).unwrap_or(1);
                    let rest = if s[a] == 0 { 0 } else { s[a] / f };
                    s.splice(a..a + 1, [f, rest]);
                }
                _ => s = vec![numel(shape)],
            }
            let infer = numel(&s) > 0 && rng.coin();
            let k = rng.below(s.len().max(1));
            let spec: Vec<isize> = s.iter().enumerate().map(|(i, &d)| if infer && i == k { -1 } else { d as isize }).collect();
            let want = Ref { shape: s, vals: r.vals.clone() };
            Some((format!("reshape to {spec:?}"), ops::reshape(t, &spec), want))
        }
        6 if shape.contains(&1) => {
            let ones: Vec<usize> = (0..rank).filter(|&a| shape[a] == 1).collect();
            let a = ones[rng.below(ones.len())];
            let mut s = shape.clone();
            s.remove(a);
            Some((format!("squeeze {a}"), ops::squeeze(t, Some(a as isize)), Ref { shape: s, vals: r.vals.clone() }))
        }
        7 if rank < 5 => {
            let a = rng.below(rank + 1);
            let mut s = shape.clone();
            s.insert(a, 1);
            Some((format!("unsqueeze {a}"), ops::unsqueeze(t, a as isize), Ref { shape: s, vals: r.vals.clone() }))
        }
        8 if rank >= 1 => {
            let a = rng.below(rank);
            let want = r.gather(shape.clone(), |idx| {
                let mut j = idx.to_vec();
                j[a] = shape[a] - 1 - idx[a];
                j
            });
            Some((format!("flip {a}"), ops::flip(t, [a as isize]), want))
        }
        _ => Some(("contiguous".to_string(), ops::contiguous(t).inspect(|c| assert!(c.is_contiguous() || c.numel() == 0)), r.clone())),
    }
}

fn view_case(shape: Vec<usize>, kind: u8, seed: u64, steps: usize) -> TestResult {
    let x = operand(&shape, kind, seed, -3.0, 3.0).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut rng = Rng(seed.rotate_left(17));
    let (mut t, mut r) = (x.t.clone(), x.r.clone());
    let mut what = format!("{shape:?} ({})", x.layout);
    for _ in 0..steps {
        let Some((step, got, want)) = view_step(&t, &r, &mut rng) else { continue };
        what = format!("{what} -> {step}");
        let got = got.map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
        check(&what, &observe(Ok(got.clone())), &want, |_| 0.0)?;
        (t, r) = (got, want);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..seeded::fixed(CASES) })]

    #[test]
    fn unary_ops_match_the_reference(shape in prop::collection::vec(0usize..=5, 0..=4), kind in 0u8..4, seed: u64, which in 0usize..64) {
        unary_case(shape, kind, seed, which)?;
    }

    #[test]
    fn binary_ops_broadcast_and_match_the_reference(out in prop::collection::vec(0usize..=5, 0..=4), drops in (0usize..3, 0usize..3),
                                                   ones in (prop::collection::vec(prop::bool::weighted(0.3), 4), prop::collection::vec(prop::bool::weighted(0.3), 4)),
                                                   kinds in (0u8..4, 0u8..4), seed: u64, which in 0usize..60) {
        binary_case(out, drops, ones, kinds, seed, which)?;
    }

    #[test]
    fn reductions_match_the_reference(shape in prop::collection::vec(0usize..=5, 0..=4), kind in 0u8..4, seed: u64, which in 0usize..130,
                                      axis_pick in prop::collection::vec(any::<bool>(), 4), keep: bool, all in prop::bool::weighted(0.2)) {
        reduction_case(shape, kind, seed, which, axis_pick, keep, all)?;
    }

    #[test]
    fn view_chains_match_the_reference(shape in prop::collection::vec(0usize..=5, 0..=4), kind in 0u8..4, seed: u64, steps in 1usize..=4) {
        view_case(shape, kind, seed, steps)?;
    }
}

/// A shape of 33k–100k elements: one to three axes, the middle one possibly small.
fn large_shape() -> impl Strategy<Value = Vec<usize>> {
    (1usize..=3, 120usize..=250, 270usize..=400, 0u8..3).prop_map(|(a, b, c, form)| match form {
        0 => vec![a * b * c],
        1 => vec![a * b, c],
        _ => vec![a, b, c],
    })
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..seeded::fixed(LARGE_CASES) })]

    #[test]
    fn large_operands_match_the_reference_at_every_thread_count(shape in large_shape(), kinds in (0u8..4, 0u8..4), seed: u64,
                                                                 which in 0usize..130, drops in (0usize..2, 0usize..2),
                                                                 ones in (prop::collection::vec(prop::bool::weighted(0.2), 4), prop::collection::vec(prop::bool::weighted(0.2), 4)),
                                                                 axis_pick in prop::collection::vec(any::<bool>(), 4), keep: bool, steps in 1usize..=3) {
        unary_case(shape.clone(), kinds.0, seed, which)?;
        binary_case(shape.clone(), drops, ones, kinds, seed, which)?;
        reduction_case(shape.clone(), kinds.0, seed, which, axis_pick, keep, false)?;
        view_case(shape, kinds.1, seed, steps)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..seeded::exploring(LONG_CASES) })]

    #[test]
    #[ignore = "long run: cargo test --release -p om-tests --test prop_reference -- --ignored"]
    fn long_run_all_families(shape in prop::collection::vec(0usize..=5, 0..=4), kinds in (0u8..4, 0u8..4), seed: u64, which in 0usize..130,
                             drops in (0usize..3, 0usize..3),
                             ones in (prop::collection::vec(prop::bool::weighted(0.3), 4), prop::collection::vec(prop::bool::weighted(0.3), 4)),
                             axis_pick in prop::collection::vec(any::<bool>(), 4), keep: bool, all in prop::bool::weighted(0.2), steps in 1usize..=4) {
        unary_case(shape.clone(), kinds.0, seed, which)?;
        binary_case(shape.clone(), drops, ones, kinds, seed, which)?;
        reduction_case(shape.clone(), kinds.0, seed, which, axis_pick, keep, all)?;
        view_case(shape, kinds.1, seed, steps)?;
    }
}
