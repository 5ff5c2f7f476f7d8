//! Probability normalisers (the module is not named `softmax` so that the operator can be):
//! `softmax(x, axis)` and `log_softmax(x, axis)` over any axis (negative counts from the
//! end, as PyTorch's `dim`). The last axis runs on the softmax row kernel of the current
//! mode; another axis runs on the line kernel, which reads and writes the tensor in its
//! row-major layout (lines of stride `inner`), so no transposed copy is made in either
//! direction. Both give the same bits for the same line. Line sums of the backward rules
//! accumulate in f64 in increasing element order.

use om_core::compute::Compute;
use om_core::kernels::lanes::{self, Src, Unary};
use om_core::kernels::softmax::{log_softmax_lines, log_softmax_rows, softmax_lines, softmax_rows};
use om_core::layout::normalize_axis;
use om_core::{Case, DType, Error, Result, Tensor};
use om_macros::op;

/// `[outer, n, inner]`: the sizes before, of and after `axis` of `shape`.
fn split_at_axis(shape: &[usize], a: usize) -> (usize, usize, usize) {
    (shape[..a].iter().product(), shape[a], shape[a + 1..].iter().product())
}

/// Checks the input and returns `(n, inner)` for `axis`.
fn lines_of(op: &'static str, x: &Tensor, axis: isize) -> Result<(usize, usize)> {
    if x.dtype() != DType::F32 {
        return Err(Error::DType { op, arg: "x", expected: DType::F32, got: x.dtype() });
    }
    if x.rank() == 0 {
        return Err(Error::shape(op, &[x.shape()], "needs at least one dimension"));
    }
    let (_, n, inner) = split_at_axis(x.shape(), normalize_axis(op, axis, x.rank(), false)?);
    Ok((n, inner))
}

/// The row or line kernel of one operator.
struct Kernels {
    rows: fn(om_core::compute::Settings, &[f32], &mut [f32], usize),
    lines: fn(om_core::compute::Settings, &[f32], &mut [f32], usize, usize),
}

/// Applies the operator to every line of `x` along `axis`: the row kernel when the lines
/// are rows (`inner == 1`), the line kernel otherwise.
fn apply(op: &'static str, x: &Tensor, axis: isize, k: Kernels) -> Result<Tensor> {
    let (n, inner) = lines_of(op, x, axis)?;
    let settings = Compute::settings();
    x.try_with_f32(|xs| {
        Tensor::build_f32(x.shape(), |out| {
            if n > 0 && inner > 0 {
                if inner == 1 {
                    (k.rows)(settings, xs, out, n);
                } else {
                    (k.lines)(settings, xs, out, n, inner);
                }
            }
            Ok(())
        })
    })?
}

/// For each line along `axis` (`n` elements of stride `inner` from `start`):
/// `f(line, g, y, out)`, where every slice is the whole tensor in row-major order.
fn per_line(g: &Tensor, y: &Tensor, axis: isize, f: impl Fn(Line, &[f32], &[f32], &mut [f32])) -> Result<Tensor> {
    let (outer, n, inner) = split_at_axis(y.shape(), normalize_axis("softmax", axis, y.rank(), false)?);
    g.try_with_f32(|gs| {
        y.try_with_f32(|ys| {
            Tensor::build_f32(y.shape(), |out| {
                for o in 0..outer {
                    for j in 0..inner {
                        f(Line { start: o * n * inner + j, stride: inner, n }, gs, ys, out);
                    }
                }
                Ok(())
            })
        })?
    })?
}

/// `n` elements `start + k·stride` of a row-major tensor.
#[derive(Clone, Copy)]
struct Line {
    start: usize,
    stride: usize,
    n: usize,
}

impl Line {
    fn at(self) -> impl Iterator<Item = usize> {
        (0..self.n).map(move |k| self.start + k * self.stride)
    }
}

fn cases_for(f: fn(&Tensor, isize) -> Result<Tensor>) -> Vec<Case> {
    vec![
        Case::new("rows", vec![Case::input(&[3, 5], -2.0, 2.0, 1)], move |x| f(&x[0], -1)),
        Case::new("batched", vec![Case::input(&[2, 2, 4], -2.0, 2.0, 2)], move |x| f(&x[0], 2)),
        Case::new("first_axis_via_transpose", vec![Case::input(&[4, 3], -2.0, 2.0, 3)], move |x| {
            crate::transpose(&f(&crate::transpose(&x[0], 0, 1)?, -1)?, 0, 1)
        }),
        Case::new("strided", vec![Case::input(&[3, 8], -2.0, 2.0, 4)], move |x| f(&crate::slice(&x[0], 1, 0, 8, 2)?, -1)),
        Case::new("first_axis", vec![Case::input(&[4, 3], -2.0, 2.0, 5)], move |x| f(&x[0], 0)),
        Case::new("middle_axis", vec![Case::input(&[2, 3, 5], -2.0, 2.0, 6)], move |x| f(&x[0], -2)),
        Case::new("middle_axis_transposed", vec![Case::input(&[5, 3, 2], -2.0, 2.0, 7)], move |x| f(&crate::permute(&x[0], [2, 1, 0])?, 1)),
    ]
}

/// `softmax(x)_i = e^(x_i − max) / Σ_j e^(x_j − max)` along `axis` (PyTorch's
/// `torch.softmax(x, dim)`; `-1` is the last axis).
/// Backward: `y·(g − Σ_j g_j y_j)` per line.
///
/// # Examples
///
/// ```
/// use om_ops::{softmax, Tensor};
/// let x = Tensor::from_vec(vec![0.0, 0.0, 1.0, 1.0], &[2, 2])?;
/// assert_eq!(softmax(&x, -1)?.to_vec(), [0.5; 4]);
/// assert_eq!(softmax(&x, 0)?.shape(), [2, 2]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [out], attrs = [axis: isize])]
pub mod softmax {
    use super::*;

    pub fn forward(x: &Tensor, axis: isize) -> Result<Tensor> {
        apply(NAME, x, axis, Kernels { rows: softmax_rows, lines: softmax_lines })
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(per_line(g, r.out(), r.axis, |line, g, y, out| {
            let s = line.at().fold(0.0f64, |acc, i| acc + g[i] as f64 * y[i] as f64) as f32;
            for i in line.at() {
                out[i] = y[i] * (g[i] - s);
            }
        })
        .map_err(|e| e.with_op(NAME))?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        cases_for(super::softmax)
    }
}

/// `log_softmax(x)_i = x_i − max − log Σ_j e^(x_j − max)` along `axis` (PyTorch's
/// `torch.log_softmax(x, dim)`).
/// Backward: `g − e^y·Σ_j g_j` per line.
///
/// # Examples
///
/// ```
/// use om_ops::{log_softmax, Tensor};
/// let x = Tensor::zeros(&[3, 4])?;
/// let y = log_softmax(&x, 1)?;
/// assert!(y.to_vec().iter().all(|v| (v + 4f32.ln()).abs() < 1e-6));
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [out], attrs = [axis: isize])]
pub mod log_softmax {
    use super::*;

    pub fn forward(x: &Tensor, axis: isize) -> Result<Tensor> {
        apply(NAME, x, axis, Kernels { rows: log_softmax_rows, lines: log_softmax_lines })
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let y = r.out();
        let settings = Compute::settings();
        let e = y.try_with_f32(|ys| {
            Tensor::build_f32(y.shape(), |out| {
                lanes::unary(settings, Unary::Exp, Src::Contig(ys), out);
                Ok(())
            })
        })??;
        d.x(per_line(g, &e, r.axis, |line, g, e, out| {
            let s = line.at().fold(0.0f64, |acc, i| acc + g[i] as f64) as f32;
            for i in line.at() {
                out[i] = g[i] - e[i] * s;
            }
        })
        .map_err(|e| e.with_op(NAME))?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        cases_for(super::log_softmax)
    }
}

#[cfg(test)]
mod tests {
    use crate::oracle::{assert_close, both_modes, Oracle};
    use om_core::{Result, Tensor};

    #[test]
    fn softmax_log_softmax_and_cross_entropy_match_pytorch() {
        let o = Oracle::load_file("misc", "tools/oracle_misc.py");
        both_modes(|| {
            let x = o.get("sm_x");
            let y = crate::softmax(&x, -1).unwrap();
            assert_close("sm_y", &y, &o.get("sm_y"));
            o.check_grads("sm", &y, &[("x", &x)]);
            let x = o.get("lsm_x");
            let y = crate::log_softmax(&x, -1).unwrap();
            assert_close("lsm_y", &y, &o.get("lsm_y"));
            o.check_grads("lsm", &y, &[("x", &x)]);
            let (logits, targets) = (o.get("ce_logits"), o.get("ce_targets"));
            for (red, reduction) in [("mean", crate::Reduction::Mean), ("sum", crate::Reduction::Sum)] {
                let options = crate::CrossEntropyOptions { reduction, ..Default::default() };
                let y = crate::cross_entropy(&logits, &targets, None, options).unwrap();
                assert_close(&format!("ce_{red}_y"), &y, &o.get(&format!("ce_{red}_y")));
                o.check_grads(&format!("ce_{red}"), &y, &[("logits", &logits)]);
            }
        });
    }

    #[test]
    fn every_axis_matches_pytorch() {
        let o = Oracle::load_file("misc", "tools/oracle_misc.py");
        both_modes(|| {
            for (name, f) in [("sm", crate::softmax as fn(&Tensor, isize) -> Result<Tensor>), ("lsm", crate::log_softmax)] {
                let x = o.get("smax_x");
                for axis in 0..4isize {
                    let key = format!("{name}_ax{axis}");
                    // The same axis counted from the end gives the same operator.
                    let y = f(&x, axis - 4).unwrap();
                    assert_close(&format!("{key}_y"), &y, &o.get(&format!("{key}_y")));
                    o.check_grads(&key, &y, &[("x", &x)]);
                }
                let x = o.get("smaxw_x");
                let y = f(&x, 1).unwrap();
                assert_close(&format!("{name}_wide_y"), &y, &o.get(&format!("{name}_wide_y")));
                o.check_grads(&format!("{name}_wide"), &y, &[("x", &x)]);
            }
        });
    }

    /// Another axis gives the bits of the last-axis kernel on the transposed copy, on every
    /// kernel path and thread count, in both modes.
    #[test]
    fn other_axes_equal_the_row_kernel_on_every_path() {
        use om_core::compute::{Compute, KernelPath, Mode, Settings};
        let x = Tensor::from_vec((0..30 * 37 * 19).map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 60.0).collect(), &[30, 37, 19]).unwrap();
        for f in [crate::softmax as fn(&Tensor, isize) -> Result<Tensor>, crate::log_softmax] {
            let want = |x: &Tensor| {
                let t = crate::contiguous(&crate::transpose(x, 1, 2).unwrap()).unwrap();
                crate::transpose(&f(&t, -1).unwrap(), 1, 2).unwrap().to_vec()
            };
            for mode in [Mode::Fast, Mode::Exact] {
                let reference = Compute::with(Settings { mode, threads: 1, path: KernelPath::Scalar }, || want(&x));
                for path in KernelPath::supported() {
                    for threads in [1, 2] {
                        let y = Compute::with(Settings { mode, threads, path }, || f(&x, 1).unwrap().to_vec());
                        let same = y.iter().zip(&reference).all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(same, "{path:?} at {threads} threads in {mode} mode differs from the row kernel");
                    }
                }
            }
        }
    }
}
