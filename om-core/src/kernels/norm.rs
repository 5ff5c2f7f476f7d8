//! Layer normalisation (rows of a row-major matrix) and 2-d batch normalisation (channels
//! of `[N, C, HW]`), forward and backward, and the per-channel sums of `[N, C, HW]` alone
//! ([`channel_sums`], the convolution's bias gradient) (order and figures:
//! `docs/kernels-norm-pool.md`).
//!
//! The order argument: every statistic is an f64 sum over its own elements in increasing
//! element order (batch norm: image by image, each image's plane in order), started at
//! `0.0` and rounded once to f32; every output element is the same f32 expression of its
//! inputs as the scalar definition. Only where the work happens changes:
//! - sums of several rows (layer norm) or channels (batch norm) run in lockstep, one f64
//!   accumulator per row or channel held in a register, so the additions of different
//!   sums overlap while each sum's own sequence is untouched (the side-by-side sum of
//!   [`super::reduce`]; on AVX-512 lanes the transposing sums of `avx512`, reached only
//!   through the AVX-512 capability token);
//! - the f32 output and `dx` loops have no branch inside (one loop per combination of the
//!   optional affine parameters) and are vectorised, element by element the same
//!   operations;
//! - rows (layer norm) and channels (batch norm) are split into parallel chunks whose size
//!   depends only on the shape; the layer norm's `dγ`, `dβ` column sums are chunked by
//!   columns, each column summed over all rows in row order.
//!
//! So every instruction set and thread count gives the bits of the scalar definition.

use super::reduce::{fold_side_by_side, sum_side_by_side, ROWS};
use super::simd::Lanes;
use crate::compute::Settings;
use crate::kernels::parallel::{for_each_tile, Grid, TileMut, Tiled};

#[cfg(target_arch = "x86_64")]
mod avx512;

/// Target elements per parallel chunk (whole rows or channels, at least one). Measured on
/// an AMD EPYC (Zen 5), 2 shared cores: 8 Ki, 32 Ki and 128 Ki gave the same `om bench
/// norm-pool` times within the noise at 1 and 2 threads. 32 Ki keeps a layer-norm chunk
/// (128 KiB per input) in L2 between its passes; a batch-norm chunk holds at least
/// [`LOCKSTEP`] channels, whatever their size.
const CHUNK_ELEMS: usize = 32 * 1024;

/// Rows or channels whose sums run in lockstep: the side-by-side sum's eight chains, one
/// f64 lane each of an AVX-512 vector (`avx512`).
const LOCKSTEP: usize = ROWS;

/// Fewest columns per chunk of the layer norm's `dγ`, `dβ` sums (each chunk reads all
/// rows, its columns of each row contiguously); a chunk is half a row (rounded up to 16
/// columns) when that is wider: two chunks for two threads, each reading as long a run of
/// a row as it can. In the encoder step (Intel Xeon model 167, 1 thread, `perf` sample
/// shares, rows of 256) the layer norm backward took 2.5% of the samples with 64-column
/// chunks and 2.1% with 128 (the first pass over `x`, cold since the forward, stalls on its
/// loads; longer runs are prefetched better). The chunks never change a bit.
const COL_BLOCK: usize = 64;

/// Runs `$body` inside the instruction set's `#[target_feature]` function (through
/// [`dispatch`](super::dispatch)) with the listed bindings moved in and the set's
/// capability token bound to `$isa`, so that the loops it inlines are vectorised for that
/// set; they are plain IEEE operations and compares, which give the same bits at every
/// width. (A closure would not do: its body is compiled once, outside the
/// `#[target_feature]` functions, when it is called from all of them.)
macro_rules! on_path {
    ($path:expr, $isa:ident, ($($name:ident: $ty:ty),* $(,)?) $body:block) => {{
        struct Task<'a> {
            $($name: $ty,)*
            _life: std::marker::PhantomData<&'a ()>,
        }
        impl $crate::kernels::LaneTask for Task<'_> {
            type Output = ();
            #[inline(always)]
            fn run<L: $crate::kernels::simd::Lanes>(self, $isa: L::Isa) {
                let Task { $($name,)* .. } = self;
                $body
            }
        }
        $crate::kernels::dispatch($path, Task { $($name,)* _life: std::marker::PhantomData });
    }};
}
pub(crate) use on_path;

/// Optional per-feature scale `γ` and shift `β`.
///
/// # Examples
///
/// ```
/// use om_core::kernels::norm::Affine;
/// let gamma = [2.0f32, 0.5];
/// let affine = Affine { gamma: Some(&gamma), beta: None };
/// assert!(affine.beta.is_none());
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Affine<'a> {
    /// The scale, if any.
    pub gamma: Option<&'a [f32]>,
    /// The shift, if any.
    pub beta: Option<&'a [f32]>,
}

/// The statistics of a normalisation, one per row (layer norm) or channel (batch norm):
/// the mean and `rstd = 1/sqrt(var + eps)`.
///
/// # Examples
///
/// ```
/// use om_core::kernels::norm::Stats;
/// let (mean, rstd) = ([0.5f32], [2.0f32]);
/// let stats = Stats { mean: &mean, rstd: &rstd };
/// assert_eq!(stats.mean.len(), stats.rstd.len());
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Stats<'a> {
    /// The means.
    pub mean: &'a [f32],
    /// The reciprocal standard deviations.
    pub rstd: &'a [f32],
}

/// Where a normalisation forward writes: the output `y` and the statistics (one per row
/// or channel).
///
/// # Examples
///
/// ```
/// use om_core::compute::Compute;
/// use om_core::kernels::norm::{layer_norm, Affine, NormOut};
/// let x = [1.0f32, 3.0];
/// let (mut y, mut mean, mut rstd) = ([0.0f32; 2], [0.0f32], [0.0f32]);
/// let out = NormOut { y: &mut y, mean: &mut mean, rstd: &mut rstd };
/// layer_norm(Compute::settings(), &x, 2, Affine { gamma: None, beta: None }, 0.0, out);
/// assert_eq!((mean, rstd, y), ([2.0], [1.0], [-1.0, 1.0]));
/// ```
#[derive(Debug)]
pub struct NormOut<'a> {
    /// The normalised output, shaped like the input.
    pub y: &'a mut [f32],
    /// The means.
    pub mean: &'a mut [f32],
    /// The reciprocal standard deviations.
    pub rstd: &'a mut [f32],
}

/// What a normalisation backward reads: the forward's input `x`, the output gradient `g`
/// (shaped like `x`), the forward's statistics and its scale `γ`, if any.
///
/// # Examples
///
/// ```
/// use om_core::compute::Compute;
/// use om_core::kernels::norm::{layer_norm_backward, NormGrad, ParamSums, Stats};
/// // One row (mean 2, rstd 1): x̂ = [-1, 1].
/// let (x, g, mean, rstd) = ([1.0f32, 3.0], [1.0f32, 0.0], [2.0f32], [1.0f32]);
/// let grad = NormGrad { x: &x, g: &g, stats: Stats { mean: &mean, rstd: &rstd }, gamma: None };
/// let (mut dx, mut dgamma, mut dbeta) = ([0.0f32; 2], [0.0f64; 2], [0.0f64; 2]);
/// let sums = ParamSums { dgamma: &mut dgamma, dbeta: &mut dbeta };
/// layer_norm_backward(Compute::settings(), 2, grad, Some(&mut dx), Some(sums));
/// // dx = (g − mean(g) − x̂·mean(g·x̂))·rstd, dγ = g·x̂, dβ = g.
/// assert_eq!((dx, dgamma, dbeta), ([0.0, 0.0], [-1.0, 0.0], [1.0, 0.0]));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct NormGrad<'a> {
    /// The forward's input.
    pub x: &'a [f32],
    /// The gradient of the output.
    pub g: &'a [f32],
    /// The forward's statistics.
    pub stats: Stats<'a>,
    /// The forward's scale, if any.
    pub gamma: Option<&'a [f32]>,
}

/// The parameter gradients' f64 sums, one per feature (layer norm) or channel (batch
/// norm): `dgamma = Σ g·x̂` and `dbeta = Σ g`, with `x̂ = (x − mean)·rstd`.
///
/// # Examples
///
/// ```
/// use om_core::kernels::norm::ParamSums;
/// let (mut dgamma, mut dbeta) = ([0.0f64; 3], [0.0f64; 3]);
/// let sums = ParamSums { dgamma: &mut dgamma, dbeta: &mut dbeta };
/// assert_eq!(sums.dgamma.len(), sums.dbeta.len());
/// ```
#[derive(Debug)]
pub struct ParamSums<'a> {
    /// `Σ g·x̂`.
    pub dgamma: &'a mut [f64],
    /// `Σ g`.
    pub dbeta: &'a mut [f64],
}

/// `1/sqrt(var + eps)` from an f64 variance rounded once to f32.
///
/// # Examples
///
/// ```
/// use om_core::kernels::norm::inv_std;
/// assert_eq!(inv_std(4.0, 0.0), 0.5);
/// ```
#[inline(always)]
pub fn inv_std(var: f64, eps: f32) -> f32 {
    1.0 / ((var as f32) + eps).sqrt()
}

// ===== lockstep sums =====

/// Converts between `[T; K]` and `[T; 8]` when `K` is 8.
#[cfg(target_arch = "x86_64")]
fn as8<T: Copy, const K: usize>(a: [T; K]) -> Option<[T; 8]> {
    <[T; 8]>::try_from(&a[..]).ok()
}

/// The inverse of [`as8`] (panics unless `K` is 8).
#[cfg(target_arch = "x86_64")]
fn from8<T: Copy, const K: usize>(a: [T; 8]) -> [T; K] {
    <[T; K]>::try_from(&a[..]).expect("K is 8")
}

/// `acc[k] + Σ rows[k][i] as f64`, in increasing `i` (also the softmax rows' sums,
/// `kernels::softmax`).
#[inline(always)]
pub(crate) fn sum<L: Lanes, const K: usize>(isa: L::Isa, rows: [&[f32]; K], acc: [f64; K]) -> [f64; K] {
    sum_ahead::<L, K>(isa, rows, acc, None)
}

/// [`sum`], telling the AVX-512 sums where the rows' next planes are (`next` elements on
/// from each row's start) so that they prefetch them (a hint: the same values and sums).
#[inline(always)]
fn sum_ahead<L: Lanes, const K: usize>(isa: L::Isa, rows: [&[f32]; K], acc: [f64; K], next: Option<usize>) -> [f64; K] {
    #[cfg(target_arch = "x86_64")]
    if let (Some(avx), Some(rows8), Some(acc8)) = (L::avx512(isa), as8(rows), as8(acc)) {
        return from8(avx512::sum(avx, rows8, acc8, next));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (isa, next);
    sum_side_by_side(rows, acc)
}

/// `acc[k] + Σ (rows[k][i] as f64 − mu[k])²`, in increasing `i`.
#[inline(always)]
fn sum_sq<L: Lanes, const K: usize>(isa: L::Isa, rows: [&[f32]; K], mu: [f64; K], acc: [f64; K]) -> [f64; K] {
    #[cfg(target_arch = "x86_64")]
    if let (Some(avx), Some(rows8), Some(mu8), Some(acc8)) = (L::avx512(isa), as8(rows), as8(mu), as8(acc)) {
        return from8(avx512::sum_sq(avx, rows8, mu8, acc8));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = isa;
    fold_side_by_side(rows, acc, |s, k, v| s + (v as f64 - mu[k]) * (v as f64 - mu[k]))
}

/// The operands of [`sum_prod`]: `K` equally long slices of `x` and of `g`, an optional
/// per-element `scale` (at least as long), and per slice the mean `m` and scale `s`; and
/// where the slices' next planes are, if known (`next` elements on from each slice's
/// start, for the AVX-512 sums' prefetches).
#[derive(Clone, Copy)]
struct ProdRows<'a, const K: usize> {
    xs: [&'a [f32]; K],
    gs: [&'a [f32]; K],
    scale: Option<&'a [f32]>,
    m: [f32; K],
    s: [f32; K],
    next: Option<usize>,
}

#[cfg(target_arch = "x86_64")]
impl<'a, const K: usize> ProdRows<'a, K> {
    /// The same operands as `ProdRows<8>`, when `K` is 8.
    #[inline(always)]
    fn as8(self) -> Option<ProdRows<'a, 8>> {
        Some(ProdRows { xs: as8(self.xs)?, gs: as8(self.gs)?, scale: self.scale, m: as8(self.m)?, s: as8(self.s)?, next: self.next })
    }
}

/// With `a = g·scale[i]` (or `g`) and `b = (x − m[k])·s[k]` in f32: `(acc.0[k] + Σ a,
/// acc.1[k] + Σ a·b)` in f64, in increasing `i`.
#[allow(clippy::needless_range_loop)] // element-major, slice-minor
#[inline(always)]
fn sum_prod<L: Lanes, const K: usize>(isa: L::Isa, rows: ProdRows<K>, acc: ([f64; K], [f64; K])) -> ([f64; K], [f64; K]) {
    #[cfg(target_arch = "x86_64")]
    if let (Some(avx), Some(rows8), Some(a8), Some(b8)) = (L::avx512(isa), rows.as8(), as8(acc.0), as8(acc.1)) {
        let (a, b) = avx512::sum_prod(avx, rows8, (a8, b8));
        return (from8(a), from8(b));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = isa;
    let ProdRows { xs, gs, scale, m, s, .. } = rows;
    let len = xs[0].len();
    let (xs, gs) = (xs.map(|r| &r[..len]), gs.map(|r| &r[..len]));
    let (mut acc1, mut acc2) = acc;
    match scale {
        Some(sc) => {
            let sc = &sc[..len];
            for i in 0..len {
                for k in 0..K {
                    let a = (gs[k][i] * sc[i]) as f64;
                    acc1[k] += a;
                    acc2[k] += a * ((xs[k][i] - m[k]) * s[k]) as f64;
                }
            }
        }
        None => {
            for i in 0..len {
                for k in 0..K {
                    let a = gs[k][i] as f64;
                    acc1[k] += a;
                    acc2[k] += a * ((xs[k][i] - m[k]) * s[k]) as f64;
                }
            }
        }
    }
    (acc1, acc2)
}

/// `y = (x − m)·s`, then `·γ[i]` and `+ β[i]` when given (`γ`, `β` indexed by element when
/// `per_elem`, else one value each).
#[inline(always)]
fn normalise(x: &[f32], y: &mut [f32], m: f32, s: f32, affine: Affine, per_elem: bool, ch: usize) {
    let y = &mut y[..x.len()];
    match (affine.gamma, affine.beta) {
        (None, None) => y.iter_mut().zip(x).for_each(|(y, &x)| *y = (x - m) * s),
        (Some(g), None) if per_elem => y.iter_mut().zip(x).zip(&g[..x.len()]).for_each(|((y, &x), &g)| *y = (x - m) * s * g),
        (None, Some(b)) if per_elem => y.iter_mut().zip(x).zip(&b[..x.len()]).for_each(|((y, &x), &b)| *y = (x - m) * s + b),
        (Some(g), Some(b)) if per_elem => {
            let (g, b) = (&g[..x.len()], &b[..x.len()]);
            for (((y, &x), &g), &b) in y.iter_mut().zip(x).zip(g).zip(b) {
                *y = (x - m) * s * g + b;
            }
        }
        (Some(g), None) => y.iter_mut().zip(x).for_each(|(y, &x)| *y = (x - m) * s * g[ch]),
        (None, Some(b)) => y.iter_mut().zip(x).for_each(|(y, &x)| *y = (x - m) * s + b[ch]),
        (Some(g), Some(b)) => {
            let (g, b) = (g[ch], b[ch]);
            y.iter_mut().zip(x).for_each(|(y, &x)| *y = (x - m) * s * g + b);
        }
    }
}

// ===== layer norm =====

/// A layer norm forward's operands: `x` as rows of `d`, the affine parameters and `eps`.
#[derive(Clone, Copy)]
struct LnInput<'a> {
    x: &'a [f32],
    d: usize,
    affine: Affine<'a>,
    eps: f32,
}

/// Layer norm forward over rows of length `d`: `out.mean[r]`, `out.rstd[r]`
/// (`1/sqrt(var + eps)`, biased variance about the rounded mean) and
/// `out.y = (x − mean)·rstd·γ + β`.
///
/// Panics unless `x` and `out.y` hold `out.mean.len()` rows of `d` and `γ`, `β` have
/// length `d`.
///
/// # Examples
///
/// ```
/// use om_core::compute::Compute;
/// use om_core::kernels::norm::{layer_norm, Affine, NormOut};
/// let (x, beta) = ([1.0f32, 3.0, 2.0, 6.0], [10.0f32, 20.0]);
/// let (mut y, mut mean, mut rstd) = ([0.0f32; 4], [0.0f32; 2], [0.0f32; 2]);
/// let out = NormOut { y: &mut y, mean: &mut mean, rstd: &mut rstd };
/// layer_norm(Compute::settings(), &x, 2, Affine { gamma: None, beta: Some(&beta) }, 0.0, out);
/// assert_eq!((mean, rstd), ([2.0, 4.0], [1.0, 0.5]));
/// assert_eq!(y, [9.0, 21.0, 9.0, 21.0]);
/// ```
pub fn layer_norm(settings: Settings, x: &[f32], d: usize, affine: Affine, eps: f32, out: NormOut) {
    let NormOut { y, mean, rstd } = out;
    let rows = mean.len();
    assert!(d > 0 && x.len() == rows * d && y.len() == rows * d && rstd.len() == rows, "layer_norm: lengths");
    assert!(affine.gamma.is_none_or(|g| g.len() == d) && affine.beta.is_none_or(|b| b.len() == d), "layer_norm: affine lengths");
    let per = (CHUNK_ELEMS / d).max(1);
    let outs = (Tiled::row_bands(y, rows, d, per), Tiled::row_bands(mean, rows, 1, per), Tiled::row_bands(rstd, rows, 1, per));
    for_each_tile(settings.threads, outs, |_, (y, mean, rstd)| {
        let (r0, nr) = (mean.origin().0, mean.rows());
        let input = LnInput { x: &x[r0 * d..(r0 + nr) * d], d, affine, eps };
        let out = NormOut { y: y.into_slice(), mean: mean.into_slice(), rstd: rstd.into_slice() };
        on_path!(settings.path, isa, (input: LnInput<'a>, nr: usize, out: NormOut<'a>) {
            let mut out = out;
            let mut r = 0;
            while r + LOCKSTEP <= nr {
                ln_rows::<L, LOCKSTEP>(isa, input, r, &mut out);
                r += LOCKSTEP;
            }
            for r in r..nr {
                ln_rows::<L, 1>(isa, input, r, &mut out);
            }
        });
    });
}

/// Rows `r..r + K` of a layer norm forward.
#[inline(always)]
fn ln_rows<L: Lanes, const K: usize>(isa: L::Isa, input: LnInput, r: usize, out: &mut NormOut) {
    let LnInput { x, d, affine, eps } = input;
    let rows: [&[f32]; K] = std::array::from_fn(|k| &x[(r + k) * d..(r + k + 1) * d]);
    let s = sum::<L, K>(isa, rows, [0.0; K]);
    let m: [f32; K] = s.map(|s| (s / d as f64) as f32);
    let sq = sum_sq::<L, K>(isa, rows, m.map(|m| m as f64), [0.0; K]);
    for k in 0..K {
        let st = inv_std(sq[k] / d as f64, eps);
        out.mean[r + k] = m[k];
        out.rstd[r + k] = st;
        normalise(rows[k], &mut out.y[(r + k) * d..(r + k + 1) * d], m[k], st, affine, true, 0);
    }
}

/// Layer norm backward over rows of length `d`.
///
/// With `x̂ = (x − mean)·rstd` and `ĝ = g·γ` (or `g`): `dx = (ĝ − m1 − x̂·m2)·rstd` per row,
/// where `m1`, `m2` are the f64 means of `ĝ` and `ĝ·x̂` rounded to f32; and, when `sums` is
/// given, `dgamma[i] = Σ_rows g·x̂` and `dbeta[i] = Σ_rows g` (f64, row order).
///
/// Panics unless the lengths agree (`grad.stats.mean.len()` rows of `d`).
///
/// # Examples
///
/// ```
/// use om_core::compute::Compute;
/// use om_core::kernels::norm::{layer_norm_backward, NormGrad, Stats};
/// // Two rows of x̂ = [-1, 1]; only dx wanted.
/// let (x, g) = ([1.0f32, 3.0, 0.0, 4.0], [2.0f32, 2.0, 1.0, -1.0]);
/// let (mean, rstd) = ([2.0f32, 2.0], [1.0f32, 0.5]);
/// let grad = NormGrad { x: &x, g: &g, stats: Stats { mean: &mean, rstd: &rstd }, gamma: None };
/// let mut dx = [0.0f32; 4];
/// layer_norm_backward(Compute::settings(), 2, grad, Some(&mut dx), None);
/// assert_eq!(dx, [0.0, 0.0, 0.0, 0.0]);
/// ```
pub fn layer_norm_backward(settings: Settings, d: usize, grad: NormGrad, dx: Option<&mut [f32]>, sums: Option<ParamSums>) {
    let NormGrad { x, g, stats: Stats { mean, rstd }, gamma } = grad;
    let rows = mean.len();
    assert!(d > 0 && x.len() == rows * d && g.len() == rows * d && rstd.len() == rows, "layer_norm: lengths");
    assert!(gamma.is_none_or(|gm| gm.len() == d), "layer_norm: gamma length");
    if let Some(ParamSums { dgamma, dbeta }) = sums {
        assert!(dgamma.len() == d && dbeta.len() == d, "layer_norm: sum lengths");
        let width = d.div_ceil(2).next_multiple_of(16).max(COL_BLOCK);
        let outs = (Tiled::contiguous(dgamma, width), Tiled::contiguous(dbeta, width));
        for_each_tile(settings.threads, outs, |_, (dgamma, dbeta)| {
            let c0 = dgamma.origin().1;
            let sums = ParamSums { dgamma: dgamma.into_slice(), dbeta: dbeta.into_slice() };
            on_path!(settings.path, _isa, (grad: NormGrad<'a>, d: usize, c0: usize, sums: ParamSums<'a>) {
                ln_column_sums(grad, d, c0, sums)
            });
        });
    }
    let Some(dx) = dx else { return };
    assert_eq!(dx.len(), rows * d, "layer_norm: dx length");
    let per = (CHUNK_ELEMS / d).max(1);
    for_each_tile(settings.threads, Tiled::row_bands(dx, rows, d, per), |_, dx| {
        let (r0, nr) = (dx.origin().0, dx.rows());
        let dx = dx.into_slice();
        let (x, g) = (&x[r0 * d..(r0 + nr) * d], &g[r0 * d..(r0 + nr) * d]);
        let stats = Stats { mean: &mean[r0..r0 + nr], rstd: &rstd[r0..r0 + nr] };
        let grad = NormGrad { x, g, stats, gamma };
        on_path!(settings.path, isa, (grad: NormGrad<'a>, d: usize, nr: usize, dx: &'a mut [f32]) {
            let mut r = 0;
            while r + LOCKSTEP <= nr {
                ln_dx_rows::<L, LOCKSTEP>(isa, grad, d, r, dx);
                r += LOCKSTEP;
            }
            for r in r..nr {
                ln_dx_rows::<L, 1>(isa, grad, d, r, dx);
            }
        });
    });
}

/// Columns `c0..c0 + sums.dgamma.len()` of `Σ_rows g·x̂` and `Σ_rows g`: the rows in
/// order, each row's columns read contiguously and added into the sums (which stay in L1),
/// so `x` and `g` stream in row order. Summing a few columns over all rows in registers
/// instead read each row 128 bytes at a time with a row's stride between reads: the loads
/// missed (half of that loop's samples on one load, Intel Xeon, perf).
#[inline(always)]
fn ln_column_sums(grad: NormGrad, d: usize, c0: usize, sums: ParamSums) {
    let NormGrad { x, g, stats: Stats { mean, rstd }, .. } = grad;
    let ParamSums { dgamma: dg, dbeta: db } = sums;
    let nc = dg.len();
    let db = &mut db[..nc];
    dg.fill(0.0);
    db.fill(0.0);
    for (row, (&m, &s)) in mean.iter().zip(rstd).enumerate() {
        let (x, g) = (&x[row * d + c0..][..nc], &g[row * d + c0..][..nc]);
        for i in 0..nc {
            let xh = (x[i] - m) * s;
            dg[i] += g[i] as f64 * xh as f64;
            db[i] += g[i] as f64;
        }
    }
}

/// `dx` of rows `r..r + K`.
#[inline(always)]
fn ln_dx_rows<L: Lanes, const K: usize>(isa: L::Isa, grad: NormGrad, d: usize, r: usize, dx: &mut [f32]) {
    let NormGrad { x, g, stats: Stats { mean, rstd }, gamma } = grad;
    let xs: [&[f32]; K] = std::array::from_fn(|k| &x[(r + k) * d..(r + k + 1) * d]);
    let gs: [&[f32]; K] = std::array::from_fn(|k| &g[(r + k) * d..(r + k + 1) * d]);
    let m: [f32; K] = std::array::from_fn(|k| mean[r + k]);
    let s: [f32; K] = std::array::from_fn(|k| rstd[r + k]);
    let (s1, s2) = sum_prod::<L, K>(isa, ProdRows { xs, gs, scale: gamma, m, s, next: None }, ([0.0; K], [0.0; K]));
    for k in 0..K {
        let m1 = (s1[k] / d as f64) as f32;
        let m2 = (s2[k] / d as f64) as f32;
        let (mk, sk) = (m[k], s[k]);
        let dx = &mut dx[(r + k) * d..(r + k + 1) * d];
        let (x, g) = (xs[k], gs[k]);
        match gamma {
            Some(gm) => {
                for (((dx, &x), &g), &gm) in dx.iter_mut().zip(x).zip(g).zip(&gm[..d]) {
                    *dx = (g * gm - m1 - (x - mk) * sk * m2) * sk;
                }
            }
            None => {
                for ((dx, &x), &g) in dx.iter_mut().zip(x).zip(g) {
                    *dx = (g - m1 - (x - mk) * sk * m2) * sk;
                }
            }
        }
    }
}

// ===== batch norm =====

/// The shape of a batch norm: `n` images of `c` channels of `hw` elements.
///
/// # Examples
///
/// ```
/// use om_core::kernels::norm::BatchShape;
/// let shape = BatchShape { n: 2, c: 3, hw: 16 };
/// assert_eq!(shape.n * shape.c * shape.hw, 96);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchShape {
    /// Images.
    pub n: usize,
    /// Channels.
    pub c: usize,
    /// Elements per channel plane (`H·W`).
    pub hw: usize,
}

impl BatchShape {
    /// Channels per parallel chunk: a multiple of [`LOCKSTEP`] near [`CHUNK_ELEMS`] elements.
    fn chunk_channels(&self) -> usize {
        (CHUNK_ELEMS / (self.n * self.hw).max(1)).max(1).next_multiple_of(LOCKSTEP)
    }

    /// A per-channel output (`c` values) cut into the chunks of channels.
    fn channels<'a, T>(&self, s: &'a mut [T]) -> Tiled<'a, T> {
        Tiled::contiguous(s, self.chunk_channels())
    }

    /// An `[N, C, HW]` output cut into the chunks of channels: the `n` rows of `c·hw`
    /// values (one per image) in column bands of whole planes, so that a chunk's tile holds
    /// its channels' planes of every image (row `b`: image `b`'s planes, in channel order).
    fn planes<'a>(&self, y: &'a mut [f32]) -> Tiled<'a, f32> {
        let width = self.c * self.hw;
        let grid = Grid { rows: self.n, cols: width, row_stride: width, band_rows: self.n, band_cols: self.chunk_channels() * self.hw };
        Tiled::new(y, grid)
    }

    /// The plane of channel `ch` in image `b`.
    #[inline(always)]
    fn plane(&self, b: usize, ch: usize) -> std::ops::Range<usize> {
        let start = (b * self.c + ch) * self.hw;
        start..start + self.hw
    }
}

/// Runs `f::<L, K>(first, args..)` over `c0..c0 + nc` in groups of [`LOCKSTEP`] channels,
/// then one by one.
macro_rules! in_lockstep {
    ($c0:expr, $nc:expr, $f:ident($($arg:expr),*)) => {{
        let (c0, nc) = ($c0, $nc);
        let mut ch = c0;
        while ch + LOCKSTEP <= c0 + nc {
            $f::<L, LOCKSTEP>(ch, $($arg),*);
            ch += LOCKSTEP;
        }
        while ch < c0 + nc {
            $f::<L, 1>(ch, $($arg),*);
            ch += 1;
        }
    }};
}

/// One chunk's per-channel statistics of a batch norm forward in training (the chunk's
/// channels `c0..`): the mean, the sum of squared deviations `sq` and `rstd`.
struct BnStats<'a> {
    mean: &'a mut [f32],
    sq: &'a mut [f64],
    rstd: &'a mut [f32],
}

/// Batch norm forward in training: per channel the mean, the sum of squared deviations
/// from it (`sq`, for the running variance) and `rstd = 1/sqrt(sq/count + eps)`, all over
/// the images and plane in order; then `y = (x − mean)·rstd·γ + β`.
///
/// Panics unless the lengths agree with `shape`.
///
/// # Examples
///
/// ```
/// use om_core::compute::Compute;
/// use om_core::kernels::norm::{batch_norm, Affine, BatchShape, NormOut};
/// // Two images of one channel of two elements: the channel holds 1, 3, 5, 7.
/// let x = [1.0f32, 3.0, 5.0, 7.0];
/// let (mut y, mut mean, mut rstd, mut sq) = ([0.0f32; 4], [0.0f32], [0.0f32], [0.0f64]);
/// let out = NormOut { y: &mut y, mean: &mut mean, rstd: &mut rstd };
/// let shape = BatchShape { n: 2, c: 1, hw: 2 };
/// batch_norm(Compute::settings(), shape, &x, Affine { gamma: None, beta: None }, 0.0, out, &mut sq);
/// assert_eq!((mean, sq), ([4.0], [20.0]));
/// assert_eq!(rstd[0], 1.0 / 5f32.sqrt());
/// ```
pub fn batch_norm(settings: Settings, shape: BatchShape, x: &[f32], affine: Affine, eps: f32, out: NormOut, sq: &mut [f64]) {
    let BatchShape { n, c, hw } = shape;
    let NormOut { y, mean, rstd } = out;
    assert!(x.len() == n * c * hw && y.len() == x.len() && mean.len() == c && sq.len() == c && rstd.len() == c, "batch_norm: lengths");
    assert!(affine.gamma.is_none_or(|g| g.len() == c) && affine.beta.is_none_or(|b| b.len() == c), "batch_norm: affine lengths");
    let outs = (shape.channels(mean), shape.channels(sq), shape.channels(rstd), shape.planes(y));
    for_each_tile(settings.threads, outs, |_, (mean, sq, rstd, y)| {
        let (c0, nc) = (mean.origin().1, mean.cols());
        let stats = BnStats { mean: mean.into_slice(), sq: sq.into_slice(), rstd: rstd.into_slice() };
        on_path!(settings.path, isa, (c0: usize, nc: usize, shape: BatchShape, x: &'a [f32], eps: f32, affine: Affine<'a>, stats: BnStats<'a>, y: TileMut<'a, f32>) {
            let (mut stats, mut y) = (stats, y);
            in_lockstep!(c0, nc, bn_stats(isa, c0, shape, x, eps, &mut stats));
            let (mean, rstd) = (&*stats.mean, &*stats.rstd);
            // Images in reverse: the last planes the sums read are the ones still in cache.
            for b in (0..shape.n).rev() {
                let y = y.row(b);
                for ch in c0..c0 + nc {
                    let y = &mut y[(ch - c0) * shape.hw..][..shape.hw];
                    normalise(&x[shape.plane(b, ch)], y, mean[ch - c0], rstd[ch - c0], affine, false, ch);
                }
            }
        });
    });
}

/// Statistics of channels `ch..ch + K` (`c0` is the chunk's first channel).
#[inline(always)]
fn bn_stats<L: Lanes, const K: usize>(ch: usize, isa: L::Isa, c0: usize, shape: BatchShape, x: &[f32], eps: f32, out: &mut BnStats) {
    let planes = |b: usize| -> [&[f32]; K] { std::array::from_fn(|k| &x[shape.plane(b, ch + k)]) };
    let s = channel_totals::<L, K>(isa, ch, shape, x);
    let count = (shape.n * shape.hw) as f64;
    let m: [f32; K] = s.map(|s| (s / count) as f32);
    let mu = m.map(|m| m as f64);
    let mut q = [0.0f64; K];
    for b in 0..shape.n {
        q = sum_sq::<L, K>(isa, planes(b), mu, q);
    }
    for k in 0..K {
        out.mean[ch - c0 + k] = m[k];
        out.sq[ch - c0 + k] = q[k];
        out.rstd[ch - c0 + k] = inv_std(q[k] / count, eps);
    }
}

/// Batch norm forward with given statistics (eval): `y = (x − mean)·rstd·γ + β` per channel.
///
/// Panics unless the lengths agree with `shape`.
///
/// # Examples
///
/// ```
/// use om_core::compute::Compute;
/// use om_core::kernels::norm::{batch_norm_apply, Affine, BatchShape, Stats};
/// let (x, mean, rstd) = ([1.0f32, 3.0], [2.0f32], [0.5f32]);
/// let mut y = [0.0f32; 2];
/// let stats = Stats { mean: &mean, rstd: &rstd };
/// batch_norm_apply(Compute::settings(), BatchShape { n: 1, c: 1, hw: 2 }, &x, stats, Affine { gamma: None, beta: None }, &mut y);
/// assert_eq!(y, [-0.5, 0.5]);
/// ```
pub fn batch_norm_apply(settings: Settings, shape: BatchShape, x: &[f32], stats: Stats, affine: Affine, y: &mut [f32]) {
    let BatchShape { n, c, hw } = shape;
    let Stats { mean, rstd } = stats;
    assert!(x.len() == n * c * hw && y.len() == x.len() && mean.len() == c && rstd.len() == c, "batch_norm: lengths");
    assert!(affine.gamma.is_none_or(|g| g.len() == c) && affine.beta.is_none_or(|b| b.len() == c), "batch_norm: affine lengths");
    for_each_tile(settings.threads, shape.planes(y), |_, y| {
        // A chunk exists only when there are images and planes (`hw > 0`).
        let (c0, nc) = (y.origin().1 / hw, y.cols() / hw);
        on_path!(settings.path, _isa, (c0: usize, nc: usize, shape: BatchShape, x: &'a [f32], stats: Stats<'a>, affine: Affine<'a>, y: TileMut<'a, f32>) {
            let mut y = y;
            for b in 0..shape.n {
                let y = y.row(b);
                for ch in c0..c0 + nc {
                    let y = &mut y[(ch - c0) * shape.hw..][..shape.hw];
                    normalise(&x[shape.plane(b, ch)], y, stats.mean[ch], stats.rstd[ch], affine, false, ch);
                }
            }
        });
    });
}

/// Batch norm backward: per channel `sums.dbeta = Σ g` and `sums.dgamma = Σ g·x̂` (f64,
/// images and plane in order; `x̂ = (x − mean)·rstd`), then, if `dx` is given,
/// `dx = k·(g − mg − x̂·mgx)` in training or `k·g` in eval, with `k = γ·rstd` (or `rstd`)
/// and `mg`, `mgx` those sums over `n·hw` rounded to f32.
///
/// Panics unless the lengths agree with `shape`.
///
/// # Examples
///
/// ```
/// use om_core::compute::Compute;
/// use om_core::kernels::norm::{batch_norm_backward, BatchShape, NormGrad, ParamSums, Stats};
/// // One channel of x̂ = [-1, 1] and a gradient that only shifts: dx is zero in training.
/// let (x, g, mean, rstd) = ([1.0f32, 3.0], [1.0f32, 1.0], [2.0f32], [1.0f32]);
/// let grad = NormGrad { x: &x, g: &g, stats: Stats { mean: &mean, rstd: &rstd }, gamma: None };
/// let (mut dgamma, mut dbeta, mut dx) = ([0.0f64], [0.0f64], [9.0f32; 2]);
/// let sums = ParamSums { dgamma: &mut dgamma, dbeta: &mut dbeta };
/// batch_norm_backward(Compute::settings(), BatchShape { n: 1, c: 1, hw: 2 }, grad, true, sums, Some(&mut dx));
/// assert_eq!((dgamma, dbeta, dx), ([0.0], [2.0], [0.0, 0.0]));
/// ```
pub fn batch_norm_backward(settings: Settings, shape: BatchShape, grad: NormGrad, training: bool, sums: ParamSums, dx: Option<&mut [f32]>) {
    let NormGrad { x, g, stats, gamma } = grad;
    assert!(g.len() == shape.n * shape.c * shape.hw, "batch_norm: lengths");
    let saved = BnSaved { x, stats, gamma, training };
    match dx {
        Some(dx) => {
            assert!(dx.len() == g.len(), "batch_norm: lengths");
            bn_backward(settings, shape, saved, sums, (Some(g), Some(shape.planes(dx))));
        }
        None => bn_backward(settings, shape, saved, sums, (Some(g), None)),
    }
}

/// [`batch_norm_backward`] in training with `dx` written over `g`: each chunk of channels
/// reads its planes of `g` for the sums, then overwrites them with `dx` (no other chunk
/// reads them). The same bits as a separate `dx`; the output's buffer is one the cache
/// already holds (`g` was just read) instead of a fresh one fetched before it is written.
///
/// Panics unless the lengths agree with `shape`.
///
/// # Examples
///
/// ```
/// use om_core::compute::Compute;
/// use om_core::kernels::norm::{batch_norm_backward_over_g, BatchShape, ParamSums, Stats};
/// let (x, mut g, mean, rstd) = ([1.0f32, 3.0], [1.0f32, 1.0], [2.0f32], [1.0f32]);
/// let (mut dgamma, mut dbeta) = ([0.0f64], [0.0f64]);
/// let sums = ParamSums { dgamma: &mut dgamma, dbeta: &mut dbeta };
/// let stats = Stats { mean: &mean, rstd: &rstd };
/// batch_norm_backward_over_g(Compute::settings(), BatchShape { n: 1, c: 1, hw: 2 }, &x, stats, None, sums, &mut g);
/// assert_eq!((dgamma, dbeta, g), ([0.0], [2.0], [0.0, 0.0]));
/// ```
pub fn batch_norm_backward_over_g(
    settings: Settings,
    shape: BatchShape,
    x: &[f32],
    stats: Stats,
    gamma: Option<&[f32]>,
    sums: ParamSums,
    g: &mut [f32],
) {
    assert!(g.len() == shape.n * shape.c * shape.hw, "batch_norm: lengths");
    bn_backward(settings, shape, BnSaved { x, stats, gamma, training: true }, sums, (None, Some(shape.planes(g))));
}

/// What a batch norm backward reads besides `g`: the forward's input, statistics and
/// scale, and whether it ran in training.
#[derive(Clone, Copy)]
struct BnSaved<'a> {
    x: &'a [f32],
    stats: Stats<'a>,
    gamma: Option<&'a [f32]>,
    training: bool,
}

/// The body of the batch norm backwards: `g` read from the slice, with `dx` (if any)
/// written into the tiles; or, with no slice, `g` read from the tiles and overwritten by
/// `dx`.
fn bn_backward(settings: Settings, shape: BatchShape, saved: BnSaved, sums: ParamSums, (g, dx): (Option<&[f32]>, Option<Tiled<f32>>)) {
    let BatchShape { n, c, hw } = shape;
    let BnSaved { x, stats: Stats { mean, rstd }, gamma, .. } = saved;
    let ParamSums { dgamma, dbeta } = sums;
    assert!(x.len() == n * c * hw && mean.len() == c && rstd.len() == c && dgamma.len() == c && dbeta.len() == c, "batch_norm: lengths");
    assert!(gamma.is_none_or(|gm| gm.len() == c), "batch_norm: lengths");
    let outs = (shape.channels(dgamma), shape.channels(dbeta), dx);
    for_each_tile(settings.threads, outs, |_, (dgamma, dbeta, dx)| {
        let (c0, nc) = (dgamma.origin().1, dgamma.cols());
        let sums = ParamSums { dgamma: dgamma.into_slice(), dbeta: dbeta.into_slice() };
        on_path!(settings.path, isa, (c0: usize, nc: usize, shape: BatchShape, saved: BnSaved<'a>, g: Option<&'a [f32]>, sums: ParamSums<'a>, dx: Option<TileMut<'a, f32>>) {
            let (mut sums, mut dx) = (sums, dx);
            in_lockstep!(c0, nc, bn_grad_sums(isa, c0, shape, saved, g, dx.as_mut(), &mut sums));
            let Some(mut dx) = dx else { return };
            let BnSaved { x, stats: Stats { mean, rstd }, gamma, training } = saved;
            let (sg, sgx) = (&*sums.dbeta, &*sums.dgamma);
            let count = (shape.n * shape.hw) as f64;
            // Images in reverse: the sums' last images are the ones still in cache.
            for b in (0..shape.n).rev() {
                let dx = dx.row(b);
                for ch in c0..c0 + nc {
                    let k = match gamma {
                        Some(gm) => gm[ch] * rstd[ch],
                        None => rstd[ch],
                    };
                    let dx = &mut dx[(ch - c0) * shape.hw..][..shape.hw];
                    let p = shape.plane(b, ch);
                    let x = &x[p.clone()];
                    let (mg, mgx) = ((sg[ch - c0] / count) as f32, (sgx[ch - c0] / count) as f32);
                    let (m, s) = (mean[ch], rstd[ch]);
                    match (g, training) {
                        (Some(g), true) => {
                            for ((dx, &x), &g) in dx.iter_mut().zip(x).zip(&g[p]) {
                                *dx = k * (g - mg - (x - m) * s * mgx);
                            }
                        }
                        (Some(g), false) => dx.iter_mut().zip(&g[p]).for_each(|(dx, &g)| *dx = k * g),
                        (None, true) => {
                            for (v, &x) in dx.iter_mut().zip(x) {
                                *v = k * (*v - mg - (x - m) * s * mgx);
                            }
                        }
                        (None, false) => {
                            for v in dx.iter_mut() {
                                let g = *v;
                                *v = k * g;
                            }
                        }
                    }
                }
            }
        });
    });
}

/// `Σ g` and `Σ g·x̂` of channels `ch..ch + K` (`c0` is the chunk's first channel): `g`
/// from the slice, or else from the chunk's tile.
#[inline(always)]
#[allow(clippy::too_many_arguments)] // the lockstep macro's operands
fn bn_grad_sums<L: Lanes, const K: usize>(
    ch: usize,
    isa: L::Isa,
    c0: usize,
    shape: BatchShape,
    saved: BnSaved,
    g: Option<&[f32]>,
    mut tile: Option<&mut TileMut<f32>>,
    sums: &mut ParamSums,
) {
    let BnSaved { x, stats: Stats { mean, rstd }, .. } = saved;
    let m: [f32; K] = std::array::from_fn(|k| mean[ch + k]);
    let s: [f32; K] = std::array::from_fn(|k| rstd[ch + k]);
    let (mut a, mut b) = ([0.0f64; K], [0.0f64; K]);
    let hw = shape.hw;
    for img in 0..shape.n {
        // Image `img`'s planes from channel `first` on.
        let (row, first): (&[f32], usize) = match (g, tile.as_mut()) {
            (Some(g), _) => (&g[shape.plane(img, 0).start..], 0),
            (None, Some(t)) => (&*t.row(img), c0),
            (None, None) => unreachable!("a batch norm backward reads g from the slice or the tiles"),
        };
        let xs: [&[f32]; K] = std::array::from_fn(|k| &x[shape.plane(img, ch + k)]);
        let gs: [&[f32]; K] = std::array::from_fn(|k| &row[(ch + k - first) * hw..][..hw]);
        // The same channels' planes in the next image are `c·hw` elements on, in `x` and in
        // `g` (a slice or the tile's rows, all rows of `c·hw`).
        let next = (img + 1 < shape.n).then_some(shape.c * hw);
        (a, b) = sum_prod::<L, K>(isa, ProdRows { xs, gs, scale: None, m, s, next }, (a, b));
    }
    for k in 0..K {
        sums.dbeta[ch - c0 + k] = a[k];
        sums.dgamma[ch - c0 + k] = b[k];
    }
}

/// Per-channel sums of `[N, C, HW]`: `out[c] = Σ g[n, c, :]` in f64, started at `0.0`,
/// images in order and each plane in order (the order of `bn_stats`' first sum, and of
/// the conv bias gradient). Chunked over channels like the batch norm (a chunk sums its
/// channels over all images), eight (`LOCKSTEP`) channels side by side: the same bits on every
/// path and thread count.
///
/// Panics unless the lengths agree with `shape`.
///
/// # Examples
///
/// ```
/// use om_core::compute::Compute;
/// use om_core::kernels::norm::{channel_sums, BatchShape};
/// // Two images of two channels of two elements.
/// let g = [1.0f32, 2.0, 10.0, 20.0, 3.0, 4.0, 30.0, 40.0];
/// let mut out = [0.0f64; 2];
/// channel_sums(Compute::settings(), BatchShape { n: 2, c: 2, hw: 2 }, &g, &mut out);
/// assert_eq!(out, [10.0, 100.0]);
/// ```
pub fn channel_sums(settings: Settings, shape: BatchShape, g: &[f32], out: &mut [f64]) {
    let BatchShape { n, c, hw } = shape;
    assert!(g.len() == n * c * hw && out.len() == c, "channel_sums: lengths");
    for_each_tile(settings.threads, shape.channels(out), |_, out| {
        let (c0, nc) = (out.origin().1, out.cols());
        let out = out.into_slice();
        on_path!(settings.path, isa, (c0: usize, nc: usize, shape: BatchShape, g: &'a [f32], out: &'a mut [f64]) {
            in_lockstep!(c0, nc, plane_sums(isa, c0, shape, g, out));
        });
    });
}

/// `Σ g` over channels `ch..ch + K` (`c0` is the chunk's first channel, `out` its sums).
#[inline(always)]
fn plane_sums<L: Lanes, const K: usize>(ch: usize, isa: L::Isa, c0: usize, shape: BatchShape, g: &[f32], out: &mut [f64]) {
    out[ch - c0..][..K].copy_from_slice(&channel_totals::<L, K>(isa, ch, shape, g));
}

/// The f64 sums of channels `ch..ch + K` of `x`, side by side: from `0.0`, images in
/// order, each plane in order (batch norm's mean and [`channel_sums`]).
#[inline(always)]
fn channel_totals<L: Lanes, const K: usize>(isa: L::Isa, ch: usize, shape: BatchShape, x: &[f32]) -> [f64; K] {
    let mut s = [0.0f64; K];
    for b in 0..shape.n {
        let next = (b + 1 < shape.n).then_some(shape.c * shape.hw);
        s = sum_ahead::<L, K>(isa, std::array::from_fn(|k| &x[shape.plane(b, ch + k)]), s, next);
    }
    s
}

#[cfg(test)]
pub(super) mod tests {
    //! Bit-for-bit checks against the scalar definitions (the loops these kernels replaced),
    //! on shapes that reach the lockstep groups, their remainders and several chunks, on
    //! every supported path at 1 and 2 threads.

    use super::*;
    use crate::compute::{KernelPath, Mode};
    use crate::rng::Rng;

    fn data(len: usize, seed: u64) -> Vec<f32> {
        let mut rng = Rng::new(seed);
        (0..len).map(|_| rng.uniform(-3.0, 3.0) + 0.5).collect()
    }

    /// Every supported path at 1 and 2 threads (also the pooling tests').
    pub(in crate::kernels) fn every_setting() -> Vec<Settings> {
        let mut all = Vec::new();
        for path in KernelPath::supported() {
            for threads in [1, 2] {
                all.push(Settings { mode: Mode::Fast, threads, path });
            }
        }
        all
    }

    pub(in crate::kernels) fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|v| v.to_bits()).collect()
    }

    /// The scalar layer norm forward: `(y, mean, rstd)`.
    fn ln_reference(x: &[f32], d: usize, gv: Option<&[f32]>, bv: Option<&[f32]>, eps: f32) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let rows = x.len() / d;
        let mut m = vec![0.0; rows];
        let mut s = vec![0.0; rows];
        let mut y = vec![0.0; x.len()];
        for r in 0..rows {
            let sum = x[r * d..(r + 1) * d].iter().fold(0.0f64, |a, &v| a + v as f64);
            m[r] = (sum / d as f64) as f32;
            let mu = m[r] as f64;
            let sq = x[r * d..(r + 1) * d].iter().fold(0.0f64, |a, &v| a + (v as f64 - mu) * (v as f64 - mu));
            s[r] = inv_std(sq / d as f64, eps);
            for i in 0..d {
                let mut v = (x[r * d + i] - m[r]) * s[r];
                if let Some(g) = gv {
                    v *= g[i];
                }
                if let Some(b) = bv {
                    v += b[i];
                }
                y[r * d + i] = v;
            }
        }
        (y, m, s)
    }

    /// The scalar layer norm backward: `(dx, Σ g·x̂, Σ g)`.
    fn ln_backward_reference(x: &[f32], gs: &[f32], n: usize, m: &[f32], s: &[f32], gv: Option<&[f32]>) -> (Vec<f32>, Vec<f64>, Vec<f64>) {
        let rows = x.len() / n;
        let (mut dga, mut dba, mut dx) = (vec![0.0f64; n], vec![0.0f64; n], vec![0.0f32; x.len()]);
        let xhat = |row: usize, i: usize| (x[row * n + i] - m[row]) * s[row];
        let ghat = |row: usize, i: usize| match gv {
            Some(gm) => gs[row * n + i] * gm[i],
            None => gs[row * n + i],
        };
        for row in 0..rows {
            for i in 0..n {
                let gi = gs[row * n + i] as f64;
                dga[i] += gi * xhat(row, i) as f64;
                dba[i] += gi;
            }
        }
        for row in 0..rows {
            let (mut s1, mut s2) = (0.0f64, 0.0f64);
            for i in 0..n {
                let gh = ghat(row, i) as f64;
                s1 += gh;
                s2 += gh * xhat(row, i) as f64;
            }
            let m1 = (s1 / n as f64) as f32;
            let m2 = (s2 / n as f64) as f32;
            for i in 0..n {
                dx[row * n + i] = (ghat(row, i) - m1 - xhat(row, i) * m2) * s[row];
            }
        }
        (dx, dga, dba)
    }

    /// What breaks the rule that an ISA path is reached only with its capability token, in
    /// the norms' sources: a path picked by lane width, an `unsafe fn` in the AVX-512
    /// routines (its caller, not a token, would carry the proof) or one of them not taking
    /// the `Avx512` token first.
    fn token_audit(kernels: &str, avx512: &str) -> Vec<String> {
        let (width, unchecked_fn) = (["WIDTH", " =="].concat(), ["uns", "afe fn"].concat());
        let mut problems = Vec::new();
        for (i, line) in kernels.lines().enumerate().filter(|(_, l)| l.contains(&width)) {
            problems.push(format!("kernel line {}: a path picked by lane width: {line}", i + 1));
        }
        for (i, line) in avx512.lines().enumerate() {
            if line.contains(&unchecked_fn) {
                problems.push(format!("avx512.rs line {}: a routine whose caller carries the proof: {line}", i + 1));
            }
            if line.contains("pub(super)") && line.contains(" fn ") && !line.contains("(isa: Avx512") {
                problems.push(format!("avx512.rs line {}: a routine without the token: {line}", i + 1));
            }
        }
        problems
    }

    #[test]
    fn avx512_sums_take_the_token_and_no_path_is_picked_by_lane_width() {
        let kernels = [include_str!("norm.rs"), include_str!("pooling.rs")].concat();
        let problems = token_audit(&kernels, include_str!("norm/avx512.rs"));
        assert!(problems.is_empty(), "{problems:#?}");
        // The audit catches the dispatch this replaced.
        let old_kernel = concat!("fn on_avx512<L: Lanes>() -> bool {\n    cfg!(target_arch = \"x86_64\") && L::WID", "TH == 16\n}\n");
        let old_avx512 = concat!("pub(super) uns", "afe fn sum(rows: [&[f32]; 8], acc: [f64; 8]) -> [f64; 8] {\n");
        assert_eq!(token_audit(old_kernel, old_avx512).len(), 3);
    }

    #[test]
    fn layer_norm_matches_the_scalar_definition_bit_for_bit() {
        for &(rows, d) in &[(13, 37), (6, 300), (300, 130), (1, 1)] {
            let x = data(rows * d, 1);
            let g = data(rows * d, 2);
            let (gm, bt) = (data(d, 3), data(d, 4));
            for (gv, bv) in [(None, None), (Some(&gm[..]), None), (None, Some(&bt[..])), (Some(&gm[..]), Some(&bt[..]))] {
                let (ry, rm, rs) = ln_reference(&x, d, gv, bv, 1e-5);
                let (rdx, rdg, rdb) = ln_backward_reference(&x, &g, d, &rm, &rs, gv);
                for st in every_setting() {
                    let (mut y, mut m, mut s) = (vec![0.0; rows * d], vec![0.0; rows], vec![0.0; rows]);
                    layer_norm(st, &x, d, Affine { gamma: gv, beta: bv }, 1e-5, NormOut { y: &mut y, mean: &mut m, rstd: &mut s });
                    assert_eq!((bits(&y), bits(&m), bits(&s)), (bits(&ry), bits(&rm), bits(&rs)), "{rows}x{d} {st:?}");
                    let (mut dx, mut dg, mut db) = (vec![0.0; rows * d], vec![0.0; d], vec![0.0; d]);
                    let grad = NormGrad { x: &x, g: &g, stats: Stats { mean: &m, rstd: &s }, gamma: gv };
                    layer_norm_backward(st, d, grad, Some(&mut dx), Some(ParamSums { dgamma: &mut dg, dbeta: &mut db }));
                    assert_eq!(bits(&dx), bits(&rdx), "{rows}x{d} {st:?}");
                    assert_eq!((dg.clone(), db.clone()), (rdg.clone(), rdb.clone()), "{rows}x{d} {st:?}");
                }
            }
        }
    }

    /// The scalar batch norm in training: `(y, mean, sq, rstd)`.
    fn bn_reference(
        x: &[f32],
        sh: BatchShape,
        gv: Option<&[f32]>,
        bv: Option<&[f32]>,
        eps: f32,
    ) -> (Vec<f32>, Vec<f32>, Vec<f64>, Vec<f32>) {
        let BatchShape { n, c, hw } = sh;
        let mut a = vec![0.0f64; c];
        for b in 0..n {
            for (ch, s) in a.iter_mut().enumerate() {
                let base = (b * c + ch) * hw;
                *s = x[base..base + hw].iter().fold(*s, |s, &v| s + v as f64);
            }
        }
        let count = (n * hw) as f64;
        let mean: Vec<f32> = a.iter().map(|&s| (s / count) as f32).collect();
        a.fill(0.0);
        for b in 0..n {
            for (ch, s) in a.iter_mut().enumerate() {
                let base = (b * c + ch) * hw;
                let mu = mean[ch] as f64;
                *s = x[base..base + hw].iter().fold(*s, |s, &v| s + (v as f64 - mu) * (v as f64 - mu));
            }
        }
        let rstd: Vec<f32> = a.iter().map(|&s| inv_std(s / count, eps)).collect();
        let mut y = vec![0.0; x.len()];
        for b in 0..n {
            for ch in 0..c {
                let base = (b * c + ch) * hw;
                for i in base..base + hw {
                    let mut v = (x[i] - mean[ch]) * rstd[ch];
                    if let Some(g) = gv {
                        v *= g[ch];
                    }
                    if let Some(bb) = bv {
                        v += bb[ch];
                    }
                    y[i] = v;
                }
            }
        }
        (y, mean, a, rstd)
    }

    /// The scalar batch norm backward: `(dx, Σ g, Σ g·x̂)`.
    fn bn_backward_reference(
        x: &[f32],
        gs: &[f32],
        sh: BatchShape,
        mean: &[f32],
        rstd: &[f32],
        gv: Option<&[f32]>,
        training: bool,
    ) -> (Vec<f32>, Vec<f64>, Vec<f64>) {
        let BatchShape { n, c, hw } = sh;
        let (mut sga, mut sgxa) = (vec![0.0f64; c], vec![0.0f64; c]);
        let xhat = |i: usize, ch: usize| (x[i] - mean[ch]) * rstd[ch];
        for b in 0..n {
            for ch in 0..c {
                let base = (b * c + ch) * hw;
                for (i, &gi) in gs.iter().enumerate().take(base + hw).skip(base) {
                    sga[ch] += gi as f64;
                    sgxa[ch] += gi as f64 * xhat(i, ch) as f64;
                }
            }
        }
        let count = (n * hw) as f64;
        let mg: Vec<f32> = sga.iter().map(|&s| (s / count) as f32).collect();
        let mgx: Vec<f32> = sgxa.iter().map(|&s| (s / count) as f32).collect();
        let mut dx = vec![0.0; x.len()];
        for b in 0..n {
            for ch in 0..c {
                let k = match gv {
                    Some(gm) => gm[ch] * rstd[ch],
                    None => rstd[ch],
                };
                let base = (b * c + ch) * hw;
                for i in base..base + hw {
                    dx[i] = if training { k * (gs[i] - mg[ch] - xhat(i, ch) * mgx[ch]) } else { k * gs[i] };
                }
            }
        }
        (dx, sga, sgxa)
    }

    #[test]
    fn batch_norm_matches_the_scalar_definition_bit_for_bit() {
        for sh in [BatchShape { n: 3, c: 11, hw: 50 }, BatchShape { n: 2, c: 11, hw: 4096 }, BatchShape { n: 2, c: 1, hw: 3 }] {
            let len = sh.n * sh.c * sh.hw;
            let (x, g) = (data(len, 5), data(len, 6));
            let (gm, bt) = (data(sh.c, 7), data(sh.c, 8));
            for (gv, bv) in [(None, None), (Some(&gm[..]), None), (None, Some(&bt[..])), (Some(&gm[..]), Some(&bt[..]))] {
                let (ry, rm, rq, rs) = bn_reference(&x, sh, gv, bv, 1e-5);
                for st in every_setting() {
                    let (mut y, mut m, mut q, mut s) = (vec![0.0; len], vec![0.0; sh.c], vec![0.0; sh.c], vec![0.0; sh.c]);
                    let affine = Affine { gamma: gv, beta: bv };
                    batch_norm(st, sh, &x, affine, 1e-5, NormOut { y: &mut y, mean: &mut m, rstd: &mut s }, &mut q);
                    assert_eq!((bits(&y), bits(&m), bits(&s)), (bits(&ry), bits(&rm), bits(&rs)), "{sh:?} {st:?}");
                    assert_eq!(q, rq, "{sh:?} {st:?}");
                    let mut y2 = vec![0.0; len];
                    batch_norm_apply(st, sh, &x, Stats { mean: &m, rstd: &s }, affine, &mut y2);
                    assert_eq!(bits(&y2), bits(&ry), "{sh:?} {st:?}");
                    for training in [true, false] {
                        let (rdx, rsg, rsgx) = bn_backward_reference(&x, &g, sh, &m, &s, gv, training);
                        let (mut dx, mut sg, mut sgx) = (vec![0.0; len], vec![0.0; sh.c], vec![0.0; sh.c]);
                        let grad = NormGrad { x: &x, g: &g, stats: Stats { mean: &m, rstd: &s }, gamma: gv };
                        let sums = ParamSums { dgamma: &mut sgx, dbeta: &mut sg };
                        batch_norm_backward(st, sh, grad, training, sums, Some(&mut dx));
                        assert_eq!(bits(&dx), bits(&rdx), "{sh:?} {st:?} training {training}");
                        assert_eq!((&sg, &sgx), (&rsg, &rsgx), "{sh:?} {st:?} training {training}");
                        if training {
                            // `dx` written over `g`: the same bits.
                            let (mut over, mut sg, mut sgx) = (g.clone(), vec![0.0; sh.c], vec![0.0; sh.c]);
                            let sums = ParamSums { dgamma: &mut sgx, dbeta: &mut sg };
                            batch_norm_backward_over_g(st, sh, &x, Stats { mean: &m, rstd: &s }, gv, sums, &mut over);
                            assert_eq!(bits(&over), bits(&rdx), "{sh:?} {st:?} over g");
                            assert_eq!((sg, sgx), (rsg, rsgx), "{sh:?} {st:?} over g");
                        }
                    }
                }
            }
        }
    }
}
