//! Element-wise losses and the [`Reduction`] every loss of om-ops takes: the regression
//! losses `mse_loss`, `l1_loss`, `smooth_l1_loss`, `huber_loss`, the binary losses
//! `binary_cross_entropy` and `binary_cross_entropy_with_logits` (each with PyTorch's
//! optional rescaling `weight`), and `kl_div` (with PyTorch's `'batchmean'` through
//! [`KlDivReduction`]).
//!
//! Input and target must have the same shape: where PyTorch broadcasts a mismatched target
//! with only a warning (an `[n]` target against an `[n, 1]` prediction silently becomes an
//! `[n, n]` loss), these losses return [`Error::Shape`] naming both shapes. Broadcast on
//! purpose with an explicit `expand`.
//!
//! Each is one primitive: forward maps the element pairs with a scalar closure (the same
//! code on every path, so exact mode is bit-identical across paths and threads) and reduces
//! with [`crate::sum()`] / [`crate::mean()`] (f64 in element order, rounded once). Backward is
//! `g · ∂loss/∂x` per element, with `g/n` for a mean over `n` elements (the product taken
//! in f64). Logarithms and exponentials use the fixed `om_core::kernels::math` functions.

use om_core::kernels::elementwise::{binary, unary};
use om_core::kernels::math;
use om_core::{Case, Error, Result, Tensor};
use om_macros::op;

/// How a loss combines its per-element losses (per sequence for `ctc_loss`), PyTorch's
/// `reduction` argument. `Default` is `Mean`, PyTorch's default.
///
/// # Examples
///
/// ```
/// use om_core::Tensor;
/// use om_ops::{mse_loss, Reduction};
/// let p = Tensor::from_vec(vec![1.0, 2.0, 4.0], &[3])?;
/// let y = Tensor::from_vec(vec![1.0, 1.0, 1.0], &[3])?;
/// assert_eq!(mse_loss(&p, &y, Reduction::None)?.to_vec(), vec![0.0, 1.0, 9.0]);
/// assert_eq!(mse_loss(&p, &y, Reduction::Sum)?.item()?, 10.0);
/// // PyTorch's default, the mean:
/// assert_eq!(Reduction::default(), Reduction::Mean);
/// assert!((mse_loss(&p, &y, Default::default())?.item()? - 10.0 / 3.0).abs() < 1e-6);
/// # Ok::<(), om_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Reduction {
    /// The losses themselves, one per element (per sequence, shape `[B]`, for `ctc_loss`).
    None,
    /// The sum of the losses, a scalar.
    Sum,
    /// The mean of the losses, a scalar (PyTorch's default): the sum over the number of
    /// elements; for `nll_loss`/`cross_entropy` with class weights the sum over the summed
    /// weights, and for `ctc_loss` each loss first divided by `max(1, target length)`, as in
    /// PyTorch.
    #[default]
    Mean,
}

/// How [`kl_div`](crate::kl_div()) combines its element-wise losses: the three
/// [`Reduction`]s (any `Reduction` converts into this) plus PyTorch's `'batchmean'`, the
/// sum divided by the batch size (the first dimension; 1 for a 0-d input), which is the
/// mathematical KL divergence of each row averaged over the batch. `Default` is `Mean`,
/// PyTorch's default (the mean over all elements, which PyTorch warns is not the KL
/// divergence).
///
/// # Examples
///
/// ```
/// use om_core::Tensor;
/// use om_ops::{kl_div, KlDivReduction, Reduction};
/// // Two rows of log-probabilities against two target distributions.
/// let x = Tensor::from_vec(vec![0.5f32.ln(), 0.5f32.ln(), 0.25f32.ln(), 0.75f32.ln()], &[2, 2])?;
/// let t = Tensor::from_vec(vec![0.5, 0.5, 0.5, 0.5], &[2, 2])?;
/// let sum = kl_div(&x, &t, Reduction::Sum, false)?.item()?;
/// let batch_mean = kl_div(&x, &t, KlDivReduction::BatchMean, false)?.item()?;
/// assert_eq!(batch_mean, sum / 2.0);
/// # Ok::<(), om_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KlDivReduction {
    /// The losses themselves, of the input's shape.
    None,
    /// The sum of the losses, a scalar.
    Sum,
    /// The mean over all elements, a scalar (PyTorch's default).
    #[default]
    Mean,
    /// The sum divided by the batch size (the input's first dimension, or 1 for a 0-d
    /// input), a scalar: PyTorch's `reduction='batchmean'`.
    BatchMean,
}

impl From<Reduction> for KlDivReduction {
    fn from(r: Reduction) -> Self {
        match r {
            Reduction::None => KlDivReduction::None,
            Reduction::Sum => KlDivReduction::Sum,
            Reduction::Mean => KlDivReduction::Mean,
        }
    }
}

/// The batch size of a loss of `shape` for [`KlDivReduction::BatchMean`]: the first
/// dimension, or 1 for a 0-d loss.
fn batch_size(shape: &[usize]) -> usize {
    shape.first().copied().unwrap_or(1)
}

/// Applies the reduction to the element-wise losses. ([`KlDivReduction`] is a superset of
/// [`Reduction`], so this and [`chain`] serve every loss of the file.)
fn reduce(loss: Tensor, reduction: impl Into<KlDivReduction>) -> Result<Tensor> {
    match reduction.into() {
        KlDivReduction::None => Ok(loss),
        KlDivReduction::Sum => crate::sum(&loss, None, false),
        KlDivReduction::Mean => crate::mean(&loss, None, false),
        KlDivReduction::BatchMean => {
            // As PyTorch: the sum, then divided by the batch size in f32.
            let batch = batch_size(loss.shape()) as f32;
            let sum = crate::sum(&loss, None, false)?;
            unary("kl_div", &sum, move |s| s / batch)
        }
    }
}

/// `g · deriv` per element, where `deriv` has the shape of the losses and `g` is the output
/// gradient: of that shape (`None`) or a scalar (`Sum`, `Mean` with the factor `1/n` over
/// the `n` elements, `BatchMean` with `1/batch`).
fn chain(op: &'static str, deriv: &Tensor, g: &Tensor, reduction: impl Into<KlDivReduction>) -> Result<Tensor> {
    let scale = match reduction.into() {
        KlDivReduction::Mean => 1.0 / deriv.numel() as f64,
        KlDivReduction::BatchMean => 1.0 / batch_size(deriv.shape()) as f64,
        KlDivReduction::None | KlDivReduction::Sum => 1.0,
    };
    binary(op, deriv, g, move |d, g| (d as f64 * g as f64 * scale) as f32)
}

/// The gradients of a loss of the difference `x − t`, whose derivative is `df(x − t)`:
/// `g·df` for the input and `−g·df` for the target (each only if needed).
fn difference_grads(
    op: &'static str,
    x: &Tensor,
    t: &Tensor,
    g: &Tensor,
    reduction: Reduction,
    needs: [bool; 2],
    df: impl Fn(f32) -> f32,
) -> Result<[Option<Tensor>; 2]> {
    if !needs[0] && !needs[1] {
        return Ok([None, None]);
    }
    let dx = chain(op, &binary(op, x, t, |x, t| df(x - t))?, g, reduction)?;
    let dt = if needs[1] { Some(unary(op, &dx, |v| -v)?) } else { None };
    Ok([needs[0].then_some(dx), dt])
}

/// Checks that `input` and `target` are `f32` tensors of one shape. PyTorch broadcasts a
/// mismatched pair with a warning; here it is an error naming both shapes.
fn check_pair(op: &'static str, input: &Tensor, target: &Tensor) -> Result<()> {
    input.expect_f32(op, "input")?;
    target.expect_f32(op, "target")?;
    if input.shape() != target.shape() {
        let msg =
            "input and target must have the same shape (PyTorch broadcasts them with only a warning; expand one explicitly to broadcast)";
        return Err(Error::shape(op, &[input.shape(), target.shape()], msg));
    }
    Ok(())
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

/// The gradient-check cases of a regression loss `f(input, target, reduction)`: every
/// reduction, a target expanded along rows, a transposed and a strided input. `input` and
/// `target` build the checked values (kept away from the loss's kinks by the caller).
fn pair_cases<F>(prefix: &str, f: F, input: fn(&[usize], u64) -> Tensor, target: fn(&[usize], u64) -> Tensor) -> Vec<Case>
where
    F: Fn(&Tensor, &Tensor, Reduction) -> Result<Tensor> + Copy + Send + Sync + 'static,
{
    vec![
        Case::new(format!("{prefix}mean"), vec![input(&[3, 4], 1), target(&[3, 4], 2)], move |x| f(&x[0], &x[1], Reduction::Mean)),
        Case::new(format!("{prefix}sum_broadcast_target"), vec![input(&[2, 3, 4], 3), target(&[4], 4)], move |x| {
            f(&x[0], &crate::expand(&x[1], [2, 3, 4])?, Reduction::Sum)
        }),
        Case::new(format!("{prefix}none_transposed"), vec![input(&[4, 3], 5), target(&[3, 4], 6)], move |x| {
            f(&crate::transpose(&x[0], 0, 1)?, &x[1], Reduction::None)
        }),
        Case::new(format!("{prefix}mean_strided"), vec![input(&[3, 8], 7), target(&[3, 4], 8)], move |x| {
            f(&crate::slice(&x[0], 1, 0, 8, 2)?, &x[1], Reduction::Mean)
        }),
    ]
}

/// Values uniform in `[-1, 1)`.
fn unit(shape: &[usize], seed: u64) -> Tensor {
    Case::input(shape, -1.0, 1.0, seed)
}

/// Values at least 0.2 from zero, magnitudes below 1 (an input whose difference to a
/// [`near_zero`] target stays ≥ 0.15 away from a kink at 0).
fn away(shape: &[usize], seed: u64) -> Tensor {
    Case::input_away_from_zero(shape, 0.2, 1.0, seed)
}

/// Values uniform in `[-0.05, 0.05)`.
fn near_zero(shape: &[usize], seed: u64) -> Tensor {
    Case::input(shape, -0.05, 0.05, seed)
}

// ===== regression =====

/// Mean squared error, PyTorch's `F.mse_loss`: `(x − t)²` per element of an input and a
/// target of the same shape (an [`Error::Shape`] naming both shapes otherwise, where
/// PyTorch broadcasts with a warning), then the [`Reduction`] (PyTorch's default `Mean`
/// is `Default::default()`).
///
/// Backward: `∂/∂x = 2(x − t)·g`, `∂/∂t = −2(x − t)·g` (`g/n` for a mean).
///
/// # Examples
///
/// ```
/// use om_core::Tensor;
/// use om_ops::{mse_loss, Reduction};
/// let p = Tensor::from_vec(vec![0.5, 1.0, 2.0, 2.0], &[4, 1])?;
/// let y = Tensor::from_vec(vec![1.0, 1.0, 1.0, 3.0], &[4, 1])?;
/// assert_eq!(mse_loss(&p, &y, Default::default())?.item()?, 0.5625); // (0.25 + 0 + 1 + 1) / 4
/// assert_eq!(mse_loss(&p, &y, Reduction::Sum)?.item()?, 2.25);
/// // A target of another shape is an error, not a broadcast to [4, 4].
/// let flat = Tensor::from_vec(vec![1.0, 1.0, 1.0, 3.0], &[4])?;
/// assert!(mse_loss(&p, &flat, Default::default()).is_err());
/// # Ok::<(), om_core::Error>(())
/// ```
#[op(saved = [input, target], attrs = [reduction: Reduction])]
pub mod mse_loss {
    use super::*;

    pub fn forward(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
        check_pair(NAME, input, target)?;
        reduce(binary(NAME, input, target, |x, t| (x - t) * (x - t))?, reduction)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let needs = [d.needs_input(), d.needs_target()];
        let [dx, dt] = difference_grads(NAME, r.input(), r.target(), g, r.reduction, needs, |v| 2.0 * v)?;
        if let Some(dx) = dx {
            d.input(dx);
        }
        if let Some(dt) = dt {
            d.target(dt);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        pair_cases("", super::mse_loss, unit, unit)
    }
}

/// Mean absolute error, PyTorch's `F.l1_loss`: `|x − t|` per element of an input and a
/// target of the same shape (an [`Error::Shape`] otherwise), then the [`Reduction`].
///
/// Backward: `∂/∂x = sign(x − t)·g`, `∂/∂t = −sign(x − t)·g`, with `sign(0) = 0` as in PyTorch (a
/// zero difference passes no gradient).
///
/// # Examples
///
/// ```
/// use om_core::Tensor;
/// use om_ops::{l1_loss, Reduction};
/// let p = Tensor::from_vec(vec![0.5, 1.0, 2.0, 4.0], &[2, 2])?;
/// let y = Tensor::from_vec(vec![1.0, 1.0, 1.0, 1.0], &[2, 2])?;
/// assert_eq!(l1_loss(&p, &y, Reduction::None)?.to_vec(), vec![0.5, 0.0, 1.0, 3.0]);
/// assert_eq!(l1_loss(&p, &y, Default::default())?.item()?, 1.125);
/// # Ok::<(), om_core::Error>(())
/// ```
#[op(saved = [input, target], attrs = [reduction: Reduction])]
pub mod l1_loss {
    use super::*;

    pub fn forward(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
        check_pair(NAME, input, target)?;
        reduce(binary(NAME, input, target, |x, t| (x - t).abs())?, reduction)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let needs = [d.needs_input(), d.needs_target()];
        let [dx, dt] = difference_grads(NAME, r.input(), r.target(), g, r.reduction, needs, sign)?;
        if let Some(dx) = dx {
            d.input(dx);
        }
        if let Some(dt) = dt {
            d.target(dt);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        // Differences stay ≥ 0.15 from the kink at 0.
        pair_cases("", super::l1_loss, away, near_zero)
    }
}

/// `−1`, `0` or `1` by the sign of `v` (`sign(±0) = ±0`; NaN stays NaN), as PyTorch's `sgn`.
fn sign(v: f32) -> f32 {
    if v > 0.0 {
        1.0
    } else if v < 0.0 {
        -1.0
    } else {
        v * 0.0
    }
}

/// Checks a non-negative finite threshold (`beta`, `delta`).
fn check_threshold(op: &'static str, name: &str, v: f32, zero_allowed: bool) -> Result<()> {
    let ok = v.is_finite() && if zero_allowed { v >= 0.0 } else { v > 0.0 };
    if !ok {
        let want = if zero_allowed { "≥ 0" } else { "> 0" };
        return Err(Error::argument(op, format!("{name} must be finite and {want}, got {v}")));
    }
    Ok(())
}

/// Smooth L1 loss with threshold `beta ≥ 0`, PyTorch's `F.smooth_l1_loss` (whose default
/// `beta` is 1): for `z = |x − t|` per element of an input and a target of the same shape
/// (an [`Error::Shape`] otherwise), `0.5·z²/beta` when `z < beta`, else `z − 0.5·beta`;
/// `beta = 0` is the L1 loss (as in PyTorch). Then the [`Reduction`].
///
/// Backward: `∂/∂x = clamp((x − t)/beta, −1, 1)·g` (PyTorch's form: `−1` below `−beta`, `1` above
/// `beta`, `(x − t)/beta` between), `∂/∂t` its negative.
///
/// # Examples
///
/// ```
/// use om_core::Tensor;
/// use om_ops::{smooth_l1_loss, Reduction};
/// let p = Tensor::from_vec(vec![0.5, 3.0], &[2])?;
/// let y = Tensor::from_vec(vec![0.0, 0.0], &[2])?;
/// // 0.5·0.5²/1 on the quadratic branch, 3 − 0.5 on the linear one.
/// assert_eq!(smooth_l1_loss(&p, &y, 1.0, Reduction::None)?.to_vec(), vec![0.125, 2.5]);
/// # Ok::<(), om_core::Error>(())
/// ```
#[op(saved = [input, target], attrs = [beta: f32, reduction: Reduction])]
pub mod smooth_l1_loss {
    use super::*;

    pub fn forward(input: &Tensor, target: &Tensor, beta: f32, reduction: Reduction) -> Result<Tensor> {
        check_pair(NAME, input, target)?;
        check_threshold(NAME, "beta", beta, true)?;
        if beta == 0.0 {
            return reduce(binary(NAME, input, target, |x, t| (x - t).abs())?, reduction);
        }
        let loss = binary(NAME, input, target, move |x, t| {
            let z = (x - t).abs();
            if z < beta {
                0.5 * z * z / beta
            } else {
                z - 0.5 * beta
            }
        })?;
        reduce(loss, reduction)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let beta = r.beta;
        let needs = [d.needs_input(), d.needs_target()];
        let df = move |v: f32| {
            if beta == 0.0 {
                sign(v)
            } else if v < -beta {
                -1.0
            } else if v > beta {
                1.0
            } else {
                v / beta
            }
        };
        let [dx, dt] = difference_grads(NAME, r.input(), r.target(), g, r.reduction, needs, df)?;
        if let Some(dx) = dx {
            d.input(dx);
        }
        if let Some(dt) = dt {
            d.target(dt);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        // beta = 3 keeps every difference (|x − t| < 2) on the quadratic branch; beta = 0.1
        // keeps every difference (≥ 0.15) on the linear one: away from the switch at beta.
        let mut cases = pair_cases("", |x, t, red| super::smooth_l1_loss(x, t, 3.0, red), unit, unit);
        cases.extend(pair_cases("linear_", |x, t, red| super::smooth_l1_loss(x, t, 0.1, red), away, near_zero));
        cases
    }
}

/// Huber loss with threshold `delta > 0`, PyTorch's `F.huber_loss` (whose default `delta`
/// is 1): for `z = |x − t|` per element of an input and a target of the same shape (an
/// [`Error::Shape`] otherwise), `0.5·z²` when `z < delta`, else `delta·(z − 0.5·delta)`.
/// Then the [`Reduction`].
///
/// Backward: `∂/∂x = clamp(x − t, −delta, delta)·g`,
/// `∂/∂t` its negative.
///
/// # Examples
///
/// ```
/// use om_core::Tensor;
/// use om_ops::{huber_loss, Reduction};
/// let p = Tensor::from_vec(vec![0.5, 3.0], &[2])?;
/// let y = Tensor::from_vec(vec![0.0, 0.0], &[2])?;
/// // 0.5·0.5² on the quadratic branch, 2·(3 − 0.5·2) on the linear one.
/// assert_eq!(huber_loss(&p, &y, 2.0, Reduction::None)?.to_vec(), vec![0.125, 4.0]);
/// # Ok::<(), om_core::Error>(())
/// ```
#[op(saved = [input, target], attrs = [delta: f32, reduction: Reduction])]
pub mod huber_loss {
    use super::*;

    pub fn forward(input: &Tensor, target: &Tensor, delta: f32, reduction: Reduction) -> Result<Tensor> {
        check_pair(NAME, input, target)?;
        check_threshold(NAME, "delta", delta, false)?;
        let loss = binary(NAME, input, target, move |x, t| {
            let z = (x - t).abs();
            if z < delta {
                0.5 * z * z
            } else {
                delta * (z - 0.5 * delta)
            }
        })?;
        reduce(loss, reduction)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let delta = r.delta;
        let needs = [d.needs_input(), d.needs_target()];
        let df = move |v: f32| {
            if v < -delta {
                -delta
            } else if v > delta {
                delta
            } else {
                v
            }
        };
        let [dx, dt] = difference_grads(NAME, r.input(), r.target(), g, r.reduction, needs, df)?;
        if let Some(dx) = dx {
            d.input(dx);
        }
        if let Some(dt) = dt {
            d.target(dt);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        // As smooth_l1_loss: delta = 3 (quadratic branch only), delta = 0.1 (linear only).
        let mut cases = pair_cases("", |x, t, red| super::huber_loss(x, t, 3.0, red), unit, unit);
        cases.extend(pair_cases("linear_", |x, t, red| super::huber_loss(x, t, 0.1, red), away, near_zero));
        cases
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
mod tests {
    use super::*;
    use crate::oracle::{assert_close, both_modes, Oracle};

    const REDUCTIONS: [(&str, Reduction); 3] = [("none", Reduction::None), ("sum", Reduction::Sum), ("mean", Reduction::Mean)];

    fn load() -> Oracle {
        Oracle::load_file("losses", "tools/oracle_losses.py")
    }

    /// Checks `f(x, t, reduction)` against the oracle set `prefix` for every reduction:
    /// the value and the gradients of `x` and `t`. A `t` of another shape than `x` (the
    /// `*_bc` sets, broadcast by PyTorch) is expanded to `x`'s shape explicitly: the losses
    /// refuse mismatched shapes, and the expansion's gradient sums back to `t`'s shape.
    fn check(o: &Oracle, prefix: &str, f: impl Fn(&Tensor, &Tensor, Reduction) -> Result<Tensor>) {
        let (x, t) = (o.get(&format!("{prefix}_x")), o.get(&format!("{prefix}_t")));
        for (red, reduction) in REDUCTIONS {
            let name = format!("{prefix}_{red}");
            let shape: Vec<isize> = x.shape().iter().map(|&d| d as isize).collect();
            let te = if t.shape() == x.shape() { t.clone() } else { crate::expand(&t, &shape).unwrap() };
            let y = f(&x, &te, reduction).unwrap();
            assert_close(&format!("{name}_y"), &y, &o.get(&format!("{name}_y")));
            o.check_grads(&name, &y, &[("x", &x), ("t", &t)]);
        }
    }

    #[test]
    fn regression_losses_match_pytorch() {
        let o = load();
        both_modes(|| {
            for bc in ["", "_bc"] {
                check(&o, &format!("mse{bc}"), crate::mse_loss);
                check(&o, &format!("l1{bc}"), crate::l1_loss);
                check(&o, &format!("sl1{bc}"), |x, t, r| crate::smooth_l1_loss(x, t, 0.5, r));
                check(&o, &format!("sl1b0{bc}"), |x, t, r| crate::smooth_l1_loss(x, t, 0.0, r));
                check(&o, &format!("hub{bc}"), |x, t, r| crate::huber_loss(x, t, 0.7, r));
            }
        });
    }

    #[test]
    fn l1_gradient_at_zero_difference_is_zero() {
        // The oracle's first three l1 pairs are equal: PyTorch's sign(0) = 0 passes nothing.
        let o = load();
        let (x, t) = (o.get("l1_x"), o.get("l1_t"));
        crate::l1_loss(&x, &t, Reduction::Sum).unwrap().backward().unwrap();
        let (gx, gt) = (x.grad().unwrap().to_vec(), t.grad().unwrap().to_vec());
        assert_eq!(&gx[..3], &[0.0; 3]);
        assert_eq!(&gt[..3], &[0.0; 3]);
        assert!(gx[3..].iter().all(|v| v.abs() == 1.0));
    }

    #[test]
    fn binary_losses_match_pytorch() {
        let o = load();
        both_modes(|| {
            check(&o, "bce", |x, t, r| crate::binary_cross_entropy(x, t, None, r));
            check(&o, "bcel", |x, t, r| crate::binary_cross_entropy_with_logits(x, t, None, None, r));
            let pw = o.get("bcelpw_pw").detach();
            check(&o, "bcelpw", |x, t, r| crate::binary_cross_entropy_with_logits(x, t, None, Some(&pw), r));
            // Inputs exactly 0 and 1: the log clamped at −100 and the input gradient divided
            // by max(x(1 − x), 1e−12), as PyTorch.
            let (x, t) = (o.get("bce_edge_x"), o.get("bce_edge_t").detach());
            let y = crate::binary_cross_entropy(&x, &t, None, Reduction::None).unwrap();
            assert_close("bce_edge_y", &y, &o.get("bce_edge_y"));
            o.check_grads("bce_edge", &y, &[("x", &x)]);
        });
    }

    #[test]
    fn kl_div_matches_pytorch() {
        let o = load();
        both_modes(|| {
            check(&o, "kl", |x, t, r| crate::kl_div(x, t, r, false));
            check(&o, "kllog", |x, t, r| crate::kl_div(x, t, r, true));
            check(&o, "kl_bc", |x, t, r| crate::kl_div(x, t, r, false));
        });
    }

    #[test]
    fn kl_div_target_gradient_is_nan_at_zero_target_as_in_pytorch() {
        // PyTorch 2.15: F.kl_div(x, t) with t = 0 gives loss 0 and target gradient NaN.
        let x = Tensor::from_vec(vec![-1.0, -0.5], &[2]).unwrap().requires_grad().unwrap();
        let t = Tensor::from_vec(vec![0.0, 0.5], &[2]).unwrap().requires_grad().unwrap();
        let y = crate::kl_div(&x, &t, Reduction::None, false).unwrap();
        assert_eq!(y.to_vec()[0], 0.0);
        crate::sum(&y, None, false).unwrap().backward().unwrap();
        let gt = t.grad().unwrap().to_vec();
        assert!(gt[0].is_nan() && gt[1].is_finite());
        assert_eq!(x.grad().unwrap().to_vec(), vec![0.0, -0.5]);
    }

    #[test]
    fn bad_arguments_are_errors_naming_the_op() {
        let x = Tensor::from_vec(vec![0.5, 1.5], &[2]).unwrap();
        let t = Tensor::from_vec(vec![0.0, 1.0], &[2]).unwrap();
        let e = crate::binary_cross_entropy(&x, &t, None, Reduction::Mean).unwrap_err().to_string();
        assert!(e.contains("binary_cross_entropy") && e.contains("1.5"), "{e}");
        let t3 = Tensor::from_vec(vec![0.0, 1.0, 0.0], &[3]).unwrap();
        let e = crate::binary_cross_entropy_with_logits(&x, &t3, None, None, Reduction::Mean).unwrap_err().to_string();
        assert!(e.contains("binary_cross_entropy_with_logits"), "{e}");
        let pw = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3, 1]).unwrap();
        let e = crate::binary_cross_entropy_with_logits(&x, &t, None, Some(&pw), Reduction::Mean).unwrap_err().to_string();
        assert!(e.contains("pos_weight"), "{e}");
        let e = crate::smooth_l1_loss(&x, &t, -1.0, Reduction::Mean).unwrap_err().to_string();
        assert!(e.contains("smooth_l1_loss") && e.contains("beta"), "{e}");
        let e = crate::huber_loss(&x, &t, 0.0, Reduction::Mean).unwrap_err().to_string();
        assert!(e.contains("huber_loss") && e.contains("delta"), "{e}");
        let e = crate::mse_loss(&x, &t3, Reduction::Mean).unwrap_err().to_string();
        assert!(e.contains("mse_loss"), "{e}");
    }

    /// The values of `w` broadcast to `shape`, row-major.
    fn broadcast_values(w: &Tensor, shape: &[usize]) -> Vec<f32> {
        let shape: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
        crate::expand(w, &shape).unwrap().to_vec()
    }

    /// `(x, t)` for a binary loss: probabilities (or logits) and soft targets, `[3, 4]`, as leaves.
    fn binary_pair(lo: f32, hi: f32, seed: u64) -> (Tensor, Tensor) {
        let x = Tensor::rand_uniform(&[3, 4], lo, hi, seed).unwrap().requires_grad().unwrap();
        let t = Tensor::rand_uniform(&[3, 4], 0.0, 1.0, seed + 1).unwrap().requires_grad().unwrap();
        (x, t)
    }

    /// A binary loss `f(x, t, weight, reduction)` with the rescaling weight, checked from
    /// the definition `ℓ_w = w·ℓ` for weights of several broadcast shapes: the unreduced
    /// losses are the weight times the unweighted ones bit for bit; `Sum` and `Mean` are
    /// the sum and mean of those (within one rounding of the f64 sum); the gradients of
    /// the input and target under `Sum` are the weight times the unweighted ones, bit for
    /// bit.
    fn check_weighted(name: &str, f: impl Fn(&Tensor, &Tensor, Option<&Tensor>, Reduction) -> Result<Tensor>, x: &Tensor, t: &Tensor) {
        let weights = [
            Tensor::from_vec(vec![0.5, 2.0, -1.0, 0.0], &[4]).unwrap(),
            Tensor::rand_uniform(&[3, 4], -1.0, 3.0, 7).unwrap(),
            Tensor::from_vec(vec![3.0, 0.25, 1.5], &[3, 1]).unwrap(),
            Tensor::scalar(1.75),
            Tensor::from_vec(vec![0.125], &[1]).unwrap(),
        ];
        let plain = f(x, t, None, Reduction::None).unwrap().to_vec();
        x.clear_grad();
        t.clear_grad();
        f(x, t, None, Reduction::Sum).unwrap().backward().unwrap();
        let (gx, gt) = (x.grad().unwrap().to_vec(), t.grad().unwrap().to_vec());
        for w in &weights {
            let wv = broadcast_values(w, x.shape());
            let none = f(x, t, Some(w), Reduction::None).unwrap();
            assert_eq!(none.shape(), x.shape());
            let want: Vec<f32> = plain.iter().zip(&wv).map(|(l, w)| l * w).collect();
            assert_eq!(none.to_vec(), want, "{name}: weight {:?}, none", w.shape());
            let exact: f64 = want.iter().map(|&v| v as f64).sum();
            let sum = f(x, t, Some(w), Reduction::Sum).unwrap().item().unwrap();
            assert!((sum as f64 - exact).abs() <= f32::EPSILON as f64 * exact.abs(), "{name}: sum {sum} vs {exact}");
            let n = want.len() as f64;
            let mean = f(x, t, Some(w), Reduction::Mean).unwrap().item().unwrap();
            assert!((mean as f64 - exact / n).abs() <= f32::EPSILON as f64 * (exact / n).abs(), "{name}: mean {mean} vs {}", exact / n);
            x.clear_grad();
            t.clear_grad();
            f(x, t, Some(w), Reduction::Sum).unwrap().backward().unwrap();
            let scaled = |g: &[f32]| g.iter().zip(&wv).map(|(g, w)| g * w).collect::<Vec<f32>>();
            assert_eq!(x.grad().unwrap().to_vec(), scaled(&gx), "{name}: weight {:?}, input gradient", w.shape());
            assert_eq!(t.grad().unwrap().to_vec(), scaled(&gt), "{name}: weight {:?}, target gradient", w.shape());
        }
    }

    #[test]
    fn weighted_binary_losses_are_the_weight_times_the_loss() {
        both_modes(|| {
            let (x, t) = binary_pair(0.05, 0.95, 1);
            check_weighted("binary_cross_entropy", crate::binary_cross_entropy, &x, &t);
            let (x, t) = binary_pair(-4.0, 4.0, 3);
            check_weighted("bce_with_logits", |x, t, w, r| crate::binary_cross_entropy_with_logits(x, t, w, None, r), &x, &t);
            // With pos_weight too (a leaf requiring a gradient, whose gradient is scaled as well).
            let pw = Tensor::from_vec(vec![0.5, 1.0, 2.0, 3.0], &[4]).unwrap().requires_grad().unwrap();
            check_weighted(
                "bce_with_logits_pos_weight",
                |x, t, w, r| crate::binary_cross_entropy_with_logits(x, t, w, Some(&pw), r),
                &x,
                &t,
            );
            // pos_weight's gradient from the definition: ∂(Σℓ)/∂p_j = Σ_i r_i·(−t_ij·log σ(x_ij))
            // for a rescaling weight r_i per row (evaluated in f64).
            let r = Tensor::from_vec(vec![3.0, 0.25, 1.5], &[3, 1]).unwrap();
            pw.clear_grad();
            crate::binary_cross_entropy_with_logits(&x, &t, Some(&r), Some(&pw), Reduction::Sum).unwrap().backward().unwrap();
            let (xv, tv, rv) = (x.to_vec(), t.to_vec(), r.to_vec());
            for (j, &got) in pw.grad().unwrap().to_vec().iter().enumerate() {
                let want: f64 = (0..3)
                    .map(|i| {
                        let (xi, ti) = (xv[i * 4 + j] as f64, tv[i * 4 + j] as f64);
                        rv[i] as f64 * ti * (1.0 + (-xi).exp()).ln()
                    })
                    .sum();
                assert!((got as f64 - want).abs() <= 1e-5 * want.abs().max(1.0), "pos_weight gradient {j}: {got} vs {want}");
            }
        });
    }

    #[test]
    fn kl_div_batchmean_is_the_sum_over_the_batch_size() {
        both_modes(|| {
            for log_target in [false, true] {
                let x = crate::log_softmax(&Tensor::randn_with_seed(&[4, 5], 11).unwrap(), 1).unwrap().detach().requires_grad().unwrap();
                let t = crate::softmax(&Tensor::randn_with_seed(&[4, 5], 12).unwrap(), 1).unwrap();
                let t = if log_target { crate::log(&t).unwrap() } else { t };
                let sum = crate::kl_div(&x, &t, Reduction::Sum, log_target).unwrap().item().unwrap();
                let y = crate::kl_div(&x, &t, KlDivReduction::BatchMean, log_target).unwrap();
                assert!(y.shape().is_empty());
                // PyTorch's definition: the sum, divided by the batch size.
                assert_eq!(y.item().unwrap(), sum / 4.0);
                y.backward().unwrap();
                // ∂/∂x = −t/4 (−e^t/4 with log_target), from the definition, in f64.
                let tv = t.to_vec();
                for (g, &t) in x.grad().unwrap().to_vec().iter().zip(&tv) {
                    let p = if log_target { (t as f64).exp() } else { t as f64 };
                    let want = -p / 4.0;
                    assert!((*g as f64 - want).abs() <= 4.0 * f32::EPSILON as f64 * want.abs(), "{g} vs {want}");
                }
            }
            // A 0-d input: the batch size is 1, so batch mean and sum agree.
            let (x, t) = (Tensor::scalar(-0.5), Tensor::scalar(0.25));
            let bm = crate::kl_div(&x, &t, KlDivReduction::BatchMean, false).unwrap().item().unwrap();
            assert_eq!(bm, crate::kl_div(&x, &t, Reduction::Sum, false).unwrap().item().unwrap());
            // An empty batch: 0 / 0, NaN, as in PyTorch.
            let e = Tensor::zeros(&[0, 3]).unwrap();
            assert!(crate::kl_div(&e, &e, KlDivReduction::BatchMean, false).unwrap().item().unwrap().is_nan());
        });
    }

    #[test]
    fn reductions_default_to_pytorchs_mean() {
        assert_eq!(Reduction::default(), Reduction::Mean);
        assert_eq!(KlDivReduction::default(), KlDivReduction::Mean);
        for (r, k) in
            [(Reduction::None, KlDivReduction::None), (Reduction::Sum, KlDivReduction::Sum), (Reduction::Mean, KlDivReduction::Mean)]
        {
            assert_eq!(KlDivReduction::from(r), k);
        }
    }

    #[test]
    fn bad_weights_are_errors_naming_the_op() {
        let x = Tensor::rand_uniform(&[3, 4], 0.1, 0.9, 1).unwrap();
        let t = Tensor::rand_uniform(&[3, 4], 0.0, 1.0, 2).unwrap();
        let bce = |w: &Tensor| crate::binary_cross_entropy(&x, &t, Some(w), Reduction::Mean);
        let bcel = |w: &Tensor| crate::binary_cross_entropy_with_logits(&x, &t, Some(w), None, Reduction::Mean);
        for (op, f) in [("binary_cross_entropy", &bce as &dyn Fn(&Tensor) -> Result<Tensor>), ("binary_cross_entropy_with_logits", &bcel)] {
            // A weight that does not broadcast to the input, or would enlarge it.
            for shape in [&[5][..], &[3, 3], &[2, 3, 4], &[4, 1]] {
                let w = Tensor::ones(shape).unwrap();
                match f(&w) {
                    Err(Error::Shape { op: o, shapes, msg }) => {
                        assert_eq!(o, op);
                        assert_eq!(shapes, vec![vec![3, 4], shape.to_vec()]);
                        assert!(msg.contains("weight"), "{msg}");
                    }
                    other => panic!("{op}: weight {shape:?} gave {other:?}"),
                }
            }
            // A weight that requires a gradient: PyTorch has no derivative for it.
            let w = Tensor::ones(&[4]).unwrap().requires_grad().unwrap();
            let e = f(&w).unwrap_err();
            assert!(matches!(e, Error::Argument { op: o, .. } if o == op), "{e}");
            assert!(e.to_string().contains("weight"), "{e}");
            // Not f32.
            let w = Tensor::from_vec_i32(vec![1; 4], &[4]).unwrap();
            assert!(matches!(f(&w).unwrap_err(), Error::DType { op: o, arg: "weight", .. } if o == op));
        }
    }

    fn load_options() -> Oracle {
        Oracle::load_file("loss_options", "tools/oracle_loss_options.py")
    }

    #[test]
    fn weighted_binary_losses_match_pytorch() {
        let o = load_options();
        both_modes(|| {
            for name in ["col", "row", "full"] {
                let w = o.get(&format!("bcew_{name}_w")).detach();
                check(&o, &format!("bcew_{name}"), |x, t, r| crate::binary_cross_entropy(x, t, Some(&w), r));
            }
            for name in ["col", "row"] {
                let w = o.get(&format!("bcelw_{name}_w")).detach();
                check(&o, &format!("bcelw_{name}"), |x, t, r| crate::binary_cross_entropy_with_logits(x, t, Some(&w), None, r));
            }
            let (w, pw) = (o.get("bcelwpw_w").detach(), o.get("bcelwpw_pw").detach());
            check(&o, "bcelwpw", |x, t, r| crate::binary_cross_entropy_with_logits(x, t, Some(&w), Some(&pw), r));
        });
    }

    #[test]
    fn kl_div_batchmean_matches_pytorch() {
        let o = load_options();
        both_modes(|| {
            for name in ["kl", "kllog", "kl3", "0d"] {
                let key = format!("bm_{name}");
                let (x, t) = (o.get(&format!("{key}_x")), o.get(&format!("{key}_t")));
                let y = crate::kl_div(&x, &t, KlDivReduction::BatchMean, name == "kllog").unwrap();
                assert_close(&format!("{key}_y"), &y, &o.get(&format!("{key}_y")));
                o.check_grads(&key, &y, &[("x", &x), ("t", &t)]);
            }
        });
    }
}
