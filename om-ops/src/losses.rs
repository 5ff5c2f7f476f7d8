//! Element-wise losses with one [`Reduction`] (`None`, `Sum`, `Mean`): the regression
//! losses `mse_loss`, `l1_loss`, `smooth_l1_loss`, `huber_loss` (input and target broadcast
//! together, as PyTorch does with a warning), the binary losses `binary_cross_entropy` and
//! `binary_cross_entropy_with_logits` (input and target of one shape), and `kl_div`.
//!
//! Each is one primitive: forward maps the element pairs with a scalar closure (the same
//! code on every path, so exact mode is bit-identical across paths and threads) and reduces
//! with [`crate::sum()`] / [`crate::mean()`] (f64 in element order, rounded once). Backward is
//! `g · ∂loss/∂x` per element, with `g/n` for a mean over `n` elements (the product taken
//! in f64); a gradient of the broadcast shape is summed down to each input by the engine.
//! Logarithms and exponentials use the fixed `om_core::kernels::math` functions.
//!
//! `Reduction::Mean` averages over every element (PyTorch's `'mean'`); PyTorch's
//! `kl_div(reduction='batchmean')` is `Sum` divided by the batch size.

use crate::Reduction;
use om_core::kernels::elementwise::{binary, unary};
use om_core::kernels::math;
use om_core::{Case, Error, Result, Tensor};
use om_macros::op;

/// Applies the reduction to the element-wise losses.
fn reduce(loss: Tensor, reduction: Reduction) -> Result<Tensor> {
    match reduction {
        Reduction::None => Ok(loss),
        Reduction::Sum => crate::sum(&loss, None, false),
        Reduction::Mean => crate::mean(&loss, None, false),
    }
}

/// `g · deriv` per element, where `deriv` has the broadcast shape of the losses and `g` is
/// the output gradient: of that shape (`None`) or a scalar (`Sum`, or `Mean` with the
/// factor `1/n` over the `n` elements).
fn chain(op: &'static str, deriv: &Tensor, g: &Tensor, reduction: Reduction) -> Result<Tensor> {
    let scale = match reduction {
        Reduction::Mean => 1.0 / deriv.numel() as f64,
        Reduction::None | Reduction::Sum => 1.0,
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

/// Checks that `input` and `target` are `f32` and, for the binary losses, of one shape.
fn check_pair(op: &'static str, input: &Tensor, target: &Tensor, same_shape: bool) -> Result<()> {
    input.expect_f32(op, "input")?;
    target.expect_f32(op, "target")?;
    if same_shape && input.shape() != target.shape() {
        return Err(Error::shape(op, &[input.shape(), target.shape()], "input and target must have the same shape"));
    }
    Ok(())
}

/// The gradient-check cases of a regression loss `f(input, target, reduction)`: every
/// reduction, a target broadcast along rows, a transposed and a strided input. `input` and
/// `target` build the checked values (kept away from the loss's kinks by the caller).
fn pair_cases<F>(prefix: &str, f: F, input: fn(&[usize], u64) -> Tensor, target: fn(&[usize], u64) -> Tensor) -> Vec<Case>
where
    F: Fn(&Tensor, &Tensor, Reduction) -> Result<Tensor> + Copy + Send + Sync + 'static,
{
    vec![
        Case::new(format!("{prefix}mean"), vec![input(&[3, 4], 1), target(&[3, 4], 2)], move |x| f(&x[0], &x[1], Reduction::Mean)),
        Case::new(format!("{prefix}sum_broadcast_target"), vec![input(&[2, 3, 4], 3), target(&[4], 4)], move |x| {
            f(&x[0], &x[1], Reduction::Sum)
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

/// Mean squared error: `(x − t)²` per element, then the reduction. Backward:
/// `∂/∂x = 2(x − t)·g`, `∂/∂t = −2(x − t)·g` (`g/n` for a mean).
#[op(saved = [input, target], attrs = [reduction: Reduction])]
pub mod mse_loss {
    use super::*;

    pub fn forward(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
        check_pair(NAME, input, target, false)?;
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

/// Mean absolute error: `|x − t|` per element, then the reduction. Backward:
/// `∂/∂x = sign(x − t)·g`, `∂/∂t = −sign(x − t)·g`, with `sign(0) = 0` as in PyTorch (a
/// zero difference passes no gradient).
#[op(saved = [input, target], attrs = [reduction: Reduction])]
pub mod l1_loss {
    use super::*;

    pub fn forward(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
        check_pair(NAME, input, target, false)?;
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

/// Smooth L1 loss with threshold `beta ≥ 0`: for `z = |x − t|`, `0.5·z²/beta` when
/// `z < beta`, else `z − 0.5·beta`; `beta = 0` is the L1 loss (as in PyTorch). Backward:
/// `∂/∂x = clamp((x − t)/beta, −1, 1)·g` (PyTorch's form: `−1` below `−beta`, `1` above
/// `beta`, `(x − t)/beta` between), `∂/∂t` its negative.
#[op(saved = [input, target], attrs = [beta: f32, reduction: Reduction])]
pub mod smooth_l1_loss {
    use super::*;

    pub fn forward(input: &Tensor, target: &Tensor, beta: f32, reduction: Reduction) -> Result<Tensor> {
        check_pair(NAME, input, target, false)?;
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

/// Huber loss with threshold `delta > 0`: for `z = |x − t|`, `0.5·z²` when `z < delta`,
/// else `delta·(z − 0.5·delta)`. Backward: `∂/∂x = clamp(x − t, −delta, delta)·g`,
/// `∂/∂t` its negative.
#[op(saved = [input, target], attrs = [delta: f32, reduction: Reduction])]
pub mod huber_loss {
    use super::*;

    pub fn forward(input: &Tensor, target: &Tensor, delta: f32, reduction: Reduction) -> Result<Tensor> {
        check_pair(NAME, input, target, false)?;
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
/// against targets `t` of the same shape: `−(t·max(log x, −100) + (1 − t)·max(log(1 − x),
/// −100))`, then the reduction. Backward (PyTorch's forms): `∂/∂x = (x − t) / max(x(1 − x),
/// 1e−12)·g` (finite at `x = 0` and `1`), `∂/∂t = (log(1 − x) − log x)·g` (unclamped:
/// `±inf` at `x = 0`, `1`).
#[op(saved = [input, target], attrs = [reduction: Reduction])]
pub mod binary_cross_entropy {
    use super::*;

    pub fn forward(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
        check_pair(NAME, input, target, true)?;
        let bad = input.try_with_f32(|xs| xs.iter().copied().find(|v| !(0.0..=1.0).contains(v)))?;
        if let Some(v) = bad {
            return Err(Error::argument(NAME, format!("every input must be a probability in [0, 1], found {v}")));
        }
        let loss = binary(NAME, input, target, |x, t| -(t * clamped_log(x) + (1.0 - t) * clamped_log(1.0 - x)))?;
        reduce(loss, reduction)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        if d.needs_input() {
            let deriv = binary(NAME, r.input(), r.target(), |x, t| (x - t) / ((1.0 - x) * x).max(1e-12))?;
            d.input(chain(NAME, &deriv, g, r.reduction)?);
        }
        if d.needs_target() {
            let deriv = unary(NAME, r.input(), |x| math::log(1.0 - x) - math::log(x))?;
            d.target(chain(NAME, &deriv, g, r.reduction)?);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let p = |shape: &[usize], seed| Case::input(shape, 0.1, 0.9, seed);
        let t = |shape: &[usize], seed| Case::input(shape, 0.0, 1.0, seed);
        let f = super::binary_cross_entropy;
        vec![
            Case::new("mean", vec![p(&[3, 4], 1), t(&[3, 4], 2)], move |x| f(&x[0], &x[1], Reduction::Mean)),
            Case::new("sum", vec![p(&[2, 3, 2], 3), t(&[2, 3, 2], 4)], move |x| f(&x[0], &x[1], Reduction::Sum)),
            Case::new("none_transposed", vec![p(&[4, 3], 5), t(&[3, 4], 6)], move |x| {
                f(&crate::transpose(&x[0], 0, 1)?, &x[1], Reduction::None)
            }),
            Case::new("mean_strided", vec![p(&[3, 8], 7), t(&[3, 4], 8)], move |x| {
                f(&crate::slice(&x[0], 1, 0, 8, 2)?, &x[1], Reduction::Mean)
            }),
        ]
    }
}

/// `log σ(x) = min(x, 0) − log(1 + e^(−|x|))`, stable for every `x`.
fn log_sigmoid(x: f32) -> f32 {
    x.min(0.0) - math::log(1.0 + math::exp(-x.abs()))
}

/// Binary cross-entropy of logits `x` against targets `t` of the same shape, in the stable
/// form `(1 − t)·x − w·log σ(x)` with `w = (p − 1)·t + 1` for the optional positive-class
/// weight `p` (broadcast to `t`'s shape, e.g. one per class; `w = 1` without it), then the
/// reduction. Backward: `∂/∂x = (w·σ(x) − p·t)·g`, `∂/∂t = (−x − (p − 1)·log σ(x))·g`,
/// `∂/∂p = −t·log σ(x)·g` (PyTorch refuses a `pos_weight` that requires a gradient; here it
/// has this one).
#[op(saved = [input, target, pos_weight], attrs = [reduction: Reduction])]
pub mod binary_cross_entropy_with_logits {
    use super::*;

    pub fn forward(input: &Tensor, target: &Tensor, pos_weight: Option<&Tensor>, reduction: Reduction) -> Result<Tensor> {
        check_pair(NAME, input, target, true)?;
        let loss = match pos_weight {
            None => binary(NAME, input, target, |x, t| (1.0 - t) * x - log_sigmoid(x))?,
            Some(p) => {
                let w = weights(input, target, p)?;
                let a = binary(NAME, input, target, |x, t| (1.0 - t) * x)?;
                let b = binary(NAME, &w, input, |w, x| w * log_sigmoid(x))?;
                binary(NAME, &a, &b, |a, b| a - b)?
            }
        };
        reduce(loss, reduction)
    }

    /// `w = (p − 1)·t + 1` of `t`'s shape, checking `p` broadcasts to it.
    fn weights(input: &Tensor, target: &Tensor, p: &Tensor) -> Result<Tensor> {
        p.expect_f32(NAME, "pos_weight")?;
        let w = binary(NAME, p, target, |p, t| (p - 1.0) * t + 1.0)?;
        if w.shape() != target.shape() {
            return Err(Error::shape(NAME, &[input.shape(), p.shape()], "pos_weight must broadcast to the input's shape"));
        }
        Ok(w)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let (x, t) = (r.input(), r.target());
        let p = r.pos_weight().ok();
        if d.needs_input() {
            let deriv = match p {
                None => binary(NAME, x, t, |x, t| math::sigmoid(x) - t)?,
                Some(p) => {
                    let a = binary(NAME, &weights(x, t, p)?, x, |w, x| w * math::sigmoid(x))?;
                    let pt = binary(NAME, p, t, |p, t| p * t)?;
                    binary(NAME, &a, &pt, |a, pt| a - pt)?
                }
            };
            d.input(chain(NAME, &deriv, g, r.reduction)?);
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
            d.target(chain(NAME, &deriv, g, r.reduction)?);
        }
        if d.needs_pos_weight() {
            let deriv = binary(NAME, t, x, |t, x| -t * log_sigmoid(x))?;
            d.pos_weight(chain(NAME, &deriv, g, r.reduction)?);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let x = |shape: &[usize], seed| Case::input(shape, -3.0, 3.0, seed);
        let t = |shape: &[usize], seed| Case::input(shape, 0.0, 1.0, seed);
        let p = |shape: &[usize], seed| Case::input(shape, 0.5, 2.0, seed);
        let f = super::binary_cross_entropy_with_logits;
        vec![
            Case::new("mean", vec![x(&[3, 4], 1), t(&[3, 4], 2)], move |v| f(&v[0], &v[1], None, Reduction::Mean)),
            Case::new("sum_pos_weight_per_class", vec![x(&[3, 4], 3), t(&[3, 4], 4), p(&[4], 5)], move |v| {
                f(&v[0], &v[1], Some(&v[2]), Reduction::Sum)
            }),
            Case::new("none_transposed_pos_weight", vec![x(&[4, 3], 6), t(&[3, 4], 7), p(&[3, 4], 8)], move |v| {
                f(&crate::transpose(&v[0], 0, 1)?, &v[1], Some(&v[2]), Reduction::None)
            }),
            Case::new("mean_strided", vec![x(&[3, 8], 9), t(&[3, 4], 10), p(&[1], 11)], move |v| {
                f(&crate::slice(&v[0], 1, 0, 8, 2)?, &v[1], Some(&v[2]), Reduction::Mean)
            }),
        ]
    }
}

// ===== divergence =====

/// Kullback–Leibler divergence of log-probabilities `x` from a target `t` (broadcast
/// together), PyTorch's pointwise form: `t·log t − t·x` (taken as `−t·x` where `t = 0`),
/// or with `log_target` (`t` holds log-probabilities) `e^t·(t − x)`; then the reduction
/// (`Mean` averages over all elements; PyTorch's `'batchmean'` is `Sum` / batch size).
/// Backward: `∂/∂x = −t·g` (`−e^t·g`); `∂/∂t = (log t + 1 − x)·g`, NaN where `t = 0` as
/// PyTorch's `xlogy` rule gives it (`log t + t/t − x`), or `e^t·(t − x + 1)·g` with `log_target`.
#[op(saved = [input, target], attrs = [reduction: Reduction, log_target: bool])]
pub mod kl_div {
    use super::*;

    pub fn forward(input: &Tensor, target: &Tensor, reduction: Reduction, log_target: bool) -> Result<Tensor> {
        check_pair(NAME, input, target, false)?;
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
            // Over both operands, so the gradient has the broadcast shape.
            let deriv = if r.log_target { binary(NAME, x, t, |_, t| -math::exp(t))? } else { binary(NAME, x, t, |_, t| -t)? };
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
    /// the value and the gradients of `x` and `t`.
    fn check(o: &Oracle, prefix: &str, f: impl Fn(&Tensor, &Tensor, Reduction) -> Result<Tensor>) {
        let (x, t) = (o.get(&format!("{prefix}_x")), o.get(&format!("{prefix}_t")));
        for (red, reduction) in REDUCTIONS {
            let name = format!("{prefix}_{red}");
            let y = f(&x, &t, reduction).unwrap();
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
            check(&o, "bce", crate::binary_cross_entropy);
            check(&o, "bcel", |x, t, r| crate::binary_cross_entropy_with_logits(x, t, None, r));
            let pw = o.get("bcelpw_pw").detach();
            check(&o, "bcelpw", |x, t, r| crate::binary_cross_entropy_with_logits(x, t, Some(&pw), r));
            // Inputs exactly 0 and 1: the log clamped at −100 and the input gradient divided
            // by max(x(1 − x), 1e−12), as PyTorch.
            let (x, t) = (o.get("bce_edge_x"), o.get("bce_edge_t").detach());
            let y = crate::binary_cross_entropy(&x, &t, Reduction::None).unwrap();
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
        let e = crate::binary_cross_entropy(&x, &t, Reduction::Mean).unwrap_err().to_string();
        assert!(e.contains("binary_cross_entropy") && e.contains("1.5"), "{e}");
        let t3 = Tensor::from_vec(vec![0.0, 1.0, 0.0], &[3]).unwrap();
        let e = crate::binary_cross_entropy_with_logits(&x, &t3, None, Reduction::Mean).unwrap_err().to_string();
        assert!(e.contains("binary_cross_entropy_with_logits"), "{e}");
        let pw = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3, 1]).unwrap();
        let e = crate::binary_cross_entropy_with_logits(&x, &t, Some(&pw), Reduction::Mean).unwrap_err().to_string();
        assert!(e.contains("pos_weight"), "{e}");
        let e = crate::smooth_l1_loss(&x, &t, -1.0, Reduction::Mean).unwrap_err().to_string();
        assert!(e.contains("smooth_l1_loss") && e.contains("beta"), "{e}");
        let e = crate::huber_loss(&x, &t, 0.0, Reduction::Mean).unwrap_err().to_string();
        assert!(e.contains("huber_loss") && e.contains("delta"), "{e}");
        let e = crate::mse_loss(&x, &t3, Reduction::Mean).unwrap_err().to_string();
        assert!(e.contains("mse_loss"), "{e}");
    }
}
