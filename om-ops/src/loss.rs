//! Class-index losses: `nll_loss` (negative log-likelihood of log-probabilities at `i32`
//! class targets) and `cross_entropy` (`nll_loss` of `log_softmax` over the class axis),
//! with PyTorch's keyword arguments in one [`CrossEntropyOptions`] (reduction, ignored
//! target value, label smoothing) and optional class weights. Inputs are `[N, C]`,
//! `[N, C, d1, …]` (targets `[N, d1, …]`) or unbatched `[C]` (a scalar target). Sums run
//! in f64 in element order (batch, then the trailing positions) and round once.

use crate::Reduction;
use om_core::layout::Dims;
use om_core::{Case, DType, Error, Result, Tensor};
use om_macros::op;

/// PyTorch's keyword arguments of `F.cross_entropy` and `F.nll_loss` (class-index
/// targets), with PyTorch's defaults: `Default` is `reduction = Mean`,
/// `ignore_index = Some(-100)`, `label_smoothing = 0`.
///
/// # Examples
///
/// ```
/// use om_ops::{CrossEntropyOptions, Reduction};
/// // F.cross_entropy(x, t, reduction="sum", label_smoothing=0.1)
/// let o = CrossEntropyOptions { reduction: Reduction::Sum, label_smoothing: 0.1, ..Default::default() };
/// assert_eq!(o.ignore_index, Some(-100));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CrossEntropyOptions {
    /// How the per-element losses are combined. `Mean` divides by the summed weight of the
    /// counted elements (their count without class weights), PyTorch's weighted mean.
    pub reduction: Reduction,
    /// Elements whose target equals this value count nowhere (loss 0, weight 0, gradient
    /// 0); `None` ignores nothing (every target must then be a class).
    pub ignore_index: Option<i64>,
    /// `ε` in `[0, 1]`: the target distribution is `(1 − ε)` on the target class plus
    /// `ε / C` on every class (each weighted by its class weight), as in PyTorch's
    /// `cross_entropy`. `nll_loss` accepts it too, on log-probabilities.
    pub label_smoothing: f32,
}

impl Default for CrossEntropyOptions {
    fn default() -> Self {
        CrossEntropyOptions { reduction: Reduction::Mean, ignore_index: Some(-100), label_smoothing: 0.0 }
    }
}

/// The sizes of a class-index loss: `c` classes, `inner` trailing positions (`logp` is
/// `[N, c, inner…]`, targets `[N, inner…]`).
#[derive(Clone, Copy)]
struct ClassDims {
    c: usize,
    inner: usize,
}

impl ClassDims {
    /// Checks `logp`, `targets`, `weight` and the options and returns the sizes.
    fn check(op: &'static str, logp: &Tensor, targets: &Tensor, weight: Option<&Tensor>, o: &CrossEntropyOptions) -> Result<ClassDims> {
        logp.expect_f32(op, "logp")?;
        if targets.dtype() != DType::I32 {
            return Err(Error::DType { op, arg: "targets", expected: DType::I32, got: targets.dtype() });
        }
        let s = logp.shape();
        // The targets' shape: `logp`'s without the class axis (1, or 0 for `[C]`; none for 0-d).
        let class_axis = if s.len() == 1 { 0 } else { 1 };
        let expected: Option<Dims> =
            (!s.is_empty()).then(|| s.iter().enumerate().filter(|&(i, _)| i != class_axis).map(|(_, &d)| d).collect());
        if expected.as_deref() != Some(targets.shape()) {
            return Err(Error::shape(
                op,
                &[s, targets.shape()],
                "logp must be [N, C, d1, ..] with targets [N, d1, ..], or [C] with a scalar target",
            ));
        }
        let dims = ClassDims::of(s);
        if let Some(w) = weight {
            w.expect_f32(op, "weight")?;
            if w.shape() != [dims.c] {
                return Err(Error::shape(op, &[s, w.shape()], "weight must have one value per class ([C])"));
            }
            if w.needs_grad() {
                return Err(Error::argument(
                    op,
                    "the class weights get no gradient (as in PyTorch); pass a tensor that does not require one",
                ));
            }
        }
        let eps = o.label_smoothing;
        if !(0.0..=1.0).contains(&eps) {
            return Err(Error::argument(op, format!("label_smoothing must be in [0, 1], got {eps}")));
        }
        Ok(dims)
    }

    /// The sizes of a `logp` of `shape` (rank at least 1).
    fn of(shape: &[usize]) -> ClassDims {
        match shape.len() {
            1 => ClassDims { c: shape[0], inner: 1 },
            _ => ClassDims { c: shape[1], inner: shape[2..].iter().product() },
        }
    }

    /// The `logp` index of class `k` at element `e` (`e = row·inner + j`).
    fn at(self, e: usize, k: usize) -> usize {
        (e / self.inner * self.c + k) * self.inner + e % self.inner
    }
}

/// For every element: `None` if its target is ignored, else its class (checked against
/// `c`). Calls `f(element, class)`.
fn for_each_target(op: &'static str, ts: &[i32], c: usize, ignore: Option<i64>, mut f: impl FnMut(usize, Option<usize>)) -> Result<()> {
    for (e, &t) in ts.iter().enumerate() {
        if Some(t as i64) == ignore {
            f(e, None);
            continue;
        }
        if t < 0 || t as usize >= c {
            return Err(Error::argument(op, format!("target {t} of element {e} is out of range for {c} classes (and not ignored)")));
        }
        f(e, Some(t as usize));
    }
    Ok(())
}

/// The summed weight of the counted elements (their count without class weights), in f64
/// in element order: the denominator of the mean.
fn total_weight(op: &'static str, ts: &[i32], c: usize, ignore: Option<i64>, w: Option<&[f32]>) -> Result<f64> {
    let mut total = 0.0f64;
    for_each_target(op, ts, c, ignore, |_, t| {
        if let Some(t) = t {
            total += w.map_or(1.0, |w| w[t] as f64);
        }
    })?;
    Ok(total)
}

/// Runs `f` with the class weights as a slice (`None` without weights).
fn with_weights<R>(weight: Option<&Tensor>, f: impl FnOnce(Option<&[f32]>) -> R) -> Result<R> {
    match weight {
        Some(w) => w.try_with_f32(|w| f(Some(w))),
        None => Ok(f(None)),
    }
}

/// Negative log-likelihood of log-probabilities `logp` (`[N, C]`, `[N, C, d1, …]` or `[C]`)
/// at class targets (`i32`, `[N]`, `[N, d1, …]` or a scalar), PyTorch's `F.nll_loss` with
/// class weights `w` (`[C]`, no gradient; all 1 when `None`) and [`CrossEntropyOptions`]:
/// per element `ℓ = −(1 − ε)·w[t]·logp[t] − (ε/C)·Σ_k w[k]·logp[k]` (0 where the target is
/// `ignore_index`), then `None` (the shape of the targets), `Sum`, or `Mean` = `Σ ℓ / Σ w[t]`
/// over the counted elements. As in PyTorch, the mean over zero counted weight is NaN
/// (0/0) and the sum 0. Targets must be in `0..C` unless ignored.
/// Backward: `∂ℓ/∂logp[k] = −(1 − ε)·w[t]·[k = t] − (ε/C)·w[k]`, times `g` (per element for
/// `None`, `g / Σ w[t]` for `Mean`).
///
/// # Examples
///
/// ```
/// use om_core::Tensor;
/// use om_ops::{nll_loss, CrossEntropyOptions, Reduction};
/// let logp = Tensor::from_vec(vec![-0.5, -1.0, -2.5, -3.0, -0.25, -1.5], &[2, 3])?;
/// let targets = Tensor::from_vec_i32(vec![0, 2], &[2])?;
/// // PyTorch's defaults: the mean of −logp[row, target] over the rows.
/// assert_eq!(nll_loss(&logp, &targets, None, Default::default())?.item()?, 1.0);
/// // Class weights: the weighted mean Σ w[t]·ℓ / Σ w[t] = (1·0.5 + 3·1.5) / 4.
/// let w = Tensor::from_vec(vec![1.0, 1.0, 3.0], &[3])?;
/// assert_eq!(nll_loss(&logp, &targets, Some(&w), Default::default())?.item()?, 1.25);
/// let sum = CrossEntropyOptions { reduction: Reduction::Sum, ..Default::default() };
/// assert_eq!(nll_loss(&logp, &targets, None, sum)?.item()?, 2.0);
/// # Ok::<(), om_core::Error>(())
/// ```
#[op(saved = [targets, weight], attrs = [options: CrossEntropyOptions])]
pub mod nll_loss {
    use super::*;

    pub fn forward(logp: &Tensor, targets: &Tensor, weight: Option<&Tensor>, options: CrossEntropyOptions) -> Result<Tensor> {
        let dims = ClassDims::check(NAME, logp, targets, weight, &options)?;
        let (c, eps) = (dims.c, options.label_smoothing as f64);
        let ignore = options.ignore_index;
        targets.try_with_i32(|ts| {
            with_weights(weight, |w| {
                logp.try_with_f32(|lp| {
                    let total = total_weight(NAME, ts, c, ignore, w)?;
                    let loss = |e: usize, t: Option<usize>| -> f64 {
                        let Some(t) = t else { return 0.0 };
                        let wt = w.map_or(1.0, |w| w[t] as f64);
                        if eps == 0.0 {
                            return -(wt * lp[dims.at(e, t)] as f64);
                        }
                        let smooth = (0..c).fold(0.0f64, |s, k| s + w.map_or(1.0, |w| w[k] as f64) * lp[dims.at(e, k)] as f64);
                        -((1.0 - eps) * wt * lp[dims.at(e, t)] as f64) - eps / c as f64 * smooth
                    };
                    if options.reduction == Reduction::None {
                        return Tensor::build_f32(targets.shape(), |out| {
                            for_each_target(NAME, ts, c, ignore, |e, t| out[e] = loss(e, t) as f32)
                        });
                    }
                    let mut sum = 0.0f64;
                    for_each_target(NAME, ts, c, ignore, |e, t| sum += loss(e, t))?;
                    let v = if options.reduction == Reduction::Mean { sum / total } else { sum };
                    Ok(Tensor::scalar(v as f32))
                })?
            })?
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
        let o = r.options;
        let dims = ClassDims::of(shape);
        let (c, eps) = (dims.c, o.label_smoothing);
        let dlogp = r.targets().try_with_i32(|ts| {
            with_weights(r.weight().ok(), |w| {
                g.try_with_f32(|gs| {
                    let total = total_weight(NAME, ts, c, o.ignore_index, w)?;
                    // The output gradient of element `e`, with the mean's `1/Σw` taken in f32.
                    let ge = |e: usize| match o.reduction {
                        Reduction::None => gs[e],
                        Reduction::Sum => gs[0],
                        Reduction::Mean => gs[0] / total as f32,
                    };
                    Tensor::build_f32(shape, |out| {
                        out.fill(0.0);
                        for_each_target(NAME, ts, c, o.ignore_index, |e, t| {
                            let Some(t) = t else { return };
                            let (gv, wt) = (ge(e), w.map_or(1.0, |w| w[t]));
                            if eps == 0.0 {
                                out[dims.at(e, t)] = -(gv * wt);
                                return;
                            }
                            let share = eps as f64 / c as f64;
                            for k in 0..c {
                                let wk = w.map_or(1.0, |w| w[k]) as f64;
                                let hit = if k == t { (1.0 - eps as f64) * wt as f64 } else { 0.0 };
                                out[dims.at(e, k)] = -(gv as f64 * (hit + share * wk)) as f32;
                            }
                        })
                    })
                })?
            })?
        })??;
        d.logp(dlogp);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let t = |v: Vec<i32>, s: &[usize]| Tensor::from_vec_i32(v, s).unwrap();
        let lp = |shape: &[usize], seed| Case::input(shape, -3.0, -0.1, seed);
        let opts = |reduction, ignore_index, label_smoothing| CrossEntropyOptions { reduction, ignore_index, label_smoothing };
        let w = || Tensor::from_vec(vec![0.5, 2.0, 1.0, 1.5], &[4]).unwrap();
        let (mean, sum, none) = (Reduction::Mean, Reduction::Sum, Reduction::None);
        vec![
            Case::new("mean_ignored_rows", vec![lp(&[5, 4], 1), t(vec![2, -100, 0, 3, -100], &[5])], |x| {
                super::nll_loss(&x[0], &x[1], None, CrossEntropyOptions::default())
            }),
            Case::new("sum_ignored_rows", vec![lp(&[5, 4], 2), t(vec![2, -100, 0, 3, -100], &[5])], move |x| {
                super::nll_loss(&x[0], &x[1], None, opts(sum, Some(-100), 0.0))
            }),
            Case::new("mean_ignore_valid_class", vec![lp(&[5, 4], 3), t(vec![1, 1, 0, 3, 2], &[5])], move |x| {
                super::nll_loss(&x[0], &x[1], None, opts(mean, Some(1), 0.0))
            }),
            Case::new("sum_no_ignore_transposed", vec![Case::input(&[4, 5], -3.0, -0.1, 4), t(vec![0, 3, 3, 1, 2], &[5])], move |x| {
                super::nll_loss(&crate::transpose(&x[0], 0, 1)?, &x[1], None, opts(sum, None, 0.0))
            }),
            Case::new("mean_strided", vec![Case::input(&[5, 8], -3.0, -0.1, 5), t(vec![3, 0, 2, 2, 1], &[5])], move |x| {
                super::nll_loss(&crate::slice(&x[0], 1, 0, 8, 2)?, &x[1], None, opts(mean, None, 0.0))
            }),
            Case::new("sum_all_ignored", vec![lp(&[5, 4], 6), t(vec![-1; 5], &[5])], move |x| {
                super::nll_loss(&x[0], &x[1], None, opts(sum, Some(-1), 0.0))
            }),
            Case::new("weighted_mean_spatial", vec![lp(&[2, 4, 3], 7), t(vec![1, -100, 3, 0, 2, 1], &[2, 3])], move |x| {
                super::nll_loss(&x[0], &x[1], Some(&w()), opts(mean, Some(-100), 0.0))
            }),
            Case::new("none_spatial_smoothed", vec![lp(&[2, 4, 3], 8), t(vec![1, -100, 3, 0, 2, 1], &[2, 3])], move |x| {
                super::nll_loss(&x[0], &x[1], None, opts(none, Some(-100), 0.2))
            }),
            Case::new("weighted_smoothed_mean", vec![lp(&[3, 4], 9), t(vec![3, 0, -100], &[3])], move |x| {
                super::nll_loss(&x[0], &x[1], Some(&w()), opts(mean, Some(-100), 0.3))
            }),
            Case::new("unbatched", vec![lp(&[4], 10), t(vec![2], &[])], move |x| {
                super::nll_loss(&x[0], &x[1], Some(&w()), opts(sum, None, 0.1))
            }),
        ]
    }
}

/// Cross-entropy of logits at class targets: `nll_loss(log_softmax(logits, 1))` (the
/// class axis; axis 0 for unbatched `[C]` logits) with the same class weights and
/// [`CrossEntropyOptions`] (PyTorch's `F.cross_entropy` with class-index targets).
/// Backward: through `log_softmax` and `nll_loss`.
///
/// # Examples
///
/// ```
/// use om_core::Tensor;
/// let logits = Tensor::from_vec(vec![2.0, 0.5, -1.0, 0.0, 1.0, 3.0], &[2, 3])?;
/// let targets = Tensor::from_vec_i32(vec![0, 2], &[2])?;
/// let loss = om_ops::cross_entropy(&logits, &targets, None, Default::default())?;
/// assert!((loss.item()? - 0.205_579).abs() < 1e-5);
/// # Ok::<(), om_core::Error>(())
/// ```
#[op(composition)]
pub mod cross_entropy {
    use super::*;

    pub fn forward(logits: &Tensor, targets: &Tensor, weight: Option<&Tensor>, options: CrossEntropyOptions) -> Result<Tensor> {
        logits.expect_f32(NAME, "logits")?;
        if logits.rank() == 0 {
            return Err(Error::shape(NAME, &[logits.shape()], "logits must be [N, C, d1, ..] or [C]"));
        }
        let class_axis = if logits.rank() == 1 { 0 } else { 1 };
        crate::nll_loss(&crate::log_softmax(logits, class_axis)?, targets, weight, options)
    }

    fn cases() -> Vec<Case> {
        let targets = || Tensor::from_vec_i32(vec![2, 0, -100, 1], &[4]).unwrap();
        let w = || Tensor::from_vec(vec![0.5, 2.0, 1.5], &[3]).unwrap();
        vec![
            Case::new("mean_ignore", vec![Case::input(&[4, 3], -2.0, 2.0, 1)], move |x| {
                super::cross_entropy(&x[0], &targets(), None, CrossEntropyOptions::default())
            }),
            Case::new("sum_transposed", vec![Case::input(&[3, 4], -2.0, 2.0, 2)], |x| {
                let t = Tensor::from_vec_i32(vec![1, 2, 0, 2], &[4]).unwrap();
                let o = CrossEntropyOptions { reduction: Reduction::Sum, ignore_index: None, ..Default::default() };
                super::cross_entropy(&crate::transpose(&x[0], 0, 1)?, &t, None, o)
            }),
            Case::new("spatial_weighted_smoothed", vec![Case::input(&[2, 3, 2, 2], -2.0, 2.0, 3)], move |x| {
                let t = Tensor::from_vec_i32(vec![0, 2, -100, 1, 1, 1, 2, 0], &[2, 2, 2]).unwrap();
                let o = CrossEntropyOptions { label_smoothing: 0.1, ..Default::default() };
                super::cross_entropy(&x[0], &t, Some(&w()), o)
            }),
        ]
    }
}

#[cfg(test)]
mod tests {
    use crate::oracle::{assert_close, both_modes, Oracle};
    use crate::{CrossEntropyOptions, Reduction};

    fn opts(reduction: Reduction, ignore_index: Option<i64>) -> CrossEntropyOptions {
        CrossEntropyOptions { reduction, ignore_index, ..Default::default() }
    }

    #[test]
    fn nll_loss_matches_pytorch() {
        let o = Oracle::load();
        both_modes(|| {
            let (lp, t) = (o.get("nll_logp"), o.get("nll_t"));
            for (red, reduction) in [("mean", Reduction::Mean), ("sum", Reduction::Sum)] {
                let y = crate::nll_loss(&lp, &t, None, opts(reduction, Some(-100))).unwrap();
                assert_close(&format!("nll_{red}_y"), &y, &o.get(&format!("nll_{red}_y")));
                lp.clear_grad();
                y.backward().unwrap();
                assert_close(&format!("nll_{red}_glogp"), &lp.grad().unwrap(), &o.get(&format!("nll_{red}_glogp")));
            }
            let y = crate::nll_loss(&lp, &o.get("nll_ign1_t"), None, opts(Reduction::Mean, Some(1))).unwrap();
            assert_close("nll_ign1_y", &y, &o.get("nll_ign1_y"));
            // Every row ignored: PyTorch gives NaN for the mean and 0 for the sum.
            let all = o.get("nll_all_t");
            assert!(o.get("nll_all_mean_y").item().unwrap().is_nan());
            assert!(crate::nll_loss(&lp, &all, None, Default::default()).unwrap().item().unwrap().is_nan());
            let y = crate::nll_loss(&lp, &all, None, opts(Reduction::Sum, Some(-100))).unwrap();
            assert_close("nll_all_sum_y", &y, &o.get("nll_all_sum_y"));
            // ... and the gradient of the NaN mean is zero (no counted row), as in PyTorch.
            lp.clear_grad();
            crate::nll_loss(&lp, &all, None, Default::default()).unwrap().backward().unwrap();
            assert!(lp.grad().unwrap().to_vec().iter().all(|&v| v == 0.0));
        });
    }

    #[test]
    fn weights_smoothing_and_spatial_targets_match_pytorch() {
        let o = Oracle::load_file("misc", "tools/oracle_misc.py");
        let reductions = [("none", Reduction::None), ("mean", Reduction::Mean), ("sum", Reduction::Sum)];
        both_modes(|| {
            let (logits, t, w) = (o.get("ceo_logits"), o.get("ceo_t"), o.get("ceo_w").detach());
            for (red, reduction) in reductions {
                for eps in [0, 2] {
                    for (wname, weight) in [("", None), ("w", Some(&w))] {
                        let key = format!("ceo_{red}_{eps}{wname}");
                        let options = CrossEntropyOptions { reduction, label_smoothing: eps as f32 / 10.0, ..Default::default() };
                        let y = crate::cross_entropy(&logits, &t, weight, options).unwrap();
                        assert_close(&format!("{key}_y"), &y, &o.get(&format!("{key}_y")));
                        o.check_grads(&key, &y, &[("logits", &logits)]);
                    }
                }
            }
            let (lp, t, w) = (o.get("nllw_lp"), o.get("nllw_t"), o.get("nllw_w").detach());
            for (red, reduction) in reductions {
                let y = crate::nll_loss(&lp, &t, Some(&w), opts(reduction, Some(2))).unwrap();
                assert_close(&format!("nllw_{red}_y"), &y, &o.get(&format!("nllw_{red}_y")));
                o.check_grads(&format!("nllw_{red}"), &y, &[("lp", &lp)]);
            }
            let logits = o.get("ce1_logits");
            let options = CrossEntropyOptions { label_smoothing: 0.1, ..Default::default() };
            let y = crate::cross_entropy(&logits, &o.get("ce1_t"), None, options).unwrap();
            assert_close("ce1_y", &y, &o.get("ce1_y"));
            o.check_grads("ce1", &y, &[("logits", &logits)]);
        });
    }
}
