//! Softmax and log-softmax over contiguous rows of length `n` (the last axis), and over
//! any other axis of a row-major tensor seen as `[outer, n, inner]` (lines of stride
//! `inner`, computed in place in blocks of adjacent lines, with no transposed copy).
//!
//! Per row, in both modes:
//! 1. `m` = the row maximum (exact; NaN elements are skipped here and poison the sum
//!    below; `m + 0` so that `-0` and `+0` maxima give the same bits);
//! 2. `e[i] = exp(x[i] - m)` with the fixed-polynomial exp;
//! 3. `s` = the sum of the `e[i]` in `f64`, in increasing element order, rounded once
//!    to `f32` (rows are summed eight side by side, each its own chain);
//! 4. softmax: `e[i] / s`; log-softmax: `(x[i] - m) - log(s)`.
//!
//! A row containing NaN or +inf, or whose elements are all -inf, gives NaN in every
//! element (`-inf - -inf` is NaN), as PyTorch does. Exact mode writes NaN as
//! [`super::CANONICAL_NAN`]. Rows are split over `settings.threads` threads in chunks of
//! whole rows whose size depends only on `n`, so every thread count gives the same bits.
//!
//! A line of stride `inner` goes through the same four steps in the same order, so its
//! values have the bits that the row kernel gives for that line copied into a row
//! (vectors cover adjacent lines instead of adjacent elements of one row).

use super::norm::sum as sum_in_lockstep;
use super::reduce::ROWS;
use super::simd::{Lanes, Scalar};
use super::transcendentals::{exp, log};
use super::{dispatch, finish, LaneTask};
use crate::compute::{Mode, Settings};
use crate::kernels::parallel::for_each_chunk_mut;

/// Target number of elements per parallel chunk (whole rows, at least one).
const CHUNK_ELEMS: usize = 16 * 1024;

/// Softmax of each row of `x` (row length `n`) into `out`.
///
/// Panics unless `x` and `out` have the same length, a multiple of `n`.
pub fn softmax_rows(settings: Settings, x: &[f32], out: &mut [f32], n: usize) {
    lines(settings, x, out, (n, 1), Kind::Softmax);
}

/// Log-softmax of each row of `x` (row length `n`) into `out`.
///
/// Panics unless `x` and `out` have the same length, a multiple of `n`.
pub fn log_softmax_rows(settings: Settings, x: &[f32], out: &mut [f32], n: usize) {
    lines(settings, x, out, (n, 1), Kind::LogSoftmax);
}

/// Softmax along the middle axis of `x` seen as `[outer, n, inner]` into `out` (same
/// layout).
///
/// Panics unless `x` and `out` have the same length, a multiple of `n * inner`.
pub fn softmax_lines(settings: Settings, x: &[f32], out: &mut [f32], n: usize, inner: usize) {
    lines(settings, x, out, (n, inner), Kind::Softmax);
}

/// Log-softmax along the middle axis of `x` seen as `[outer, n, inner]` into `out`.
///
/// Panics unless `x` and `out` have the same length, a multiple of `n * inner`.
pub fn log_softmax_lines(settings: Settings, x: &[f32], out: &mut [f32], n: usize, inner: usize) {
    lines(settings, x, out, (n, inner), Kind::LogSoftmax);
}

#[derive(Clone, Copy)]
enum Kind {
    Softmax,
    LogSoftmax,
}

/// Splits `x` into chunks of whole `[n, inner]` blocks (a size that depends only on the
/// block) over the threads; `inner == 1` runs the row kernel.
fn lines(settings: Settings, x: &[f32], out: &mut [f32], (n, inner): (usize, usize), kind: Kind) {
    assert_eq!(x.len(), out.len(), "softmax: input and output lengths differ");
    if x.is_empty() {
        return;
    }
    let block = n * inner;
    assert!(block > 0 && x.len().is_multiple_of(block), "softmax: length {} is not a multiple of {n} x {inner}", x.len());
    let chunk = (CHUNK_ELEMS / block).max(1) * block;
    for_each_chunk_mut(settings.threads, out, chunk, |c, out| {
        let x = &x[c * chunk..c * chunk + out.len()];
        dispatch(settings.path, LinesTask { x, out, n, inner, kind, mode: settings.mode });
    });
}

struct LinesTask<'a, 'o> {
    x: &'a [f32],
    out: &'o mut [f32],
    n: usize,
    inner: usize,
    kind: Kind,
    mode: Mode,
}

impl LaneTask for LinesTask<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn run<L: Lanes>(self, isa: L::Isa) {
        let LinesTask { x, out, n, inner, kind, mode } = self;
        if inner == 1 {
            let grouped = x.len() / (ROWS * n) * (ROWS * n);
            for (x, out) in x[..grouped].chunks_exact(ROWS * n).zip(out[..grouped].chunks_exact_mut(ROWS * n)) {
                rows_side_by_side::<L>(isa, x, out, n, kind, mode);
            }
            for (x, out) in x[grouped..].chunks_exact(n).zip(out[grouped..].chunks_exact_mut(n)) {
                row::<L>(isa, x, out, kind, mode);
            }
            return;
        }
        let full = inner / L::WIDTH * L::WIDTH;
        for (x, out) in x.chunks_exact(n * inner).zip(out.chunks_exact_mut(n * inner)) {
            for j in (0..full).step_by(L::WIDTH) {
                line_block::<L>(isa, x, out, (n, inner, j), kind, mode);
            }
            for j in full..inner {
                line_block::<f32>(Scalar, x, out, (n, inner, j), kind, mode);
            }
        }
    }
}

/// The `L::WIDTH` adjacent lines starting at column `j` of one `[n, inner]` block: the
/// steps of [`row`] per line, vectorised across the lines.
#[inline(always)]
fn line_block<L: Lanes>(isa: L::Isa, x: &[f32], out: &mut [f32], (n, inner, j): (usize, usize, usize), kind: Kind, mode: Mode) {
    let at = |k: usize| k * inner + j;
    let mut m = L::splat(isa, f32::NEG_INFINITY);
    for k in 0..n {
        let v = L::load(isa, &x[at(k)..]);
        m = L::select(m.lt(v), v, m);
    }
    let m = m.add(L::splat(isa, 0.0));
    let mut sums = [0.0f64; 16];
    for k in 0..n {
        let o = &mut out[at(k)..at(k) + L::WIDTH];
        exp(L::load(isa, &x[at(k)..]).sub(m)).store(o);
        for (s, &e) in sums.iter_mut().zip(o.iter()) {
            *s += e as f64;
        }
    }
    let mut rounded = [0.0f32; 16];
    for (r, &s) in rounded.iter_mut().zip(&sums) {
        *r = s as f32;
    }
    let sum = L::load(isa, &rounded);
    match kind {
        Kind::Softmax => {
            for k in 0..n {
                let o = &mut out[at(k)..at(k) + L::WIDTH];
                finish(L::load(isa, o).div(sum), mode).store(o);
            }
        }
        Kind::LogSoftmax => {
            let lse = log(sum);
            for k in 0..n {
                let v = L::load(isa, &x[at(k)..]).sub(m).sub(lse);
                finish(v, mode).store(&mut out[at(k)..at(k) + L::WIDTH]);
            }
        }
    }
}

/// One row; `L` covers the full vectors, `f32` the tail of each pass.
#[inline(always)]
fn row<L: Lanes>(isa: L::Isa, x: &[f32], out: &mut [f32], kind: Kind, mode: Mode) {
    let m = max_and_exp::<L>(isa, x, out);
    let sum = out.iter().fold(0.0f64, |s, &e| s + e as f64);
    finish_row::<L>(isa, x, out, (m, sum as f32), kind, mode);
}

/// [`ROWS`] rows of `n` (`x`, `out` hold `ROWS · n` values): the steps of [`row`] for
/// each, with the step-3 sums of the rows in lockstep (the norms' sums: one f64 lane or
/// chain per row, so the chains overlap while each row's own sum is the same sequence of
/// adds, the same bits). A row of an attention block (64 keys) spent most of its time
/// waiting on its single chain.
#[inline(always)]
fn rows_side_by_side<L: Lanes>(isa: L::Isa, x: &[f32], out: &mut [f32], n: usize, kind: Kind, mode: Mode) {
    let mut m = [0.0f32; ROWS];
    for ((x, out), m) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)).zip(&mut m) {
        *m = max_and_exp::<L>(isa, x, out);
    }
    let sums = sum_in_lockstep::<L, ROWS>(isa, std::array::from_fn(|r| &out[r * n..(r + 1) * n]), [0.0; ROWS]);
    for (((x, out), &m), &sum) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)).zip(&m).zip(&sums) {
        finish_row::<L>(isa, x, out, (m, sum as f32), kind, mode);
    }
}

/// Steps 1 and 2 of a row: returns its maximum `m` (`+ 0`) and writes `out = exp(x − m)`.
#[inline(always)]
fn max_and_exp<L: Lanes>(isa: L::Isa, x: &[f32], out: &mut [f32]) -> f32 {
    let full = x.len() / L::WIDTH * L::WIDTH;
    let m = larger(row_max::<L>(isa, &x[..full]), row_max::<f32>(Scalar, &x[full..])) + 0.0;
    exp_shifted::<L>(isa, &x[..full], m, &mut out[..full]);
    exp_shifted::<f32>(Scalar, &x[full..], m, &mut out[full..]);
    m
}

/// Step 4 of a row given its maximum and rounded sum `(m, sum)`, in place of the
/// exponentials in `out`.
#[inline(always)]
fn finish_row<L: Lanes>(isa: L::Isa, x: &[f32], out: &mut [f32], (m, sum): (f32, f32), kind: Kind, mode: Mode) {
    let full = x.len() / L::WIDTH * L::WIDTH;
    match kind {
        Kind::Softmax => {
            divide::<L>(isa, &mut out[..full], sum, mode);
            divide::<f32>(Scalar, &mut out[full..], sum, mode);
        }
        Kind::LogSoftmax => {
            let lse = log(sum);
            shifted_sub::<L>(isa, &x[..full], m, lse, &mut out[..full], mode);
            shifted_sub::<f32>(Scalar, &x[full..], m, lse, &mut out[full..], mode);
        }
    }
}

/// Exact maximum of `x` (length a multiple of the width); -inf if empty.
#[inline(always)]
fn row_max<L: Lanes>(isa: L::Isa, x: &[f32]) -> f32 {
    let mut m = L::splat(isa, f32::NEG_INFINITY);
    for v in x.chunks_exact(L::WIDTH).map(|v| L::load(isa, v)) {
        m = L::select(m.lt(v), v, m);
    }
    let mut lanes = [0.0f32; 16];
    m.store(&mut lanes);
    lanes[..L::WIDTH].iter().fold(f32::NEG_INFINITY, |a, &b| larger(a, b))
}

/// `out = exp(x - m)`.
#[inline(always)]
fn exp_shifted<L: Lanes>(isa: L::Isa, x: &[f32], m: f32, out: &mut [f32]) {
    for (x, o) in x.chunks_exact(L::WIDTH).zip(out.chunks_exact_mut(L::WIDTH)) {
        exp(L::load(isa, x).sub(L::splat(isa, m))).store(o);
    }
}

/// `out = out / s`.
#[inline(always)]
fn divide<L: Lanes>(isa: L::Isa, out: &mut [f32], s: f32, mode: Mode) {
    for o in out.chunks_exact_mut(L::WIDTH) {
        finish(L::load(isa, o).div(L::splat(isa, s)), mode).store(o);
    }
}

/// `out = (x - m) - lse`.
#[inline(always)]
fn shifted_sub<L: Lanes>(isa: L::Isa, x: &[f32], m: f32, lse: f32, out: &mut [f32], mode: Mode) {
    for (x, o) in x.chunks_exact(L::WIDTH).zip(out.chunks_exact_mut(L::WIDTH)) {
        let v = L::load(isa, x).sub(L::splat(isa, m)).sub(L::splat(isa, lse));
        finish(v, mode).store(o);
    }
}

/// The larger of two floats by compare-and-select (a NaN `b` is skipped).
#[inline(always)]
fn larger(a: f32, b: f32) -> f32 {
    if a < b {
        b
    } else {
        a
    }
}
