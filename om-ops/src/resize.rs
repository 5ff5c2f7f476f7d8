//! Resizing: `interpolate` (PyTorch's `F.interpolate`, with its keyword arguments in one
//! [`Interpolate`] value) on the primitives `resize2d` (to a size) and `resize2d_scale` (by
//! a scale factor) of `[N, C, H, W]` or unbatched `[C, H, W]` images: nearest,
//! nearest-exact and bilinear, with or without aligned corners. Both operators are one
//! validated `Resize` run forward and backward. Coordinate rules and accumulation order:
//! `docs/ops-conv.md`.

use crate::conv::Pair;
use crate::image::Images;
use om_core::layout::Dims;
use om_core::pool::max_buffer_bytes;
use om_core::{Case, Error, Result, Tensor};
use om_macros::op;

/// How [`interpolate()`] interpolates; `Default` is PyTorch's default, `Nearest`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ResizeMode {
    /// PyTorch's `'nearest'` (the default): source `min(floor(dst·scale), in − 1)`, in f32
    /// (`scale` is `in/out`, or `1/scale_factor`).
    #[default]
    Nearest,
    /// PyTorch's `'nearest-exact'`: the pixel whose centre is nearest,
    /// `min(floor(max(scale·(dst + 0.5) − 0.5, 0) + 0.5), in − 1)`, in f32.
    NearestExact,
    /// PyTorch's `'bilinear'`: half-pixel centres clamped at 0, or aligned corners.
    Bilinear,
}

/// Scale factors (height, width) of [`Interpolate::scale_factor`]: one `f64` for both axes,
/// or a pair.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScaleFactor(pub [f64; 2]);

impl From<f64> for ScaleFactor {
    fn from(s: f64) -> Self {
        ScaleFactor([s, s])
    }
}

impl From<[f64; 2]> for ScaleFactor {
    fn from(s: [f64; 2]) -> Self {
        ScaleFactor(s)
    }
}

impl From<(f64, f64)> for ScaleFactor {
    fn from((h, w): (f64, f64)) -> Self {
        ScaleFactor([h, w])
    }
}

/// The output of a resize: a size, or scale factors.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Target {
    Size(Pair),
    Scale([f64; 2]),
}

/// PyTorch's arguments of `F.interpolate` for images, with PyTorch's defaults: built from
/// the output size (`Interpolate::size`, an int or (height, width)) or from scale factors
/// (`Interpolate::scale_factor`, an `f64` or a pair), then `mode` (`Nearest`),
/// `align_corners` (off; bilinear only) and `recompute_scale_factor` (off; scale factors
/// only). An int or an int pair converts to a size, an `f64` or an `f64` pair to scale
/// factors, so `interpolate(&x, [7, 9])` and `interpolate(&x, 2.0)` read as PyTorch's.
///
/// ```
/// use om_ops::{interpolate, Interpolate, ResizeMode, Tensor};
/// let x = Tensor::randn(&[1, 2, 3, 4])?;
/// // F.interpolate(x, size=(7, 9), mode='bilinear', align_corners=True)
/// let o = Interpolate::size([7, 9]).mode(ResizeMode::Bilinear).align_corners(true);
/// assert_eq!(interpolate(&x, o)?.shape(), &[1, 2, 7, 9]);
/// // F.interpolate(x, scale_factor=2.5)
/// assert_eq!(interpolate(&x, 2.5)?.shape(), &[1, 2, 7, 10]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interpolate {
    target: Target,
    mode: ResizeMode,
    align_corners: bool,
    recompute_scale_factor: bool,
}

impl Interpolate {
    /// Resizes to `size`: an int (square) or (height, width).
    pub fn size(size: impl Into<Pair>) -> Interpolate {
        Interpolate::with_target(Target::Size(size.into()))
    }

    /// Resizes by `scale_factor`: one factor for both axes, or (height, width); the output
    /// is `floor(H·sh) × floor(W·sw)`.
    pub fn scale_factor(scale_factor: impl Into<ScaleFactor>) -> Interpolate {
        Interpolate::with_target(Target::Scale(scale_factor.into().0))
    }

    fn with_target(target: Target) -> Interpolate {
        Interpolate { target, mode: ResizeMode::Nearest, align_corners: false, recompute_scale_factor: false }
    }

    /// How the output samples the input. Default [`ResizeMode::Nearest`].
    pub fn mode(self, mode: ResizeMode) -> Interpolate {
        Interpolate { mode, ..self }
    }

    /// Bilinear only: whether the corner pixels' centres align (source coordinate
    /// `(in − 1)/(out − 1)·dst`) rather than half-pixel centres. Default off.
    pub fn align_corners(self, align_corners: bool) -> Interpolate {
        Interpolate { align_corners, ..self }
    }

    /// Scale factors only: whether the coordinate map uses `in/out` rather than
    /// `1/scale_factor`. Default off.
    pub fn recompute_scale_factor(self, recompute_scale_factor: bool) -> Interpolate {
        Interpolate { recompute_scale_factor, ..self }
    }
}

macro_rules! interpolate_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Interpolate {
            /// An output size (PyTorch's `size=`).
            fn from(size: $t) -> Interpolate {
                Interpolate::size(size)
            }
        }
    )*};
}
interpolate_from!(i32, usize, [i32; 2], [usize; 2], (i32, i32), (usize, usize), Pair);

impl From<f64> for Interpolate {
    /// Scale factors (PyTorch's `scale_factor=`).
    fn from(s: f64) -> Interpolate {
        Interpolate::scale_factor(s)
    }
}

impl From<[f64; 2]> for Interpolate {
    /// Scale factors (PyTorch's `scale_factor=`).
    fn from(s: [f64; 2]) -> Interpolate {
        Interpolate::scale_factor(s)
    }
}

/// The source taps of one output coordinate along one axis: `y = v[i0]·l0 + v[i1]·l1`
/// (nearest: `i0 = i1`, `l0 = 1`, `l1 = 0`, and only `i0` is read).
#[derive(Clone, Copy, Debug)]
struct Tap {
    i0: usize,
    i1: usize,
    l0: f32,
    l1: f32,
}

/// One axis of a resize: `len_in` → `len_out` (both ≥ 1) and the scale factor the caller
/// gave, which PyTorch's coordinate map uses instead of `len_out / len_in` (when given
/// without `recompute_scale_factor`).
#[derive(Clone, Copy, Debug)]
struct Axis {
    len_in: usize,
    len_out: usize,
    scale_factor: Option<f64>,
}

/// PyTorch's source coordinates along one axis, in f32 as `aten/src/ATen/native/UpSample.h`
/// computes them. Fails with `Error::OutOfMemory` if the `len_out` taps are refused (over
/// the pool's limit, or beyond what the allocator can serve).
fn taps(mode: ResizeMode, align_corners: bool, axis: Axis) -> Result<Vec<Tap>> {
    let Axis { len_in, len_out, scale_factor } = axis;
    let bytes = len_out.saturating_mul(std::mem::size_of::<Tap>());
    let limit = max_buffer_bytes();
    let refused = || Error::OutOfMemory { op: "", bytes: bytes as u64, limit: limit as u64 };
    let mut out = Vec::new();
    if bytes > limit {
        return Err(refused());
    }
    out.try_reserve_exact(len_out).map_err(|_| refused())?;
    let last = len_in - 1;
    // `in/out` in f32, or `1/scale_factor` rounded to f32 (`compute_scales_value`).
    let scale = match scale_factor {
        Some(s) => (1.0 / s) as f32,
        None => len_in as f32 / len_out as f32,
    };
    let nearest = |i: usize| Tap { i0: i, i1: i, l0: 1.0, l1: 0.0 };
    out.extend((0..len_out).map(|d| {
        // Equal lengths copy (PyTorch's shortcut, even when a scale factor is given), except
        // in nearest-exact mode, which has none.
        if len_in == len_out && mode != ResizeMode::NearestExact {
            return nearest(d);
        }
        match mode {
            ResizeMode::Nearest => nearest(if len_out == 2 * len_in { d >> 1 } else { ((d as f32 * scale).floor() as usize).min(last) }),
            ResizeMode::NearestExact => {
                let real = (scale * (d as f32 + 0.5) - 0.5).max(0.0);
                nearest(((real + 0.5).floor() as usize).min(last))
            }
            ResizeMode::Bilinear => {
                let real = if align_corners {
                    let scale = if len_out > 1 { last as f32 / (len_out - 1) as f32 } else { 0.0 };
                    scale * d as f32
                } else {
                    let s = scale * (d as f32 + 0.5) - 0.5;
                    if s < 0.0 {
                        0.0
                    } else {
                        s
                    }
                };
                let i0 = (real.floor() as usize).min(last);
                let l1 = (real - i0 as f32).clamp(0.0, 1.0);
                let i1 = if i0 < last { i0 + 1 } else { i0 };
                Tap { i0, i1, l0: 1.0 - l1, l1 }
            }
        }
    }));
    Ok(out)
}

/// One validated resize of an image operand.
#[derive(Clone, Copy, Debug)]
struct Resize {
    images: Images,
    mode: ResizeMode,
    align_corners: bool,
    rows: Axis,
    cols: Axis,
}

impl Resize {
    /// A resize of `x` to `out = [out_h, out_w]`.
    fn to_size(op: &'static str, x: &[usize], out: [usize; 2], mode: ResizeMode, align_corners: bool) -> Result<Resize> {
        let images = Images::of(op, x, &[x])?;
        if images.h == 0 || images.w == 0 {
            return Err(Error::shape(op, &[x], format!("the input image must be at least 1×1, got {}×{}", images.h, images.w)));
        }
        if out.contains(&0) {
            return Err(Error::argument(op, format!("the output size must be at least 1×1, got {}×{}", out[0], out[1])));
        }
        if align_corners && mode != ResizeMode::Bilinear {
            return Err(Error::argument(
                op,
                format!("align_corners is only valid with bilinear interpolation (as in PyTorch), got {mode:?}"),
            ));
        }
        let axis = |len_in, len_out| Axis { len_in, len_out, scale_factor: None };
        Ok(Resize { images, mode, align_corners, rows: axis(images.h, out[0]), cols: axis(images.w, out[1]) })
    }

    /// A resize of `x` by `scale_factor` (PyTorch's output size `floor(len·scale_factor)`,
    /// in f64); the coordinate map uses the scale factors unless `recompute_scale_factor`.
    fn by_scale(
        op: &'static str,
        x: &[usize],
        scale_factor: [f64; 2],
        mode: ResizeMode,
        align_corners: bool,
        recompute_scale_factor: bool,
    ) -> Result<Resize> {
        if scale_factor.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(Error::argument(op, format!("scale factors must be positive and finite, got {scale_factor:?}")));
        }
        let images = Images::of(op, x, &[x])?;
        let (h, w) = (images.h as f64 * scale_factor[0], images.w as f64 * scale_factor[1]);
        if h.floor() >= isize::MAX as f64 || w.floor() >= isize::MAX as f64 {
            return Err(Error::argument(op, format!("scale factors {scale_factor:?} make the output of a {x:?} input too large")));
        }
        let out = [h.floor() as usize, w.floor() as usize];
        if out.contains(&0) && images.h * images.w != 0 {
            return Err(Error::argument(
                op,
                format!(
                    "scale factors {scale_factor:?} make the output of a {}×{} image {}×{}: it must be at least 1×1",
                    images.h, images.w, out[0], out[1]
                ),
            ));
        }
        let mut resize = Resize::to_size(op, x, out, mode, align_corners)?;
        if !recompute_scale_factor {
            resize.rows.scale_factor = Some(scale_factor[0]);
            resize.cols.scale_factor = Some(scale_factor[1]);
        }
        Ok(resize)
    }

    /// The resize of `x` that `options` describe, for operator `op`, which takes a size
    /// (`resize2d`) or scale factors (`resize2d_scale`) as `by_scale` says.
    fn of(op: &'static str, x: &[usize], options: &Interpolate, by_scale: bool) -> Result<Resize> {
        let Interpolate { target, mode, align_corners, recompute_scale_factor } = *options;
        match (target, by_scale) {
            (Target::Size(size), false) => {
                if recompute_scale_factor {
                    return Err(Error::argument(op, "recompute_scale_factor is not meaningful with an explicit size (as in PyTorch)"));
                }
                Resize::to_size(op, x, size.get(op, "the output size")?, mode, align_corners)
            }
            (Target::Scale(scale), true) => Resize::by_scale(op, x, scale, mode, align_corners, recompute_scale_factor),
            (Target::Scale(scale), false) => Err(Error::argument(
                op,
                format!("resize2d takes an output size, got scale factors {scale:?}: call interpolate or resize2d_scale"),
            )),
            (Target::Size(size), true) => Err(Error::argument(
                op,
                format!("resize2d_scale takes scale factors, got an output size {size:?}: call interpolate or resize2d"),
            )),
        }
    }

    /// The result's shape.
    fn out_shape(&self) -> Dims {
        self.images.shape(self.images.c, [self.rows.len_out, self.cols.len_out])
    }

    /// The taps of the rows and of the columns.
    fn taps(&self) -> Result<(Vec<Tap>, Vec<Tap>)> {
        Ok((taps(self.mode, self.align_corners, self.rows)?, taps(self.mode, self.align_corners, self.cols)?))
    }

    /// Forward: nearest takes the source pixel; bilinear blends the four neighbours, rows
    /// of the blend first: `(x00·wx0 + x01·wx1)·wy0 + (x10·wx0 + x11·wx1)·wy1` in f32.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (ty, tx) = self.taps()?;
        let (planes, h, w) = (self.images.n * self.images.c, self.images.h, self.images.w);
        let (out_h, out_w) = (self.rows.len_out, self.cols.len_out);
        let bilinear = self.mode == ResizeMode::Bilinear;
        x.try_with_f32(|xs| {
            Tensor::build_f32(&self.out_shape(), |y| {
                for (plane, yp) in y.chunks_mut(out_h * out_w).enumerate().take(planes) {
                    let src = &xs[plane * h * w..][..h * w];
                    for (oy, row) in yp.chunks_mut(out_w).enumerate() {
                        let a = ty[oy];
                        let (r0, r1) = (&src[a.i0 * w..][..w], &src[a.i1 * w..][..w]);
                        for (v, b) in row.iter_mut().zip(&tx) {
                            *v = if bilinear {
                                let top = r0[b.i0] * b.l0 + r0[b.i1] * b.l1;
                                let bottom = r1[b.i0] * b.l0 + r1[b.i1] * b.l1;
                                top * a.l0 + bottom * a.l1
                            } else {
                                r0[b.i0]
                            };
                        }
                    }
                }
                Ok(())
            })
        })?
    }

    /// Backward: `dx = 0`, then each output's `g` scatter-added to its source pixel or,
    /// weighted `(wy·wx)·g`, to the four neighbours, in output scan order.
    fn backward(&self, g: &Tensor) -> Result<Tensor> {
        let (ty, tx) = self.taps()?;
        let im = self.images;
        let (planes, h, w) = (im.n * im.c, im.h, im.w);
        let (out_h, out_w) = (self.rows.len_out, self.cols.len_out);
        let bilinear = self.mode == ResizeMode::Bilinear;
        g.try_with_f32(|gs| {
            Tensor::build_f32(&im.shape(im.c, [h, w]), |dx| {
                dx.fill(0.0);
                for plane in 0..planes {
                    let dst = &mut dx[plane * h * w..][..h * w];
                    let gp = &gs[plane * out_h * out_w..][..out_h * out_w];
                    for (oy, grow) in gp.chunks(out_w).enumerate() {
                        let a = ty[oy];
                        for (&gv, b) in grow.iter().zip(&tx) {
                            if bilinear {
                                dst[a.i0 * w + b.i0] += (a.l0 * b.l0) * gv;
                                dst[a.i0 * w + b.i1] += (a.l0 * b.l1) * gv;
                                dst[a.i1 * w + b.i0] += (a.l1 * b.l0) * gv;
                                dst[a.i1 * w + b.i1] += (a.l1 * b.l1) * gv;
                            } else {
                                dst[a.i0 * w + b.i0] += gv;
                            }
                        }
                    }
                }
                Ok(())
            })
        })?
    }
}

/// Resizes the images of `x` `[N, C, H, W]` (or unbatched `[C, H, W]`) to the size of an
/// [`Interpolate::size`] as PyTorch's `F.interpolate(x, size=(out_h, out_w), mode,
/// align_corners)` does (see [`ResizeMode`]; for an unbatched image, as `interpolate` of a
/// batch of one); [`interpolate()`] calls it for a size. Bilinear blends in f32, rows of the
/// blend first. Backward: `g` scatter-added to the source pixel or, weighted `(wy·wx)·g`,
/// to the four neighbours, in output scan order.
///
/// # Examples
///
/// ```
/// use om_ops::{resize2d, Interpolate, ResizeMode, Tensor};
/// let x = Tensor::randn(&[2, 3, 4, 5])?;
/// assert_eq!(resize2d(&x, [8, 10])?.shape(), &[2, 3, 8, 10]);
/// let o = Interpolate::size(6).mode(ResizeMode::Bilinear);
/// assert_eq!(resize2d(&x, o)?.shape(), &[2, 3, 6, 6]);
/// assert!(resize2d(&x, 2.0).is_err()); // a scale factor: interpolate or resize2d_scale
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [options: Interpolate])]
pub mod resize2d {
    use super::*;

    pub fn forward(x: &Tensor, options: impl Into<Interpolate>) -> Result<Tensor> {
        let options: Interpolate = options.into();
        x.expect_f32(NAME, "x")?;
        Resize::of(NAME, x.shape(), &options, false)?.forward(x)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(Resize::of(NAME, &r.input_shapes[0], &r.options, false)?.backward(g)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let mut c = Vec::new();
        let modes = [
            (ResizeMode::Nearest, false, "nearest"),
            (ResizeMode::Bilinear, false, "bilinear"),
            (ResizeMode::Bilinear, true, "bilinear_align"),
            (ResizeMode::NearestExact, false, "nearest_exact"),
        ];
        for (mode, align, tag) in modes {
            c.push(Case::new(format!("{tag}_up_non_integer"), vec![Case::input(&[2, 2, 3, 4], -1.0, 1.0, 1)], move |x| {
                super::resize2d(&x[0], Interpolate::size([7, 9]).mode(mode).align_corners(align))
            }));
            c.push(Case::new(format!("{tag}_up_2x"), vec![Case::input(&[1, 2, 3, 3], -1.0, 1.0, 2)], move |x| {
                super::resize2d(&x[0], Interpolate::size(6).mode(mode).align_corners(align))
            }));
            c.push(Case::new(format!("{tag}_down_non_integer"), vec![Case::input(&[1, 3, 7, 9], -1.0, 1.0, 3)], move |x| {
                super::resize2d(&x[0], Interpolate::size([3, 4]).mode(mode).align_corners(align))
            }));
            c.push(Case::new(format!("{tag}_mixed_same_and_to_one"), vec![Case::input(&[1, 2, 5, 4], -1.0, 1.0, 4)], move |x| {
                super::resize2d(&x[0], Interpolate::size([1, 4]).mode(mode).align_corners(align))
            }));
            c.push(Case::new(format!("{tag}_nhwc_permuted_input"), vec![Case::input(&[1, 5, 4, 3], -1.0, 1.0, 5)], move |x| {
                super::resize2d(&crate::permute(&x[0], [0, 3, 1, 2])?, Interpolate::size([3, 7]).mode(mode).align_corners(align))
            }));
            c.push(Case::new(format!("{tag}_unbatched"), vec![Case::input(&[2, 4, 5], -1.0, 1.0, 6)], move |x| {
                super::resize2d(&x[0], Interpolate::size([7, 3]).mode(mode).align_corners(align))
            }));
        }
        c
    }
}

/// Resizes the images of `x` `[N, C, H, W]` (or unbatched `[C, H, W]`) by the scale
/// factors (height, width) of an [`Interpolate::scale_factor`] as PyTorch's
/// `F.interpolate(x, scale_factor=.., mode, align_corners, recompute_scale_factor)` does;
/// [`interpolate()`] calls it for scale factors. The output is `floor(H·sh) × floor(W·sw)`,
/// and the coordinate map uses `1/scale_factor` (in f32) rather than `in/out` unless
/// `recompute_scale_factor` (aligned corners use `(in − 1)/(out − 1)` either way). Backward
/// as `resize2d`: `g` scatter-added to the source pixels (weighted by the bilinear taps).
///
/// # Examples
///
/// ```
/// use om_ops::{resize2d_scale, Interpolate, ResizeMode, Tensor};
/// let x = Tensor::randn(&[3, 4, 5])?; // unbatched
/// assert_eq!(resize2d_scale(&x, 2.0)?.shape(), &[3, 8, 10]);
/// let o = Interpolate::scale_factor([0.5, 1.5]).mode(ResizeMode::Bilinear).recompute_scale_factor(true);
/// assert_eq!(resize2d_scale(&x, o)?.shape(), &[3, 2, 7]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [options: Interpolate])]
pub mod resize2d_scale {
    use super::*;

    pub fn forward(x: &Tensor, options: impl Into<Interpolate>) -> Result<Tensor> {
        let options: Interpolate = options.into();
        x.expect_f32(NAME, "x")?;
        Resize::of(NAME, x.shape(), &options, true)?.forward(x)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(Resize::of(NAME, &r.input_shapes[0], &r.options, true)?.backward(g)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let mut c = Vec::new();
        let modes = [
            (ResizeMode::Nearest, false, "nearest"),
            (ResizeMode::NearestExact, false, "nearest_exact"),
            (ResizeMode::Bilinear, false, "bilinear"),
            (ResizeMode::Bilinear, true, "bilinear_align"),
        ];
        for (mode, align, tag) in modes {
            c.push(Case::new(format!("{tag}_up_non_integer"), vec![Case::input(&[1, 2, 3, 4], -1.0, 1.0, 1)], move |x| {
                super::resize2d_scale(&x[0], Interpolate::scale_factor([2.5, 1.7]).mode(mode).align_corners(align))
            }));
            c.push(Case::new(format!("{tag}_up_recomputed"), vec![Case::input(&[1, 2, 3, 4], -1.0, 1.0, 2)], move |x| {
                super::resize2d_scale(
                    &x[0],
                    Interpolate::scale_factor([2.5, 1.7]).mode(mode).align_corners(align).recompute_scale_factor(true),
                )
            }));
            c.push(Case::new(format!("{tag}_down_unbatched"), vec![Case::input(&[2, 7, 9], -1.0, 1.0, 3)], move |x| {
                super::resize2d_scale(&x[0], Interpolate::scale_factor([0.6, 0.45]).mode(mode).align_corners(align))
            }));
            c.push(Case::new(format!("{tag}_same_size_other_scale_permuted"), vec![Case::input(&[1, 6, 5, 2], -1.0, 1.0, 4)], move |x| {
                super::resize2d_scale(
                    &crate::permute(&x[0], [0, 3, 1, 2])?,
                    Interpolate::scale_factor([1.1, 2.0]).mode(mode).align_corners(align),
                )
            }));
        }
        c
    }
}

/// PyTorch's `F.interpolate` of images `[N, C, H, W]` (or unbatched `[C, H, W]`): to a
/// size ([`resize2d()`]) or by scale factors ([`resize2d_scale()`]), with the mode and flags
/// of an [`Interpolate`] (PyTorch's defaults: nearest, no aligned corners, no recomputed
/// scale factor). An int or an int pair is a size, an `f64` or an `f64` pair scale factors.
/// Backward: theirs.
///
/// # Examples
///
/// ```
/// use om_ops::{interpolate, Interpolate, ResizeMode, Tensor};
/// let x = Tensor::randn(&[1, 3, 4, 4])?;
/// assert_eq!(interpolate(&x, 8)?.shape(), &[1, 3, 8, 8]); // size=8
/// assert_eq!(interpolate(&x, [2, 6])?.shape(), &[1, 3, 2, 6]); // size=(2, 6)
/// assert_eq!(interpolate(&x, 1.5)?.shape(), &[1, 3, 6, 6]); // scale_factor=1.5
/// let o = Interpolate::scale_factor(2.0).mode(ResizeMode::Bilinear).align_corners(true);
/// assert_eq!(interpolate(&x, o)?.shape(), &[1, 3, 8, 8]);
/// assert!(interpolate(&x, Interpolate::size(8).align_corners(true)).is_err()); // nearest
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(composition)]
pub mod interpolate {
    use super::*;

    pub fn forward(x: &Tensor, options: impl Into<Interpolate>) -> Result<Tensor> {
        let options: Interpolate = options.into();
        match options.target {
            Target::Size(_) => crate::resize2d(x, options),
            Target::Scale(_) => crate::resize2d_scale(x, options),
        }
    }

    fn cases() -> Vec<Case> {
        vec![
            Case::new("size_bilinear", vec![Case::input(&[1, 2, 3, 4], -1.0, 1.0, 1)], |x| {
                super::interpolate(&x[0], Interpolate::size([5, 7]).mode(ResizeMode::Bilinear))
            }),
            Case::new("scale_nearest_unbatched", vec![Case::input(&[2, 3, 4], -1.0, 1.0, 2)], |x| super::interpolate(&x[0], 1.5)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::tests::{assert_bit_identical, case_names, output_and_gradient_bits, params, spatial_oracle as oracle};
    use crate::oracle::{assert_close, both_modes};
    use crate::{conv_transpose2d, ConvTranspose2dOptions};

    #[test]
    fn resize2d_matches_pytorch() {
        let o = oracle();
        let names = case_names(&o, "resize_");
        assert!(names.len() >= 18, "the oracle file holds the resize cases");
        both_modes(|| {
            for name in &names {
                let p = params(&o, name);
                let x = o.get(&format!("{name}_x"));
                let y = resize2d(&x, Interpolate::size([p[0], p[1]]).mode(oracle_mode(p[2])).align_corners(p[3] != 0)).unwrap();
                assert_close(&format!("{name}_y"), &y, &o.get(&format!("{name}_y")));
                o.check_grads(name, &y, &[("x", &x)]);
            }
        });
    }

    /// The mode of an oracle case's parameters (`tools/oracle_spatial.py`).
    fn oracle_mode(code: usize) -> ResizeMode {
        [ResizeMode::Nearest, ResizeMode::Bilinear, ResizeMode::NearestExact][code]
    }

    #[test]
    fn resize2d_scale_matches_pytorch() {
        let o = oracle();
        let names = case_names(&o, "rscale_");
        assert!(names.len() >= 40, "the oracle file holds the scale-factor cases");
        both_modes(|| {
            for name in &names {
                let p = params(&o, name);
                let scale = [p[3] as f64 / p[4] as f64, p[5] as f64 / p[6] as f64];
                let x = o.get(&format!("{name}_x"));
                let y = resize2d_scale(
                    &x,
                    Interpolate::scale_factor(scale).mode(oracle_mode(p[0])).align_corners(p[1] != 0).recompute_scale_factor(p[2] != 0),
                )
                .unwrap();
                assert_close(&format!("{name}_y"), &y, &o.get(&format!("{name}_y")));
                o.check_grads(name, &y, &[("x", &x)]);
            }
        });
    }

    #[test]
    fn nearest_picks_pytorchs_source_pixels() {
        // in = 7 → out = 3: scale 7/3 in f32, floor(d·scale) = 0, 2, 4.
        let x = Tensor::from_vec((0..7).map(|v| v as f32).collect(), &[1, 1, 1, 7]).unwrap();
        assert_eq!(resize2d(&x, [1, 3]).unwrap().to_vec(), vec![0.0, 2.0, 4.0]);
        assert_eq!(resize2d(&x, [1, 14]).unwrap().to_vec()[..4], [0.0, 0.0, 1.0, 1.0]);
    }

    /// The source indices of `mode` along one axis.
    fn sources(mode: ResizeMode, axis: Axis) -> Vec<i32> {
        taps(mode, false, axis).unwrap().iter().map(|t| t.i0 as i32).collect()
    }

    #[test]
    fn nearest_index_rules_match_pytorch_for_all_small_sizes() {
        let o = oracle();
        for (mode, table) in [(ResizeMode::Nearest, "nearest_src"), (ResizeMode::NearestExact, "nearest_exact_src")] {
            let mut got = Vec::new();
            for len_in in 1..=24 {
                for len_out in 1..=24 {
                    got.extend(sources(mode, Axis { len_in, len_out, scale_factor: None }));
                }
            }
            assert_eq!(got, o.get(table).to_vec_i32(), "{table}");
        }
    }

    #[test]
    fn nearest_index_rules_by_scale_factor_match_pytorch() {
        let o = oracle();
        let factors = o.get("scale_src_factors").to_vec_i32();
        let mut got = Vec::new();
        for mode in [ResizeMode::Nearest, ResizeMode::NearestExact] {
            for len_in in 1..=24usize {
                for nd in factors.chunks(2) {
                    let (num, den) = (nd[0] as usize, nd[1] as usize);
                    if len_in * num / den == 0 {
                        continue;
                    }
                    let scale = num as f64 / den as f64;
                    let len_out = (len_in as f64 * scale).floor() as usize;
                    got.extend(sources(mode, Axis { len_in, len_out, scale_factor: Some(scale) }));
                }
            }
        }
        assert_eq!(got, o.get("scale_src").to_vec_i32());
    }

    fn forward_backward_bits() -> Vec<u32> {
        let x = Tensor::randn_with_seed(&[3, 4, 5, 6], 1).unwrap().requires_grad().unwrap();
        let w = Tensor::randn_with_seed(&[4, 3, 3, 2], 2).unwrap().requires_grad().unwrap();
        let b = Tensor::randn_with_seed(&[6], 3).unwrap().requires_grad().unwrap();
        let y = conv_transpose2d(
            &x,
            &w,
            Some(&b),
            ConvTranspose2dOptions::default().stride([2, 1]).padding([1, 0]).output_padding(1).dilation([1, 2]).groups(2),
        )
        .unwrap();
        let y = resize2d(&y, Interpolate::size([9, 13]).mode(ResizeMode::Bilinear)).unwrap();
        let y = resize2d(&y, [11, 7]).unwrap();
        let y = resize2d(&y, Interpolate::size([6, 8]).mode(ResizeMode::Bilinear).align_corners(true)).unwrap();
        output_and_gradient_bits(&y, &[&x, &w, &b])
    }

    #[test]
    fn exact_mode_is_identical_on_every_path_and_thread_count() {
        assert_bit_identical("conv_transpose2d/resize2d", &[2, 3, 8], forward_backward_bits);
    }

    /// Scale factors, nearest-exact and an unbatched image.
    fn scale_bits() -> Vec<u32> {
        let x = Tensor::randn_with_seed(&[3, 5, 6], 5).unwrap().requires_grad().unwrap();
        let y = resize2d_scale(&x, Interpolate::scale_factor([1.7, 2.5]).mode(ResizeMode::Bilinear)).unwrap();
        let y = resize2d_scale(&y, Interpolate::scale_factor([0.6, 0.45]).mode(ResizeMode::NearestExact)).unwrap();
        let y = resize2d(&y, Interpolate::size([7, 9]).mode(ResizeMode::NearestExact)).unwrap();
        let y = resize2d_scale(
            &y,
            Interpolate::scale_factor([1.3, 1.1]).mode(ResizeMode::Bilinear).align_corners(true).recompute_scale_factor(true),
        )
        .unwrap();
        output_and_gradient_bits(&y, &[&x])
    }

    #[test]
    fn scale_factor_exact_mode_is_identical_on_every_path_and_thread_count() {
        assert_bit_identical("resize2d_scale", &[2, 3, 8], scale_bits);
    }
}
