//! Layer normalisation (rows of a row-major matrix) and 2-d batch normalisation (channels
//! of `[N, C, HW]`), forward and backward (order and figures: `docs/kernels-norm-pool.md`).
//!
//! The order argument: every statistic is an f64 sum over its own elements in increasing
//! element order (batch norm: image by image, each image's plane in order), started at
//! `0.0` and rounded once to f32; every output element is the same f32 expression of its
//! inputs as the scalar definition. Only where the work happens changes:
//! - sums of several rows (layer norm) or channels (batch norm) run in lockstep, one f64
//!   accumulator per row or channel held in a register, so the additions of different
//!   sums overlap while each sum's own sequence is untouched;
//! - the f32 output and `dx` loops have no branch inside (one loop per combination of the
//!   optional affine parameters) and are vectorised, element by element the same
//!   operations;
//! - rows (layer norm) and channels (batch norm) are split into parallel chunks whose size
//!   depends only on the shape; the layer norm's `dγ`, `dβ` column sums are chunked by
//!   columns, each column summed over all rows in row order.
//!
//! So every instruction set and thread count gives the bits of the scalar definition.

use super::simd::Lanes;
use crate::compute::Settings;
use crate::kernels::parallel::for_each_chunk;
use std::marker::PhantomData;

#[cfg(target_arch = "x86_64")]
mod avx512;

/// Target elements per parallel chunk (whole rows or channels, at least one). Measured on
/// an AMD EPYC (Zen 5), 2 shared cores: 8 Ki, 32 Ki and 128 Ki gave the same `om bench
/// norm-pool` times within the noise at 1 and 2 threads. 32 Ki keeps a layer-norm chunk
/// (128 KiB per input) in L2 between its passes; a batch-norm chunk holds at least
/// [`LOCKSTEP`] channels, whatever their size.
const CHUNK_ELEMS: usize = 32 * 1024;

/// Rows or channels whose sums run in lockstep: eight, one f64 lane each of an AVX-512
/// vector (`avx512`); elsewhere eight independent scalar chains, which cover the add latency.
const LOCKSTEP: usize = 8;

/// Columns per chunk of the layer norm's `dγ`, `dβ` sums (each chunk reads all rows).
/// Measured 2026-12-02 on an Intel Xeon model 167 (`om bench norm-pool --case
/// layernorm_1024x256`, forward + backward): 32 and 128 took 1.03× and 1.24× the time of 64
/// at 1 thread, 1.06× and 1.08× at 2 (medians of 11 interleaved runs; docs/performance.md,
/// "Tuning constants").
const COL_BLOCK: usize = 64;

/// Disjoint mutable pieces of one slice handed to parallel chunks.
pub(crate) struct Shared<'a, T> {
    ptr: *mut T,
    len: usize,
    _slice: PhantomData<&'a mut [T]>,
}

// SAFETY: `Shared` only hands out `&mut` pieces of the slice it borrows mutably, and the
// callers of `range` guarantee that pieces used at the same time do not overlap.
unsafe impl<T: Send> Send for Shared<'_, T> {}
// SAFETY: as for `Send`: concurrent callers receive disjoint pieces.
unsafe impl<T: Send> Sync for Shared<'_, T> {}

impl<'a, T> Shared<'a, T> {
    /// Borrows `s` for the chunks.
    pub(crate) fn new(s: &'a mut [T]) -> Self {
        Shared { ptr: s.as_mut_ptr(), len: s.len(), _slice: PhantomData }
    }

    /// The piece `start..start + len` (panics if out of bounds).
    ///
    /// # Safety
    /// No two pieces in use at the same time may overlap.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn range(&self, start: usize, len: usize) -> &'a mut [T] {
        assert!(start <= self.len && len <= self.len - start, "Shared::range out of bounds");
        // SAFETY: in bounds (checked above) of a slice borrowed mutably for 'a; the caller
        // guarantees exclusivity of the piece.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }
}

/// Runs `$body` inside the instruction set's `#[target_feature]` function (through
/// [`dispatch`]) with the listed bindings moved in, so that the loops it inlines are
/// vectorised for that set; they are plain IEEE operations and compares, which give the
/// same bits at every width. (A closure would not do: its body is compiled once, outside
/// the `#[target_feature]` functions, when it is called from all of them.)
macro_rules! on_path {
    ($path:expr, ($($name:ident: $ty:ty),* $(,)?) $body:block) => {{
        struct Task<'a> {
            $($name: $ty,)*
            _life: std::marker::PhantomData<&'a ()>,
        }
        impl $crate::kernels::LaneTask for Task<'_> {
            type Output = ();
            #[inline(always)]
            fn run<L: $crate::kernels::simd::Lanes>(self, _isa: L::Isa) {
                let Task { $($name,)* .. } = self;
                $body
            }
        }
        $crate::kernels::dispatch($path, Task { $($name,)* _life: std::marker::PhantomData });
    }};
}
pub(crate) use on_path;

/// Optional per-feature scale `γ` and shift `β`.
#[derive(Clone, Copy, Debug)]
pub struct Affine<'a> {
    /// The scale, if any.
    pub gamma: Option<&'a [f32]>,
    /// The shift, if any.
    pub beta: Option<&'a [f32]>,
}

/// `1/sqrt(var + eps)` from an f64 variance rounded once to f32.
#[inline(always)]
pub fn inv_std(var: f64, eps: f32) -> f32 {
    1.0 / ((var as f32) + eps).sqrt()
}

// ===== lockstep sums =====

/// Converts between `[T; K]` and `[T; 8]` when `K` is 8.
fn as8<T: Copy, const K: usize>(a: [T; K]) -> Option<[T; 8]> {
    <[T; 8]>::try_from(&a[..]).ok()
}

/// The inverse of [`as8`] (panics unless `K` is 8).
fn from8<T: Copy, const K: usize>(a: [T; 8]) -> [T; K] {
    <[T; K]>::try_from(&a[..]).expect("K is 8")
}

/// Whether the lanes are AVX-512's (`dispatch` only runs `L` = `__m512` on a CPU with
/// AVX-512F), where eight slices take the transposing [`avx512`] sums.
#[inline(always)]
fn on_avx512<L: Lanes>() -> bool {
    cfg!(target_arch = "x86_64") && L::WIDTH == 16
}

/// `acc[k] + Σ rows[k][i] as f64`, in increasing `i`.
#[inline(always)]
fn sum<L: Lanes, const K: usize>(rows: [&[f32]; K], acc: [f64; K]) -> [f64; K] {
    #[cfg(target_arch = "x86_64")]
    if let (true, Some(rows8), Some(acc8)) = (on_avx512::<L>(), as8(rows), as8(acc)) {
        // SAFETY: inside the AVX-512 instantiation (`on_avx512`).
        return from8(unsafe { avx512::sum(rows8, acc8) });
    }
    lockstep(rows, acc, |s, _, v| s + v as f64)
}

/// `acc[k] + Σ (rows[k][i] as f64 − mu[k])²`, in increasing `i`.
#[inline(always)]
fn sum_sq<L: Lanes, const K: usize>(rows: [&[f32]; K], mu: [f64; K], acc: [f64; K]) -> [f64; K] {
    #[cfg(target_arch = "x86_64")]
    if let (true, Some(rows8), Some(mu8), Some(acc8)) = (on_avx512::<L>(), as8(rows), as8(mu), as8(acc)) {
        // SAFETY: inside the AVX-512 instantiation (`on_avx512`).
        return from8(unsafe { avx512::sum_sq(rows8, mu8, acc8) });
    }
    lockstep(rows, acc, |s, k, v| s + (v as f64 - mu[k]) * (v as f64 - mu[k]))
}

/// With `a = g·scale[i]` (or `g`) and `b = (x − m[k])·s[k]` in f32: `(acc1[k] + Σ a,
/// acc2[k] + Σ a·b)` in f64, in increasing `i`.
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)] // element-major, slice-minor
#[inline(always)]
fn sum_prod<L: Lanes, const K: usize>(
    xs: [&[f32]; K],
    gs: [&[f32]; K],
    scale: Option<&[f32]>,
    m: [f32; K],
    s: [f32; K],
    acc1: [f64; K],
    acc2: [f64; K],
) -> ([f64; K], [f64; K]) {
    #[cfg(target_arch = "x86_64")]
    if let (true, Some(xs8), Some(gs8), Some(m8), Some(s8), Some(a8), Some(b8)) =
        (on_avx512::<L>(), as8(xs), as8(gs), as8(m), as8(s), as8(acc1), as8(acc2))
    {
        // SAFETY: inside the AVX-512 instantiation (`on_avx512`).
        let (a, b) = unsafe { avx512::sum_prod(xs8, gs8, scale, m8, s8, a8, b8) };
        return (from8(a), from8(b));
    }
    let len = xs[0].len();
    let (xs, gs) = (xs.map(|r| &r[..len]), gs.map(|r| &r[..len]));
    let (mut acc1, mut acc2) = (acc1, acc2);
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

/// `K` folds over `K` equally long slices: `acc[k] = f(acc[k], k, rows[k][i])` for `i` in
/// increasing order.
#[inline(always)]
fn lockstep<const K: usize>(rows: [&[f32]; K], mut acc: [f64; K], f: impl Fn(f64, usize, f32) -> f64) -> [f64; K] {
    let len = rows[0].len();
    let rows = rows.map(|r| &r[..len]);
    #[allow(clippy::needless_range_loop)] // `i` indexes K rows in lockstep
    for i in 0..len {
        for k in 0..K {
            acc[k] = f(acc[k], k, rows[k][i]);
        }
    }
    acc
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

/// Layer norm forward over rows of length `d`: `mean[r]`, `rstd[r]` (`1/sqrt(var + eps)`,
/// biased variance about the rounded mean) and `y = (x − mean)·rstd·γ + β`.
///
/// Panics unless `x` and `y` hold `mean.len()` rows of `d` and `γ`, `β` have length `d`.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm(settings: Settings, x: &[f32], d: usize, affine: Affine, eps: f32, y: &mut [f32], mean: &mut [f32], rstd: &mut [f32]) {
    let rows = mean.len();
    assert!(d > 0 && x.len() == rows * d && y.len() == rows * d && rstd.len() == rows, "layer_norm: lengths");
    assert!(affine.gamma.is_none_or(|g| g.len() == d) && affine.beta.is_none_or(|b| b.len() == d), "layer_norm: affine lengths");
    let per = (CHUNK_ELEMS / d).max(1);
    let (ys, ms, ss) = (Shared::new(y), Shared::new(mean), Shared::new(rstd));
    for_each_chunk(settings.threads, rows.div_ceil(per), |chunk| {
        let (r0, nr) = (chunk * per, per.min(rows - chunk * per));
        // SAFETY: chunks cover disjoint ranges of rows.
        let (y, mean, rstd) = unsafe { (ys.range(r0 * d, nr * d), ms.range(r0, nr), ss.range(r0, nr)) };
        let x = &x[r0 * d..(r0 + nr) * d];
        on_path!(settings.path, (x: &'a [f32], d: usize, nr: usize, affine: Affine<'a>, eps: f32, y: &'a mut [f32], mean: &'a mut [f32], rstd: &'a mut [f32]) {
            let mut r = 0;
            while r + LOCKSTEP <= nr {
                ln_rows::<L, LOCKSTEP>(x, d, r, affine, eps, y, mean, rstd);
                r += LOCKSTEP;
            }
            for r in r..nr {
                ln_rows::<L, 1>(x, d, r, affine, eps, y, mean, rstd);
            }
        });
    });
}

/// Rows `r..r + K` of a layer norm forward.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn ln_rows<L: Lanes, const K: usize>(
    x: &[f32],
    d: usize,
    r: usize,
    affine: Affine,
    eps: f32,
    y: &mut [f32],
    mean: &mut [f32],
    rstd: &mut [f32],
) {
    let rows: [&[f32]; K] = std::array::from_fn(|k| &x[(r + k) * d..(r + k + 1) * d]);
    let s = sum::<L, K>(rows, [0.0; K]);
    let m: [f32; K] = s.map(|s| (s / d as f64) as f32);
    let sq = sum_sq::<L, K>(rows, m.map(|m| m as f64), [0.0; K]);
    for k in 0..K {
        let st = inv_std(sq[k] / d as f64, eps);
        mean[r + k] = m[k];
        rstd[r + k] = st;
        normalise(rows[k], &mut y[(r + k) * d..(r + k + 1) * d], m[k], st, affine, true, 0);
    }
}

/// Layer norm backward.
///
/// With `x̂ = (x − mean)·rstd` and `ĝ = g·γ` (or `g`): `dx = (ĝ − m1 − x̂·m2)·rstd` per row,
/// where `m1`, `m2` are the f64 means of `ĝ` and `ĝ·x̂` rounded to f32; and, when `sums` is
/// given, `sums.0[i] = Σ_rows g·x̂` and `sums.1[i] = Σ_rows g` (f64, row order).
///
/// Panics unless the lengths agree (`mean.len()` rows of `d`).
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_backward(
    settings: Settings,
    x: &[f32],
    g: &[f32],
    d: usize,
    mean: &[f32],
    rstd: &[f32],
    gamma: Option<&[f32]>,
    dx: Option<&mut [f32]>,
    sums: Option<(&mut [f64], &mut [f64])>,
) {
    let rows = mean.len();
    assert!(d > 0 && x.len() == rows * d && g.len() == rows * d && rstd.len() == rows, "layer_norm: lengths");
    assert!(gamma.is_none_or(|gm| gm.len() == d), "layer_norm: gamma length");
    if let Some((dg, db)) = sums {
        assert!(dg.len() == d && db.len() == d, "layer_norm: sum lengths");
        let (dgs, dbs) = (Shared::new(dg), Shared::new(db));
        for_each_chunk(settings.threads, d.div_ceil(COL_BLOCK), |chunk| {
            let (c0, nc) = (chunk * COL_BLOCK, COL_BLOCK.min(d - chunk * COL_BLOCK));
            // SAFETY: chunks cover disjoint ranges of columns.
            let (dg, db) = unsafe { (dgs.range(c0, nc), dbs.range(c0, nc)) };
            on_path!(settings.path, (x: &'a [f32], g: &'a [f32], d: usize, mean: &'a [f32], rstd: &'a [f32], c0: usize, dg: &'a mut [f64], db: &'a mut [f64]) {
                ln_column_sums(x, g, d, mean, rstd, c0, dg, db)
            });
        });
    }
    let Some(dx) = dx else { return };
    assert_eq!(dx.len(), rows * d, "layer_norm: dx length");
    let per = (CHUNK_ELEMS / d).max(1);
    let dxs = Shared::new(dx);
    for_each_chunk(settings.threads, rows.div_ceil(per), |chunk| {
        let (r0, nr) = (chunk * per, per.min(rows - chunk * per));
        // SAFETY: chunks cover disjoint ranges of rows.
        let dx = unsafe { dxs.range(r0 * d, nr * d) };
        let (x, g) = (&x[r0 * d..(r0 + nr) * d], &g[r0 * d..(r0 + nr) * d]);
        let (mean, rstd) = (&mean[r0..r0 + nr], &rstd[r0..r0 + nr]);
        on_path!(settings.path, (x: &'a [f32], g: &'a [f32], d: usize, nr: usize, mean: &'a [f32], rstd: &'a [f32], gamma: Option<&'a [f32]>, dx: &'a mut [f32]) {
            let mut r = 0;
            while r + LOCKSTEP <= nr {
                ln_dx_rows::<L, LOCKSTEP>(x, g, d, r, mean, rstd, gamma, dx);
                r += LOCKSTEP;
            }
            for r in r..nr {
                ln_dx_rows::<L, 1>(x, g, d, r, mean, rstd, gamma, dx);
            }
        });
    });
}

/// Columns `c0..c0 + dg.len()` of `Σ_rows g·x̂` and `Σ_rows g`, in blocks of
/// [`COL_REGS`] columns whose accumulators stay in registers.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn ln_column_sums(x: &[f32], g: &[f32], d: usize, mean: &[f32], rstd: &[f32], c0: usize, dg: &mut [f64], db: &mut [f64]) {
    let nc = dg.len();
    let full = nc / COL_REGS * COL_REGS;
    for c in (0..full).step_by(COL_REGS) {
        ln_column_block::<COL_REGS>(x, g, d, mean, rstd, c0 + c, &mut dg[c..], &mut db[c..]);
    }
    for c in full..nc {
        ln_column_block::<1>(x, g, d, mean, rstd, c0 + c, &mut dg[c..], &mut db[c..]);
    }
}

/// Columns summed together by the layer norm's `dγ`, `dβ` pass: 32 columns are two sets of
/// four AVX-512 f64 accumulators, kept in registers. Measured on an AMD EPYC (Zen 5): the
/// `layernorm_1024x256` benchmark process took 73 ms of CPU against 80 ms when the whole
/// 64-column chunk was summed at once (its sums went to memory).
const COL_REGS: usize = 32;

/// Columns `c..c + N` of `Σ_rows g·x̂` and `Σ_rows g`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn ln_column_block<const N: usize>(x: &[f32], g: &[f32], d: usize, mean: &[f32], rstd: &[f32], c: usize, dg: &mut [f64], db: &mut [f64]) {
    let (mut ag, mut ab) = ([0.0f64; N], [0.0f64; N]);
    for (row, (&m, &s)) in mean.iter().zip(rstd).enumerate() {
        let (x, g) = (&x[row * d + c..][..N], &g[row * d + c..][..N]);
        for i in 0..N {
            let xh = (x[i] - m) * s;
            ag[i] += g[i] as f64 * xh as f64;
            ab[i] += g[i] as f64;
        }
    }
    dg[..N].copy_from_slice(&ag);
    db[..N].copy_from_slice(&ab);
}

/// `dx` of rows `r..r + K`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn ln_dx_rows<L: Lanes, const K: usize>(
    x: &[f32],
    g: &[f32],
    d: usize,
    r: usize,
    mean: &[f32],
    rstd: &[f32],
    gamma: Option<&[f32]>,
    dx: &mut [f32],
) {
    let xs: [&[f32]; K] = std::array::from_fn(|k| &x[(r + k) * d..(r + k + 1) * d]);
    let gs: [&[f32]; K] = std::array::from_fn(|k| &g[(r + k) * d..(r + k + 1) * d]);
    let m: [f32; K] = std::array::from_fn(|k| mean[r + k]);
    let s: [f32; K] = std::array::from_fn(|k| rstd[r + k]);
    let (s1, s2) = sum_prod::<L, K>(xs, gs, gamma, m, s, [0.0; K], [0.0; K]);
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

    /// Runs `f(first_channel, channels)` for each chunk of channels.
    fn for_each_channel_chunk(&self, settings: Settings, f: impl Fn(usize, usize) + Sync + Send) {
        let per = self.chunk_channels();
        for_each_chunk(settings.threads, self.c.div_ceil(per), |chunk| {
            let c0 = chunk * per;
            f(c0, per.min(self.c - c0));
        });
    }

    /// The plane of channel `ch` in image `b`.
    #[inline(always)]
    fn plane(&self, b: usize, ch: usize) -> std::ops::Range<usize> {
        let start = (b * self.c + ch) * self.hw;
        start..start + self.hw
    }
}

/// Runs `f::<K>(first)` over `c0..c0 + nc` in groups of [`LOCKSTEP`] channels, then one by one.
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

/// Batch norm forward in training: per channel the mean, the sum of squared deviations
/// from it (`sq`, for the running variance) and `rstd = 1/sqrt(sq/count + eps)`, all over
/// the images and plane in order; then `y = (x − mean)·rstd·γ + β`.
///
/// Panics unless the lengths agree with `shape`.
#[allow(clippy::too_many_arguments)]
pub fn batch_norm(
    settings: Settings,
    shape: BatchShape,
    x: &[f32],
    affine: Affine,
    eps: f32,
    y: &mut [f32],
    mean: &mut [f32],
    sq: &mut [f64],
    rstd: &mut [f32],
) {
    let BatchShape { n, c, hw } = shape;
    assert!(x.len() == n * c * hw && y.len() == x.len() && mean.len() == c && sq.len() == c && rstd.len() == c, "batch_norm: lengths");
    assert!(affine.gamma.is_none_or(|g| g.len() == c) && affine.beta.is_none_or(|b| b.len() == c), "batch_norm: affine lengths");
    let (ys, ms, qs, ss) = (Shared::new(y), Shared::new(mean), Shared::new(sq), Shared::new(rstd));
    shape.for_each_channel_chunk(settings, |c0, nc| {
        // SAFETY: chunks cover disjoint ranges of channels, hence disjoint statistics and
        // disjoint planes of `y`.
        let (mean, sq, rstd) = unsafe { (ms.range(c0, nc), qs.range(c0, nc), ss.range(c0, nc)) };
        let ys = &ys;
        on_path!(settings.path, (c0: usize, nc: usize, shape: BatchShape, x: &'a [f32], eps: f32, affine: Affine<'a>, mean: &'a mut [f32], sq: &'a mut [f64], rstd: &'a mut [f32], ys: &'a Shared<'a, f32>) {
            in_lockstep!(c0, nc, bn_stats(c0, shape, x, eps, mean, sq, rstd));
            for b in 0..shape.n {
                for ch in c0..c0 + nc {
                    let p = shape.plane(b, ch);
                    // SAFETY: the plane of a channel of this chunk.
                    let y = unsafe { ys.range(p.start, shape.hw) };
                    normalise(&x[p], y, mean[ch - c0], rstd[ch - c0], affine, false, ch);
                }
            }
        });
    });
}

/// Statistics of channels `ch..ch + K` (`c0` is the chunk's first channel).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn bn_stats<L: Lanes, const K: usize>(
    ch: usize,
    c0: usize,
    shape: BatchShape,
    x: &[f32],
    eps: f32,
    mean: &mut [f32],
    sq: &mut [f64],
    rstd: &mut [f32],
) {
    let planes = |b: usize| -> [&[f32]; K] { std::array::from_fn(|k| &x[shape.plane(b, ch + k)]) };
    let mut s = [0.0f64; K];
    for b in 0..shape.n {
        s = sum::<L, K>(planes(b), s);
    }
    let count = (shape.n * shape.hw) as f64;
    let m: [f32; K] = s.map(|s| (s / count) as f32);
    let mu = m.map(|m| m as f64);
    let mut q = [0.0f64; K];
    for b in 0..shape.n {
        q = sum_sq::<L, K>(planes(b), mu, q);
    }
    for k in 0..K {
        mean[ch - c0 + k] = m[k];
        sq[ch - c0 + k] = q[k];
        rstd[ch - c0 + k] = inv_std(q[k] / count, eps);
    }
}

/// Batch norm forward with given statistics (eval): `y = (x − mean)·rstd·γ + β` per channel.
///
/// Panics unless the lengths agree with `shape`.
pub fn batch_norm_apply(settings: Settings, shape: BatchShape, x: &[f32], mean: &[f32], rstd: &[f32], affine: Affine, y: &mut [f32]) {
    let BatchShape { n, c, hw } = shape;
    assert!(x.len() == n * c * hw && y.len() == x.len() && mean.len() == c && rstd.len() == c, "batch_norm: lengths");
    assert!(affine.gamma.is_none_or(|g| g.len() == c) && affine.beta.is_none_or(|b| b.len() == c), "batch_norm: affine lengths");
    let ys = Shared::new(y);
    shape.for_each_channel_chunk(settings, |c0, nc| {
        let ys = &ys;
        on_path!(settings.path, (c0: usize, nc: usize, shape: BatchShape, x: &'a [f32], mean: &'a [f32], rstd: &'a [f32], affine: Affine<'a>, ys: &'a Shared<'a, f32>) {
            for b in 0..shape.n {
                for ch in c0..c0 + nc {
                    let p = shape.plane(b, ch);
                    // SAFETY: chunks cover disjoint ranges of channels, hence planes.
                    let y = unsafe { ys.range(p.start, shape.hw) };
                    normalise(&x[p], y, mean[ch], rstd[ch], affine, false, ch);
                }
            }
        });
    });
}

/// Batch norm backward: per channel `sg = Σ g` and `sgx = Σ g·x̂` (f64, images and plane in
/// order; `x̂ = (x − mean)·rstd`), then, if `dx` is given, `dx = k·(g − mg − x̂·mgx)` in
/// training or `k·g` in eval, with `k = γ·rstd` (or `rstd`) and `mg`, `mgx` the sums over
/// `n·hw` rounded to f32.
///
/// Panics unless the lengths agree with `shape`.
#[allow(clippy::too_many_arguments)]
pub fn batch_norm_backward(
    settings: Settings,
    shape: BatchShape,
    x: &[f32],
    g: &[f32],
    mean: &[f32],
    rstd: &[f32],
    gamma: Option<&[f32]>,
    training: bool,
    sg: &mut [f64],
    sgx: &mut [f64],
    dx: Option<&mut [f32]>,
) {
    let BatchShape { n, c, hw } = shape;
    let len = n * c * hw;
    assert!(
        x.len() == len && g.len() == len && mean.len() == c && rstd.len() == c && sg.len() == c && sgx.len() == c,
        "batch_norm: lengths"
    );
    assert!(gamma.is_none_or(|gm| gm.len() == c) && dx.as_ref().is_none_or(|d| d.len() == len), "batch_norm: lengths");
    let (sgs, sgxs) = (Shared::new(sg), Shared::new(sgx));
    let dxs = dx.map(Shared::new);
    shape.for_each_channel_chunk(settings, |c0, nc| {
        // SAFETY: chunks cover disjoint ranges of channels, hence disjoint sums and planes.
        let (sg, sgx) = unsafe { (sgs.range(c0, nc), sgxs.range(c0, nc)) };
        let dxs = dxs.as_ref();
        on_path!(settings.path, (c0: usize, nc: usize, shape: BatchShape, x: &'a [f32], g: &'a [f32], mean: &'a [f32], rstd: &'a [f32], gamma: Option<&'a [f32]>, training: bool, sg: &'a mut [f64], sgx: &'a mut [f64], dxs: Option<&'a Shared<'a, f32>>) {
            in_lockstep!(c0, nc, bn_grad_sums(c0, shape, x, g, mean, rstd, sg, sgx));
            let Some(dxs) = dxs else { return };
            let count = (shape.n * shape.hw) as f64;
            for b in 0..shape.n {
                for ch in c0..c0 + nc {
                    let k = match gamma {
                        Some(gm) => gm[ch] * rstd[ch],
                        None => rstd[ch],
                    };
                    let p = shape.plane(b, ch);
                    // SAFETY: the plane of a channel of this chunk.
                    let dx = unsafe { dxs.range(p.start, shape.hw) };
                    let (x, g) = (&x[p.clone()], &g[p]);
                    if training {
                        let (mg, mgx) = ((sg[ch - c0] / count) as f32, (sgx[ch - c0] / count) as f32);
                        let (m, s) = (mean[ch], rstd[ch]);
                        for ((dx, &x), &g) in dx.iter_mut().zip(x).zip(g) {
                            *dx = k * (g - mg - (x - m) * s * mgx);
                        }
                    } else {
                        dx.iter_mut().zip(g).for_each(|(dx, &g)| *dx = k * g);
                    }
                }
            }
        });
    });
}

/// `sg`, `sgx` of channels `ch..ch + K` (`c0` is the chunk's first channel).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn bn_grad_sums<L: Lanes, const K: usize>(
    ch: usize,
    c0: usize,
    shape: BatchShape,
    x: &[f32],
    g: &[f32],
    mean: &[f32],
    rstd: &[f32],
    sg: &mut [f64],
    sgx: &mut [f64],
) {
    let m: [f32; K] = std::array::from_fn(|k| mean[ch + k]);
    let s: [f32; K] = std::array::from_fn(|k| rstd[ch + k]);
    let (mut a, mut b) = ([0.0f64; K], [0.0f64; K]);
    for img in 0..shape.n {
        let xs: [&[f32]; K] = std::array::from_fn(|k| &x[shape.plane(img, ch + k)]);
        let gs: [&[f32]; K] = std::array::from_fn(|k| &g[shape.plane(img, ch + k)]);
        (a, b) = sum_prod::<L, K>(xs, gs, None, m, s, a, b);
    }
    for k in 0..K {
        sg[ch - c0 + k] = a[k];
        sgx[ch - c0 + k] = b[k];
    }
}

#[cfg(test)]
mod tests {
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

    fn every_setting() -> Vec<Settings> {
        let mut all = Vec::new();
        for path in KernelPath::supported() {
            for threads in [1, 2] {
                all.push(Settings { mode: Mode::Fast, threads, path });
            }
        }
        all
    }

    fn bits(v: &[f32]) -> Vec<u32> {
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
                    layer_norm(st, &x, d, Affine { gamma: gv, beta: bv }, 1e-5, &mut y, &mut m, &mut s);
                    assert_eq!((bits(&y), bits(&m), bits(&s)), (bits(&ry), bits(&rm), bits(&rs)), "{rows}x{d} {st:?}");
                    let (mut dx, mut dg, mut db) = (vec![0.0; rows * d], vec![0.0; d], vec![0.0; d]);
                    layer_norm_backward(st, &x, &g, d, &m, &s, gv, Some(&mut dx), Some((&mut dg, &mut db)));
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
    #[allow(clippy::too_many_arguments)]
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
                    batch_norm(st, sh, &x, affine, 1e-5, &mut y, &mut m, &mut q, &mut s);
                    assert_eq!((bits(&y), bits(&m), bits(&s)), (bits(&ry), bits(&rm), bits(&rs)), "{sh:?} {st:?}");
                    assert_eq!(q, rq, "{sh:?} {st:?}");
                    let mut y2 = vec![0.0; len];
                    batch_norm_apply(st, sh, &x, &m, &s, affine, &mut y2);
                    assert_eq!(bits(&y2), bits(&ry), "{sh:?} {st:?}");
                    for training in [true, false] {
                        let (rdx, rsg, rsgx) = bn_backward_reference(&x, &g, sh, &m, &s, gv, training);
                        let (mut dx, mut sg, mut sgx) = (vec![0.0; len], vec![0.0; sh.c], vec![0.0; sh.c]);
                        batch_norm_backward(st, sh, &x, &g, &m, &s, gv, training, &mut sg, &mut sgx, Some(&mut dx));
                        assert_eq!(bits(&dx), bits(&rdx), "{sh:?} {st:?} training {training}");
                        assert_eq!((sg, sgx), (rsg, rsgx), "{sh:?} {st:?} training {training}");
                    }
                }
            }
        }
    }
}
