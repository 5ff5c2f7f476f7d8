//! Resizing: `resize2d` (PyTorch `interpolate(size=..)`) and `resize2d_scale`
//! (`interpolate(scale_factor=..)`) of `[N, C, H, W]` or unbatched `[C, H, W]` images:
//! nearest, nearest-exact and bilinear, with or without aligned corners. Both operators are
//! one validated `Resize` run forward and backward. Coordinate rules and accumulation
//! order: `docs/ops-conv.md`.

use crate::image::Images;
use om_core::layout::Dims;
use om_core::pool::max_buffer_bytes;
use om_core::{Case, Error, Result, Tensor};
use om_macros::op;

/// How [`resize2d()`] and [`resize2d_scale()`] interpolate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeMode {
    /// PyTorch's `'nearest'`: source `min(floor(dst·scale), in − 1)`, in f32 (`scale` is
    /// `in/out`, or `1/scale_factor`).
    Nearest,
    /// PyTorch's `'nearest-exact'`: the pixel whose centre is nearest,
    /// `min(floor(max(scale·(dst + 0.5) − 0.5, 0) + 0.5), in − 1)`, in f32.
    NearestExact,
    /// PyTorch's `'bilinear'`: half-pixel centres clamped at 0, or aligned corners.
    Bilinear,
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

/// Resizes the images of `x` `[N, C, H, W]` (or unbatched `[C, H, W]`) to `out_h × out_w`
/// as PyTorch's `F.interpolate(x, size=(out_h, out_w), mode, align_corners)` does (see
/// [`ResizeMode`]; for an unbatched image, as `interpolate` of a batch of one). Bilinear
/// blends in f32, rows of the blend first. Backward: `g` scatter-added to the source pixel
/// or, weighted `(wy·wx)·g`, to the four neighbours, in output scan order.
#[op(attrs = [out_h: usize, out_w: usize, mode: ResizeMode, align_corners: bool])]
pub mod resize2d {
    use super::*;

    pub fn forward(x: &Tensor, out_h: usize, out_w: usize, mode: ResizeMode, align_corners: bool) -> Result<Tensor> {
        x.expect_f32(NAME, "x")?;
        Resize::to_size(NAME, x.shape(), [out_h, out_w], mode, align_corners)?.forward(x)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(Resize::to_size(NAME, &r.input_shapes[0], [r.out_h, r.out_w], r.mode, r.align_corners)?.backward(g)?);
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
                super::resize2d(&x[0], 7, 9, mode, align)
            }));
            c.push(Case::new(format!("{tag}_up_2x"), vec![Case::input(&[1, 2, 3, 3], -1.0, 1.0, 2)], move |x| {
                super::resize2d(&x[0], 6, 6, mode, align)
            }));
            c.push(Case::new(format!("{tag}_down_non_integer"), vec![Case::input(&[1, 3, 7, 9], -1.0, 1.0, 3)], move |x| {
                super::resize2d(&x[0], 3, 4, mode, align)
            }));
            c.push(Case::new(format!("{tag}_mixed_same_and_to_one"), vec![Case::input(&[1, 2, 5, 4], -1.0, 1.0, 4)], move |x| {
                super::resize2d(&x[0], 1, 4, mode, align)
            }));
            c.push(Case::new(format!("{tag}_nhwc_permuted_input"), vec![Case::input(&[1, 5, 4, 3], -1.0, 1.0, 5)], move |x| {
                super::resize2d(&crate::permute(&x[0], [0, 3, 1, 2])?, 3, 7, mode, align)
            }));
            c.push(Case::new(format!("{tag}_unbatched"), vec![Case::input(&[2, 4, 5], -1.0, 1.0, 6)], move |x| {
                super::resize2d(&x[0], 7, 3, mode, align)
            }));
        }
        c
    }
}

/// Resizes the images of `x` `[N, C, H, W]` (or unbatched `[C, H, W]`) by `scale_factor`
/// (height, width) as PyTorch's `F.interpolate(x, scale_factor=.., mode, align_corners,
/// recompute_scale_factor)` does: the output is `floor(H·sh) × floor(W·sw)`, and the
/// coordinate map uses `1/scale_factor` (in f32) rather than `in/out` unless
/// `recompute_scale_factor` (aligned corners use `(in − 1)/(out − 1)` either way). Backward
/// as `resize2d`: `g` scatter-added to the source pixels (weighted by the bilinear taps).
#[op(attrs = [scale_factor: [f64; 2], mode: ResizeMode, align_corners: bool, recompute_scale_factor: bool])]
pub mod resize2d_scale {
    use super::*;

    pub fn forward(
        x: &Tensor,
        scale_factor: [f64; 2],
        mode: ResizeMode,
        align_corners: bool,
        recompute_scale_factor: bool,
    ) -> Result<Tensor> {
        x.expect_f32(NAME, "x")?;
        Resize::by_scale(NAME, x.shape(), scale_factor, mode, align_corners, recompute_scale_factor)?.forward(x)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let resize = Resize::by_scale(NAME, &r.input_shapes[0], r.scale_factor, r.mode, r.align_corners, r.recompute_scale_factor)?;
        d.x(resize.backward(g)?);
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
                super::resize2d_scale(&x[0], [2.5, 1.7], mode, align, false)
            }));
            c.push(Case::new(format!("{tag}_up_recomputed"), vec![Case::input(&[1, 2, 3, 4], -1.0, 1.0, 2)], move |x| {
                super::resize2d_scale(&x[0], [2.5, 1.7], mode, align, true)
            }));
            c.push(Case::new(format!("{tag}_down_unbatched"), vec![Case::input(&[2, 7, 9], -1.0, 1.0, 3)], move |x| {
                super::resize2d_scale(&x[0], [0.6, 0.45], mode, align, false)
            }));
            c.push(Case::new(format!("{tag}_same_size_other_scale_permuted"), vec![Case::input(&[1, 6, 5, 2], -1.0, 1.0, 4)], move |x| {
                super::resize2d_scale(&crate::permute(&x[0], [0, 3, 1, 2])?, [1.1, 2.0], mode, align, false)
            }));
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::tests::{assert_bit_identical, case_names, output_and_gradient_bits, params, spatial_oracle as oracle};
    use crate::conv_transpose2d;
    use crate::oracle::{assert_close, both_modes};

    #[test]
    fn resize2d_matches_pytorch() {
        let o = oracle();
        let names = case_names(&o, "resize_");
        assert!(names.len() >= 18, "the oracle file holds the resize cases");
        both_modes(|| {
            for name in &names {
                let p = params(&o, name);
                let x = o.get(&format!("{name}_x"));
                let y = resize2d(&x, p[0], p[1], oracle_mode(p[2]), p[3] != 0).unwrap();
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
                let y = resize2d_scale(&x, scale, oracle_mode(p[0]), p[1] != 0, p[2] != 0).unwrap();
                assert_close(&format!("{name}_y"), &y, &o.get(&format!("{name}_y")));
                o.check_grads(name, &y, &[("x", &x)]);
            }
        });
    }

    #[test]
    fn nearest_picks_pytorchs_source_pixels() {
        // in = 7 → out = 3: scale 7/3 in f32, floor(d·scale) = 0, 2, 4.
        let x = Tensor::from_vec((0..7).map(|v| v as f32).collect(), &[1, 1, 1, 7]).unwrap();
        assert_eq!(resize2d(&x, 1, 3, ResizeMode::Nearest, false).unwrap().to_vec(), vec![0.0, 2.0, 4.0]);
        assert_eq!(resize2d(&x, 1, 14, ResizeMode::Nearest, false).unwrap().to_vec()[..4], [0.0, 0.0, 1.0, 1.0]);
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
        let y = conv_transpose2d(&x, &w, Some(&b), [2, 1], [1, 0], [1, 1], [1, 2], 2).unwrap();
        let y = resize2d(&y, 9, 13, ResizeMode::Bilinear, false).unwrap();
        let y = resize2d(&y, 11, 7, ResizeMode::Nearest, false).unwrap();
        let y = resize2d(&y, 6, 8, ResizeMode::Bilinear, true).unwrap();
        output_and_gradient_bits(&y, &[&x, &w, &b])
    }

    #[test]
    fn exact_mode_is_identical_on_every_path_and_thread_count() {
        assert_bit_identical("conv_transpose2d/resize2d", &[2, 3, 8], forward_backward_bits);
    }

    /// Scale factors, nearest-exact and an unbatched image.
    fn scale_bits() -> Vec<u32> {
        let x = Tensor::randn_with_seed(&[3, 5, 6], 5).unwrap().requires_grad().unwrap();
        let y = resize2d_scale(&x, [1.7, 2.5], ResizeMode::Bilinear, false, false).unwrap();
        let y = resize2d_scale(&y, [0.6, 0.45], ResizeMode::NearestExact, false, false).unwrap();
        let y = resize2d(&y, 7, 9, ResizeMode::NearestExact, false).unwrap();
        let y = resize2d_scale(&y, [1.3, 1.1], ResizeMode::Bilinear, true, true).unwrap();
        output_and_gradient_bits(&y, &[&x])
    }

    #[test]
    fn scale_factor_exact_mode_is_identical_on_every_path_and_thread_count() {
        assert_bit_identical("resize2d_scale", &[2, 3, 8], scale_bits);
    }
}
