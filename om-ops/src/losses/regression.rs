//! Regression losses: `mse_loss`, `l1_loss`, `smooth_l1_loss` and `huber_loss` (PyTorch's
//! `F.*` with a [`Reduction`]), each one primitive over element pairs of the same shape (see
//! the `losses` module doc).

use super::{chain, check_pair, pair_cases, reduce};
use crate::Reduction;
use om_core::maps::{binary, unary};
use om_core::{Case, Error, Result, Tensor};
use om_macros::op;

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
pub(crate) fn sign(v: f32) -> f32 {
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
