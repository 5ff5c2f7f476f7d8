//! Classification losses. Class-index losses: `nll_loss` (negative log-likelihood of
//! log-probabilities at `i32` class targets) and `cross_entropy` (`nll_loss` of
//! `log_softmax` over the class axis), with PyTorch's keyword arguments in one
//! [`CrossEntropyOptions`] (reduction, ignored target value, label smoothing) and optional
//! class weights. Inputs are `[N, C]`, `[N, C, d1, …]` (targets `[N, d1, …]`) or unbatched
//! `[C]` (a scalar target). Sums run in f64 in element order (batch, then the trailing
//! positions) and round once.
//!
//! Probability losses over element pairs of the same shape (see the `losses` module doc):
//! `binary_cross_entropy` and `binary_cross_entropy_with_logits` (each with PyTorch's
//! optional rescaling `weight`), and `kl_div` (with PyTorch's `'batchmean'` through
//! [`KlDivReduction`]).

use super::{chain, check_pair, pair_cases, reduce};
use crate::{KlDivReduction, Reduction};
use om_core::kernels::math;
use om_core::layout::Dims;
use om_core::maps::{binary, unary};
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

/// Whether a tensor of shape `from` broadcasts to `to` without enlarging it (every
/// trailing dimension equal or 1, no more axes than `to`).
fn broadcasts_to(from: &[usize], to: &[usize]) -> bool {
    from.len() <= to.len() && from.iter().rev().zip(to.iter().rev()).all(|(&f, &t)| f == t || f == 1)
}

/// Checks an optional per-element tensor `name` of a binary loss (`weight`, `pos_weight`):
/// `f32` and broadcastable to the input's shape.
fn check_broadcast_arg(op: &'static str, name: &'static str, input: &Tensor, w: Option<&Tensor>) -> Result<()> {
    let Some(w) = w else { return Ok(()) };
    w.expect_f32(op, name)?;
    if !broadcasts_to(w.shape(), input.shape()) {
        return Err(Error::shape(op, &[input.shape(), w.shape()], format!("{name} must broadcast to the input's shape")));
    }
    Ok(())
}

/// Checks the optional rescaling `weight` of a binary loss: as [`check_broadcast_arg`], and
/// not requiring a gradient (PyTorch has no derivative for it; refused here rather than
/// silently left without one, as `nll_loss`'s class weights).
fn check_weight(op: &'static str, input: &Tensor, weight: Option<&Tensor>) -> Result<()> {
    check_broadcast_arg(op, "weight", input, weight)?;
    if weight.is_some_and(Tensor::needs_grad) {
        return Err(Error::argument(
            op,
            "the rescaling weight gets no gradient (PyTorch has no derivative for it); pass a tensor that does not require one, e.g. `weight.detach()`",
        ));
    }
    Ok(())
}

/// `v · w` per element (the weight broadcast to `v`'s shape), or `v` itself without a
/// weight.
fn weighted(op: &'static str, v: Tensor, weight: Option<&Tensor>) -> Result<Tensor> {
    match weight {
        Some(w) => binary(op, &v, w, |v, w| v * w),
        None => Ok(v),
    }
}

// ===== binary classification =====

/// `max(log v, −100)`, PyTorch's clamped logarithm of `binary_cross_entropy` (`v = 0`
/// gives −100).
fn clamped_log(v: f32) -> f32 {
    if v > 0.0 {
        math::log(v).max(-100.0)
    } else {
        -100.0
    }
}

/// Binary cross-entropy of probabilities `x ∈ [0, 1]` (an error otherwise, as in PyTorch)
/// against targets `t` of the same shape (an [`Error::Shape`] otherwise), PyTorch's
/// `F.binary_cross_entropy(input, target, weight, reduction)`: per element
/// `ℓ = −w·(t·max(log x, −100) + (1 − t)·max(log(1 − x), −100))`, then the [`Reduction`].
/// The optional rescaling `weight` `w` broadcasts to the input's shape (e.g. one value per
/// column); it gets no gradient (PyTorch has no derivative for it), so a `weight` that
/// requires one is refused. Without it `w = 1`.
///
/// Backward (PyTorch's forms): `∂/∂x = w·(x − t) / max(x(1 − x),
/// 1e−12)·g` (finite at `x = 0` and `1`), `∂/∂t = w·(log(1 − x) − log x)·g` (unclamped:
/// `±inf` at `x = 0`, `1`).
///
/// # Examples
///
/// ```
/// use om_core::Tensor;
/// use om_ops::{binary_cross_entropy, Reduction};
/// let p = Tensor::from_vec(vec![0.9, 0.2, 0.6, 0.5], &[2, 2])?;
/// let t = Tensor::from_vec(vec![1.0, 0.0, 1.0, 0.0], &[2, 2])?;
/// let loss = binary_cross_entropy(&p, &t, None, Default::default())?;
/// let expected = -(0.9f32.ln() + 0.8f32.ln() + 0.6f32.ln() + 0.5f32.ln()) / 4.0;
/// assert!((loss.item()? - expected).abs() < 1e-6);
/// // One weight per column, broadcast over the rows.
/// let w = Tensor::from_vec(vec![2.0, 0.0], &[2])?;
/// let weighted = binary_cross_entropy(&p, &t, Some(&w), Reduction::Sum)?;
/// assert!((weighted.item()? + 2.0 * (0.9f32.ln() + 0.6f32.ln())).abs() < 1e-6);
/// # Ok::<(), om_core::Error>(())
/// ```
#[op(saved = [input, target, weight], attrs = [reduction: Reduction])]
pub mod binary_cross_entropy {
    use super::*;

    pub fn forward(input: &Tensor, target: &Tensor, weight: Option<&Tensor>, reduction: Reduction) -> Result<Tensor> {
        check_pair(NAME, input, target)?;
        check_weight(NAME, input, weight)?;
        let bad = input.try_with_f32(|xs| xs.iter().copied().find(|v| !(0.0..=1.0).contains(v)))?;
        if let Some(v) = bad {
            return Err(Error::argument(NAME, format!("every input must be a probability in [0, 1], found {v}")));
        }
        let loss = binary(NAME, input, target, |x, t| -(t * clamped_log(x) + (1.0 - t) * clamped_log(1.0 - x)))?;
        reduce(weighted(NAME, loss, weight)?, reduction)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let w = r.weight().ok();
        if d.needs_input() {
            let deriv = binary(NAME, r.input(), r.target(), |x, t| (x - t) / ((1.0 - x) * x).max(1e-12))?;
            d.input(chain(NAME, &weighted(NAME, deriv, w)?, g, r.reduction)?);
        }
        if d.needs_target() {
            let deriv = unary(NAME, r.input(), |x| math::log(1.0 - x) - math::log(x))?;
            d.target(chain(NAME, &weighted(NAME, deriv, w)?, g, r.reduction)?);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let p = |shape: &[usize], seed| Case::input(shape, 0.1, 0.9, seed);
        let t = |shape: &[usize], seed| Case::input(shape, 0.0, 1.0, seed);
        // Weights are constants (no gradient): positive and negative, broadcast or not; at
        // most 1 in magnitude, since near x = 0.1 the curvature of log x already uses most of
        // the finite-difference tolerance.
        let w = |shape: &[usize], seed| Case::input(shape, -1.0, 1.0, seed).detach();
        let f = super::binary_cross_entropy;
        vec![
            Case::new("mean", vec![p(&[3, 4], 1), t(&[3, 4], 2)], move |x| f(&x[0], &x[1], None, Reduction::Mean)),
            Case::new("sum", vec![p(&[2, 3, 2], 3), t(&[2, 3, 2], 4)], move |x| f(&x[0], &x[1], None, Reduction::Sum)),
            Case::new("none_transposed", vec![p(&[4, 3], 5), t(&[3, 4], 6)], move |x| {
                f(&crate::transpose(&x[0], 0, 1)?, &x[1], None, Reduction::None)
            }),
            Case::new("mean_strided", vec![p(&[3, 8], 7), t(&[3, 4], 8)], move |x| {
                f(&crate::slice(&x[0], 1, 0, 8, 2)?, &x[1], None, Reduction::Mean)
            }),
            Case::new("weight_per_column_sum", vec![p(&[3, 4], 9), t(&[3, 4], 10), w(&[4], 11)], move |x| {
                f(&x[0], &x[1], Some(&x[2]), Reduction::Sum)
            }),
            Case::new("weight_full_none", vec![p(&[2, 3], 12), t(&[2, 3], 13), w(&[2, 3], 14)], move |x| {
                f(&x[0], &x[1], Some(&x[2]), Reduction::None)
            }),
            Case::new("weight_per_row_mean_transposed", vec![p(&[4, 3], 15), t(&[3, 4], 16), w(&[3, 1], 17)], move |x| {
                f(&crate::transpose(&x[0], 0, 1)?, &x[1], Some(&x[2]), Reduction::Mean)
            }),
        ]
    }
}

/// `log σ(x) = min(x, 0) − log(1 + e^(−|x|))`, stable for every `x`.
fn log_sigmoid(x: f32) -> f32 {
    x.min(0.0) - math::log(1.0 + math::exp(-x.abs()))
}

/// Binary cross-entropy of logits `x` against targets `t` of the same shape (an
/// [`Error::Shape`] otherwise), PyTorch's
/// `F.binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction)`: per
/// element, in the stable form, `ℓ = r·((1 − t)·x − w·log σ(x))` with `w = (p − 1)·t + 1`,
/// then the [`Reduction`]. Two optional tensors broadcast to the input's shape, in
/// PyTorch's order: the rescaling `weight` `r` (no gradient, as in PyTorch, so a `weight`
/// that requires one is refused; `r = 1` without it), then the positive-class weight
/// `pos_weight` `p` (e.g. one per class; `p = 1` without it). Both are `Option<&Tensor>`:
/// mind the order, `weight` scales the whole loss, `pos_weight` only the positive term.
///
/// Backward: `∂/∂x = r·(w·σ(x) − p·t)·g`, `∂/∂t = r·(−x − (p − 1)·log σ(x))·g`,
/// `∂/∂p = −r·t·log σ(x)·g` (PyTorch refuses a `pos_weight` that requires a gradient; here it
/// has this one).
///
/// # Examples
///
/// ```
/// use om_core::Tensor;
/// use om_ops::{binary_cross_entropy_with_logits, sigmoid, Reduction};
/// let x = Tensor::from_vec(vec![2.0, -1.0, 0.5, 0.0], &[2, 2])?;
/// let t = Tensor::from_vec(vec![1.0, 0.0, 0.0, 1.0], &[2, 2])?;
/// let logits = binary_cross_entropy_with_logits(&x, &t, None, None, Default::default())?;
/// let probs = om_ops::binary_cross_entropy(&sigmoid(&x)?, &t, None, Default::default())?;
/// assert!((logits.item()? - probs.item()?).abs() < 1e-6);
/// // Positives of the second class count three times.
/// let pos_weight = Tensor::from_vec(vec![1.0, 3.0], &[2])?;
/// let y = binary_cross_entropy_with_logits(&x, &t, None, Some(&pos_weight), Reduction::None)?;
/// assert_eq!(y.shape(), &[2, 2]);
/// # Ok::<(), om_core::Error>(())
/// ```
#[op(saved = [input, target, weight, pos_weight], attrs = [reduction: Reduction])]
pub mod binary_cross_entropy_with_logits {
    use super::*;

    pub fn forward(
        input: &Tensor,
        target: &Tensor,
        weight: Option<&Tensor>,
        pos_weight: Option<&Tensor>,
        reduction: Reduction,
    ) -> Result<Tensor> {
        check_pair(NAME, input, target)?;
        check_weight(NAME, input, weight)?;
        check_broadcast_arg(NAME, "pos_weight", input, pos_weight)?;
        let loss = match pos_weight {
            None => binary(NAME, input, target, |x, t| (1.0 - t) * x - log_sigmoid(x))?,
            Some(p) => {
                let w = weights(p, target)?;
                let a = binary(NAME, input, target, |x, t| (1.0 - t) * x)?;
                let b = binary(NAME, &w, input, |w, x| w * log_sigmoid(x))?;
                binary(NAME, &a, &b, |a, b| a - b)?
            }
        };
        reduce(weighted(NAME, loss, weight)?, reduction)
    }

    /// `w = (p − 1)·t + 1` of `t`'s shape (`p` broadcasts to it: checked by forward).
    fn weights(p: &Tensor, target: &Tensor) -> Result<Tensor> {
        binary(NAME, p, target, |p, t| (p - 1.0) * t + 1.0)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let (x, t) = (r.input(), r.target());
        let (rw, p) = (r.weight().ok(), r.pos_weight().ok());
        if d.needs_input() {
            let deriv = match p {
                None => binary(NAME, x, t, |x, t| math::sigmoid(x) - t)?,
                Some(p) => {
                    let a = binary(NAME, &weights(p, t)?, x, |w, x| w * math::sigmoid(x))?;
                    let pt = binary(NAME, p, t, |p, t| p * t)?;
                    binary(NAME, &a, &pt, |a, pt| a - pt)?
                }
            };
            d.input(chain(NAME, &weighted(NAME, deriv, rw)?, g, r.reduction)?);
        }
        if d.needs_target() {
            let deriv = match p {
                None => unary(NAME, x, |x| -x)?,
                Some(p) => {
                    let ls = unary(NAME, x, log_sigmoid)?;
                    let b = binary(NAME, p, &ls, |p, ls| (p - 1.0) * ls)?;
                    binary(NAME, x, &b, |x, b| -x - b)?
                }
            };
            d.target(chain(NAME, &weighted(NAME, deriv, rw)?, g, r.reduction)?);
        }
        if d.needs_pos_weight() {
            let deriv = binary(NAME, t, x, |t, x| -t * log_sigmoid(x))?;
            d.pos_weight(chain(NAME, &weighted(NAME, deriv, rw)?, g, r.reduction)?);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let x = |shape: &[usize], seed| Case::input(shape, -3.0, 3.0, seed);
        let t = |shape: &[usize], seed| Case::input(shape, 0.0, 1.0, seed);
        let p = |shape: &[usize], seed| Case::input(shape, 0.5, 2.0, seed);
        // Rescaling weights are constants (no gradient).
        let w = |shape: &[usize], seed| Case::input(shape, -1.0, 2.0, seed).detach();
        let f = super::binary_cross_entropy_with_logits;
        vec![
            Case::new("mean", vec![x(&[3, 4], 1), t(&[3, 4], 2)], move |v| f(&v[0], &v[1], None, None, Reduction::Mean)),
            Case::new("sum_pos_weight_per_class", vec![x(&[3, 4], 3), t(&[3, 4], 4), p(&[4], 5)], move |v| {
                f(&v[0], &v[1], None, Some(&v[2]), Reduction::Sum)
            }),
            Case::new("none_transposed_pos_weight", vec![x(&[4, 3], 6), t(&[3, 4], 7), p(&[3, 4], 8)], move |v| {
                f(&crate::transpose(&v[0], 0, 1)?, &v[1], None, Some(&v[2]), Reduction::None)
            }),
            Case::new("mean_strided", vec![x(&[3, 8], 9), t(&[3, 4], 10), p(&[1], 11)], move |v| {
                f(&crate::slice(&v[0], 1, 0, 8, 2)?, &v[1], None, Some(&v[2]), Reduction::Mean)
            }),
            Case::new("weight_per_column_sum", vec![x(&[3, 4], 12), t(&[3, 4], 13), w(&[4], 14)], move |v| {
                f(&v[0], &v[1], Some(&v[2]), None, Reduction::Sum)
            }),
            Case::new("weight_and_pos_weight_none", vec![x(&[3, 4], 15), t(&[3, 4], 16), w(&[3, 1], 17), p(&[4], 18)], move |v| {
                f(&v[0], &v[1], Some(&v[2]), Some(&v[3]), Reduction::None)
            }),
            Case::new("weight_and_pos_weight_mean_strided", vec![x(&[3, 8], 19), t(&[3, 4], 20), w(&[3, 4], 21), p(&[1], 22)], move |v| {
                f(&crate::slice(&v[0], 1, 0, 8, 2)?, &v[1], Some(&v[2]), Some(&v[3]), Reduction::Mean)
            }),
        ]
    }
}

// ===== divergence =====

/// Kullback–Leibler divergence of log-probabilities `x` from a target `t` of the same shape
/// (an [`Error::Shape`] otherwise), PyTorch's `F.kl_div(input, target, reduction,
/// log_target)` in its pointwise form: `t·log t − t·x` (taken as `−t·x` where `t = 0`), or
/// with `log_target` (`t` holds log-probabilities) `e^t·(t − x)`; then the reduction: any
/// [`Reduction`] (`Mean` averages over all elements, PyTorch's default) or
/// [`KlDivReduction::BatchMean`], the sum divided by the batch size (the first dimension),
/// which is the KL divergence of each row averaged over the batch. (`reduction` is
/// `impl Into<KlDivReduction>`, so PyTorch's default is spelled `KlDivReduction::default()`
/// or `Reduction::Mean`; a bare `Default::default()` has no type to default to.)
///
/// Backward: `∂/∂x = −t·g` (`−e^t·g`); `∂/∂t = (log t + 1 − x)·g`, NaN where `t = 0` as
/// PyTorch's `xlogy` rule gives it (`log t + t/t − x`), or `e^t·(t − x + 1)·g` with `log_target`
/// (`g/n` for a mean over `n` elements, `g/batch` for `BatchMean`).
///
/// # Examples
///
/// ```
/// use om_core::Tensor;
/// use om_ops::{kl_div, log_softmax, KlDivReduction};
/// let logits = Tensor::from_vec(vec![1.0, 2.0, 0.5, 0.0, 0.0, 3.0], &[2, 3])?;
/// let target = Tensor::from_vec(vec![0.2, 0.7, 0.1, 0.3, 0.3, 0.4], &[2, 3])?;
/// // KL(target ‖ softmax(logits)) per row, averaged over the 2 rows.
/// let kl = kl_div(&log_softmax(&logits, 1)?, &target, KlDivReduction::BatchMean, false)?;
/// assert!(kl.item()? > 0.0);
/// # Ok::<(), om_core::Error>(())
/// ```
#[op(saved = [input, target], attrs = [reduction: KlDivReduction, log_target: bool])]
pub mod kl_div {
    use super::*;

    pub fn forward(input: &Tensor, target: &Tensor, reduction: impl Into<KlDivReduction>, log_target: bool) -> Result<Tensor> {
        check_pair(NAME, input, target)?;
        let loss = if log_target {
            binary(NAME, input, target, |x, t| math::exp(t) * (t - x))?
        } else {
            binary(NAME, input, target, |x, t| xlogx(t) - t * x)?
        };
        reduce(loss, reduction)
    }

    /// `t·log t`, 0 at `t = 0` (PyTorch's `xlogy(t, t)`).
    fn xlogx(t: f32) -> f32 {
        if t == 0.0 {
            0.0
        } else {
            t * math::log(t)
        }
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let (x, t) = (r.input(), r.target());
        if d.needs_input() {
            let deriv = if r.log_target { unary(NAME, t, |t| -math::exp(t))? } else { unary(NAME, t, |t| -t)? };
            d.input(chain(NAME, &deriv, g, r.reduction)?);
        }
        if d.needs_target() {
            let deriv = if r.log_target {
                binary(NAME, x, t, |x, t| math::exp(t) * (t - x + 1.0))?
            } else {
                // PyTorch's xlogy rule: log t + t/t − x, NaN (0/0) where t = 0.
                binary(NAME, x, t, |x, t| if t == 0.0 { f32::NAN } else { math::log(t) + 1.0 - x })?
            };
            d.target(chain(NAME, &deriv, g, r.reduction)?);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let lp = |shape: &[usize], seed| Case::input(shape, -3.0, -0.1, seed);
        // Targets from 0.3: t·log t curves as 1/t, and the summed broadcast case adds six
        // finite-difference errors per target.
        let p = |shape: &[usize], seed| Case::input(shape, 0.3, 1.0, seed);
        let mut cases = pair_cases("", |x, t, red| super::kl_div(x, t, red, false), lp, p);
        cases.extend(pair_cases("log_target_", |x, t, red| super::kl_div(x, t, red, true), lp, lp));
        let batch_mean = KlDivReduction::BatchMean;
        cases.extend([
            Case::new("batchmean", vec![lp(&[3, 4], 9), p(&[3, 4], 10)], move |x| super::kl_div(&x[0], &x[1], batch_mean, false)),
            Case::new("log_target_batchmean_transposed", vec![lp(&[4, 3], 11), lp(&[3, 4], 12)], move |x| {
                super::kl_div(&crate::transpose(&x[0], 0, 1)?, &x[1], batch_mean, true)
            }),
            Case::new("batchmean_0d", vec![lp(&[], 13), p(&[], 14)], move |x| super::kl_div(&x[0], &x[1], batch_mean, false)),
        ]);
        cases
    }
}

#[cfg(test)]
mod class_index_tests {
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
