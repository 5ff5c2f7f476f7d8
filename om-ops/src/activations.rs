//! Activations: `relu`, `sigmoid`, `tanh`, `gelu` (exact or tanh form, [`GeluForm`]),
//! `leaky_relu`, `silu`, `softplus`, `elu` and `log_sigmoid`, each with PyTorch's forward
//! value and gradient (its choices at kinks stated per operator; the oracle test of
//! `pointwise.rs` pins them). `relu`, `sigmoid`, `tanh` and `gelu` run on the lane kernels;
//! the others are scalar closures (`maps::unary`) with the fixed
//! transcendentals of `om_core::kernels::math`, the same code on every path and thread count.

use crate::elementwise_cases::unary_cases;
use om_core::kernels::fused::GeluFormula;
use om_core::kernels::lanes::{Binary, Unary};
use om_core::kernels::math;
use om_core::maps::{binary, binary_op, binary_op_over_gradient, gelu_with_slope_tensors, unary, unary_op};
use om_core::{Case, Error, Result, Tensor};
use om_macros::op;

/// Rectified linear unit `max(x, 0)`. Backward: `g` where the output is positive, else 0.
///
/// # Examples
///
/// ```
/// use om_ops::{relu, Tensor};
/// let x = Tensor::from_vec(vec![-1.0, 0.0, 2.0], &[3])?;
/// assert_eq!(relu(&x)?.to_vec(), vec![0.0, 0.0, 2.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [out])]
pub mod relu {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        unary_op(NAME, x, Unary::Relu)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        // Over `g`'s buffer when the engine's handle is its only one.
        d.x(binary_op_over_gradient(NAME, g, r.out(), Binary::ReluBackward)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        // Inputs keep 0.1 away from the kink at 0.
        unary_cases(super::relu, |s, seed| Case::input_away_from_zero(s, 0.1, 1.0, seed))
    }
}

/// Logistic sigmoid `1 / (1 + e^(−x))`. Backward: `g·y·(1−y)` with `y` the output.
///
/// # Examples
///
/// ```
/// use om_ops::{sigmoid, Tensor};
/// let x = Tensor::from_vec(vec![0.0], &[1])?;
/// assert!((sigmoid(&x)?.item()? - 0.5).abs() < 1e-6);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [out])]
pub mod sigmoid {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        unary_op(NAME, x, Unary::Sigmoid)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(binary_op(NAME, g, r.out(), Binary::SigmoidBackward)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        unary_cases(super::sigmoid, |s, seed| Case::input(s, -3.0, 3.0, seed))
    }
}

/// Hyperbolic tangent. Backward: `g·(1−y²)` with `y` the output.
///
/// # Examples
///
/// ```
/// use om_ops::{tanh, Tensor};
/// let x = Tensor::from_vec(vec![0.0, 1.0], &[2])?;
/// let y = tanh(&x)?.to_vec();
/// assert!(y[0].abs() < 1e-6 && (y[1] - 1f32.tanh()).abs() < 1e-6);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [out])]
pub mod tanh {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        unary_op(NAME, x, Unary::Tanh)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(binary_op(NAME, g, r.out(), Binary::TanhBackward)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        unary_cases(super::tanh, |s, seed| Case::input(s, -2.0, 2.0, seed))
    }
}

/// Which GELU formula [`gelu()`] uses; `Default` is PyTorch's default, [`GeluForm::Erf`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GeluForm {
    /// `x·Φ(x)` with the exact normal CDF (PyTorch `approximate='none'`, the default).
    #[default]
    Erf,
    /// `½x(1 + tanh(√(2/π)(x + 0.044715x³)))` (PyTorch `approximate='tanh'`).
    Tanh,
}

/// Gaussian error linear unit, erf or tanh form. Backward: `g·(Φ(x) + x·φ(x))` (erf) or
/// `g·(½(1+t) + ½x(1−t²)k(1+3·0.044715x²))` with `t = tanh(k(x+0.044715x³))` (tanh).
/// When `x` needs a gradient, the forward writes that slope next to the value in the same
/// pass (the erf form's Gaussian terms are then evaluated once, not again in the
/// backward) and the record keeps the slope instead of `x`: the same storage, and the
/// bits of recomputing it from `x` (`om_core::kernels::fused`).
///
/// # Examples
///
/// ```
/// use om_ops::{gelu, GeluForm, Tensor};
/// let x = Tensor::from_vec(vec![-1.0, 0.0, 2.0], &[3])?;
/// let exact = gelu(&x, GeluForm::default())?; // F.gelu(x)
/// let approx = gelu(&x, GeluForm::Tanh)?; // F.gelu(x, approximate='tanh')
/// assert_eq!(exact.to_vec()[1], 0.0);
/// assert!((exact.to_vec()[2] - approx.to_vec()[2]).abs() < 1e-3);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [slope: owned], attrs = [form: GeluForm])]
pub mod gelu {
    use super::*;

    pub fn forward(x: &Tensor, form: GeluForm) -> Result<(Tensor, Owned)> {
        if !x.needs_grad() {
            // Not recorded (the input needs no gradient): the value alone.
            let y = match form {
                GeluForm::Erf => unary_op(NAME, x, Unary::GeluErf),
                GeluForm::Tanh => unary_op(NAME, x, Unary::GeluTanh),
            }?;
            return Ok((y, Owned { slope: Tensor::zeros(&[0])? }));
        }
        let formula = match form {
            GeluForm::Erf => GeluFormula::Erf,
            GeluForm::Tanh => GeluFormula::Tanh,
        };
        let [y, slope] = gelu_with_slope_tensors(NAME, x, formula)?;
        Ok((y, Owned { slope }))
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        // `g·slope`: the bits of `GeluErfBackward` / `GeluTanhBackward` of `(g, x)`; written
        // over `g`'s buffer when `g` is its only handle.
        d.x(binary_op_over_gradient(NAME, g, r.slope(), Binary::Mul)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let mut cases = Vec::new();
        for (form, tag) in [(GeluForm::Erf, "erf"), (GeluForm::Tanh, "tanh")] {
            cases.push(Case::new(format!("{tag}_contiguous"), vec![Case::input(&[3, 4], -3.0, 3.0, 1)], move |x| super::gelu(&x[0], form)));
            cases.push(Case::new(format!("{tag}_transposed"), vec![Case::input(&[4, 3], -3.0, 3.0, 2)], move |x| {
                super::gelu(&crate::transpose(&x[0], 0, 1)?, form)
            }));
            cases.push(Case::new(format!("{tag}_strided"), vec![Case::input(&[3, 8], -3.0, 3.0, 3)], move |x| {
                super::gelu(&crate::slice(&x[0], 1, 1, 8, 3)?, form)
            }));
        }
        cases
    }
}

/// Leaky ReLU: `x` where `x > 0`, else `slope·x`. Backward: `g` where `x > 0`, else
/// `slope·g` (PyTorch: the kink at 0 takes the negative side's slope).
///
/// # Examples
///
/// ```
/// use om_ops::{leaky_relu, Tensor};
/// let x = Tensor::from_vec(vec![-2.0, 3.0], &[2])?;
/// assert_eq!(leaky_relu(&x, 0.5)?.to_vec(), vec![-1.0, 3.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x], attrs = [slope: f32])]
pub mod leaky_relu {
    use super::*;

    pub fn forward(x: &Tensor, slope: f32) -> Result<Tensor> {
        if !slope.is_finite() {
            return Err(Error::argument(NAME, format!("the slope must be finite, got {slope}")));
        }
        unary(NAME, x, move |v| if v > 0.0 { v } else { v * slope })
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let slope = r.slope;
        d.x(binary(NAME, g, r.x(), move |g, x| if x > 0.0 { g } else { g * slope })?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        // Inputs keep 0.1 away from the kink at 0.
        unary_cases(|x| super::leaky_relu(x, 0.2), |s, seed| Case::input_away_from_zero(s, 0.1, 1.0, seed))
    }
}

/// SiLU (swish) `x·σ(x)`. Backward: `g·σ(x)·(1 + x·(1 − σ(x)))`, recomputed from `x`.
///
/// # Examples
///
/// ```
/// use om_ops::{silu, Tensor};
/// let x = Tensor::from_vec(vec![0.0, 2.0], &[2])?;
/// let y = silu(&x)?.to_vec(); // x·σ(x)
/// assert!(y[0].abs() < 1e-6 && (y[1] - 2.0 / (1.0 + (-2f32).exp())).abs() < 1e-5);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x])]
pub mod silu {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        unary(NAME, x, |v| v * math::sigmoid(v))
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(binary(NAME, g, r.x(), |g, x| {
            let s = math::sigmoid(x);
            g * (s * (1.0 + x * (1.0 - s)))
        })?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        unary_cases(super::silu, |s, seed| Case::input(s, -3.0, 3.0, seed))
    }
}

/// `ln(1 + u)` accurate for small `u`, from the fixed `log` (Goldberg's trick: the
/// rounding of `1 + u` is corrected by `u / ((1 + u) − 1)`).
fn log1p(u: f32) -> f32 {
    let w = 1.0 + u;
    if w == 1.0 {
        u
    } else if w == f32::INFINITY {
        w
    } else {
        math::log(w) * (u / (w - 1.0))
    }
}

/// Softplus `ln(1 + e^(βx))/β`, and `x` itself where `βx > threshold` (PyTorch's
/// linear region). Backward: `g·z/(z + 1)` with `z = e^(βx)`, and `g` in the linear region.
///
/// # Examples
///
/// ```
/// use om_ops::{softplus, Tensor};
/// let x = Tensor::from_vec(vec![0.0, 30.0], &[2])?;
/// let y = softplus(&x, 1.0, 20.0)?.to_vec(); // ln(1 + eˣ); linear above the threshold
/// assert!((y[0] - 2f32.ln()).abs() < 1e-6 && y[1] == 30.0);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x], attrs = [beta: f32, threshold: f32])]
pub mod softplus {
    use super::*;

    pub fn forward(x: &Tensor, beta: f32, threshold: f32) -> Result<Tensor> {
        if !beta.is_finite() || beta == 0.0 {
            return Err(Error::argument(NAME, format!("beta must be finite and nonzero, got {beta}")));
        }
        if threshold.is_nan() {
            return Err(Error::argument(NAME, "the threshold is NaN"));
        }
        unary(NAME, x, move |v| if v * beta > threshold { v } else { log1p(math::exp(v * beta)) / beta })
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let (beta, threshold) = (r.beta, r.threshold);
        d.x(binary(NAME, g, r.x(), move |g, x| {
            if x * beta > threshold {
                g
            } else {
                let z = math::exp(x * beta);
                g * z / (z + 1.0)
            }
        })?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        // beta 1 and 2 with threshold 20: the inputs stay in the log branch (the switch to
        // the linear branch is a small jump, pinned by the oracle test instead).
        let mut cases = unary_cases(|x| super::softplus(x, 1.0, 20.0), |s, seed| Case::input(s, -3.0, 3.0, seed));
        cases.push(Case::new("beta2_contiguous", vec![Case::input(&[3, 4], -3.0, 1.5, 4)], |x| super::softplus(&x[0], 2.0, 20.0)));
        cases
    }
}

/// Element-wise ELU: `x` for `x > 0`, `α(eˣ − 1)` otherwise (`eˣ` the fixed polynomial).
/// Backward, as PyTorch: `g` for `x > 0`, `g·α·eˣ` otherwise (so `g·α` at 0).
///
/// # Examples
///
/// ```
/// use om_ops::{elu, Tensor};
/// let x = Tensor::from_vec(vec![0.0, 2.0], &[2])?;
/// assert_eq!(elu(&x, 1.0)?.to_vec()[1], 2.0);
/// assert!(elu(&x, 1.0)?.to_vec()[0].abs() < 1e-6);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x], attrs = [alpha: f32])]
pub mod elu {
    use super::*;

    pub fn forward(x: &Tensor, alpha: f32) -> Result<Tensor> {
        if !alpha.is_finite() {
            return Err(Error::argument(NAME, format!("alpha must be finite, got {alpha}")));
        }
        unary(NAME, x, move |v| if v > 0.0 { v } else { alpha * (math::exp(v) - 1.0) })
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let alpha = r.alpha;
        d.x(binary(NAME, g, r.x(), move |g, x| if x > 0.0 { g } else { g * alpha * math::exp(x) })?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let mut cases = unary_cases(|x| super::elu(x, 1.0), |s, seed| Case::input_away_from_zero(s, 0.05, 3.0, seed));
        cases.push(Case::new("alpha_half", vec![Case::input_away_from_zero(&[3, 4], 0.05, 3.0, 4)], |x| super::elu(&x[0], 0.5)));
        cases
    }
}

/// Element-wise `log σ(x) = min(x, 0) − log(1 + e^(−|x|))`, stable for large `|x|`.
/// Backward, as PyTorch: with `b = e^(−|x|)`, `g·(1 − b/(1 + b))` for `x < 0` and
/// `g·b/(1 + b)` otherwise (that is `g·σ(−x)`).
///
/// # Examples
///
/// ```
/// use om_ops::{log_sigmoid, Tensor};
/// let x = Tensor::from_vec(vec![0.0], &[1])?;
/// assert!((log_sigmoid(&x)?.item()? + 2f32.ln()).abs() < 1e-6);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x])]
pub mod log_sigmoid {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        unary(NAME, x, |v| v.min(0.0) - log1p(math::exp(-v.abs())))
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(binary(NAME, g, r.x(), |g, x| {
            let b = math::exp(-x.abs());
            let s = b / (1.0 + b);
            g * if x < 0.0 { 1.0 - s } else { s }
        })?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        unary_cases(super::log_sigmoid, |s, seed| Case::input(s, -4.0, 4.0, seed))
    }
}
