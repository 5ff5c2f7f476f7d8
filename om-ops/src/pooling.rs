//! Pooling: `max_pool2d` (saves the winner's index), `avg_pool2d` and the composition
//! `global_avg_pool2d` of `[N, C, H, W]` or unbatched `[C, H, W]` images, with PyTorch's CPU
//! semantics (`ceil_mode`'s output size and divisor included; see `docs/ops-conv.md` for
//! ties, NaN and padding). The arithmetic lives in
//! `om_core::kernels::pooling` (vectorised 2×2 and 2×1 paths, planes in parallel; see
//! `docs/kernels-norm-pool.md`).

use crate::image::Images;
use om_core::compute::Compute;
use om_core::kernels::pooling::{self as kernel, Pool2d};
use om_core::{Case, Error, Result, Tensor};
use om_macros::op;

/// The output length of a pooling along one axis of length `len` (PyTorch's
/// `pooling_output_shape`): `(len + 2p − d(k−1) − 1)/s + 1`, rounded down, or up with
/// `ceil_mode` — then less one if the last window would start past the input and its left
/// padding. `None` when no window fits.
fn out_len(len: usize, k: usize, s: usize, p: usize, d: usize, ceil_mode: bool) -> Option<usize> {
    let span = (len + 2 * p).checked_sub(d * (k - 1) + 1)?;
    let out = if ceil_mode { span.div_ceil(s) + 1 } else { span / s + 1 };
    Some(if ceil_mode && (out - 1) * s >= len + p { out - 1 } else { out })
}

/// Validates a pooling over `x` and returns its geometry and the image dimensions.
fn geometry(
    op: &'static str,
    x: &[usize],
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    ceil_mode: bool,
) -> Result<(Pool2d, Images)> {
    let im = Images::of(op, x, &[x])?;
    let (h, w) = (im.h, im.w);
    if kernel.contains(&0) {
        return Err(Error::argument(op, format!("kernel size must be at least 1, got {kernel:?}")));
    }
    if stride.contains(&0) {
        return Err(Error::argument(op, format!("stride must be at least 1, got {stride:?}")));
    }
    if dilation.contains(&0) {
        return Err(Error::argument(op, format!("dilation must be at least 1, got {dilation:?}")));
    }
    if padding[0] > kernel[0] / 2 || padding[1] > kernel[1] / 2 {
        return Err(Error::argument(op, format!("padding {padding:?} must be at most half the kernel size {kernel:?} (as in PyTorch)")));
    }
    if h == 0 || w == 0 {
        // PyTorch too allows only the batch and channel dims to be empty.
        return Err(Error::shape(op, &[x], format!("the input image must be at least 1×1, got {h}×{w}")));
    }
    let (Some(oh), Some(ow)) = (
        out_len(h, kernel[0], stride[0], padding[0], dilation[0], ceil_mode),
        out_len(w, kernel[1], stride[1], padding[1], dilation[1], ceil_mode),
    ) else {
        return Err(Error::shape(
            op,
            &[x],
            format!("the output would be empty: the window ({kernel:?}, dilation {dilation:?}) is larger than the padded input (padding {padding:?})"),
        ));
    };
    let geo = Pool2d {
        planes: im.n * im.c,
        h,
        w,
        kh: kernel[0],
        kw: kernel[1],
        sh: stride[0],
        sw: stride[1],
        ph: padding[0],
        pw: padding[1],
        dh: dilation[0],
        dw: dilation[1],
        oh,
        ow,
    };
    Ok((geo, im))
}

/// Max over each window of `x` `[N, C, H, W]` (or unbatched `[C, H, W]`; padding acts as
/// −∞; a dilated window skips `dilation − 1` elements). `ceil_mode` rounds the output size
/// up, as PyTorch does (the last window must start inside the input or its left padding).
/// Ties keep the first maximum in window scan order and NaN wins, as PyTorch's CPU kernel
/// does. Backward: `g` scatter-added at the saved winner's index.
#[op(
    saved = [idx: owned],
    attrs = [kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2], dilation: [usize; 2], ceil_mode: bool]
)]
pub mod max_pool2d {
    use super::*;

    pub fn forward(
        x: &Tensor,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        ceil_mode: bool,
    ) -> Result<(Tensor, Owned)> {
        x.expect_f32(NAME, "x")?;
        let (geo, im) = geometry(NAME, x.shape(), kernel, stride, padding, dilation, ceil_mode)?;
        if i32::try_from(geo.h * geo.w).is_err() {
            return Err(Error::argument(NAME, format!("an image of {}×{} is too large for i32 indices", geo.h, geo.w)));
        }
        let out_shape = im.shape(im.c, [geo.oh, geo.ow]);
        let settings = Compute::settings();
        let mut y = None;
        let idx = x.try_with_f32(|xs| {
            Tensor::build_i32(&out_shape, |idx| {
                y = Some(Tensor::build_f32(&out_shape, |y| {
                    kernel::max_pool2d(settings, &geo, xs, y, idx);
                    Ok(())
                })?);
                Ok(())
            })
        })??;
        let y = y.expect("built with the indices");
        Ok((y, Owned { idx }))
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let shape = &r.input_shapes[0];
        let (geo, _) = geometry(NAME, shape, r.kernel, r.stride, r.padding, r.dilation, r.ceil_mode)?;
        let settings = Compute::settings();
        let dx = g.try_with_f32(|gs| {
            r.idx().try_with_i32(|idx| {
                Tensor::build_f32(shape, |dx| {
                    kernel::max_pool2d_backward(settings, &geo, gs, idx, dx);
                    Ok(())
                })
            })
        })???;
        d.x(dx);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        vec![
            Case::new("k3_s2_pad1", vec![Case::distinct_input(&[2, 2, 7, 7], 1)], |x| {
                super::max_pool2d(&x[0], [3, 3], [2, 2], [1, 1], [1, 1], false)
            }),
            Case::new("overlapping_k3_s1", vec![Case::distinct_input(&[1, 2, 5, 5], 2)], |x| {
                super::max_pool2d(&x[0], [3, 3], [1, 1], [0, 0], [1, 1], false)
            }),
            Case::new("k2x3_s1x2_pad_dilation", vec![Case::distinct_input(&[1, 3, 6, 7], 3)], |x| {
                super::max_pool2d(&x[0], [2, 3], [1, 2], [1, 1], [2, 1], false)
            }),
            Case::new("nhwc_permuted_input", vec![Case::distinct_input(&[2, 6, 5, 2], 4)], |x| {
                super::max_pool2d(&crate::permute(&x[0], [0, 3, 1, 2])?, [2, 2], [2, 1], [0, 1], [1, 1], false)
            }),
            Case::new("ceil_k2_s2_odd_sizes", vec![Case::distinct_input(&[1, 2, 7, 9], 5)], |x| {
                super::max_pool2d(&x[0], [2, 2], [2, 2], [0, 0], [1, 1], true)
            }),
            Case::new("ceil_k3_s2_pad1", vec![Case::distinct_input(&[2, 2, 8, 8], 6)], |x| {
                super::max_pool2d(&x[0], [3, 3], [2, 2], [1, 1], [1, 1], true)
            }),
            Case::new("ceil_k2x3_s3x2_pad_dilation", vec![Case::distinct_input(&[1, 2, 8, 7], 7)], |x| {
                super::max_pool2d(&x[0], [2, 3], [3, 2], [1, 1], [2, 1], true)
            }),
            Case::new("unbatched", vec![Case::distinct_input(&[3, 6, 5], 8)], |x| {
                super::max_pool2d(&x[0], [2, 2], [1, 2], [1, 0], [1, 1], false)
            }),
            Case::new("unbatched_ceil_permuted", vec![Case::distinct_input(&[5, 6, 2], 9)], |x| {
                super::max_pool2d(&crate::permute(&x[0], [2, 0, 1])?, [3, 2], [2, 2], [1, 1], [1, 1], true)
            }),
        ]
    }
}

/// Average over each window of `x` `[N, C, H, W]` (or unbatched `[C, H, W]`), as PyTorch's
/// `avg_pool2d`: `ceil_mode` rounds the output size up (the last window must start inside
/// the input or its left padding); the divisor is the window's area inside the padded input
/// when `count_include_pad` (the kernel area, less where a `ceil_mode` window reaches past
/// the padding), else the number of in-bounds elements; sums in f64 in window scan order.
/// Backward: each output's `g/count` added to every in-bounds element of its window.
#[op(attrs = [kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2], ceil_mode: bool, count_include_pad: bool])]
pub mod avg_pool2d {
    use super::*;

    pub fn forward(
        x: &Tensor,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        ceil_mode: bool,
        count_include_pad: bool,
    ) -> Result<Tensor> {
        x.expect_f32(NAME, "x")?;
        let (geo, im) = geometry(NAME, x.shape(), kernel, stride, padding, [1, 1], ceil_mode)?;
        let out_shape = im.shape(im.c, [geo.oh, geo.ow]);
        let settings = Compute::settings();
        x.try_with_f32(|xs| {
            Tensor::build_f32(&out_shape, |y| {
                kernel::avg_pool2d(settings, &geo, count_include_pad, xs, y);
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
        let (geo, _) = geometry(NAME, shape, r.kernel, r.stride, r.padding, [1, 1], r.ceil_mode)?;
        let settings = Compute::settings();
        let dx = g.try_with_f32(|gs| {
            Tensor::build_f32(shape, |dx| {
                kernel::avg_pool2d_backward(settings, &geo, r.count_include_pad, gs, dx);
                Ok(())
            })
        })??;
        d.x(dx);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let mut c = Vec::new();
        for (cip, tag) in [(true, "include_pad"), (false, "exclude_pad")] {
            c.push(Case::new(format!("k3_s2_pad1_{tag}"), vec![Case::input(&[2, 2, 6, 5], -1.0, 1.0, 1)], move |x| {
                super::avg_pool2d(&x[0], [3, 3], [2, 2], [1, 1], false, cip)
            }));
            c.push(Case::new(format!("k2x3_s3x1_pad_{tag}"), vec![Case::input(&[1, 3, 7, 6], -1.0, 1.0, 2)], move |x| {
                super::avg_pool2d(&x[0], [2, 3], [3, 1], [1, 1], false, cip)
            }));
            c.push(Case::new(format!("nhwc_permuted_input_{tag}"), vec![Case::input(&[1, 5, 6, 2], -1.0, 1.0, 3)], move |x| {
                super::avg_pool2d(&crate::permute(&x[0], [0, 3, 1, 2])?, [3, 2], [1, 2], [1, 1], false, cip)
            }));
            c.push(Case::new(format!("ceil_k3_s2_pad1_{tag}"), vec![Case::input(&[1, 2, 8, 7], -1.0, 1.0, 4)], move |x| {
                super::avg_pool2d(&x[0], [3, 3], [2, 2], [1, 1], true, cip)
            }));
            c.push(Case::new(format!("ceil_k2x3_s3x2_{tag}"), vec![Case::input(&[2, 2, 7, 8], -1.0, 1.0, 5)], move |x| {
                super::avg_pool2d(&x[0], [2, 3], [3, 2], [0, 1], true, cip)
            }));
            c.push(Case::new(format!("ceil_k2_s2_odd_sizes_{tag}"), vec![Case::input(&[1, 3, 5, 7], -1.0, 1.0, 6)], move |x| {
                super::avg_pool2d(&x[0], [2, 2], [2, 2], [0, 0], true, cip)
            }));
            c.push(Case::new(format!("unbatched_ceil_{tag}"), vec![Case::input(&[3, 5, 6], -1.0, 1.0, 7)], move |x| {
                super::avg_pool2d(&x[0], [2, 2], [2, 2], [1, 1], true, cip)
            }));
        }
        c
    }
}

/// Mean over each image plane: `[N, C, H, W]` → `[N, C, 1, 1]` (or unbatched `[C, H, W]` →
/// `[C, 1, 1]`; PyTorch's `adaptive_avg_pool2d(x, 1)`), as reshape, mean over the last axis,
/// reshape.
/// Backward: through `reshape` and `mean`.
#[op(composition)]
pub mod global_avg_pool2d {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        x.expect_f32(NAME, "x")?;
        let s = x.shape();
        let im = Images::of(NAME, s, &[s])?;
        if im.h * im.w == 0 {
            return Err(Error::shape(NAME, &[s], "the mean of an empty image plane is undefined"));
        }
        let m = crate::mean(&crate::reshape(x, [im.n as isize, im.c as isize, (im.h * im.w) as isize])?, Some(-1), false)?;
        crate::reshape(&m, im.shape(im.c, [1, 1]).iter().map(|&d| d as isize).collect::<om_core::layout::SignedDims>())
    }

    fn cases() -> Vec<Case> {
        vec![
            Case::new("contiguous", vec![Case::input(&[2, 3, 4, 5], -1.0, 1.0, 1)], |x| super::global_avg_pool2d(&x[0])),
            Case::new("nhwc_permuted_input", vec![Case::input(&[2, 3, 4, 3], -1.0, 1.0, 2)], |x| {
                super::global_avg_pool2d(&crate::permute(&x[0], [0, 3, 1, 2])?)
            }),
            Case::new("unbatched", vec![Case::input(&[3, 4, 5], -1.0, 1.0, 3)], |x| super::global_avg_pool2d(&x[0])),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::tests::{assert_bit_identical, oracle, output_and_gradient_bits, scaled_error};
    use crate::oracle::{assert_close, both_modes, Oracle};
    use om_core::compute::{Compute, Mode};

    fn pool_params(data: &std::collections::BTreeMap<String, Tensor>, name: &str) -> Vec<usize> {
        data[&format!("{name}.params")].to_vec_i32().iter().map(|&v| v as usize).collect()
    }

    #[test]
    fn forward_matches_pytorch_in_both_modes() {
        let data = oracle();
        for mode in [Mode::Fast, Mode::Exact] {
            Compute::set_mode(mode);
            let mut checked = 0;
            for name in data.keys().filter_map(|k| k.strip_suffix(".params")) {
                let x = &data[&format!("{name}.x")];
                let want = &data[&format!("{name}.y")];
                let p = pool_params(&data, name);
                let y = if name.starts_with("maxpool") {
                    let y = max_pool2d(x, [p[0], p[1]], [p[2], p[3]], [p[4], p[5]], [p[6], p[7]], false).unwrap();
                    // The saved indices equal PyTorch's `return_indices`.
                    let rec = max_pool2d::forward(x, [p[0], p[1]], [p[2], p[3]], [p[4], p[5]], [p[6], p[7]], false).unwrap();
                    assert_eq!(rec.1.idx.to_vec_i32(), data[&format!("{name}.idx")].to_vec_i32(), "{name}: indices");
                    y
                } else if name.starts_with("avgpool") {
                    avg_pool2d(x, [p[0], p[1]], [p[2], p[3]], [p[4], p[5]], false, p[6] != 0).unwrap()
                } else if name.starts_with("gap") {
                    global_avg_pool2d(x).unwrap()
                } else {
                    continue;
                };
                let err = scaled_error(&y, want);
                eprintln!("{name} ({mode}): scaled error {err:.3e}");
                assert!(err <= 1e-5, "{name} ({mode}): scaled error {err:e}");
                checked += 1;
            }
            assert!(checked >= 5, "the oracle file holds the pooling cases");
        }
        Compute::set_mode(Mode::Fast);
    }

    #[test]
    fn ceil_mode_and_unbatched_pooling_match_pytorch_with_gradients() {
        let o = Oracle::load_file("conv_pool", "tools/oracle_conv_pool.py");
        let names: Vec<&str> = o.names().filter_map(|k| k.strip_suffix("_params")).filter(|k| k.starts_with("pool_")).collect();
        assert!(names.len() >= 19, "the oracle file holds the ceil-mode and unbatched pooling cases");
        both_modes(|| {
            for name in &names {
                let p: Vec<usize> = o.get(&format!("{name}_params")).to_vec_i32().iter().map(|&v| v as usize).collect();
                let x = o.get(&format!("{name}_x"));
                let (kernel, stride, padding, dilation, ceil) = ([p[1], p[2]], [p[3], p[4]], [p[5], p[6]], [p[7], p[8]], p[9] != 0);
                let y = match p[0] {
                    0 => max_pool2d(&x, kernel, stride, padding, dilation, ceil),
                    1 => avg_pool2d(&x, kernel, stride, padding, ceil, p[10] != 0),
                    _ => global_avg_pool2d(&x),
                }
                .unwrap();
                assert_close(&format!("{name}_y"), &y, &o.get(&format!("{name}_y")));
                o.check_grads(name, &y, &[("x", &x)]);
            }
        });
    }

    /// `ceil_mode` and unbatched pooling, on the general and the dedicated 2×2 loops.
    fn ceil_and_unbatched_bits() -> Vec<u32> {
        let x = Tensor::randn_with_seed(&[2, 3, 9, 11], 5).unwrap().requires_grad().unwrap();
        let u = Tensor::randn_with_seed(&[3, 7, 8], 6).unwrap().requires_grad().unwrap();
        let a = max_pool2d(&x, [3, 3], [2, 2], [1, 1], [1, 1], true).unwrap();
        let a = avg_pool2d(&a, [2, 2], [2, 2], [0, 0], true, false).unwrap();
        let b = max_pool2d(&u, [2, 2], [2, 2], [0, 0], [1, 1], true).unwrap();
        let b = avg_pool2d(&b, [3, 2], [2, 1], [1, 1], true, true).unwrap();
        let y = crate::add(&global_avg_pool2d(&a).unwrap(), &global_avg_pool2d(&b).unwrap()).unwrap();
        output_and_gradient_bits(&y, &[&x, &u])
    }

    #[test]
    fn ceil_mode_and_unbatched_exact_mode_is_identical_on_every_path_and_thread_count() {
        assert_bit_identical("ceil-mode/unbatched pooling", &[2, 3], ceil_and_unbatched_bits);
    }

    #[test]
    fn max_pool_ties_keep_the_first_and_nan_wins() {
        let x = Tensor::from_vec(vec![1.0, 3.0, 3.0, 0.0, 2.0, f32::NAN, 5.0, 1.0], &[1, 1, 2, 4]).unwrap();
        let (y, owned) = max_pool2d::forward(&x, [1, 3], [1, 1], [0, 0], [1, 1], false).unwrap();
        assert_eq!(owned.idx.to_vec_i32(), vec![1, 1, 5, 5]);
        let y = y.to_vec();
        assert_eq!(&y[..2], &[3.0, 3.0]);
        assert!(y[2].is_nan() && y[3].is_nan());
    }
}
