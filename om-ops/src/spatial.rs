//! Spatial operators: `conv_transpose2d` (the adjoint of `conv2d`, on the convolution
//! kernel's GEMM + col2im) and `resize2d` (PyTorch `interpolate(size=..)`: nearest and
//! bilinear, with or without aligned corners). Layout, coordinate rules and accumulation
//! order: `docs/ops-conv.md`.

use crate::fallible::with_f32_opt;
use om_core::compute::Compute;
use om_core::kernels::conv::{channel_sums, conv2d_backward_weight, conv2d_forward, conv_transpose2d_forward, ConvGeom};
use om_core::pool::max_buffer_bytes;
use om_core::{Case, Error, Result, Tensor};
use om_macros::op;

/// Validates a transposed convolution and returns the geometry of the convolution it is
/// the adjoint of: that convolution's input is the transposed convolution's output
/// (`c = Cout`, `h × w = OH × OW`) and its output is the transposed convolution's input
/// (`o = Cin`, `oh × ow = H × W`); both share the weight `[Cin, Cout/groups, kH, kW]`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn transpose_geometry(
    op: &'static str,
    x: &[usize],
    w: &[usize],
    bias: Option<&[usize]>,
    stride: [usize; 2],
    padding: [usize; 2],
    output_padding: [usize; 2],
    dilation: [usize; 2],
    groups: usize,
) -> Result<ConvGeom> {
    let shapes = crate::conv::check_common(op, [x, w], bias, ["[N, Cin, H, W]", "[Cin, Cout/groups, kH, kW]"], stride, dilation, groups)?;
    for i in 0..2 {
        if output_padding[i] >= stride[i].max(dilation[i]) {
            return Err(Error::argument(
                op,
                format!(
                    "output padding must be smaller than either stride or dilation (as in PyTorch), got output padding {output_padding:?}, stride {stride:?}, dilation {dilation:?}"
                ),
            ));
        }
    }
    let (n, cin, h, wd) = (x[0], x[1], x[2], x[3]);
    let (kh, kw) = (w[2], w[3]);
    if !cin.is_multiple_of(groups) {
        return Err(Error::shape(op, &shapes, format!("{cin} input channels are not divisible by groups = {groups}")));
    }
    if w[0] != cin {
        return Err(Error::shape(op, &shapes, format!("`w` has {} input channels (dimension 0), but `x` has {cin}", w[0])));
    }
    if kh == 0 || kw == 0 {
        return Err(Error::shape(op, &shapes, format!("the kernel must be at least 1×1, got {kh}×{kw}")));
    }
    let cout = w[1] * groups;
    if let Some(b) = bias {
        if b != [cout] {
            return Err(Error::shape(op, &shapes, format!("`bias` must have shape [Cout] = [{cout}], got {b:?}")));
        }
    }
    if h == 0 || wd == 0 {
        return Err(Error::shape(op, &shapes, format!("the input image must be at least 1×1, got {h}×{wd}")));
    }
    // (H − 1)·s − 2p + d·(k − 1) + output_padding + 1, in signed arithmetic.
    let out = |len: usize, s: usize, p: usize, k: usize, d: usize, op: usize| {
        (len as i128 - 1) * s as i128 - 2 * p as i128 + (d * (k - 1)) as i128 + op as i128 + 1
    };
    let oh = out(h, stride[0], padding[0], kh, dilation[0], output_padding[0]);
    let ow = out(wd, stride[1], padding[1], kw, dilation[1], output_padding[1]);
    if oh < 1 || ow < 1 {
        return Err(Error::shape(
            op,
            &shapes,
            format!("the output would be {oh}×{ow}: padding {padding:?} crops more than the transposed convolution produces"),
        ));
    }
    let (oh, ow) = (usize::try_from(oh), usize::try_from(ow));
    let (Ok(oh), Ok(ow)) = (oh, ow) else {
        return Err(Error::shape(op, &shapes, "the output size overflows"));
    };
    Ok(ConvGeom {
        n,
        c: cout,
        h: oh,
        w: ow,
        o: cin,
        groups,
        kh,
        kw,
        sh: stride[0],
        sw: stride[1],
        pt: padding[0],
        pl: padding[1],
        dh: dilation[0],
        dw: dilation[1],
        oh: h,
        ow: wd,
    })
}

/// 2-d transposed convolution (PyTorch's `conv_transpose2d`) of `x` `[N, Cin, H, W]` with
/// `w` `[Cin, Cout/groups, kH, kW]` plus an optional `bias` `[Cout]`; `padding` is
/// PyTorch's (symmetric: it crops `padding` rows/columns from each side of the full
/// output), `output_padding` adds rows/columns at the bottom/right. Output
/// `[N, Cout, (H−1)·s − 2p + d·(k−1) + output_padding + 1, ..]`. Forward: GEMM + col2im.
/// Backward: `dx = conv2d(g, W)`, `dW` per image in item order with the roles of `x` and
/// `g` swapped, `dbias = Σ g`.
#[op(
    saved = [x, w],
    attrs = [stride: [usize; 2], padding: [usize; 2], output_padding: [usize; 2], dilation: [usize; 2], groups: usize]
)]
pub mod conv_transpose2d {
    use super::*;

    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        stride: [usize; 2],
        padding: [usize; 2],
        output_padding: [usize; 2],
        dilation: [usize; 2],
        groups: usize,
    ) -> Result<Tensor> {
        x.expect_f32(NAME, "x")?;
        w.expect_f32(NAME, "w")?;
        if let Some(b) = bias {
            b.expect_f32(NAME, "bias")?;
        }
        let geo =
            transpose_geometry(NAME, x.shape(), w.shape(), bias.map(|b| b.shape()), stride, padding, output_padding, dilation, groups)?;
        let settings = Compute::settings();
        x.try_with_f32(|xs| {
            w.try_with_f32(|ws| {
                with_f32_opt(bias, |bs| {
                    Tensor::build_f32(&[geo.n, geo.c, geo.h, geo.w], |y| conv_transpose2d_forward(settings, &geo, xs, ws, bs, y))
                })
            })
        })???
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let s = &r.input_shapes;
        let bias_shape = if s[2].is_empty() { None } else { Some(s[2].as_slice()) };
        let geo = transpose_geometry(NAME, &s[0], &s[1], bias_shape, r.stride, r.padding, r.output_padding, r.dilation, r.groups)?;
        let settings = Compute::settings();
        let g = g.try_to_contiguous()?;
        if d.needs_x() {
            // The convolution of g with the same weight.
            let dx = g.try_with_f32(|gs| {
                r.w().try_with_f32(|ws| Tensor::build_f32(&s[0], |dx| conv2d_forward(settings, &geo, gs, ws, None, dx)))
            })???;
            d.x(dx);
        }
        if d.needs_w() {
            // The convolution's weight gradient with input g and output gradient x.
            let dw = g.try_with_f32(|gs| {
                r.x().try_with_f32(|xs| Tensor::build_f32(&s[1], |dw| conv2d_backward_weight(settings, &geo, gs, xs, dw)))
            })???;
            d.w(dw);
        }
        if d.needs_bias() {
            let db = g.try_with_f32(|gs| Tensor::build_f32(&[geo.c], |db| channel_sums(geo.n, geo.c, geo.h * geo.w, gs, db)))??;
            d.bias(db);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        vec![
            Case::new(
                "bias_pad1",
                vec![Case::input(&[2, 3, 3, 3], -1.0, 1.0, 1), Case::input(&[3, 2, 3, 3], -1.0, 1.0, 2), Case::input(&[2], -1.0, 1.0, 3)],
                |x| super::conv_transpose2d(&x[0], &x[1], Some(&x[2]), [1, 1], [1, 1], [0, 0], [1, 1], 1),
            ),
            Case::new(
                "stride2_output_padding",
                vec![Case::input(&[1, 2, 3, 4], -1.0, 1.0, 4), Case::input(&[2, 3, 3, 3], -1.0, 1.0, 5), Case::input(&[3], -1.0, 1.0, 6)],
                |x| super::conv_transpose2d(&x[0], &x[1], Some(&x[2]), [2, 2], [1, 1], [1, 1], [1, 1], 1),
            ),
            Case::new(
                "groups_dilation_no_bias",
                vec![Case::input(&[1, 4, 3, 3], -1.0, 1.0, 7), Case::input(&[4, 2, 2, 3], -1.0, 1.0, 8)],
                |x| super::conv_transpose2d(&x[0], &x[1], None, [2, 1], [1, 0], [1, 1], [2, 2], 2),
            ),
            Case::new(
                "depthwise_stride2_asymmetric",
                vec![Case::input(&[2, 3, 3, 2], -1.0, 1.0, 9), Case::input(&[3, 1, 2, 3], -1.0, 1.0, 10), Case::input(&[3], -1.0, 1.0, 11)],
                |x| super::conv_transpose2d(&x[0], &x[1], Some(&x[2]), [2, 3], [0, 1], [1, 2], [1, 1], 3),
            ),
            Case::new(
                "nhwc_permuted_strided_input",
                vec![
                    Case::input(&[1, 3, 6, 2], -1.0, 1.0, 12),
                    Case::input(&[2, 2, 2, 2], -1.0, 1.0, 13),
                    Case::input(&[2], -1.0, 1.0, 14),
                ],
                |x| {
                    let xv = crate::slice(&crate::permute(&x[0], &[0, 3, 1, 2])?, 3, 0, 6, 2)?;
                    super::conv_transpose2d(&xv, &x[1], Some(&x[2]), [2, 2], [0, 0], [0, 1], [1, 1], 1)
                },
            ),
            Case::new(
                "transposed_weight",
                vec![Case::input(&[1, 2, 3, 3], -1.0, 1.0, 15), Case::input(&[3, 2, 2, 2], -1.0, 1.0, 16)],
                |x| super::conv_transpose2d(&x[0], &crate::transpose(&x[1], 0, 1)?, None, [1, 2], [0, 1], [0, 1], [1, 1], 1),
            ),
        ]
    }
}

/// How [`resize2d()`] interpolates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeMode {
    /// PyTorch's `'nearest'`: source `min(floor(dst·(in/out)), in − 1)`, the scale in f32.
    Nearest,
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

/// PyTorch's source coordinates along one axis of `len_in` → `len_out` (both ≥ 1), in f32
/// as `aten/src/ATen/native/UpSample.h` computes them for `interpolate(size=..)`. Fails
/// with `Error::OutOfMemory` if the `len_out` taps are refused (over the pool's limit, or
/// beyond what the allocator can serve).
fn taps(mode: ResizeMode, align_corners: bool, len_in: usize, len_out: usize) -> Result<Vec<Tap>> {
    let bytes = len_out.saturating_mul(std::mem::size_of::<Tap>());
    let limit = max_buffer_bytes();
    let refused = || Error::OutOfMemory { op: "", bytes: bytes as u64, limit: limit as u64 };
    let mut out = Vec::new();
    if bytes > limit {
        return Err(refused());
    }
    out.try_reserve_exact(len_out).map_err(|_| refused())?;
    let last = len_in - 1;
    out.extend((0..len_out).map(|d| {
        if len_in == len_out {
            return Tap { i0: d, i1: d, l0: 1.0, l1: 0.0 };
        }
        match mode {
            ResizeMode::Nearest => {
                let i = if len_out == 2 * len_in {
                    d >> 1
                } else {
                    let scale = len_in as f32 / len_out as f32;
                    ((d as f32 * scale).floor() as usize).min(last)
                };
                Tap { i0: i, i1: i, l0: 1.0, l1: 0.0 }
            }
            ResizeMode::Bilinear => {
                let real = if align_corners {
                    let scale = if len_out > 1 { last as f32 / (len_out - 1) as f32 } else { 0.0 };
                    scale * d as f32
                } else {
                    let scale = len_in as f32 / len_out as f32;
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

/// Validates a resize of `x` and returns `(planes, H, W)`.
fn resize_geometry(
    op: &'static str,
    x: &[usize],
    out_h: usize,
    out_w: usize,
    mode: ResizeMode,
    align_corners: bool,
) -> Result<(usize, usize, usize)> {
    if x.len() != 4 {
        return Err(Error::shape(op, &[x], format!("`x` must be [N, C, H, W] (rank 4), got rank {}", x.len())));
    }
    if x[2] == 0 || x[3] == 0 {
        return Err(Error::shape(op, &[x], format!("the input image must be at least 1×1, got {}×{}", x[2], x[3])));
    }
    if out_h == 0 || out_w == 0 {
        return Err(Error::argument(op, format!("the output size must be at least 1×1, got {out_h}×{out_w}")));
    }
    if align_corners && mode != ResizeMode::Bilinear {
        return Err(Error::argument(op, format!("align_corners is only valid with bilinear interpolation (as in PyTorch), got {mode:?}")));
    }
    Ok((x[0] * x[1], x[2], x[3]))
}

/// Resizes the images of `x` `[N, C, H, W]` to `[N, C, out_h, out_w]` as PyTorch's
/// `F.interpolate(x, size=(out_h, out_w), mode, align_corners)` does: nearest takes
/// `floor(dst·in/out)`; bilinear blends the four neighbours of the source point
/// (half-pixel centres clamped at 0, or aligned corners), rows of the blend first:
/// `(x00·wx0 + x01·wx1)·wy0 + (x10·wx0 + x11·wx1)·wy1` in f32. Backward: `g` scatter-added
/// to the source pixel or, weighted `(wy·wx)·g`, to the four neighbours, in output scan order.
#[op(attrs = [mode: ResizeMode, align_corners: bool, out_h: usize, out_w: usize])]
pub mod resize2d {
    use super::*;

    pub fn forward(x: &Tensor, out_h: usize, out_w: usize, mode: ResizeMode, align_corners: bool) -> Result<Tensor> {
        x.expect_f32(NAME, "x")?;
        let (planes, h, w) = resize_geometry(NAME, x.shape(), out_h, out_w, mode, align_corners)?;
        let (ty, tx) = (taps(mode, align_corners, h, out_h)?, taps(mode, align_corners, w, out_w)?);
        let out_shape = [x.shape()[0], x.shape()[1], out_h, out_w];
        x.try_with_f32(|xs| {
            Tensor::build_f32(&out_shape, |y| {
                for (plane, yp) in y.chunks_mut(out_h * out_w).enumerate().take(planes) {
                    let src = &xs[plane * h * w..][..h * w];
                    for (oy, row) in yp.chunks_mut(out_w).enumerate() {
                        let a = ty[oy];
                        let (r0, r1) = (&src[a.i0 * w..][..w], &src[a.i1 * w..][..w]);
                        for (v, b) in row.iter_mut().zip(&tx) {
                            *v = match mode {
                                ResizeMode::Nearest => r0[b.i0],
                                ResizeMode::Bilinear => {
                                    let top = r0[b.i0] * b.l0 + r0[b.i1] * b.l1;
                                    let bottom = r1[b.i0] * b.l0 + r1[b.i1] * b.l1;
                                    top * a.l0 + bottom * a.l1
                                }
                            };
                        }
                    }
                }
                Ok(())
            })
        })?
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let shape = &r.input_shapes[0];
        let (out_h, out_w, mode) = (r.out_h, r.out_w, r.mode);
        let (planes, h, w) = resize_geometry(NAME, shape, out_h, out_w, mode, r.align_corners)?;
        let (ty, tx) = (taps(mode, r.align_corners, h, out_h)?, taps(mode, r.align_corners, w, out_w)?);
        let dx = g.try_with_f32(|gs| {
            Tensor::build_f32(shape, |dx| {
                dx.fill(0.0);
                for plane in 0..planes {
                    let dst = &mut dx[plane * h * w..][..h * w];
                    let gp = &gs[plane * out_h * out_w..][..out_h * out_w];
                    for (oy, grow) in gp.chunks(out_w).enumerate() {
                        let a = ty[oy];
                        for (&gv, b) in grow.iter().zip(&tx) {
                            match mode {
                                ResizeMode::Nearest => dst[a.i0 * w + b.i0] += gv,
                                ResizeMode::Bilinear => {
                                    dst[a.i0 * w + b.i0] += (a.l0 * b.l0) * gv;
                                    dst[a.i0 * w + b.i1] += (a.l0 * b.l1) * gv;
                                    dst[a.i1 * w + b.i0] += (a.l1 * b.l0) * gv;
                                    dst[a.i1 * w + b.i1] += (a.l1 * b.l1) * gv;
                                }
                            }
                        }
                    }
                }
                Ok(())
            })
        })??;
        d.x(dx);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let mut c = Vec::new();
        let modes = [
            (ResizeMode::Nearest, false, "nearest"),
            (ResizeMode::Bilinear, false, "bilinear"),
            (ResizeMode::Bilinear, true, "bilinear_align"),
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
                super::resize2d(&crate::permute(&x[0], &[0, 3, 1, 2])?, 3, 7, mode, align)
            }));
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracle::{assert_close, both_modes, Oracle};
    use om_core::compute::{KernelPath, Mode, Settings};

    fn oracle() -> Oracle {
        Oracle::load_file("spatial", "tools/oracle_spatial.py")
    }

    fn params(o: &Oracle, name: &str) -> Vec<usize> {
        o.get(&format!("{name}_params")).to_vec_i32().iter().map(|&v| v as usize).collect()
    }

    fn case_names(o: &Oracle, prefix: &str) -> Vec<String> {
        o.names().filter_map(|k| k.strip_suffix("_params")).filter(|k| k.starts_with(prefix)).map(str::to_string).collect()
    }

    #[test]
    fn conv_transpose2d_matches_pytorch() {
        let o = oracle();
        let names = case_names(&o, "ct_");
        assert!(names.len() >= 6, "the oracle file holds the transposed-conv cases");
        both_modes(|| {
            for name in &names {
                let p = params(&o, name);
                let (x, w) = (o.get(&format!("{name}_x")), o.get(&format!("{name}_w")));
                let bias = o.names().any(|k| k == format!("{name}_bias")).then(|| o.get(&format!("{name}_bias")));
                let y = conv_transpose2d(&x, &w, bias.as_ref(), [p[0], p[1]], [p[2], p[3]], [p[4], p[5]], [p[6], p[7]], p[8]).unwrap();
                assert_close(&format!("{name}_y"), &y, &o.get(&format!("{name}_y")));
                let mut inputs = vec![("x", &x), ("w", &w)];
                if let Some(b) = &bias {
                    inputs.push(("bias", b));
                }
                o.check_grads(name, &y, &inputs);
            }
        });
    }

    #[test]
    fn resize2d_matches_pytorch() {
        let o = oracle();
        let names = case_names(&o, "resize_");
        assert!(names.len() >= 18, "the oracle file holds the resize cases");
        both_modes(|| {
            for name in &names {
                let p = params(&o, name);
                let mode = if p[2] == 1 { ResizeMode::Bilinear } else { ResizeMode::Nearest };
                let x = o.get(&format!("{name}_x"));
                let y = resize2d(&x, p[0], p[1], mode, p[3] != 0).unwrap();
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

    #[test]
    fn nearest_index_rule_matches_pytorch_for_all_small_sizes() {
        let want = oracle().get("nearest_src").to_vec_i32();
        let mut got = Vec::new();
        for len_in in 1..=24 {
            for len_out in 1..=24 {
                got.extend(taps(ResizeMode::Nearest, false, len_in, len_out).unwrap().iter().map(|t| t.i0 as i32));
            }
        }
        assert_eq!(got, want);
    }

    fn forward_backward_bits() -> Vec<u32> {
        let x = Tensor::randn(&[3, 4, 5, 6], 1).unwrap().requires_grad().unwrap();
        let w = Tensor::randn(&[4, 3, 3, 2], 2).unwrap().requires_grad().unwrap();
        let b = Tensor::randn(&[6], 3).unwrap().requires_grad().unwrap();
        let y = conv_transpose2d(&x, &w, Some(&b), [2, 1], [1, 0], [1, 1], [1, 2], 2).unwrap();
        let y = resize2d(&y, 9, 13, ResizeMode::Bilinear, false).unwrap();
        let y = resize2d(&y, 11, 7, ResizeMode::Nearest, false).unwrap();
        let y = resize2d(&y, 6, 8, ResizeMode::Bilinear, true).unwrap();
        let gy = Tensor::randn(y.shape(), 4).unwrap();
        y.backward_with(Some(&gy), false).unwrap();
        let mut bits: Vec<u32> = y.to_vec().iter().map(|v| v.to_bits()).collect();
        for t in [&x, &w, &b] {
            bits.extend(t.grad().unwrap().to_vec().iter().map(|v| v.to_bits()));
        }
        bits
    }

    #[test]
    fn exact_mode_is_identical_on_every_path_and_thread_count() {
        let reference = Compute::with(Settings { mode: Mode::Exact, threads: 1, path: KernelPath::Scalar }, forward_backward_bits);
        for path in KernelPath::supported() {
            for threads in [1, 2, 3, 8] {
                let got = Compute::with(Settings { mode: Mode::Exact, threads, path }, forward_backward_bits);
                assert!(got == reference, "exact conv_transpose2d/resize2d differ on {path} with {threads} threads");
            }
        }
        let fast = Compute::with(Settings { mode: Mode::Fast, threads: 1, path: KernelPath::best() }, forward_backward_bits);
        for threads in [2, 3, 8] {
            let got = Compute::with(Settings { mode: Mode::Fast, threads, path: KernelPath::best() }, forward_backward_bits);
            assert!(got == fast, "fast conv_transpose2d/resize2d differ with {threads} threads");
        }
    }
}
