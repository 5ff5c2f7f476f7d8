//! Pooling: `max_pool2d` (saves the winner's index), `avg_pool2d` and the composition
//! `global_avg_pool2d`, with PyTorch's CPU semantics (`ceil_mode = false`; see
//! `docs/ops-conv.md` for ties, NaN and padding). The arithmetic lives in
//! `om_core::kernels::pooling` (vectorised 2×2 and 2×1 paths, planes in parallel; see
//! `docs/kernels-norm-pool.md`).

use om_core::compute::Compute;
use om_core::kernels::pooling::{self as kernel, Pool2d};
use om_core::{Case, Error, Result, Tensor};
use om_macros::op;

/// Validates a pooling over `x` and returns its geometry.
fn geometry(
    op: &'static str,
    x: &[usize],
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
) -> Result<Pool2d> {
    if x.len() != 4 {
        return Err(Error::shape(op, &[x], format!("`x` must be [N, C, H, W] (rank 4), got rank {}", x.len())));
    }
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
    let (h, w) = (x[2], x[3]);
    if h == 0 || w == 0 {
        // PyTorch too allows only the batch and channel dims to be empty.
        return Err(Error::shape(op, &[x], format!("the input image must be at least 1×1, got {h}×{w}")));
    }
    let out = |len: usize, k: usize, s: usize, p: usize, d: usize| (len + 2 * p).checked_sub(d * (k - 1) + 1).map(|v| v / s + 1);
    let (Some(oh), Some(ow)) =
        (out(h, kernel[0], stride[0], padding[0], dilation[0]), out(w, kernel[1], stride[1], padding[1], dilation[1]))
    else {
        return Err(Error::shape(
            op,
            &[x],
            format!("the output would be empty: the window ({kernel:?}, dilation {dilation:?}) is larger than the padded input (padding {padding:?})"),
        ));
    };
    Ok(Pool2d {
        planes: x[0] * x[1],
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
    })
}

/// Max over each window (padding acts as −∞; a dilated window skips `dilation − 1`
/// elements). Ties keep the first maximum in window scan order and NaN wins, as PyTorch's
/// CPU kernel does. Backward: `g` scatter-added at the saved winner's index.
#[op(saved = [idx: owned], attrs = [kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2], dilation: [usize; 2]])]
pub mod max_pool2d {
    use super::*;

    pub fn forward(
        x: &Tensor,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
    ) -> Result<(Tensor, Owned)> {
        x.expect_f32(NAME, "x")?;
        let geo = geometry(NAME, x.shape(), kernel, stride, padding, dilation)?;
        if i32::try_from(geo.h * geo.w).is_err() {
            return Err(Error::argument(NAME, format!("an image of {}×{} is too large for i32 indices", geo.h, geo.w)));
        }
        let out_shape = [x.shape()[0], x.shape()[1], geo.oh, geo.ow];
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
        let geo = geometry(NAME, shape, r.kernel, r.stride, r.padding, r.dilation)?;
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
                super::max_pool2d(&x[0], [3, 3], [2, 2], [1, 1], [1, 1])
            }),
            Case::new("overlapping_k3_s1", vec![Case::distinct_input(&[1, 2, 5, 5], 2)], |x| {
                super::max_pool2d(&x[0], [3, 3], [1, 1], [0, 0], [1, 1])
            }),
            Case::new("k2x3_s1x2_pad_dilation", vec![Case::distinct_input(&[1, 3, 6, 7], 3)], |x| {
                super::max_pool2d(&x[0], [2, 3], [1, 2], [1, 1], [2, 1])
            }),
            Case::new("nhwc_permuted_input", vec![Case::distinct_input(&[2, 6, 5, 2], 4)], |x| {
                super::max_pool2d(&crate::permute(&x[0], &[0, 3, 1, 2])?, [2, 2], [2, 1], [0, 1], [1, 1])
            }),
        ]
    }
}

/// Average over each window (PyTorch's `avg_pool2d`, `ceil_mode = false`): the divisor is
/// the kernel area when `count_include_pad`, else the number of in-bounds elements; sums in
/// f64 in window scan order. Backward: each output's `g/count` added to every in-bounds
/// element of its window.
#[op(attrs = [kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2], count_include_pad: bool])]
pub mod avg_pool2d {
    use super::*;

    pub fn forward(x: &Tensor, kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2], count_include_pad: bool) -> Result<Tensor> {
        x.expect_f32(NAME, "x")?;
        let geo = geometry(NAME, x.shape(), kernel, stride, padding, [1, 1])?;
        let out_shape = [x.shape()[0], x.shape()[1], geo.oh, geo.ow];
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
        let geo = geometry(NAME, shape, r.kernel, r.stride, r.padding, [1, 1])?;
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
                super::avg_pool2d(&x[0], [3, 3], [2, 2], [1, 1], cip)
            }));
            c.push(Case::new(format!("k2x3_s3x1_pad_{tag}"), vec![Case::input(&[1, 3, 7, 6], -1.0, 1.0, 2)], move |x| {
                super::avg_pool2d(&x[0], [2, 3], [3, 1], [1, 1], cip)
            }));
            c.push(Case::new(format!("nhwc_permuted_input_{tag}"), vec![Case::input(&[1, 5, 6, 2], -1.0, 1.0, 3)], move |x| {
                super::avg_pool2d(&crate::permute(&x[0], &[0, 3, 1, 2])?, [3, 2], [1, 2], [1, 1], cip)
            }));
        }
        c
    }
}

/// Mean over each image plane: `[N, C, H, W]` → `[N, C, 1, 1]` (PyTorch's
/// `adaptive_avg_pool2d(x, 1)`), as reshape, mean over the last axis, reshape.
#[op(composition)]
pub mod global_avg_pool2d {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        x.expect_f32(NAME, "x")?;
        let s = x.shape();
        if s.len() != 4 {
            return Err(Error::shape(NAME, &[s], format!("`x` must be [N, C, H, W] (rank 4), got rank {}", s.len())));
        }
        if s[2] * s[3] == 0 {
            return Err(Error::shape(NAME, &[s], "the mean of an empty image plane is undefined"));
        }
        let (n, c, hw) = (s[0] as isize, s[1] as isize, (s[2] * s[3]) as isize);
        let m = crate::mean(&crate::reshape(x, &[n, c, hw])?, Some(-1), false)?;
        crate::reshape(&m, &[n, c, 1, 1])
    }

    fn cases() -> Vec<Case> {
        vec![
            Case::new("contiguous", vec![Case::input(&[2, 3, 4, 5], -1.0, 1.0, 1)], |x| super::global_avg_pool2d(&x[0])),
            Case::new("nhwc_permuted_input", vec![Case::input(&[2, 3, 4, 3], -1.0, 1.0, 2)], |x| {
                super::global_avg_pool2d(&crate::permute(&x[0], &[0, 3, 1, 2])?)
            }),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::tests::{oracle, scaled_error};
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
                    let y = max_pool2d(x, [p[0], p[1]], [p[2], p[3]], [p[4], p[5]], [p[6], p[7]]).unwrap();
                    // The saved indices equal PyTorch's `return_indices`.
                    let rec = max_pool2d::forward(x, [p[0], p[1]], [p[2], p[3]], [p[4], p[5]], [p[6], p[7]]).unwrap();
                    assert_eq!(rec.1.idx.to_vec_i32(), data[&format!("{name}.idx")].to_vec_i32(), "{name}: indices");
                    y
                } else if name.starts_with("avgpool") {
                    avg_pool2d(x, [p[0], p[1]], [p[2], p[3]], [p[4], p[5]], p[6] != 0).unwrap()
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
    fn max_pool_ties_keep_the_first_and_nan_wins() {
        let x = Tensor::from_vec(vec![1.0, 3.0, 3.0, 0.0, 2.0, f32::NAN, 5.0, 1.0], &[1, 1, 2, 4]).unwrap();
        let (y, owned) = max_pool2d::forward(&x, [1, 3], [1, 1], [0, 0], [1, 1]).unwrap();
        assert_eq!(owned.idx.to_vec_i32(), vec![1, 1, 5, 5]);
        let y = y.to_vec();
        assert_eq!(&y[..2], &[3.0, 3.0]);
        assert!(y[2].is_nan() && y[3].is_nan());
    }
}
