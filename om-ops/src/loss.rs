//! Losses: `nll_loss` (negative log-likelihood of `[N, C]` log-probabilities at `i32`
//! targets, mean or sum, with an optional ignored target value). The sum runs in f64 in
//! row order and rounds once.

use om_core::{Case, DType, Error, Result, Tensor};
use om_macros::op;

/// Checks the targets against `classes` and returns how many rows are not ignored.
fn count_rows(op: &'static str, targets: &[i32], classes: usize, ignore_index: Option<i64>) -> Result<usize> {
    let mut count = 0;
    for (n, &t) in targets.iter().enumerate() {
        if Some(t as i64) == ignore_index {
            continue;
        }
        if t < 0 || t as usize >= classes {
            return Err(Error::argument(op, format!("target {t} of row {n} is out of range for {classes} classes (and not ignored)")));
        }
        count += 1;
    }
    Ok(count)
}

/// Negative log-likelihood `−Σ logp[n, target_n]` over the rows whose target is not
/// `ignore_index`, divided by their count when `mean` (a scalar). As in PyTorch, the mean
/// over zero counted rows is NaN (0/0) and the sum is 0. Targets are `i32` in `0..C`
/// unless ignored. Backward: `−g/count` (mean) or `−g` (sum) at `[n, target_n]` of the
/// counted rows, zero elsewhere.
#[op(saved = [targets], attrs = [mean: bool, ignore_index: Option<i64>])]
pub mod nll_loss {
    use super::*;

    pub fn forward(logp: &Tensor, targets: &Tensor, mean: bool, ignore_index: Option<i64>) -> Result<Tensor> {
        logp.expect_f32(NAME, "logp")?;
        if targets.dtype() != DType::I32 {
            return Err(Error::DType { op: NAME, arg: "targets", expected: DType::I32, got: targets.dtype() });
        }
        if logp.rank() != 2 || targets.shape() != [logp.shape()[0]] {
            return Err(Error::shape(NAME, &[logp.shape(), targets.shape()], "logp must be [N, C] and targets [N]"));
        }
        let c = logp.shape()[1];
        targets.try_with_i32(|ts| {
            let count = count_rows(NAME, ts, c, ignore_index)?;
            let sum = logp.try_with_f32(|lp| {
                ts.iter()
                    .enumerate()
                    .filter(|&(_, &t)| Some(t as i64) != ignore_index)
                    .fold(0.0f64, |s, (n, &t)| s - lp[n * c + t as usize] as f64)
            })?;
            let v = if mean { sum / count as f64 } else { sum };
            Ok(Tensor::scalar(v as f32))
        })?
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        if !d.needs_logp() {
            return Ok(());
        }
        let shape = &r.input_shapes[0];
        let c = shape[1];
        let gv = g.item()?;
        let dlogp = r.targets().try_with_i32(|ts| {
            let count = count_rows(NAME, ts, c, r.ignore_index)?;
            let v = if r.mean { -(gv / count as f32) } else { -gv };
            Tensor::build_f32(shape, |out| {
                out.fill(0.0);
                for (n, &t) in ts.iter().enumerate() {
                    if Some(t as i64) != r.ignore_index {
                        out[n * c + t as usize] = v;
                    }
                }
                Ok(())
            })
        })??;
        d.logp(dlogp);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let t = |v: Vec<i32>| Tensor::from_vec_i32(v, &[5]).unwrap();
        let lp = |seed| Case::input(&[5, 4], -3.0, -0.1, seed);
        vec![
            Case::new("mean_ignored_rows", vec![lp(1), t(vec![2, -100, 0, 3, -100])], |x| super::nll_loss(&x[0], &x[1], true, Some(-100))),
            Case::new("sum_ignored_rows", vec![lp(2), t(vec![2, -100, 0, 3, -100])], |x| super::nll_loss(&x[0], &x[1], false, Some(-100))),
            Case::new("mean_ignore_valid_class", vec![lp(3), t(vec![1, 1, 0, 3, 2])], |x| super::nll_loss(&x[0], &x[1], true, Some(1))),
            Case::new("sum_no_ignore_transposed", vec![Case::input(&[4, 5], -3.0, -0.1, 4), t(vec![0, 3, 3, 1, 2])], |x| {
                super::nll_loss(&crate::transpose(&x[0], 0, 1)?, &x[1], false, None)
            }),
            Case::new("mean_strided", vec![Case::input(&[5, 8], -3.0, -0.1, 5), t(vec![3, 0, 2, 2, 1])], |x| {
                super::nll_loss(&crate::slice(&x[0], 1, 0, 8, 2)?, &x[1], true, None)
            }),
            Case::new("sum_all_ignored", vec![lp(6), t(vec![-1; 5])], |x| super::nll_loss(&x[0], &x[1], false, Some(-1))),
        ]
    }
}

#[cfg(test)]
mod tests {
    use crate::oracle::{assert_close, both_modes, Oracle};

    #[test]
    fn nll_loss_matches_pytorch() {
        let o = Oracle::load();
        both_modes(|| {
            let (lp, t) = (o.get("nll_logp"), o.get("nll_t"));
            for (red, mean) in [("mean", true), ("sum", false)] {
                let y = crate::nll_loss(&lp, &t, mean, Some(-100)).unwrap();
                assert_close(&format!("nll_{red}_y"), &y, &o.get(&format!("nll_{red}_y")));
                lp.clear_grad();
                y.backward().unwrap();
                assert_close(&format!("nll_{red}_glogp"), &lp.grad().unwrap(), &o.get(&format!("nll_{red}_glogp")));
            }
            let y = crate::nll_loss(&lp, &o.get("nll_ign1_t"), true, Some(1)).unwrap();
            assert_close("nll_ign1_y", &y, &o.get("nll_ign1_y"));
            // Every row ignored: PyTorch gives NaN for the mean and 0 for the sum.
            let all = o.get("nll_all_t");
            assert!(o.get("nll_all_mean_y").item().unwrap().is_nan());
            assert!(crate::nll_loss(&lp, &all, true, Some(-100)).unwrap().item().unwrap().is_nan());
            let y = crate::nll_loss(&lp, &all, false, Some(-100)).unwrap();
            assert_close("nll_all_sum_y", &y, &o.get("nll_all_sum_y"));
            // ... and the gradient of the NaN mean is zero (no counted row), as in PyTorch.
            lp.clear_grad();
            crate::nll_loss(&lp, &all, true, Some(-100)).unwrap().backward().unwrap();
            assert!(lp.grad().unwrap().to_vec().iter().all(|&v| v == 0.0));
        });
    }
}

/// Cross-entropy of `[N, C]` logits at `i32` targets: `nll_loss(log_softmax(logits))`,
/// mean or sum, with an optional ignored target value (PyTorch's `F.cross_entropy` with
/// class-index targets).
/// Backward: through `log_softmax` and `nll_loss`.
#[op(composition)]
pub mod cross_entropy {
    use super::*;

    pub fn forward(logits: &Tensor, targets: &Tensor, mean: bool, ignore_index: Option<i64>) -> Result<Tensor> {
        logits.expect_f32(NAME, "logits")?;
        if logits.rank() != 2 {
            return Err(Error::shape(NAME, &[logits.shape()], "logits must be [N, C]"));
        }
        crate::nll_loss(&crate::log_softmax(logits)?, targets, mean, ignore_index)
    }

    fn cases() -> Vec<Case> {
        let targets = || Tensor::from_vec_i32(vec![2, 0, -100, 1], &[4]).unwrap();
        vec![
            Case::new("mean_ignore", vec![Case::input(&[4, 3], -2.0, 2.0, 1)], move |x| {
                super::cross_entropy(&x[0], &targets(), true, Some(-100))
            }),
            Case::new("sum_transposed", vec![Case::input(&[3, 4], -2.0, 2.0, 2)], |x| {
                let t = Tensor::from_vec_i32(vec![1, 2, 0, 2], &[4]).unwrap();
                super::cross_entropy(&crate::transpose(&x[0], 0, 1)?, &t, false, None)
            }),
        ]
    }
}
