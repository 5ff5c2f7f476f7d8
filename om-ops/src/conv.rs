//! Convolutions: `conv2d` (groups, stride, asymmetric padding, dilation, optional bias) on
//! the canonical-order GEMM through im2col/col2im (`om_core::kernels::conv`; the layout and
//! the accumulation order are in `docs/ops-conv.md`).

use crate::fallible::with_f32_opt;
use om_core::compute::Compute;
use om_core::kernels::conv::{conv2d_backward_bias, conv2d_backward_input, conv2d_backward_weight, conv2d_forward, ConvGeom};
use om_core::{Case, Error, Result, Tensor};
use om_macros::op;

/// The shapes of a convolution's `x`, `w` and (if given) `bias`, kept inline.
pub(crate) type ArgShapes<'a> = om_core::inline_vec::InlineVec<&'a [usize], 3>;

/// The checks every convolution shares: `x` and `w` of rank 4 (`layouts` names their
/// expected layouts for the message), and stride, dilation and groups at least 1.
/// Returns the argument shapes, for later error messages.
pub(crate) fn check_common<'a>(
    op: &'static str,
    [x, w]: [&'a [usize]; 2],
    bias: Option<&'a [usize]>,
    layouts: [&str; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    groups: usize,
) -> Result<ArgShapes<'a>> {
    let mut shapes = ArgShapes::from_slice(&[x, w]);
    if let Some(b) = bias {
        shapes.push(b);
    }
    for (arg, t, layout) in [("x", x, layouts[0]), ("w", w, layouts[1])] {
        if t.len() != 4 {
            return Err(Error::shape(op, &shapes, format!("`{arg}` must be {layout} (rank 4), got rank {}", t.len())));
        }
    }
    if stride.contains(&0) {
        return Err(Error::argument(op, format!("stride must be at least 1, got {stride:?}")));
    }
    if dilation.contains(&0) {
        return Err(Error::argument(op, format!("dilation must be at least 1, got {dilation:?}")));
    }
    if groups == 0 {
        return Err(Error::argument(op, "groups must be at least 1, got 0"));
    }
    Ok(shapes)
}

/// Validates the shapes and attributes of a convolution and returns its geometry.
/// `bias` is `None` when absent.
#[allow(clippy::too_many_arguments)]
pub(crate) fn geometry(
    op: &'static str,
    x: &[usize],
    w: &[usize],
    bias: Option<&[usize]>,
    stride: [usize; 2],
    padding: [usize; 4],
    dilation: [usize; 2],
    groups: usize,
) -> Result<ConvGeom> {
    let shapes = check_common(op, [x, w], bias, ["[N, C, H, W]", "[O, C/groups, kH, kW]"], stride, dilation, groups)?;
    let (n, c, h, wd) = (x[0], x[1], x[2], x[3]);
    let (o, kh, kw) = (w[0], w[2], w[3]);
    if !c.is_multiple_of(groups) {
        return Err(Error::shape(op, &shapes, format!("{c} input channels are not divisible by groups = {groups}")));
    }
    if !o.is_multiple_of(groups) {
        return Err(Error::shape(op, &shapes, format!("{o} output channels are not divisible by groups = {groups}")));
    }
    if w[1] != c / groups {
        return Err(Error::shape(
            op,
            &shapes,
            format!("`w` has {} input channels per group, expected C/groups = {c}/{groups} = {}", w[1], c / groups),
        ));
    }
    if kh == 0 || kw == 0 {
        return Err(Error::shape(op, &shapes, format!("the kernel must be at least 1×1, got {kh}×{kw}")));
    }
    if let Some(b) = bias {
        if b != [o] {
            return Err(Error::shape(op, &shapes, format!("`bias` must have shape [{o}], got {b:?}")));
        }
    }
    let [pt, pl, pb, pr] = padding;
    let (eh, ew) = ((kh - 1) * dilation[0] + 1, (kw - 1) * dilation[1] + 1);
    let (ph, pw) = (h + pt + pb, wd + pl + pr);
    if eh > ph || ew > pw {
        return Err(Error::shape(
            op,
            &shapes,
            format!(
                "the dilated kernel ({eh}×{ew}) is larger than the padded input ({ph}×{pw}; padding top, left, bottom, right = {padding:?})"
            ),
        ));
    }
    let (oh, ow) = ((ph - eh) / stride[0] + 1, (pw - ew) / stride[1] + 1);
    Ok(ConvGeom { n, c, h, w: wd, o, groups, kh, kw, sh: stride[0], sw: stride[1], pt, pl, dh: dilation[0], dw: dilation[1], oh, ow })
}

/// 2-d cross-correlation (PyTorch's `conv2d`) of `x` `[N, C, H, W]` with `w`
/// `[O, C/groups, kH, kW]` plus an optional `bias` `[O]`; `padding` is (top, left, bottom,
/// right) zeros. Backward: `dW` per image in item order, `dx` by col2im of `W_gᵀ·g`,
/// `dbias = Σ g`.
#[op(saved = [x, w], attrs = [stride: [usize; 2], padding: [usize; 4], dilation: [usize; 2], groups: usize])]
pub mod conv2d {
    use super::*;

    pub fn forward(
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        stride: [usize; 2],
        padding: [usize; 4],
        dilation: [usize; 2],
        groups: usize,
    ) -> Result<Tensor> {
        x.expect_f32(NAME, "x")?;
        w.expect_f32(NAME, "w")?;
        if let Some(b) = bias {
            b.expect_f32(NAME, "bias")?;
        }
        let geo = geometry(NAME, x.shape(), w.shape(), bias.map(|b| b.shape()), stride, padding, dilation, groups)?;
        let settings = Compute::settings();
        x.try_with_f32(|xs| {
            w.try_with_f32(|ws| {
                with_f32_opt(bias, |bs| {
                    Tensor::build_f32(&[geo.n, geo.o, geo.oh, geo.ow], |y| conv2d_forward(settings, &geo, xs, ws, bs, y))
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
        let geo = geometry(NAME, &s[0], &s[1], bias_shape, r.stride, r.padding, r.dilation, r.groups)?;
        let settings = Compute::settings();
        let g = g.try_to_contiguous()?;
        if d.needs_x() {
            let dx = g.try_with_f32(|gs| {
                r.w().try_with_f32(|ws| Tensor::build_f32(&s[0], |dx| conv2d_backward_input(settings, &geo, gs, ws, dx)))
            })???;
            d.x(dx);
        }
        if d.needs_w() {
            let dw = g.try_with_f32(|gs| {
                r.x().try_with_f32(|xs| Tensor::build_f32(&s[1], |dw| conv2d_backward_weight(settings, &geo, xs, gs, dw)))
            })???;
            d.w(dw);
        }
        if d.needs_bias() {
            let db = g.try_with_f32(|gs| Tensor::build_f32(&[geo.o], |db| conv2d_backward_bias(&geo, gs, db)))??;
            d.bias(db);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        vec![
            Case::new(
                "bias_pad1",
                vec![Case::input(&[2, 3, 5, 5], -1.0, 1.0, 1), Case::input(&[4, 3, 3, 3], -1.0, 1.0, 2), Case::input(&[4], -1.0, 1.0, 3)],
                |x| super::conv2d(&x[0], &x[1], Some(&x[2]), [1, 1], [1, 1, 1, 1], [1, 1], 1),
            ),
            Case::new("groups_dilation", vec![Case::input(&[1, 4, 6, 6], -1.0, 1.0, 4), Case::input(&[4, 2, 2, 2], -1.0, 1.0, 5)], |x| {
                super::conv2d(&x[0], &x[1], None, [1, 1], [0, 0, 0, 0], [2, 1], 2)
            }),
            Case::new(
                "stride2_asymmetric_padding",
                vec![Case::input(&[2, 2, 5, 6], -1.0, 1.0, 6), Case::input(&[3, 2, 3, 2], -1.0, 1.0, 7), Case::input(&[3], -1.0, 1.0, 8)],
                |x| super::conv2d(&x[0], &x[1], Some(&x[2]), [2, 2], [1, 0, 2, 1], [1, 1], 1),
            ),
            Case::new(
                "depthwise_multiplier2",
                vec![Case::input(&[1, 3, 5, 5], -1.0, 1.0, 9), Case::input(&[6, 1, 3, 3], -1.0, 1.0, 10), Case::input(&[6], -1.0, 1.0, 11)],
                |x| super::conv2d(&x[0], &x[1], Some(&x[2]), [1, 1], [1, 1, 1, 1], [1, 1], 3),
            ),
            Case::new(
                "nhwc_permuted_input",
                vec![
                    Case::input(&[2, 4, 5, 3], -1.0, 1.0, 12),
                    Case::input(&[2, 3, 2, 2], -1.0, 1.0, 13),
                    Case::input(&[2], -1.0, 1.0, 14),
                ],
                |x| super::conv2d(&crate::permute(&x[0], &[0, 3, 1, 2])?, &x[1], Some(&x[2]), [1, 2], [0, 1, 1, 0], [1, 1], 1),
            ),
            Case::new(
                "transposed_weight",
                vec![Case::input(&[1, 2, 4, 4], -1.0, 1.0, 15), Case::input(&[2, 2, 3, 3], -1.0, 1.0, 16)],
                |x| super::conv2d(&x[0], &crate::transpose(&x[1], 0, 1)?, None, [1, 1], [0, 1, 0, 1], [1, 1], 1),
            ),
        ]
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use om_core::compute::{KernelPath, Mode, Settings};
    use std::collections::BTreeMap;

    pub(crate) fn oracle() -> BTreeMap<String, Tensor> {
        om_core::io::load(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/ops/conv_pool.safetensors"))
            .expect("testdata/ops/conv_pool.safetensors")
    }

    /// `max|ours − torch| / max|torch|`.
    pub(crate) fn scaled_error(ours: &Tensor, want: &Tensor) -> f64 {
        assert_eq!(ours.shape(), want.shape());
        let (a, b) = (ours.to_vec(), want.to_vec());
        let scale = b.iter().fold(0.0f64, |m, &v| m.max((v as f64).abs()));
        let worst = a.iter().zip(&b).fold(0.0f64, |m, (&p, &q)| m.max((p as f64 - q as f64).abs()));
        worst / scale.max(f64::MIN_POSITIVE)
    }

    fn run_all(data: &BTreeMap<String, Tensor>) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        for name in data.keys().filter_map(|k| k.strip_suffix(".params")).filter(|k| k.starts_with("conv")) {
            let p: Vec<usize> = data[&format!("{name}.params")].to_vec_i32().iter().map(|&v| v as usize).collect();
            let bias = data.get(&format!("{name}.bias"));
            let y = conv2d(
                &data[&format!("{name}.x")],
                &data[&format!("{name}.w")],
                bias,
                [p[0], p[1]],
                [p[2], p[3], p[4], p[5]],
                [p[6], p[7]],
                p[8],
            )
            .unwrap();
            out.push((name.to_string(), y));
        }
        out
    }

    #[test]
    fn forward_matches_pytorch_in_both_modes() {
        let data = oracle();
        for mode in [Mode::Fast, Mode::Exact] {
            Compute::set_mode(mode);
            let results = run_all(&data);
            assert!(results.len() >= 4, "the oracle file holds the conv cases");
            for (name, y) in results {
                let err = scaled_error(&y, &data[&format!("{name}.y")]);
                eprintln!("conv2d {name} ({mode}): scaled error {err:.3e}");
                assert!(err <= 1e-5, "{name} ({mode}): scaled error {err:e}");
            }
        }
        Compute::set_mode(Mode::Fast);
    }

    fn forward_backward_bits() -> Vec<u32> {
        let x = Tensor::randn(&[3, 4, 9, 8], 1).unwrap().requires_grad().unwrap();
        let w = Tensor::randn(&[6, 2, 3, 3], 2).unwrap().requires_grad().unwrap();
        let b = Tensor::randn(&[6], 3).unwrap().requires_grad().unwrap();
        let y = conv2d(&x, &w, Some(&b), [2, 1], [1, 2, 0, 1], [1, 2], 2).unwrap();
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
            for threads in [1, 2, 3] {
                let got = Compute::with(Settings { mode: Mode::Exact, threads, path }, forward_backward_bits);
                assert!(got == reference, "exact conv2d differs on {path} with {threads} threads");
            }
        }
        let fast = Compute::with(Settings { mode: Mode::Fast, threads: 1, path: KernelPath::best() }, forward_backward_bits);
        for threads in [2, 3] {
            let got = Compute::with(Settings { mode: Mode::Fast, threads, path: KernelPath::best() }, forward_backward_bits);
            assert!(got == fast, "fast conv2d differs with {threads} threads");
        }
    }
}
