//! 2-d max and average pooling over `[planes, H, W]` row-major planes (layout, ties, NaN
//! and padding: `docs/ops-conv.md`; speed: `docs/kernels-norm-pool.md`).
//!
//! Every output is computed exactly as the scalar definition says, in output scan order
//! within its plane:
//! - max: the running maximum starts at −∞ with the index of the window's first in-bounds
//!   element and is replaced when `v > max || v.is_nan()`, scanning the window row by row
//!   (so ties keep the first maximum and the last NaN wins);
//! - average: an f64 sum in window scan order, divided by the count and rounded once;
//! - backward: `dx` of a plane is zeroed, then each output's gradient is added to its
//!   window (max: at the saved index; average: `g/count` to every in-bounds element) in
//!   output scan order.
//!
//! Windows are found incrementally (no division per window); max pooling's 2×2/stride 2
//! and 2×1/stride 2×1 windows and average pooling's 2×2/stride 2 windows, without padding
//! or dilation, take dedicated loops over row pairs that the compiler vectorises. Planes are independent, so chunks are whole planes (a count that
//! depends only on the plane size), each run on one thread: every thread count gives the
//! same bits.

use super::norm::on_path;
use crate::compute::Settings;
use crate::kernels::parallel::{for_each_tile, Tiled};

/// Target input elements per parallel chunk (whole planes, at least one). Measured on an
/// AMD EPYC (Zen 5), 2 shared cores: 8 Ki, 32 Ki and 128 Ki gave the same `om bench
/// norm-pool` times within the noise at 1 and 2 threads; 32 Ki (128 KiB of input) stays well
/// inside any L2 and still gives the benchmark shapes at least 8 chunks.
const CHUNK_ELEMS: usize = 32 * 1024;

/// The geometry of one 2-d pooling, validated by the caller: every size non-zero,
/// `padding ≤ kernel/2`, and the output at least 1×1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool2d {
    /// Number of `[H, W]` planes (`N·C`).
    pub planes: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Kernel height.
    pub kh: usize,
    /// Kernel width.
    pub kw: usize,
    /// Vertical stride.
    pub sh: usize,
    /// Horizontal stride.
    pub sw: usize,
    /// Top and bottom padding.
    pub ph: usize,
    /// Left and right padding.
    pub pw: usize,
    /// Vertical dilation.
    pub dh: usize,
    /// Horizontal dilation.
    pub dw: usize,
    /// Output height.
    pub oh: usize,
    /// Output width.
    pub ow: usize,
}

/// The in-bounds span of one window along one axis: the first position inside the image
/// (stepping by the dilation from the window's start) and the exclusive end.
#[inline(always)]
fn span(o: usize, s: usize, p: usize, k: usize, d: usize, len: usize) -> (usize, usize) {
    // In i128: the geometry's sizes are checked to be indices, and no sum here overflows.
    let start = (o * s) as i128 - p as i128;
    let end = (start + (k as i128 - 1) * d as i128 + 1).min(len as i128);
    // The first tap at or after 0, in one step (a loop would take p/d steps).
    let first = if start < 0 {
        start + (-start).div_euclid(d as i128) * d as i128 + if (-start) % d as i128 == 0 { 0 } else { d as i128 }
    } else {
        start
    };
    (first.min(len as i128).max(0) as usize, end.max(0) as usize)
}

/// Which loop a pooling takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// 2×2 windows, stride 2, no padding or dilation.
    K2x2,
    /// 2×1 windows (two rows, one column), stride 2×1, no padding or dilation.
    K2x1,
    /// Anything else.
    General,
}

impl Pool2d {
    /// The in-bounds rows of output row `oy`.
    #[inline(always)]
    fn rows(&self, oy: usize) -> (usize, usize) {
        span(oy, self.sh, self.ph, self.kh, self.dh, self.h)
    }

    /// The in-bounds columns of output column `ox`.
    #[inline(always)]
    fn cols(&self, ox: usize) -> (usize, usize) {
        span(ox, self.sw, self.pw, self.kw, self.dw, self.w)
    }

    fn shape(&self) -> Shape {
        // Every window inside the input (not so for a `ceil_mode` window past the edge).
        let inside = (self.oh - 1) * self.sh + self.kh <= self.h && (self.ow - 1) * self.sw + self.kw <= self.w;
        let plain = inside && self.kh == 2 && self.sh == 2 && self.ph == 0 && self.pw == 0 && self.dh == 1 && self.dw == 1;
        match (plain, self.kw, self.sw) {
            (true, 2, 2) => Shape::K2x2,
            (true, 1, 1) => Shape::K2x1,
            _ => Shape::General,
        }
    }

    /// Planes per parallel chunk.
    fn chunk_planes(&self) -> usize {
        (CHUNK_ELEMS / (self.h * self.w).max(1)).max(1)
    }

    /// The first `planes · len` values of `s` (planes of `len`) cut into the chunks of
    /// planes.
    fn by_planes<'a, T>(&self, s: &'a mut [T], len: usize) -> Tiled<'a, T> {
        Tiled::row_bands(s, self.planes, len, self.chunk_planes())
    }
}

/// Max pooling forward: `y` and the winners' flat in-plane indices `idx` (−1 for an empty
/// window), both `[planes, OH, OW]`. Panics if a slice is too short.
pub fn max_pool2d(settings: Settings, geo: &Pool2d, x: &[f32], y: &mut [f32], idx: &mut [i32]) {
    let (hw, ohw) = (geo.h * geo.w, geo.oh * geo.ow);
    assert!(x.len() >= geo.planes * hw && y.len() >= geo.planes * ohw && idx.len() >= geo.planes * ohw, "max_pool2d: short slices");
    let kind = geo.shape();
    for_each_tile(settings.threads, (geo.by_planes(y, ohw), geo.by_planes(idx, ohw)), |_, (y, idx)| {
        let (first, planes) = (y.origin().0, y.rows());
        let (y, idx) = (y.into_slice(), idx.into_slice());
        let x = &x[first * hw..(first + planes) * hw];
        on_path!(settings.path, _isa, (geo: &'a Pool2d, kind: Shape, x: &'a [f32], y: &'a mut [f32], idx: &'a mut [i32]) {
            let (hw, ohw) = (geo.h * geo.w, geo.oh * geo.ow);
            for ((x, y), idx) in x.chunks_exact(hw).zip(y.chunks_exact_mut(ohw)).zip(idx.chunks_exact_mut(ohw)) {
                match kind {
                    Shape::K2x2 => max_plane_2x2(geo, x, y, idx),
                    Shape::K2x1 => max_plane_2x1(geo, x, y, idx),
                    Shape::General => max_plane(geo, x, y, idx),
                }
            }
        });
    });
}

/// The running-maximum step: replaces `(best, at)` by `(v, i)` when `v > best` or `v` is NaN.
#[inline(always)]
fn take(best: &mut f32, at: &mut i32, v: f32, i: i32) {
    let t = v > *best || v.is_nan();
    *best = if t { v } else { *best };
    *at = if t { i } else { *at };
}

/// One plane, any geometry.
#[inline(always)]
fn max_plane(geo: &Pool2d, x: &[f32], y: &mut [f32], idx: &mut [i32]) {
    let w = geo.w;
    let mut j = 0;
    for oy in 0..geo.oh {
        let (y0, y1) = geo.rows(oy);
        for ox in 0..geo.ow {
            let (x0, x1) = geo.cols(ox);
            let mut best = f32::NEG_INFINITY;
            let mut at = if y0 < y1 && x0 < x1 { (y0 * w + x0) as i32 } else { -1 };
            let mut iy = y0;
            while iy < y1 {
                let row = &x[iy * w..(iy + 1) * w];
                let mut ix = x0;
                while ix < x1 {
                    take(&mut best, &mut at, row[ix], (iy * w + ix) as i32);
                    ix += geo.dw;
                }
                iy += geo.dh;
            }
            y[j] = best;
            idx[j] = at;
            j += 1;
        }
    }
}

/// One plane of 2×2/stride-2 windows: the scan order is `(0,0) (0,1) (1,0) (1,1)`; the first
/// element always becomes the running maximum (it replaces −∞, or equals it). Rows go in
/// runs of [`RUN`] outputs, a length the compiler vectorises even when rows are short.
#[inline(always)]
fn max_plane_2x2(geo: &Pool2d, x: &[f32], y: &mut [f32], idx: &mut [i32]) {
    let (w, ow) = (geo.w, geo.ow);
    for (oy, (y, idx)) in y.chunks_exact_mut(ow).zip(idx.chunks_exact_mut(ow)).enumerate() {
        let r0 = &x[2 * oy * w..][..2 * ow];
        let r1 = &x[(2 * oy + 1) * w..][..2 * ow];
        let base = (2 * oy * w) as i32;
        let full = ow / RUN * RUN;
        for ox in (0..full).step_by(RUN) {
            let at = base + 2 * ox as i32;
            max_run_2x2::<RUN>(&r0[2 * ox..], &r1[2 * ox..], at, w as i32, &mut y[ox..], &mut idx[ox..]);
        }
        for ox in full..ow {
            let at = base + 2 * ox as i32;
            max_run_2x2::<1>(&r0[2 * ox..], &r1[2 * ox..], at, w as i32, &mut y[ox..], &mut idx[ox..]);
        }
    }
}

/// Outputs per run of the dedicated 2×2 and 2×1 loops (one AVX2 vector of results). With
/// whole-row loops the compiler's 16-lane AVX-512 loop never ran on the convnet's 8-output
/// rows (a profile on an AMD EPYC, Zen 5, showed only scalar code); runs of 8 vectorise them,
/// and the pooling benchmark's process time fell 2.3× with this and the one-pass backward.
const RUN: usize = 8;

/// `N` consecutive 2×2 windows of the row pair `r0`, `r1`, the first at flat index `at`.
#[inline(always)]
fn max_run_2x2<const N: usize>(r0: &[f32], r1: &[f32], at: i32, w: i32, y: &mut [f32], idx: &mut [i32]) {
    let (r0, r1, y, idx) = (&r0[..2 * N], &r1[..2 * N], &mut y[..N], &mut idx[..N]);
    for k in 0..N {
        let i = at + 2 * k as i32;
        let (mut best, mut win) = (r0[2 * k], i);
        take(&mut best, &mut win, r0[2 * k + 1], i + 1);
        take(&mut best, &mut win, r1[2 * k], i + w);
        take(&mut best, &mut win, r1[2 * k + 1], i + w + 1);
        y[k] = best;
        idx[k] = win;
    }
}

/// One plane of 2×1/stride-2×1 windows (two rows, one column), in runs as for 2×2.
#[inline(always)]
fn max_plane_2x1(geo: &Pool2d, x: &[f32], y: &mut [f32], idx: &mut [i32]) {
    let (w, ow) = (geo.w, geo.ow);
    for (oy, (y, idx)) in y.chunks_exact_mut(ow).zip(idx.chunks_exact_mut(ow)).enumerate() {
        let r0 = &x[2 * oy * w..][..ow];
        let r1 = &x[(2 * oy + 1) * w..][..ow];
        let base = (2 * oy * w) as i32;
        let full = ow / RUN * RUN;
        for ox in (0..full).step_by(RUN) {
            max_run_2x1::<RUN>(&r0[ox..], &r1[ox..], base + ox as i32, w as i32, &mut y[ox..], &mut idx[ox..]);
        }
        for ox in full..ow {
            max_run_2x1::<1>(&r0[ox..], &r1[ox..], base + ox as i32, w as i32, &mut y[ox..], &mut idx[ox..]);
        }
    }
}

/// `N` consecutive 2×1 windows of the row pair `r0`, `r1`, the first at flat index `at`.
#[inline(always)]
fn max_run_2x1<const N: usize>(r0: &[f32], r1: &[f32], at: i32, w: i32, y: &mut [f32], idx: &mut [i32]) {
    let (r0, r1, y, idx) = (&r0[..N], &r1[..N], &mut y[..N], &mut idx[..N]);
    for k in 0..N {
        let i = at + k as i32;
        let (mut best, mut win) = (r0[k], i);
        take(&mut best, &mut win, r1[k], i + w);
        y[k] = best;
        idx[k] = win;
    }
}

/// Max pooling backward: `dx` (`[planes, H, W]`) gets zeros plus `g` added at each saved
/// index `idx` (as [`max_pool2d`] wrote them), in output scan order per plane. The 2×2 and
/// 2×1 windows do not overlap, so there each element is written once: `0 + g` where the
/// saved index points, else `0`, the same bits.
pub fn max_pool2d_backward(settings: Settings, geo: &Pool2d, g: &[f32], idx: &[i32], dx: &mut [f32]) {
    let (hw, ohw) = (geo.h * geo.w, geo.oh * geo.ow);
    assert!(g.len() >= geo.planes * ohw && idx.len() >= geo.planes * ohw && dx.len() >= geo.planes * hw, "max_pool2d: short slices");
    let kind = geo.shape();
    for_each_tile(settings.threads, geo.by_planes(dx, hw), |_, dx| {
        let (first, planes) = (dx.origin().0, dx.rows());
        let dx = dx.into_slice();
        let (g, idx) = (&g[first * ohw..(first + planes) * ohw], &idx[first * ohw..(first + planes) * ohw]);
        on_path!(settings.path, _isa, (geo: &'a Pool2d, kind: Shape, g: &'a [f32], idx: &'a [i32], dx: &'a mut [f32]) {
            let (hw, ohw) = (geo.h * geo.w, geo.oh * geo.ow);
            for ((dx, g), idx) in dx.chunks_exact_mut(hw).zip(g.chunks_exact(ohw)).zip(idx.chunks_exact(ohw)) {
                match kind {
                    Shape::K2x2 | Shape::K2x1 => max_back_plane_2xk(geo, kind == Shape::K2x2, g, idx, dx),
                    Shape::General => {
                        dx.fill(0.0);
                        for (&gv, &at) in g.iter().zip(idx) {
                            if at >= 0 {
                                dx[at as usize] += gv;
                            }
                        }
                    }
                }
            }
        });
    });
}

/// One plane of the 2×2 (`wide`) or 2×1 backward: every element written once.
#[inline(always)]
fn max_back_plane_2xk(geo: &Pool2d, wide: bool, g: &[f32], idx: &[i32], dx: &mut [f32]) {
    let (w, ow) = (geo.w, geo.ow);
    let used = if wide { 2 * ow } else { ow };
    for (oy, (g, idx)) in g.chunks_exact(ow).zip(idx.chunks_exact(ow)).enumerate() {
        let (d0, d1) = dx[2 * oy * w..(2 * oy + 2) * w].split_at_mut(w);
        let base = (2 * oy * w) as i32;
        let full = ow / RUN * RUN;
        for ox in (0..full).step_by(RUN).chain(full..ow) {
            let n = if ox < full { RUN } else { 1 };
            let (g, idx) = (&g[ox..ox + n], &idx[ox..ox + n]);
            match (wide, n) {
                (true, RUN) => back_run_2x2::<RUN>(g, idx, base + 2 * ox as i32, w as i32, &mut d0[2 * ox..], &mut d1[2 * ox..]),
                (true, _) => back_run_2x2::<1>(g, idx, base + 2 * ox as i32, w as i32, &mut d0[2 * ox..], &mut d1[2 * ox..]),
                (false, RUN) => back_run_2x1::<RUN>(g, idx, base + ox as i32, w as i32, &mut d0[ox..], &mut d1[ox..]),
                (false, _) => back_run_2x1::<1>(g, idx, base + ox as i32, w as i32, &mut d0[ox..], &mut d1[ox..]),
            }
        }
        d0[used..].fill(0.0);
        d1[used..].fill(0.0);
    }
    dx[2 * geo.oh * w..].fill(0.0);
}

/// `N` consecutive 2×2 windows' gradients, the first window's top-left at flat index `at`.
#[inline(always)]
fn back_run_2x2<const N: usize>(g: &[f32], idx: &[i32], at: i32, w: i32, d0: &mut [f32], d1: &mut [f32]) {
    let (g, idx, d0, d1) = (&g[..N], &idx[..N], &mut d0[..2 * N], &mut d1[..2 * N]);
    for k in 0..N {
        let (v, win, i) = (0.0 + g[k], idx[k], at + 2 * k as i32);
        d0[2 * k] = if win == i { v } else { 0.0 };
        d0[2 * k + 1] = if win == i + 1 { v } else { 0.0 };
        d1[2 * k] = if win == i + w { v } else { 0.0 };
        d1[2 * k + 1] = if win == i + w + 1 { v } else { 0.0 };
    }
}

/// `N` consecutive 2×1 windows' gradients, the first window's top at flat index `at`.
#[inline(always)]
fn back_run_2x1<const N: usize>(g: &[f32], idx: &[i32], at: i32, w: i32, d0: &mut [f32], d1: &mut [f32]) {
    let (g, idx, d0, d1) = (&g[..N], &idx[..N], &mut d0[..N], &mut d1[..N]);
    for k in 0..N {
        let (v, win, i) = (0.0 + g[k], idx[k], at + k as i32);
        d0[k] = if win == i { v } else { 0.0 };
        d1[k] = if win == i + w { v } else { 0.0 };
    }
}

/// What an average pooling divides each window's sum by: PyTorch's `count_include_pad`
/// (on: `IncludePad`, off: `ExcludePad`) or its `divisor_override` (`Override(d)`, `d ≥ 1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Divisor {
    /// The window's area inside the padded input.
    IncludePad,
    /// The number of in-bounds elements.
    ExcludePad,
    /// A fixed divisor for every window.
    Override(usize),
}

/// The divisor of average window `(oy, ox)` as PyTorch computes it: with
/// `count_include_pad`, the window's area inside the padded input (the kernel area, except
/// for a `ceil_mode` window that reaches past the bottom or right padding), else the number
/// of in-bounds elements (`rows`, `cols`: the in-bounds spans), or the override. As `f32`.
#[inline(always)]
fn avg_count(geo: &Pool2d, divisor: Divisor, (oy, ox): (usize, usize), (y0, y1): (usize, usize), (x0, x1): (usize, usize)) -> f32 {
    // The window's extent in padded coordinates, clipped to the padded input.
    let padded = |o: usize, s: usize, k: usize, p: usize, len: usize| (o * s + k).min(len + 2 * p) - o * s;
    let count = match divisor {
        // Through f64 (exact below 2^53, as the integer product was): a window far larger
        // than the input must not overflow.
        Divisor::IncludePad => {
            return (padded(oy, geo.sh, geo.kh, geo.ph, geo.h) as f64 * padded(ox, geo.sw, geo.kw, geo.pw, geo.w) as f64) as f32
        }
        Divisor::ExcludePad => (y1 - y0.min(y1)) * (x1 - x0.min(x1)),
        Divisor::Override(d) => d,
    };
    count as f32
}

/// Average pooling forward (dilation 1): `y[j] = (Σ x as f64 / count) as f32`, 0 for an
/// empty window. 2×2/stride-2 windows without padding (or override) take a vectorised
/// loop over row pairs.
pub fn avg_pool2d(settings: Settings, geo: &Pool2d, divisor: Divisor, x: &[f32], y: &mut [f32]) {
    let (hw, ohw) = (geo.h * geo.w, geo.oh * geo.ow);
    assert!(x.len() >= geo.planes * hw && y.len() >= geo.planes * ohw, "avg_pool2d: short slices");
    let kind = geo.shape();
    for_each_tile(settings.threads, geo.by_planes(y, ohw), |_, y| {
        let (first, planes) = (y.origin().0, y.rows());
        let y = y.into_slice();
        let x = &x[first * hw..(first + planes) * hw];
        on_path!(settings.path, _isa, (geo: &'a Pool2d, kind: Shape, divisor: Divisor, x: &'a [f32], y: &'a mut [f32]) {
            let (hw, ohw) = (geo.h * geo.w, geo.oh * geo.ow);
            for (x, y) in x.chunks_exact(hw).zip(y.chunks_exact_mut(ohw)) {
                match kind {
                    Shape::K2x2 if !matches!(divisor, Divisor::Override(_)) => avg_plane_2x2(geo, x, y),
                    _ => avg_plane(geo, divisor, x, y),
                }
            }
        });
    });
}

/// One plane of an average pooling, any geometry.
#[inline(always)]
fn avg_plane(geo: &Pool2d, divisor: Divisor, x: &[f32], y: &mut [f32]) {
    let mut j = 0;
    for oy in 0..geo.oh {
        let rows = geo.rows(oy);
        for ox in 0..geo.ow {
            let cols = geo.cols(ox);
            let count = avg_count(geo, divisor, (oy, ox), rows, cols);
            let mut sum = 0.0f64;
            for row in x[rows.0 * geo.w..].chunks(geo.w).take(rows.1.saturating_sub(rows.0)) {
                for &v in &row[cols.0..cols.1.max(cols.0)] {
                    sum += v as f64;
                }
            }
            y[j] = if count > 0.0 { (sum / count as f64) as f32 } else { 0.0 };
            j += 1;
        }
    }
}

/// One plane of 2×2/stride-2 averages (count 4 with or without `count_include_pad`), in
/// runs of [`RUN`] outputs.
#[inline(always)]
fn avg_plane_2x2(geo: &Pool2d, x: &[f32], y: &mut [f32]) {
    let (w, ow) = (geo.w, geo.ow);
    for (oy, y) in y.chunks_exact_mut(ow).enumerate() {
        let r0 = &x[2 * oy * w..][..2 * ow];
        let r1 = &x[(2 * oy + 1) * w..][..2 * ow];
        let full = ow / RUN * RUN;
        for ox in (0..full).step_by(RUN) {
            avg_run_2x2::<RUN>(&r0[2 * ox..], &r1[2 * ox..], &mut y[ox..]);
        }
        for ox in full..ow {
            avg_run_2x2::<1>(&r0[2 * ox..], &r1[2 * ox..], &mut y[ox..]);
        }
    }
}

/// `N` consecutive 2×2 averages of the row pair `r0`, `r1`: `0 + a + b + c + d` in f64.
#[inline(always)]
fn avg_run_2x2<const N: usize>(r0: &[f32], r1: &[f32], y: &mut [f32]) {
    let (r0, r1, y) = (&r0[..2 * N], &r1[..2 * N], &mut y[..N]);
    for k in 0..N {
        let mut sum = 0.0f64;
        sum += r0[2 * k] as f64;
        sum += r0[2 * k + 1] as f64;
        sum += r1[2 * k] as f64;
        sum += r1[2 * k + 1] as f64;
        y[k] = (sum / 4.0f32 as f64) as f32;
    }
}

/// Average pooling backward (dilation 1): `dx` gets zeros plus `g[j]/count` added to each
/// in-bounds element of window `j`, in output scan order per plane. 2×2/stride-2 windows
/// without padding (or override) do not overlap: there each element is written once,
/// `0 + g/4` or `0`.
pub fn avg_pool2d_backward(settings: Settings, geo: &Pool2d, divisor: Divisor, g: &[f32], dx: &mut [f32]) {
    let (hw, ohw) = (geo.h * geo.w, geo.oh * geo.ow);
    assert!(g.len() >= geo.planes * ohw && dx.len() >= geo.planes * hw, "avg_pool2d: short slices");
    let kind = geo.shape();
    for_each_tile(settings.threads, geo.by_planes(dx, hw), |_, dx| {
        let (first, planes) = (dx.origin().0, dx.rows());
        let dx = dx.into_slice();
        let g = &g[first * ohw..(first + planes) * ohw];
        on_path!(settings.path, _isa, (geo: &'a Pool2d, kind: Shape, divisor: Divisor, g: &'a [f32], dx: &'a mut [f32]) {
            let (hw, ohw) = (geo.h * geo.w, geo.oh * geo.ow);
            for (dx, g) in dx.chunks_exact_mut(hw).zip(g.chunks_exact(ohw)) {
                match kind {
                    Shape::K2x2 if !matches!(divisor, Divisor::Override(_)) => avg_back_plane_2x2(geo, g, dx),
                    _ => avg_back_plane(geo, divisor, g, dx),
                }
            }
        });
    });
}

/// One plane of an average pooling's backward, any geometry.
#[inline(always)]
fn avg_back_plane(geo: &Pool2d, divisor: Divisor, g: &[f32], dx: &mut [f32]) {
    dx.fill(0.0);
    let mut j = 0;
    for oy in 0..geo.oh {
        let rows = geo.rows(oy);
        for ox in 0..geo.ow {
            let cols = geo.cols(ox);
            let count = avg_count(geo, divisor, (oy, ox), rows, cols);
            if count != 0.0 {
                let v = g[j] / count;
                for row in dx[rows.0 * geo.w..].chunks_mut(geo.w).take(rows.1.saturating_sub(rows.0)) {
                    for d in &mut row[cols.0..cols.1.max(cols.0)] {
                        *d += v;
                    }
                }
            }
            j += 1;
        }
    }
}

/// One plane of the 2×2/stride-2 average backward: every element written once.
#[inline(always)]
fn avg_back_plane_2x2(geo: &Pool2d, g: &[f32], dx: &mut [f32]) {
    let (w, ow) = (geo.w, geo.ow);
    for (oy, g) in g.chunks_exact(ow).enumerate() {
        let (d0, d1) = dx[2 * oy * w..(2 * oy + 2) * w].split_at_mut(w);
        for (ox, &gv) in g.iter().enumerate() {
            let v = 0.0 + gv / 4.0f32;
            d0[2 * ox] = v;
            d0[2 * ox + 1] = v;
            d1[2 * ox] = v;
            d1[2 * ox + 1] = v;
        }
        d0[2 * ow..].fill(0.0);
        d1[2 * ow..].fill(0.0);
    }
    dx[2 * geo.oh * w..].fill(0.0);
}

#[cfg(test)]
mod tests {
    //! Bit-for-bit checks against the scalar definitions (the loops these kernels replaced),
    //! with ties, NaN and −∞ in the input, on the dedicated and the general paths, on every
    //! supported path at 1 and 2 threads.

    use super::*;
    use crate::kernels::norm::tests::{bits, every_setting};
    use crate::rng::Rng;

    /// Values from a small set (many ties) with NaN and −∞ sprinkled in.
    fn data(len: usize, seed: u64) -> Vec<f32> {
        let mut rng = Rng::new(seed);
        (0..len)
            .map(|_| match rng.below(20) {
                0 => f32::NAN,
                1 => f32::NEG_INFINITY,
                2 => -0.0,
                k => (k % 6) as f32 - 2.5,
            })
            .collect()
    }

    fn geometry(
        planes: usize,
        (h, w): (usize, usize),
        (kh, kw): (usize, usize),
        (sh, sw): (usize, usize),
        (ph, pw): (usize, usize),
        (dh, dw): (usize, usize),
    ) -> Pool2d {
        let out = |len: usize, k: usize, s: usize, p: usize, d: usize| (len + 2 * p - d * (k - 1) - 1) / s + 1;
        Pool2d { planes, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh: out(h, kh, sh, ph, dh), ow: out(w, kw, sw, pw, dw) }
    }

    /// `geo` with PyTorch's `ceil_mode` output size: `ceil((len + 2p − d(k−1) − 1)/s) + 1`,
    /// less one when the last window would start past the input and its left padding.
    fn ceil_mode(geo: Pool2d) -> Pool2d {
        let out = |len: usize, k: usize, s: usize, p: usize, d: usize| {
            let o = (len + 2 * p - d * (k - 1) - 1).div_ceil(s) + 1;
            if (o - 1) * s >= len + p {
                o - 1
            } else {
                o
            }
        };
        Pool2d { oh: out(geo.h, geo.kh, geo.sh, geo.ph, geo.dh), ow: out(geo.w, geo.kw, geo.sw, geo.pw, geo.dw), ..geo }
    }

    /// The scalar forward: `(y, idx)`.
    fn max_reference(geo: &Pool2d, xs: &[f32]) -> (Vec<f32>, Vec<i32>) {
        let (mut y, mut idx) = (Vec::new(), Vec::new());
        for plane in 0..geo.planes {
            let src = &xs[plane * geo.h * geo.w..][..geo.h * geo.w];
            for oy in 0..geo.oh {
                for ox in 0..geo.ow {
                    let ((y0, y1), (x0, x1)) = (geo.rows(oy), geo.cols(ox));
                    let mut best = f32::NEG_INFINITY;
                    let mut at = if y0 < y1 && x0 < x1 { (y0 * geo.w + x0) as i32 } else { -1 };
                    for iy in (y0..y1).step_by(geo.dh) {
                        for ix in (x0..x1).step_by(geo.dw) {
                            let v = src[iy * geo.w + ix];
                            if v > best || v.is_nan() {
                                best = v;
                                at = (iy * geo.w + ix) as i32;
                            }
                        }
                    }
                    y.push(best);
                    idx.push(at);
                }
            }
        }
        (y, idx)
    }

    #[test]
    fn max_pool_matches_the_scalar_definition_bit_for_bit() {
        let cases = [
            geometry(70, (9, 11), (2, 2), (2, 2), (0, 0), (1, 1)),
            geometry(3, (64, 64), (2, 2), (2, 2), (0, 0), (1, 1)),
            geometry(70, (9, 11), (2, 1), (2, 1), (0, 0), (1, 1)),
            geometry(5, (7, 8), (3, 3), (2, 2), (1, 1), (1, 1)),
            geometry(5, (6, 7), (2, 3), (1, 2), (1, 1), (2, 1)),
            geometry(4, (5, 5), (3, 3), (1, 1), (0, 0), (1, 1)),
            ceil_mode(geometry(70, (9, 11), (2, 2), (2, 2), (0, 0), (1, 1))),
            ceil_mode(geometry(70, (9, 10), (2, 1), (2, 1), (0, 0), (1, 1))),
            ceil_mode(geometry(5, (8, 9), (3, 3), (2, 2), (1, 1), (1, 1))),
            ceil_mode(geometry(5, (6, 8), (2, 3), (2, 3), (1, 1), (2, 1))),
        ];
        for geo in cases {
            let (hw, ohw) = (geo.h * geo.w, geo.oh * geo.ow);
            let x = data(geo.planes * hw, 1);
            let g: Vec<f32> = data(geo.planes * ohw, 2).iter().map(|v| if v.is_finite() { *v } else { -0.0 }).collect();
            let (ry, ridx) = max_reference(&geo, &x);
            let mut rdx = vec![0.0f32; x.len()];
            for (j, (&gv, &at)) in g.iter().zip(&ridx).enumerate() {
                rdx[(j / ohw) * hw + at as usize] += gv;
            }
            for st in every_setting() {
                let (mut y, mut idx) = (vec![0.0; ry.len()], vec![0; ry.len()]);
                max_pool2d(st, &geo, &x, &mut y, &mut idx);
                assert_eq!((bits(&y), &idx), (bits(&ry), &ridx), "{geo:?} {st:?}");
                let mut dx = vec![1.0; x.len()];
                max_pool2d_backward(st, &geo, &g, &idx, &mut dx);
                assert_eq!(bits(&dx), bits(&rdx), "{geo:?} {st:?}");
            }
        }
    }

    #[test]
    fn avg_pool_matches_the_scalar_definition_bit_for_bit() {
        let cases = [
            geometry(70, (9, 11), (2, 2), (2, 2), (0, 0), (1, 1)),
            geometry(3, (40, 38), (2, 2), (2, 2), (0, 0), (1, 1)),
            geometry(5, (7, 8), (3, 3), (2, 2), (1, 1), (1, 1)),
            geometry(5, (7, 6), (2, 3), (3, 1), (1, 1), (1, 1)),
            ceil_mode(geometry(70, (9, 11), (2, 2), (2, 2), (0, 0), (1, 1))),
            ceil_mode(geometry(5, (8, 9), (3, 3), (2, 2), (1, 1), (1, 1))),
            ceil_mode(geometry(5, (7, 8), (2, 3), (3, 2), (1, 1), (1, 1))),
        ];
        for geo in cases {
            let (hw, ohw) = (geo.h * geo.w, geo.oh * geo.ow);
            let mut rng = Rng::new(3);
            let x: Vec<f32> = (0..geo.planes * hw).map(|_| rng.uniform(-2.0, 2.0)).collect();
            let g: Vec<f32> = (0..geo.planes * ohw).map(|_| rng.uniform(-2.0, 2.0)).collect();
            for cip in [Divisor::IncludePad, Divisor::ExcludePad, Divisor::Override(3)] {
                let (mut ry, mut rdx) = (vec![0.0f32; geo.planes * ohw], vec![0.0f32; x.len()]);
                for plane in 0..geo.planes {
                    for oy in 0..geo.oh {
                        for ox in 0..geo.ow {
                            let ((y0, y1), (x0, x1)) = (geo.rows(oy), geo.cols(ox));
                            let count = avg_count(&geo, cip, (oy, ox), (y0, y1), (x0, x1));
                            let j = (plane * geo.oh + oy) * geo.ow + ox;
                            let mut sum = 0.0f64;
                            for iy in y0..y1 {
                                for ix in x0..x1 {
                                    sum += x[plane * hw + iy * geo.w + ix] as f64;
                                    rdx[plane * hw + iy * geo.w + ix] += g[j] / count;
                                }
                            }
                            ry[j] = (sum / count as f64) as f32;
                        }
                    }
                }
                for st in every_setting() {
                    let (mut y, mut dx) = (vec![0.0; ry.len()], vec![1.0; x.len()]);
                    avg_pool2d(st, &geo, cip, &x, &mut y);
                    avg_pool2d_backward(st, &geo, cip, &g, &mut dx);
                    assert_eq!((bits(&y), bits(&dx)), (bits(&ry), bits(&rdx)), "{geo:?} {st:?}");
                }
            }
        }
    }
}
