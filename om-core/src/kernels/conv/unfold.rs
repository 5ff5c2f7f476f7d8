//! Row-wise im2col and col2im on the `[K, P]` unfolding (layout and order:
//! `docs/ops-conv.md`).
//!
//! Row `k = (c·kH + kh)·kW + kw` of `colsᵀ[K, P]` is, for each output row `oh`, one run of
//! an input row: output columns `ow` in `lo..hi` read input column `ow·sW + kw·dW − left`
//! (a contiguous slice when `sW = 1`, a strided gather otherwise) and the columns outside
//! `lo..hi`, like whole output rows whose input row lies in the padding, are zero. The
//! ranges are computed once per `(kh, kw)`, not per element. col2im walks the same runs in
//! the same order (`k` outer, then `oh`, then `ow`), adding whole slices, so every `dx`
//! element receives its additions in exactly the order of the element-wise loop.

use super::ConvGeom;
use std::ops::Range;

impl ConvGeom {
    /// Output rows `oh` whose input row `oh·sH + kh·dH − top` lies inside the image, for
    /// kernel row `kh`.
    #[inline(always)]
    fn valid_rows(&self, kh: usize) -> Range<usize> {
        valid_range(self.oh, self.sh, kh * self.dh, self.pt, self.h)
    }

    /// Output columns `ow` whose input column `ow·sW + kw·dW − left` lies inside the
    /// image, for kernel column `kw`.
    #[inline(always)]
    fn valid_cols(&self, kw: usize) -> Range<usize> {
        valid_range(self.ow, self.sw, kw * self.dw, self.pl, self.w)
    }

    /// Channel, kernel row and kernel column of each unfolded row in `rows`, in order,
    /// counted up instead of divided out per row.
    #[inline(always)]
    fn taps(&self, rows: Range<usize>) -> impl Iterator<Item = (usize, usize, usize)> {
        let (kh, kw) = (self.kh, self.kw);
        let (mut c, mut ky, mut kx) = (rows.start / (kh * kw), rows.start / kw % kh, rows.start % kw);
        rows.map(move |_| {
            let tap = (c, ky, kx);
            kx += 1;
            if kx == kw {
                kx = 0;
                ky += 1;
                if ky == kh {
                    ky = 0;
                    c += 1;
                }
            }
            tap
        })
    }
}

/// What one kernel tap `(kh, kw)` reads, the same for every channel: its valid output
/// rows and columns, and its flat run ([`flat_run`]) when there is one.
#[derive(Clone, Copy, Default)]
struct TapRun {
    ys: (usize, usize),
    xs: (usize, usize),
    /// The flat run's output range and shift.
    flat: Option<(usize, usize, isize)>,
}

impl TapRun {
    #[inline(always)]
    fn ys(&self) -> Range<usize> {
        self.ys.0..self.ys.1
    }
    #[inline(always)]
    fn xs(&self) -> Range<usize> {
        self.xs.0..self.xs.1
    }
}

/// Kernels of at most this many taps have their [`TapRun`]s computed once per call (a
/// table on the stack) instead of once per unfolded row: on the convnet's 8×8 layer
/// (`K = 576` rows of 64 values) the range arithmetic per row cost about as much as the
/// copy it sets up.
const PLANNED_TAPS: usize = 25;

/// The [`TapRun`] of every tap of a kernel of at most [`PLANNED_TAPS`] taps; larger
/// kernels compute each row's on the fly.
struct TapRuns {
    runs: [TapRun; PLANNED_TAPS],
    planned: bool,
}

impl TapRuns {
    #[inline(always)]
    fn new(geo: &ConvGeom) -> TapRuns {
        let mut runs = [TapRun::default(); PLANNED_TAPS];
        let planned = geo.kh * geo.kw <= PLANNED_TAPS;
        if planned {
            for ky in 0..geo.kh {
                for kx in 0..geo.kw {
                    runs[ky * geo.kw + kx] = geo.tap_run(ky, kx);
                }
            }
        }
        TapRuns { runs, planned }
    }

    #[inline(always)]
    fn get(&self, geo: &ConvGeom, ky: usize, kx: usize) -> TapRun {
        if self.planned {
            self.runs[ky * geo.kw + kx]
        } else {
            geo.tap_run(ky, kx)
        }
    }
}

impl ConvGeom {
    /// The [`TapRun`] of tap `(ky, kx)`.
    #[inline(always)]
    fn tap_run(&self, ky: usize, kx: usize) -> TapRun {
        let (ys, xs) = (self.valid_rows(ky), self.valid_cols(kx));
        let flat = flat_run(self, ky, kx, &ys).map(|(run, shift)| (run.start, run.end, shift));
        TapRun { ys: (ys.start, ys.end), xs: (xs.start, xs.end), flat }
    }
}

/// For stride 1 and an output as wide as the input, output `(oy, ox)` of tap `(kh, kw)`
/// reads plane element `oy·W + ox + shift`: returns the part of the flat output range of
/// rows `ys` whose shifted index lies inside the plane, and the shift. Columns outside the
/// tap's valid columns then map onto a neighbouring row's edge (or are clipped here).
#[inline(always)]
fn flat_run(geo: &ConvGeom, ky: usize, kx: usize, ys: &Range<usize>) -> Option<(Range<usize>, isize)> {
    if geo.sh != 1 || geo.sw != 1 || geo.ow != geo.w || ys.is_empty() {
        return None;
    }
    let (h, w) = (geo.h as i128, geo.w as i128);
    // In i128: with a dilation or padding far larger than the image (taps mostly in the
    // padding) the products overflow isize.
    let shift = (ky * geo.dh) as i128 * w + (kx * geo.dw) as i128 - (geo.pt as i128 * w + geo.pl as i128);
    let a = (ys.start as i128 * w).max((-shift).max(0));
    let b = (ys.end as i128 * w).min((h * w - shift).max(0));
    if a >= b {
        // Nothing to copy (every valid output of these rows lies outside the plane in the
        // flat view only when no column is valid): the row-by-row loop handles it.
        return None;
    }
    Some((a as usize..b as usize, shift as isize))
}

/// Values of one block of [`short_blocks`].
const BLOCK: usize = 16;

/// Runs longer than this are left to `memcpy` / `memset` (whose call then costs little):
/// the convnet's first layer (runs of about 1,000 values) ran 2–3% slower in blocks.
const LONG_RUN: usize = 256;

/// Calls `f` on ranges covering `0..n` so that a copy or fill of each is inlined vector
/// moves rather than a `memcpy`/`memset` call: up to [`LONG_RUN`] values, blocks of
/// [`BLOCK`] (the last one overlapping its predecessor instead of a shorter tail; a run of
/// 8 to 15 values as two overlapping halves); otherwise, and below 8 values, `0..n` whole.
/// The unfolding's runs are a row or a plane of a small image (64 values on the convnet's
/// 8×8 layer, 256 on its 16×16 one), where a call per run cost as much as the copy.
/// Overlapping ranges are written twice with the same values.
#[inline(always)]
fn short_blocks(n: usize, mut f: impl FnMut(Range<usize>)) {
    if !(BLOCK / 2..=LONG_RUN).contains(&n) {
        f(0..n);
    } else if n >= BLOCK {
        for i in (0..n - BLOCK).step_by(BLOCK) {
            f(i..i + BLOCK);
        }
        f(n - BLOCK..n);
    } else {
        f(0..BLOCK / 2);
        f(n - BLOCK / 2..n);
    }
}

/// `dst.copy_from_slice(src)` by [`short_blocks`].
#[inline(always)]
fn copy_short(dst: &mut [f32], src: &[f32]) {
    assert_eq!(dst.len(), src.len(), "copy_short: lengths");
    short_blocks(dst.len(), |r| dst[r.clone()].copy_from_slice(&src[r]));
}

/// `dst.fill(0.0)` by [`short_blocks`].
#[inline(always)]
fn zero_short(dst: &mut [f32]) {
    short_blocks(dst.len(), |r| dst[r].fill(0.0));
}

/// Zeroes the columns outside `keep` of every row of `rows` (rows of `width`), a column
/// at a time: a strided loop, where a fill per row would be a `memset` call for one or two
/// values (about 4% of the time on the convnet's 8×8 layer, `perf`).
#[inline(always)]
fn zero_columns(rows: &mut [f32], width: usize, keep: &Range<usize>) {
    for col in (0..keep.start).chain(keep.end..width) {
        rows[col..].iter_mut().step_by(width).for_each(|v| *v = 0.0);
    }
}

/// The outputs `o < len` with `0 ≤ o·stride + off − pad < size`.
#[inline(always)]
fn valid_range(len: usize, stride: usize, off: usize, pad: usize, size: usize) -> Range<usize> {
    let steps = |v: usize| if stride == 1 { v } else { v.div_ceil(stride) };
    let lo = steps(pad.saturating_sub(off)).min(len);
    let hi = steps((size + pad).saturating_sub(off)).min(len);
    lo..hi.max(lo)
}

/// Writes rows `rows` of one image group's `colsᵀ` (`[K, P]`) into `out`
/// (`[rows.len(), P]`, row-major); `xg` is the group's input, `[C/g, H, W]`.
#[inline(always)]
pub fn im2col_kp_rows(geo: &ConvGeom, xg: &[f32], rows: Range<usize>, out: &mut [f32]) {
    im2col_kp_rows_strided(geo, xg, rows, out, geo.p());
}

/// As [`im2col_kp_rows`], with the rows of `out` `row_stride ≥ P` values apart (the values
/// between them are left as they are).
#[inline(always)]
pub fn im2col_kp_rows_strided(geo: &ConvGeom, xg: &[f32], rows: Range<usize>, out: &mut [f32], row_stride: usize) {
    let (p, h, w, ow) = (geo.p(), geo.h, geo.w, geo.ow);
    assert!(row_stride >= p, "im2col: row stride {row_stride} below P = {p}");
    let rows_out = out.chunks_mut(row_stride.max(1)).map(|r| &mut r[..p]);
    let runs = TapRuns::new(geo);
    for ((c, ky, kx), dst) in geo.taps(rows).zip(rows_out) {
        let plane = &xg[c * h * w..][..h * w];
        let tap = runs.get(geo, ky, kx);
        let (ys, xs) = (tap.ys(), tap.xs());
        zero_short(&mut dst[..ys.start * ow]);
        zero_short(&mut dst[ys.end * ow..]);
        if let Some((a, b, shift)) = tap.flat {
            // One shifted copy of the valid rows, then the columns outside `xs` (which
            // read a neighbouring row, or were clipped) are zeroed.
            let from = (a as isize + shift) as usize;
            copy_short(&mut dst[a..b], &plane[from..from + (b - a)]);
            zero_columns(&mut dst[ys.start * ow..ys.end * ow], ow, &xs);
            continue;
        }
        for oy in ys {
            let r = oy * geo.sh + ky * geo.dh - geo.pt;
            let d = &mut dst[oy * ow..][..ow];
            zero_short(&mut d[..xs.start]);
            zero_short(&mut d[xs.end..]);
            if xs.is_empty() {
                continue;
            }
            let c0 = xs.start * geo.sw + kx * geo.dw - geo.pl;
            let src = &plane[r * w + c0..];
            let run = &mut d[xs.clone()];
            if geo.sw == 1 {
                run.copy_from_slice(&src[..run.len()]);
            } else {
                run.iter_mut().zip(src.iter().step_by(geo.sw)).for_each(|(o, &v)| *o = v);
            }
        }
    }
}

/// Unfolds one image's group (`xg`: `[C/g, H, W]`) into `colsᵀ` (`[K, P]`, row-major).
#[inline(always)]
pub fn im2col_kp(geo: &ConvGeom, xg: &[f32], cols: &mut [f32]) {
    im2col_kp_rows(geo, xg, 0..geo.k(), cols);
}

/// Adds every tap of `dcols` (`[K, P]`) into `dxg` (`[C/g, H, W]`), `k` outer, `p` inner;
/// taps in the padding are dropped.
///
/// `dxg` must not hold `-0.0`: the stride-1, same-width path zeroes the entries of `dcols`
/// outside each tap's valid columns and then adds one flat run per tap, so those `+0.0`s
/// land on a neighbouring row's edge, where `v + 0.0 = v` for every `v` but `-0.0`. Sums
/// started from `+0.0` never are `-0.0` (round to nearest), so a `dx` zeroed first and
/// filled only by this function qualifies, and every element's additions are exactly those
/// of the element-wise loop, in its order.
#[inline(always)]
pub fn col2im_kp_add(geo: &ConvGeom, dcols: &mut [f32], dxg: &mut [f32]) {
    let (p, h, w, ow) = (geo.p(), geo.h, geo.w, geo.ow);
    let runs = TapRuns::new(geo);
    for ((c, ky, kx), src) in geo.taps(0..geo.k()).zip(dcols.chunks_exact_mut(p)) {
        let plane = &mut dxg[c * h * w..][..h * w];
        let tap = runs.get(geo, ky, kx);
        let (ys, xs) = (tap.ys(), tap.xs());
        if xs.is_empty() {
            continue;
        }
        if let Some((a, b, shift)) = tap.flat {
            zero_columns(&mut src[ys.start * ow..ys.end * ow], ow, &xs);
            let to = (a as isize + shift) as usize;
            plane[to..to + (b - a)].iter_mut().zip(&src[a..b]).for_each(|(d, &v)| *d += v);
            continue;
        }
        let c0 = xs.start * geo.sw + kx * geo.dw - geo.pl;
        for oy in ys {
            let r = oy * geo.sh + ky * geo.dh - geo.pt;
            let run = &src[oy * ow..][xs.clone()];
            let dst = &mut plane[r * w + c0..];
            if geo.sw == 1 {
                dst[..run.len()].iter_mut().zip(run).for_each(|(d, &v)| *d += v);
            } else {
                dst.iter_mut().step_by(geo.sw).zip(run).for_each(|(d, &v)| *d += v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The element-wise reference: visits the taps `(k, p, input offset)` with `k` outer
    /// and `p` inner, `None` for taps in the padding.
    fn for_each_tap(geo: &ConvGeom, mut f: impl FnMut(usize, usize, Option<usize>)) {
        for c in 0..geo.cg() {
            for ky in 0..geo.kh {
                for kx in 0..geo.kw {
                    let k = (c * geo.kh + ky) * geo.kw + kx;
                    for oy in 0..geo.oh {
                        let row = (oy * geo.sh + ky * geo.dh).checked_sub(geo.pt).filter(|&r| r < geo.h);
                        for ox in 0..geo.ow {
                            let col = (ox * geo.sw + kx * geo.dw).checked_sub(geo.pl).filter(|&c| c < geo.w);
                            let src = row.zip(col).map(|(r, col)| (c * geo.h + r) * geo.w + col);
                            f(k, oy * geo.ow + ox, src);
                        }
                    }
                }
            }
        }
    }

    /// Geometries covering stride, dilation, asymmetric padding (wider than the kernel
    /// reach on one side), 1×1 outputs, kernels reaching past the whole image, and a kernel
    /// of more taps than the per-call table of runs holds.
    fn geometries() -> Vec<ConvGeom> {
        let mut out = Vec::new();
        for &(h, w, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw) in &[
            (3, 3, 2, 2, 1, 1, 1, 0, 0, 0, 1, 1),
            (5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
            (8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
            (5, 6, 3, 2, 2, 2, 1, 0, 2, 1, 1, 1),
            (9, 8, 3, 3, 2, 1, 1, 2, 0, 1, 1, 2),
            (6, 7, 2, 3, 1, 3, 4, 0, 3, 5, 2, 1),
            (4, 4, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1),
            (1, 9, 1, 4, 1, 2, 0, 3, 0, 0, 1, 3),
            (7, 6, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2),
            (5, 6, 3, 3, 1, 1, 0, 2, 2, 0, 1, 1),
            // 30 taps: more than `PLANNED_TAPS`, so each row's runs are computed on the fly.
            (7, 7, 6, 5, 1, 1, 2, 2, 3, 2, 1, 1),
            // Runs copied in blocks (`copy_short`: 12-wide rows and planes of up to 144),
            // and runs longer than `LONG_RUN` (a 20×17 plane).
            (12, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
            (20, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
            (13, 40, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1),
        ] {
            let (eh, ew) = ((kh - 1) * dh + 1, (kw - 1) * dw + 1);
            let (oh, ow) = ((h + pt + pb - eh) / sh + 1, (w + pl + pr - ew) / sw + 1);
            out.push(ConvGeom { n: 1, c: 2, h, w, o: 1, groups: 1, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow });
        }
        out
    }

    #[test]
    fn unfold_matches_the_element_wise_reference() {
        for g in geometries() {
            let x: Vec<f32> = (1..=g.cg() * g.h * g.w).map(|v| v as f32).collect();
            let (k, p) = (g.k(), g.p());
            let mut want = vec![f32::NAN; k * p];
            for_each_tap(&g, |kk, pp, src| want[kk * p + pp] = src.map_or(0.0, |s| x[s]));
            let mut got = vec![f32::NAN; k * p];
            im2col_kp(&g, &x, &mut got);
            assert_eq!(got, want, "{g:?}");
            // A band of rows alone.
            let rows = k / 3..k - k / 4;
            let mut band = vec![f32::NAN; rows.len() * p];
            im2col_kp_rows(&g, &x, rows.clone(), &mut band);
            assert_eq!(band, want[rows.start * p..rows.end * p], "{g:?}");
            // With rows 3 values further apart than P; the gaps untouched.
            let stride = p + 3;
            let mut spaced = vec![f32::NAN; rows.len() * stride];
            im2col_kp_rows_strided(&g, &x, rows.clone(), &mut spaced, stride);
            for (i, row) in spaced.chunks(stride).enumerate() {
                assert_eq!(row[..p], want[(rows.start + i) * p..][..p], "{g:?}");
                assert!(row[p..].iter().all(|v| v.is_nan()), "{g:?}");
            }
        }
    }

    #[test]
    fn fold_adds_in_the_element_wise_order() {
        for g in geometries() {
            let (k, p) = (g.k(), g.p());
            // Values of very different magnitudes, so a different order changes bits.
            let dcols: Vec<f32> = (0..k * p).map(|i| ((i * 7919 % 1013) as f32 - 500.0) * 10f32.powi((i % 7) as i32 - 3)).collect();
            let mut want = vec![0.0f32; g.cg() * g.h * g.w];
            for_each_tap(&g, |kk, pp, dst| {
                if let Some(d) = dst {
                    want[d] += dcols[kk * p + pp];
                }
            });
            let mut got = vec![0.0f32; want.len()];
            col2im_kp_add(&g, &mut dcols.clone(), &mut got);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{g:?}");
        }
    }

    #[test]
    fn col2im_adds_every_in_bounds_tap() {
        let g = ConvGeom { n: 1, c: 1, h: 3, w: 3, o: 1, groups: 1, kh: 2, kw: 2, sh: 1, sw: 1, pt: 1, pl: 0, dh: 1, dw: 1, oh: 3, ow: 2 };
        let mut dcols = vec![1.0; g.k() * g.p()];
        let mut dx = vec![0.0; 9];
        col2im_kp_add(&g, &mut dcols, &mut dx);
        // How many windows read each pixel.
        assert_eq!(dx, vec![2.0, 4.0, 2.0, 2.0, 4.0, 2.0, 1.0, 2.0, 1.0]);
    }
}
