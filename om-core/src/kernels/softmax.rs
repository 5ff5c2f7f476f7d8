//! Row-wise softmax and log-softmax over contiguous rows of length `n`.
//!
//! Per row, in both modes:
//! 1. `m` = the row maximum (exact; NaN elements are skipped here and poison the sum
//!    below; `m + 0` so that `-0` and `+0` maxima give the same bits);
//! 2. `e[i] = exp(x[i] - m)` with the fixed-polynomial exp;
//! 3. `s` = the sum of the `e[i]` in `f64`, in increasing element order, rounded once
//!    to `f32`;
//! 4. softmax: `e[i] / s`; log-softmax: `(x[i] - m) - log(s)`.
//!
//! A row containing NaN or +inf, or whose elements are all -inf, gives NaN in every
//! element (`-inf - -inf` is NaN), as PyTorch does. Exact mode writes NaN as
//! [`super::CANONICAL_NAN`]. Rows are split over `settings.threads` threads in chunks of
//! whole rows whose size depends only on `n`, so every thread count gives the same bits.

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
    rows(settings, x, out, n, Kind::Softmax);
}

/// Log-softmax of each row of `x` (row length `n`) into `out`.
///
/// Panics unless `x` and `out` have the same length, a multiple of `n`.
pub fn log_softmax_rows(settings: Settings, x: &[f32], out: &mut [f32], n: usize) {
    rows(settings, x, out, n, Kind::LogSoftmax);
}

#[derive(Clone, Copy)]
enum Kind {
    Softmax,
    LogSoftmax,
}

fn rows(settings: Settings, x: &[f32], out: &mut [f32], n: usize, kind: Kind) {
    assert_eq!(x.len(), out.len(), "softmax: input and output lengths differ");
    if x.is_empty() {
        return;
    }
    assert!(n > 0 && x.len().is_multiple_of(n), "softmax: length {} is not a multiple of {n}", x.len());
    let chunk = (CHUNK_ELEMS / n).max(1) * n;
    for_each_chunk_mut(settings.threads, out, chunk, |c, out| {
        let x = &x[c * chunk..c * chunk + out.len()];
        let task = RowsTask { x, out, n, kind, mode: settings.mode };
        dispatch(settings.path, task);
    });
}

struct RowsTask<'a, 'o> {
    x: &'a [f32],
    out: &'o mut [f32],
    n: usize,
    kind: Kind,
    mode: Mode,
}

impl LaneTask for RowsTask<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn run<L: Lanes>(self, isa: L::Isa) {
        for (x, out) in self.x.chunks_exact(self.n).zip(self.out.chunks_exact_mut(self.n)) {
            row::<L>(isa, x, out, self.kind, self.mode);
        }
    }
}

/// One row; `L` covers the full vectors, `f32` the tail of each pass.
#[inline(always)]
fn row<L: Lanes>(isa: L::Isa, x: &[f32], out: &mut [f32], kind: Kind, mode: Mode) {
    let full = x.len() / L::WIDTH * L::WIDTH;
    let m = larger(row_max::<L>(isa, &x[..full]), row_max::<f32>(Scalar, &x[full..])) + 0.0;
    exp_shifted::<L>(isa, &x[..full], m, &mut out[..full]);
    exp_shifted::<f32>(Scalar, &x[full..], m, &mut out[full..]);
    let sum = out.iter().fold(0.0f64, |s, &e| s + e as f64) as f32;
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
