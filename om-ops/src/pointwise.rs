//! Element-wise math: `exp`, `log`, `sin`, `cos`, `sqrt`, `rsqrt`, `pow` (a scalar or a
//! tensor exponent: `pow_scalar`, `pow_tensor`), `abs`, `clamp`, `maximum`, `minimum` and
//! `where_`, each with PyTorch's forward value and gradient (including its choices at kinks
//! and ties, stated per operator and pinned by the oracle test below, which also covers the
//! activations of `activations.rs` and the scalar operands of `arith.rs`).
//!
//! `exp`, `log`, `sin` and `cos` run on the lane kernels; the others are scalar closures
//! (`maps::{unary, binary}`), the same code on every path and thread
//! count. Transcendentals inside closures use the fixed polynomials of
//! `om_core::kernels::math`; `sqrt` is an IEEE operation (correctly rounded everywhere);
//! `pow_scalar` and `pow_tensor` run, in exact mode, the `Pow` lane op (`math64::powf`:
//! fixed `f64` `exp` and `log`, within 0.5 + 2⁻¹⁶ ulp, the same bits on every machine) and
//! in fast mode std's `powf` (the platform libm: about 5 times faster than the fixed
//! algorithm, not guaranteed the same across platforms), forward and backward (`pow_fn`).

use crate::elementwise_cases::unary_cases;
use om_core::compute::{Compute, Mode};
use om_core::kernels::lanes::{Binary, Unary};
use om_core::kernels::math;
use om_core::layout::{broadcast_shapes, broadcast_strides, contiguous_strides, for_each_row};
use om_core::maps::{binary, binary_op, unary, unary_op};
use om_core::{Case, DType, Error, Result, Tensor};
use om_macros::op;

/// The scalar power function of the current mode: exact mode's fixed [`math::pow`] (the
/// bits of the `Pow` lane op), fast mode's std `powf`.
fn pow_fn() -> fn(f32, f32) -> f32 {
    match Compute::mode() {
        Mode::Exact => math::pow,
        Mode::Fast => f32::powf,
    }
}

/// The standard cases of a binary map: equal shapes, broadcasting both ways, a transposed
/// operand and a strided (every other column) operand. `a` is drawn by `input_a`, `b` by
/// `input_b`.
fn binary_cases(
    f: fn(&Tensor, &Tensor) -> Result<Tensor>,
    input_a: fn(&[usize], u64) -> Tensor,
    input_b: fn(&[usize], u64) -> Tensor,
) -> Vec<Case> {
    vec![
        Case::new("same_shape", vec![input_a(&[2, 3], 1), input_b(&[2, 3], 2)], move |x| f(&x[0], &x[1])),
        Case::new("broadcast_row", vec![input_a(&[3, 4], 3), input_b(&[4], 4)], move |x| f(&x[0], &x[1])),
        Case::new("broadcast_both", vec![input_a(&[2, 1, 3], 5), input_b(&[4, 1], 6)], move |x| f(&x[0], &x[1])),
        Case::new("transposed", vec![input_a(&[3, 2], 7), input_b(&[2, 3], 8)], move |x| f(&crate::transpose(&x[0], 0, 1)?, &x[1])),
        Case::new("strided", vec![input_a(&[2, 6], 9), input_b(&[2, 3], 10)], move |x| f(&crate::slice(&x[0], 1, 0, 6, 2)?, &x[1])),
    ]
}

/// Operands of `maximum`/`minimum` kept 0.05 apart (no tie within the finite-difference
/// step): `a` with `0.1 ≤ |a| < 1`, `b` in `[−0.05, 0.05)`, so each side wins somewhere.
fn separated_cases(f: fn(&Tensor, &Tensor) -> Result<Tensor>) -> Vec<Case> {
    binary_cases(f, |s, seed| Case::input_away_from_zero(s, 0.1, 1.0, seed), |s, seed| Case::input(s, -0.05, 0.05, seed))
}

// ===== exponential and powers =====

/// Element-wise `eˣ` (lane kernel; exact mode's fixed polynomial). Backward: `g·y` with
/// `y` the output.
///
/// # Examples
///
/// ```
/// use om_ops::{exp, Tensor};
/// let x = Tensor::from_vec(vec![0.0, 1.0], &[2])?;
/// let y = exp(&x)?.to_vec();
/// assert!((y[0] - 1.0).abs() < 1e-6 && (y[1] - std::f32::consts::E).abs() < 1e-6);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [out])]
pub mod exp {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        unary_op(NAME, x, Unary::Exp)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(binary_op(NAME, g, r.out(), Binary::Mul)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        unary_cases(super::exp, |s, seed| Case::input(s, -2.0, 2.0, seed))
    }
}

/// Element-wise natural logarithm `ln x` (lane kernel; exact mode's fixed polynomial;
/// `ln 0 = −∞`, negative inputs give NaN). Backward: `g / x`.
///
/// # Examples
///
/// ```
/// use om_ops::{log, Tensor};
/// let x = Tensor::from_vec(vec![1.0, std::f32::consts::E], &[2])?;
/// let y = log(&x)?.to_vec();
/// assert!(y[0].abs() < 1e-6 && (y[1] - 1.0).abs() < 1e-6);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x])]
pub mod log {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        unary_op(NAME, x, Unary::Log)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(binary_op(NAME, g, r.x(), Binary::Div)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        // Inputs in [0.5, 3): away from the pole at 0.
        unary_cases(super::log, |s, seed| Case::input(s, 0.5, 3.0, seed))
    }
}

/// Element-wise sine (lane kernel; exact mode's fixed polynomials after an exact argument
/// reduction, see `docs/transcendentals.md`; ±∞ give NaN). Backward: `g·cos x`.
///
/// # Examples
///
/// ```
/// use om_ops::{sin, Tensor};
/// let x = Tensor::from_vec(vec![0.0, std::f32::consts::FRAC_PI_2], &[2])?;
/// let y = sin(&x)?.to_vec();
/// assert!(y[0].abs() < 1e-6 && (y[1] - 1.0).abs() < 1e-6);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x])]
pub mod sin {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        unary_op(NAME, x, Unary::Sin)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(binary_op(NAME, g, r.x(), Binary::SinBackward)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        unary_cases(super::sin, |s, seed| Case::input(s, -4.0, 4.0, seed))
    }
}

/// Element-wise cosine (lane kernel, as [`sin()`]). Backward: `−g·sin x`.
///
/// # Examples
///
/// ```
/// use om_ops::{cos, Tensor};
/// let x = Tensor::from_vec(vec![0.0, std::f32::consts::PI], &[2])?;
/// let y = cos(&x)?.to_vec();
/// assert!((y[0] - 1.0).abs() < 1e-6 && (y[1] + 1.0).abs() < 1e-6);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x])]
pub mod cos {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        unary_op(NAME, x, Unary::Cos)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(binary_op(NAME, g, r.x(), Binary::CosBackward)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        unary_cases(super::cos, |s, seed| Case::input(s, -4.0, 4.0, seed))
    }
}

/// Element-wise `√x` (IEEE square root; negative inputs give NaN). Backward: `g / (2y)`
/// with `y` the output (PyTorch's formula; `+∞` at 0).
///
/// # Examples
///
/// ```
/// use om_ops::{sqrt, Tensor};
/// let x = Tensor::from_vec(vec![4.0, 9.0], &[2])?;
/// assert_eq!(sqrt(&x)?.to_vec(), vec![2.0, 3.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [out])]
pub mod sqrt {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        unary(NAME, x, f32::sqrt)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(binary(NAME, g, r.out(), |g, y| g / (2.0 * y))?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        // Inputs in [0.5, 3): away from the infinite slope at 0.
        unary_cases(super::sqrt, |s, seed| Case::input(s, 0.5, 3.0, seed))
    }
}

/// Element-wise `1/√x`. Backward: `−½·g·y³` with `y` the output (PyTorch's formula).
///
/// # Examples
///
/// ```
/// use om_ops::{rsqrt, Tensor};
/// let x = Tensor::from_vec(vec![4.0, 0.25], &[2])?;
/// let y = rsqrt(&x)?.to_vec();
/// assert!((y[0] - 0.5).abs() < 1e-6 && (y[1] - 2.0).abs() < 1e-6);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [out])]
pub mod rsqrt {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        unary(NAME, x, |v| 1.0 / v.sqrt())
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(binary(NAME, g, r.out(), |g, y| -0.5 * g * (y * y * y))?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        // Inputs in [0.5, 3): away from the pole at 0.
        unary_cases(super::rsqrt, |s, seed| Case::input(s, 0.5, 3.0, seed))
    }
}

/// The exponent of [`pow()`]: a scalar (`x.pow(2.0)`, PyTorch's `x ** 2`; an `i32`
/// converts too) or a tensor broadcast against the base (`x.pow(&y)`).
///
/// ```
/// use om_ops::{Exponent, Tensor};
/// let y = Tensor::ones(&[2])?;
/// assert!(matches!(Exponent::from(2.0), Exponent::Scalar(p) if p == 2.0));
/// assert!(matches!(Exponent::from(3), Exponent::Scalar(p) if p == 3.0));
/// assert!(matches!(Exponent::from(&y), Exponent::Tensor(_)));
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub enum Exponent<'a> {
    /// One exponent for every element: [`pow_scalar()`].
    Scalar(f32),
    /// An exponent per element, broadcast with the base: [`pow_tensor()`].
    Tensor(&'a Tensor),
}

impl From<f32> for Exponent<'_> {
    fn from(p: f32) -> Self {
        Exponent::Scalar(p)
    }
}

impl From<i32> for Exponent<'_> {
    /// The exponent as `f32` (exact up to 2²⁴ in magnitude).
    fn from(p: i32) -> Self {
        Exponent::Scalar(p as f32)
    }
}

impl<'a> From<&'a Tensor> for Exponent<'a> {
    fn from(e: &'a Tensor) -> Self {
        Exponent::Tensor(e)
    }
}

/// Element-wise power, PyTorch's `torch.pow(x, exponent)` (`x ** exponent`): a scalar
/// exponent runs [`pow_scalar()`], a tensor one [`pow_tensor()`] (broadcast).
/// Backward: theirs.
///
/// # Examples
///
/// ```
/// use om_ops::{pow, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3])?;
/// assert_eq!(pow(&x, 2.0)?.to_vec(), vec![1.0, 4.0, 9.0]);
/// assert_eq!(pow(&x, 3)?.to_vec(), vec![1.0, 8.0, 27.0]);
/// let e = Tensor::from_vec(vec![0.0, 1.0, 2.0], &[3])?;
/// assert_eq!(pow(&x, &e)?.to_vec(), vec![1.0, 2.0, 9.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(composition)]
pub mod pow {
    use super::*;

    pub fn forward<'a>(x: &Tensor, exponent: impl Into<Exponent<'a>>) -> Result<Tensor> {
        match exponent.into() {
            Exponent::Scalar(p) => crate::pow_scalar(x, p),
            Exponent::Tensor(e) => crate::pow_tensor(x, e),
        }
    }

    fn cases() -> Vec<Case> {
        // Bases in [0.5, 2): positive for the fractional powers and away from 0.
        vec![
            Case::new("scalar_exponent", vec![Case::input(&[3, 4], 0.5, 2.0, 1)], |x| super::pow(&x[0], 2.5)),
            Case::new("integer_exponent", vec![Case::input(&[3, 4], 0.5, 2.0, 2)], |x| super::pow(&x[0], 3)),
            Case::new("tensor_exponent_broadcast", vec![Case::input(&[3, 4], 0.5, 2.0, 3), Case::input(&[4], -1.5, 2.5, 4)], |x| {
                super::pow(&x[0], &x[1])
            }),
        ]
    }
}

/// Element-wise `xᵖ` for a scalar exponent `p` (C99/PyTorch special values: `x⁰ = 1` even
/// for NaN, a negative base with a non-integer `p` gives NaN; in exact mode a fixed
/// algorithm within 0.5 + 2⁻¹⁶ ulp, the same bits on every path and machine, in fast mode
/// std's `powf`, see the module doc); [`pow()`] with a scalar calls it. Backward:
/// `g·p·xᵖ⁻¹`, and `0` when `p = 0` (PyTorch's rule, so `x⁰` has gradient 0 even at `x = 0`).
///
/// # Examples
///
/// ```
/// use om_ops::{pow_scalar, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 4.0], &[2])?;
/// assert_eq!(pow_scalar(&x, 0.5)?.to_vec(), vec![1.0, 2.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x], attrs = [p: f32])]
pub mod pow_scalar {
    use super::*;

    pub fn forward(x: &Tensor, p: f32) -> Result<Tensor> {
        if p.is_nan() {
            return Err(Error::argument(NAME, "the exponent p is NaN"));
        }
        match Compute::mode() {
            Mode::Exact => {
                x.expect_f32(NAME, "x")?;
                binary_op(NAME, x, &Tensor::scalar(p), Binary::Pow)
            }
            Mode::Fast => unary(NAME, x, |v| v.powf(p)),
        }
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let p = r.p;
        if p == 0.0 {
            d.x(unary(NAME, g, |_| 0.0)?);
        } else {
            let pow = pow_fn();
            d.x(binary(NAME, g, r.x(), move |g, x| g * p * pow(x, p - 1.0))?);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let mut cases = Vec::new();
        for (p, tag) in [(2.0f32, "square"), (3.0, "cube"), (0.5, "half"), (-1.5, "negative")] {
            // Bases in [0.5, 2): positive for the fractional powers and away from 0.
            cases.push(Case::new(format!("{tag}_contiguous"), vec![Case::input(&[3, 4], 0.5, 2.0, 1)], move |x| {
                super::pow_scalar(&x[0], p)
            }));
            cases.push(Case::new(format!("{tag}_transposed"), vec![Case::input(&[4, 3], 0.5, 2.0, 2)], move |x| {
                super::pow_scalar(&crate::transpose(&x[0], 0, 1)?, p)
            }));
        }
        cases.push(Case::new("cube_negative_base_strided", vec![Case::input(&[3, 8], -2.0, -0.5, 3)], |x| {
            super::pow_scalar(&crate::slice(&x[0], 1, 1, 8, 3)?, 3.0)
        }));
        cases
    }
}

/// Element-wise `aᵇ` with broadcasting (PyTorch's `torch.pow(a, b)` for two tensors;
/// computed as in [`pow_scalar()`]); [`pow()`] with a tensor exponent calls it. Backward, as
/// PyTorch: `g·b·aᵇ⁻¹` to `a` (0 where `b = 0`), `g·aᵇ·ln a` to `b` (0 where `a = 0` and
/// `b ≥ 0`; NaN for negative `a`, whose real power has no derivative in `b`).
///
/// # Examples
///
/// ```
/// use om_ops::{pow_tensor, Tensor};
/// let a = Tensor::from_vec(vec![2.0, 3.0], &[2])?;
/// let b = Tensor::from_vec(vec![3.0, 2.0], &[2])?;
/// assert_eq!(pow_tensor(&a, &b)?.to_vec(), vec![8.0, 9.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [a, b])]
pub mod pow_tensor {
    use super::*;

    pub fn forward(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        match Compute::mode() {
            Mode::Exact => binary_op(NAME, a, b, Binary::Pow),
            Mode::Fast => binary(NAME, a, b, f32::powf),
        }
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let pow = pow_fn();
        if d.needs_a() {
            let slope = binary(NAME, r.a(), r.b(), |a, b| if b == 0.0 { 0.0 } else { b * pow(a, b - 1.0) })?;
            d.a(binary(NAME, g, &slope, |g, s| g * s)?);
        }
        if d.needs_b() {
            let slope = binary(NAME, r.a(), r.b(), |a, b| if a == 0.0 && b >= 0.0 { 0.0 } else { pow(a, b) * math::log(a) })?;
            d.b(binary(NAME, g, &slope, |g, s| g * s)?);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        // Bases in [0.5, 2) (positive: the derivative in the exponent needs ln a), exponents
        // in [-1.5, 2.5).
        binary_cases(super::pow_tensor, |s, seed| Case::input(s, 0.5, 2.0, seed), |s, seed| Case::input(s, -1.5, 2.5, seed))
    }
}

// ===== kinks =====

/// Element-wise `|x|`. Backward: `g·sign(x)` with `sign(0) = 0` (PyTorch: the gradient at
/// the kink is 0).
///
/// # Examples
///
/// ```
/// use om_ops::{abs, Tensor};
/// let x = Tensor::from_vec(vec![-1.5, 2.0], &[2])?;
/// assert_eq!(abs(&x)?.to_vec(), vec![1.5, 2.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x])]
pub mod abs {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        unary(NAME, x, f32::abs)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(binary(NAME, g, r.x(), |g, x| {
            if x > 0.0 {
                g
            } else if x < 0.0 {
                -g
            } else if x == 0.0 {
                0.0
            } else {
                f32::NAN
            }
        })?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        // Inputs keep 0.1 away from the kink at 0.
        unary_cases(super::abs, |s, seed| Case::input_away_from_zero(s, 0.1, 1.0, seed))
    }
}

/// Element-wise `min(max(x, min), max)`, PyTorch's `torch.clamp(x, min, max)`: each bound
/// a number or `None` (not both absent); NaN stays NaN, and `min > max` gives `max`
/// everywhere (as PyTorch). Backward: `g` where `min < x < max`, else 0: PyTorch 2.15 with
/// scalar bounds passes no gradient at an input exactly on a bound (bounds exclusive;
/// pinned by the oracle test), and none at all when `min > max`.
///
/// # Examples
///
/// ```
/// use om_ops::{clamp, Tensor};
/// let x = Tensor::from_vec(vec![-2.0, 0.25, 3.0], &[3])?;
/// assert_eq!(clamp(&x, -0.5, 0.5)?.to_vec(), vec![-0.5, 0.25, 0.5]);
/// assert_eq!(clamp(&x, None, 0.0)?.to_vec(), vec![-2.0, 0.0, 0.0]);
/// assert_eq!(clamp(&x, 0.0, None)?.to_vec(), vec![0.0, 0.25, 3.0]);
/// assert!(clamp(&x, None, None).is_err());
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x], attrs = [min: Option<f32>, max: Option<f32>])]
pub mod clamp {
    use super::*;

    pub fn forward(x: &Tensor, min: impl Into<Option<f32>>, max: impl Into<Option<f32>>) -> Result<Tensor> {
        let (min, max): (Option<f32>, Option<f32>) = (min.into(), max.into());
        if min.is_none() && max.is_none() {
            return Err(Error::argument(NAME, "at least one of min and max must be given"));
        }
        if min.is_some_and(f32::is_nan) || max.is_some_and(f32::is_nan) {
            return Err(Error::argument(NAME, "a bound is NaN"));
        }
        let (lo, hi) = (min.unwrap_or(f32::NEG_INFINITY), max.unwrap_or(f32::INFINITY));
        unary(NAME, x, move |v| {
            let v = if v < lo { lo } else { v };
            if v > hi {
                hi
            } else {
                v
            }
        })
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let (lo, hi) = (r.min.unwrap_or(f32::NEG_INFINITY), r.max.unwrap_or(f32::INFINITY));
        d.x(binary(NAME, g, r.x(), move |g, x| if lo < x && x < hi { g } else { 0.0 })?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        // Inputs in [-2, 2), bounds at ±0.55: no input of these seeds lies within the
        // finite-difference step of a bound (a failing gradcheck would say so).
        let mut cases = Vec::new();
        for (min, max, tag) in [(Some(-0.55f32), Some(0.55f32), "both"), (Some(-0.55), None, "min"), (None, Some(0.55), "max")] {
            for mut c in unary_cases(move |x| super::clamp(x, min, max), |s, seed| Case::input(s, -2.0, 2.0, seed)) {
                c.name = format!("{tag}_{}", c.name);
                cases.push(c);
            }
        }
        cases
    }
}

/// The share of the gradient that `a` gets in `maximum(a, b)`: 1 where `a > b`, ½ on a tie,
/// 0 where `a < b`, and 1 when either is NaN (PyTorch 2.x masks only strict comparisons).
fn winner_share(a: f32, b: f32) -> f32 {
    if a < b {
        0.0
    } else if a == b {
        0.5
    } else {
        1.0
    }
}

/// The gradients of `maximum`/`minimum`: `g·s` to `a` and `g·s'` to `b`, with the shares
/// `s = share(a, b)` and `s' = share(b, a)`.
fn split_grads(name: &'static str, g: &Tensor, a: &Tensor, b: &Tensor, share: fn(f32, f32) -> f32) -> Result<(Tensor, Tensor)> {
    let sa = binary(name, a, b, share)?;
    let sb = binary(name, b, a, share)?;
    Ok((binary(name, g, &sa, |g, s| g * s)?, binary(name, g, &sb, |g, s| g * s)?))
}

/// Element-wise larger of `a` and `b` with broadcasting; NaN if either is NaN. Backward
/// (PyTorch 2.x's tie rule): `g` to the larger input, `g/2` to each on a tie (sum-to).
///
/// # Examples
///
/// ```
/// use om_ops::{maximum, Tensor};
/// let a = Tensor::from_vec(vec![1.0, 5.0], &[2])?;
/// let b = Tensor::from_vec(vec![3.0, 2.0], &[2])?;
/// assert_eq!(maximum(&a, &b)?.to_vec(), vec![3.0, 5.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [a, b])]
pub mod maximum {
    use super::*;

    pub fn forward(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        binary(NAME, a, b, |a, b| if a.is_nan() || b.is_nan() { f32::NAN } else { a.max(b) })
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let (ga, gb) = split_grads(NAME, g, r.a(), r.b(), winner_share)?;
        d.a(ga);
        d.b(gb);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        // The tie rule is pinned by the oracle test.
        separated_cases(super::maximum)
    }
}

/// Element-wise smaller of `a` and `b` with broadcasting; NaN if either is NaN. Backward
/// (PyTorch 2.x's tie rule): `g` to the smaller input, `g/2` to each on a tie (sum-to).
///
/// # Examples
///
/// ```
/// use om_ops::{minimum, Tensor};
/// let a = Tensor::from_vec(vec![1.0, 5.0], &[2])?;
/// let b = Tensor::from_vec(vec![3.0, 2.0], &[2])?;
/// assert_eq!(minimum(&a, &b)?.to_vec(), vec![1.0, 2.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [a, b])]
pub mod minimum {
    use super::*;

    pub fn forward(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        binary(NAME, a, b, |a, b| if a.is_nan() || b.is_nan() { f32::NAN } else { a.min(b) })
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let (ga, gb) = split_grads(NAME, g, r.a(), r.b(), |a, b| winner_share(b, a))?;
        d.a(ga);
        d.b(gb);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        separated_cases(super::minimum)
    }
}

// ===== selection =====

/// `a` where `cond` is nonzero, else `b`, all three broadcast together. `cond` is an `i32`
/// or `f32` mask (any nonzero value, NaN included, selects `a`). Backward: `g` masked to
/// `a`'s positions and to `b`'s positions (sum-to); the selection is piecewise constant in
/// `cond`, so an `f32` mask that requires a gradient gets zeros.
///
/// # Examples
///
/// ```
/// use om_ops::{where_, Tensor};
/// let cond = Tensor::from_vec(vec![1.0, 0.0, 1.0], &[3])?; // nonzero picks `a`
/// let a = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3])?;
/// let b = Tensor::from_vec(vec![-1.0, -2.0, -3.0], &[3])?;
/// assert_eq!(where_(&cond, &a, &b)?.to_vec(), vec![1.0, -2.0, 3.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [cond])]
pub mod where_ {
    use super::*;

    pub fn forward(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        a.expect_f32(NAME, "a")?;
        b.expect_f32(NAME, "b")?;
        let mask = mask_f32(cond)?;
        let shape = broadcast_shapes(NAME, &broadcast_shapes(NAME, cond.shape(), a.shape())?, b.shape())?;
        let os = contiguous_strides(&shape);
        let sc = broadcast_strides(mask.shape(), mask.strides(), &shape);
        let sa = broadcast_strides(a.shape(), a.strides(), &shape);
        let sb = broadcast_strides(b.shape(), b.strides(), &shape);
        mask.with_storage_f32(|xc| {
            a.with_storage_f32(|xa| {
                b.with_storage_f32(|xb| {
                    Tensor::build_f32(&shape, |out| {
                        let offsets = [0, mask.offset(), a.offset(), b.offset()];
                        for_each_row(&shape, [&os, &sc, &sa, &sb], offsets, |[o, c0, i0, j0], len, [so, sc, si, sj]| {
                            for t in 0..len {
                                out[o + t * so] = if xc[c0 + t * sc] != 0.0 { xa[i0 + t * si] } else { xb[j0 + t * sj] };
                            }
                        });
                        Ok(())
                    })
                })
            })
        })
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let mask = mask_f32(r.cond())?;
        if d.needs_a() {
            d.a(binary(NAME, g, &mask, |g, m| if m != 0.0 { g } else { 0.0 })?);
        }
        if d.needs_b() {
            d.b(binary(NAME, g, &mask, |g, m| if m != 0.0 { 0.0 } else { g })?);
        }
        if d.needs_cond() {
            d.cond(unary(NAME, &mask, |_| 0.0)?);
        }
        Ok(())
    }

    /// `cond` as an `f32` tensor (an `i32` mask is cast; its layout is kept otherwise).
    fn mask_f32(cond: &Tensor) -> Result<Tensor> {
        match cond.dtype() {
            DType::F32 => Ok(cond.clone()),
            DType::I32 => crate::cast(cond, DType::F32),
        }
    }

    fn cases() -> Vec<Case> {
        let cond = || Tensor::from_vec_i32(vec![1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 1, 1], &[3, 4]).unwrap();
        vec![
            Case::new("same_shape", vec![Case::input(&[3, 4], -1.0, 1.0, 1), Case::input(&[3, 4], -1.0, 1.0, 2)], move |x| {
                super::where_(&cond(), &x[0], &x[1])
            }),
            Case::new("broadcast", vec![Case::input(&[4], -1.0, 1.0, 3), Case::input(&[3, 1], -1.0, 1.0, 4)], move |x| {
                super::where_(&cond(), &x[0], &x[1])
            }),
            Case::new("f32_mask_transposed", vec![Case::input(&[4, 3], -1.0, 1.0, 5), Case::input(&[3, 4], -1.0, 1.0, 6)], |x| {
                let m = Tensor::from_vec(vec![0.0, 1.0, 0.0, 2.0], &[4])?;
                super::where_(&m, &crate::transpose(&x[0], 0, 1)?, &x[1])
            }),
        ]
    }
}

#[cfg(test)]
mod tests {
    use crate::oracle::{assert_close, both_modes, Oracle};
    use om_core::Tensor;

    fn load() -> Oracle {
        Oracle::load_file("math", "tools/oracle_math.py")
    }

    /// Checks a unary map's output and gradient against `<name>_y` and `<name>_gx`.
    fn check_unary(o: &Oracle, name: &str, f: impl Fn(&Tensor) -> Tensor) {
        let x = o.get(&format!("{name}_x"));
        let y = f(&x);
        assert_close(&format!("{name}_y"), &y, &o.get(&format!("{name}_y")));
        o.check_grads(name, &y, &[("x", &x)]);
    }

    #[test]
    fn unary_maps_match_pytorch() {
        let o = load();
        both_modes(|| {
            check_unary(&o, "exp", |x| crate::exp(x).unwrap());
            check_unary(&o, "log", |x| crate::log(x).unwrap());
            check_unary(&o, "sin", |x| crate::sin(x).unwrap());
            check_unary(&o, "cos", |x| crate::cos(x).unwrap());
            check_unary(&o, "sqrt", |x| crate::sqrt(x).unwrap());
            check_unary(&o, "rsqrt", |x| crate::rsqrt(x).unwrap());
            check_unary(&o, "abs", |x| crate::abs(x).unwrap());
            check_unary(&o, "leaky_relu", |x| crate::leaky_relu(x, 0.1).unwrap());
            check_unary(&o, "silu", |x| crate::silu(x).unwrap());
            check_unary(&o, "softplus", |x| crate::softplus(x, 2.0, 3.0).unwrap());
            check_unary(&o, "pow_frac", |x| crate::pow_scalar(x, 2.5).unwrap());
            check_unary(&o, "pow_cube", |x| crate::pow_scalar(x, 3.0).unwrap());
            check_unary(&o, "pow_zero", |x| crate::pow_scalar(x, 0.0).unwrap());
            check_unary(&o, "pow_neg", |x| crate::pow_scalar(x, -1.5).unwrap());
            check_unary(&o, "elu", |x| crate::elu(x, 0.7).unwrap());
            check_unary(&o, "log_sigmoid", |x| crate::log_sigmoid(x).unwrap());
            let (a, b) = (o.get("pow_tensor_a"), o.get("pow_tensor_b"));
            let y = crate::pow_tensor(&a, &b).unwrap();
            assert_close("pow_tensor_y", &y, &o.get("pow_tensor_y"));
            o.check_grads("pow_tensor", &y, &[("a", &a), ("b", &b)]);
        });
    }

    #[test]
    fn kinks_follow_pytorch() {
        let o = load();
        both_modes(|| {
            check_unary(&o, "clamp_both", |x| crate::clamp(x, Some(-0.5), Some(0.5)).unwrap());
            check_unary(&o, "clamp_min", |x| crate::clamp(x, Some(-0.5), None).unwrap());
            check_unary(&o, "clamp_max", |x| crate::clamp(x, None, Some(0.5)).unwrap());
            check_unary(&o, "clamp_crossed", |x| crate::clamp(x, Some(0.5), Some(-0.5)).unwrap());
        });
        // Pinned choices: abs has gradient 0 at 0; clamp passes none on a bound; x⁰ has
        // gradient 0 at x = 0.
        let x = Tensor::from_vec(vec![0.0, -0.5, 0.5, 0.25], &[4]).unwrap().requires_grad().unwrap();
        let sum = |y: Tensor| crate::sum(&y, None, false).unwrap().backward().unwrap();
        sum(crate::abs(&x).unwrap());
        assert_eq!(x.grad().unwrap().to_vec(), vec![0.0, -1.0, 1.0, 1.0]);
        x.clear_grad();
        sum(crate::clamp(&x, Some(-0.5), Some(0.5)).unwrap());
        assert_eq!(x.grad().unwrap().to_vec(), vec![1.0, 0.0, 0.0, 1.0]);
        x.clear_grad();
        sum(crate::pow_scalar(&x, 0.0).unwrap());
        assert_eq!(x.grad().unwrap().to_vec(), vec![0.0; 4]);
        assert!(crate::clamp(&x, None, None).is_err());
    }

    #[test]
    fn maximum_minimum_split_ties_like_pytorch() {
        let o = load();
        both_modes(|| {
            for name in ["maximum", "minimum"] {
                let (a, b) = (o.get(&format!("{name}_a")), o.get(&format!("{name}_b")));
                let f = if name == "maximum" { crate::maximum } else { crate::minimum };
                let y = f(&a, &b).unwrap();
                assert_close(&format!("{name}_y"), &y, &o.get(&format!("{name}_y")));
                o.check_grads(name, &y, &[("a", &a), ("b", &b)]);
            }
        });
        // A tie gives g/2 to each side (PyTorch 2.x).
        let a = Tensor::from_vec(vec![1.0, 2.0], &[2]).unwrap().requires_grad().unwrap();
        let b = Tensor::from_vec(vec![1.0, 3.0], &[2]).unwrap().requires_grad().unwrap();
        crate::sum(&crate::maximum(&a, &b).unwrap(), None, false).unwrap().backward().unwrap();
        assert_eq!((a.grad().unwrap().to_vec(), b.grad().unwrap().to_vec()), (vec![0.5, 0.0], vec![0.5, 1.0]));
    }

    #[test]
    fn scalar_operands_match_pytorch() {
        let o = load();
        both_modes(|| {
            check_unary(&o, "add_scalar", |x| (x + 1.5).unwrap());
            check_unary(&o, "radd_scalar", |x| (1.5 + x).unwrap());
            check_unary(&o, "sub_scalar", |x| (x - 0.75).unwrap());
            check_unary(&o, "rsub_scalar", |x| (2.0 - x).unwrap());
            check_unary(&o, "mul_scalar", |x| (x * -2.5).unwrap());
            check_unary(&o, "rmul_scalar", |x| (-2.5 * x).unwrap());
            check_unary(&o, "div_scalar", |x| (x / 3.0).unwrap());
            check_unary(&o, "rdiv_scalar", |x| (2.0 / x).unwrap());
        });
        // The operators record as the named scalar operators.
        let x = Tensor::from_vec(vec![1.0, 2.0], &[2]).unwrap().requires_grad().unwrap();
        assert_eq!((&x * 2.0).unwrap().grad_fn_name(), Some("mul_scalar"));
        assert_eq!((2.0 - &x).unwrap().grad_fn_name(), Some("rsub_scalar"));
        assert_eq!((x.clone() / 4.0).unwrap().grad_fn_name(), Some("div_scalar"));
    }

    #[test]
    fn where_matches_pytorch() {
        let o = load();
        both_modes(|| {
            let (c, a, b) = (o.get("where_cond"), o.get("where_a"), o.get("where_b"));
            let y = crate::where_(&c, &a, &b).unwrap();
            assert_close("where_y", &y, &o.get("where_y"));
            o.check_grads("where", &y, &[("a", &a), ("b", &b)]);
            let cf = crate::cast(&c, om_core::DType::F32).unwrap();
            assert_close("where_y (f32 mask)", &crate::where_(&cf, &a, &b).unwrap(), &o.get("where_y"));
        });
        // An f32 mask that requires a gradient gets zeros (the selection is flat in cond).
        let m = Tensor::from_vec(vec![1.0, 0.0], &[2]).unwrap().requires_grad().unwrap();
        let a = Tensor::from_vec(vec![3.0, 4.0], &[2]).unwrap().requires_grad().unwrap();
        let y = crate::where_(&m, &a, &Tensor::zeros(&[1]).unwrap()).unwrap();
        crate::sum(&y, None, false).unwrap().backward().unwrap();
        assert_eq!((m.grad().unwrap().to_vec(), a.grad().unwrap().to_vec()), (vec![0.0, 0.0], vec![1.0, 0.0]));
        assert!(crate::where_(&m, &a, &Tensor::zeros(&[3]).unwrap()).is_err());
    }
}
