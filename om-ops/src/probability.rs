//! Probability normalisers (the module is not named `softmax` so that the operator can be):
//! softmax-type operators on the last axis (other axes through transposed views):
//! `softmax` and `log_softmax`, on the softmax row kernel of the current mode.
//! Row sums of the backward rules accumulate in f64 in increasing element order.

use om_core::compute::Compute;
use om_core::kernels::lanes::{self, Src, Unary};
use om_core::kernels::softmax::{log_softmax_rows, softmax_rows};
use om_core::{Case, DType, Error, Result, Tensor};
use om_macros::op;

/// Checks the input and returns the row length (the last dimension).
fn row_len(op: &'static str, x: &Tensor) -> Result<usize> {
    if x.dtype() != DType::F32 {
        return Err(Error::DType { op, arg: "x", expected: DType::F32, got: x.dtype() });
    }
    if x.rank() == 0 {
        return Err(Error::shape(op, &[x.shape()], "needs at least one dimension (rows are the last axis)"));
    }
    Ok(x.shape()[x.rank() - 1])
}

/// Applies a row kernel to every last-axis row of `x`.
fn rows(op: &'static str, x: &Tensor, kernel: fn(om_core::compute::Settings, &[f32], &mut [f32], usize)) -> Result<Tensor> {
    let n = row_len(op, x)?;
    let settings = Compute::settings();
    x.try_with_f32(|xs| {
        Tensor::build_f32(x.shape(), |out| {
            if n > 0 {
                kernel(settings, xs, out, n);
            }
            Ok(())
        })
    })?
}

/// For each row: `f(g_row, y_row, out_row)`.
fn per_row(g: &Tensor, y: &Tensor, f: impl Fn(&[f32], &[f32], &mut [f32])) -> Result<Tensor> {
    let n = y.shape()[y.rank() - 1].max(1);
    g.try_with_f32(|gs| {
        y.try_with_f32(|ys| {
            Tensor::build_f32(y.shape(), |out| {
                for ((gr, yr), or) in gs.chunks(n).zip(ys.chunks(n)).zip(out.chunks_mut(n)) {
                    f(gr, yr, or);
                }
                Ok(())
            })
        })?
    })?
}

fn cases_for(f: fn(&Tensor) -> Result<Tensor>) -> Vec<Case> {
    vec![
        Case::new("rows", vec![Case::input(&[3, 5], -2.0, 2.0, 1)], move |x| f(&x[0])),
        Case::new("batched", vec![Case::input(&[2, 2, 4], -2.0, 2.0, 2)], move |x| f(&x[0])),
        Case::new("first_axis_via_transpose", vec![Case::input(&[4, 3], -2.0, 2.0, 3)], move |x| {
            crate::transpose(&f(&crate::transpose(&x[0], 0, 1)?)?, 0, 1)
        }),
        Case::new("strided", vec![Case::input(&[3, 8], -2.0, 2.0, 4)], move |x| f(&crate::slice(&x[0], 1, 0, 8, 2)?)),
    ]
}

/// `softmax(x)_i = e^(x_i − max) / Σ_j e^(x_j − max)` over the last axis.
/// Backward: `y·(g − Σ_j g_j y_j)` per row.
#[op(saved = [out])]
pub mod softmax {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        rows(NAME, x, softmax_rows)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(per_row(g, r.out(), |g, y, out| {
            let s = g.iter().zip(y).fold(0.0f64, |acc, (&g, &y)| acc + g as f64 * y as f64) as f32;
            for ((o, &g), &y) in out.iter_mut().zip(g).zip(y) {
                *o = y * (g - s);
            }
        })?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        cases_for(super::softmax)
    }
}

/// `log_softmax(x)_i = x_i − max − log Σ_j e^(x_j − max)` over the last axis.
/// Backward: `g − e^y·Σ_j g_j` per row.
#[op(saved = [out])]
pub mod log_softmax {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        rows(NAME, x, log_softmax_rows)
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
        d.x(per_row(g, &e, |g, e, out| {
            let s = g.iter().fold(0.0f64, |acc, &g| acc + g as f64) as f32;
            for ((o, &g), &e) in out.iter_mut().zip(g).zip(e) {
                *o = g - e * s;
            }
        })?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        cases_for(super::log_softmax)
    }
}

#[cfg(test)]
mod tests {
    use crate::oracle::{assert_close, both_modes, Oracle};

    #[test]
    fn softmax_log_softmax_and_cross_entropy_match_pytorch() {
        let o = Oracle::load_file("misc", "tools/oracle_misc.py");
        both_modes(|| {
            let x = o.get("sm_x");
            let y = crate::softmax(&x).unwrap();
            assert_close("sm_y", &y, &o.get("sm_y"));
            o.check_grads("sm", &y, &[("x", &x)]);
            let x = o.get("lsm_x");
            let y = crate::log_softmax(&x).unwrap();
            assert_close("lsm_y", &y, &o.get("lsm_y"));
            o.check_grads("lsm", &y, &[("x", &x)]);
            let (logits, targets) = (o.get("ce_logits"), o.get("ce_targets"));
            for (red, mean) in [("mean", true), ("sum", false)] {
                let y = crate::cross_entropy(&logits, &targets, mean, Some(-100)).unwrap();
                assert_close(&format!("ce_{red}_y"), &y, &o.get(&format!("ce_{red}_y")));
                o.check_grads(&format!("ce_{red}"), &y, &[("logits", &logits)]);
            }
        });
    }
}
