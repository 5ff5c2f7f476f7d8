//! Element-wise operators: `add`, `sub`, `mul`, `div`, `neg` (full broadcasting over
//! strided and transposed operands) and the activations `relu`, `sigmoid`, `tanh`, `gelu`.
//! Broadcast gradients are summed back to each input's shape by the engine.

use om_core::kernels::elementwise::{binary_op, unary_op};
use om_core::kernels::lanes::{Binary, Unary};
use om_core::{Case, Result, Tensor};
use om_macros::op;

/// The standard cases of a binary operator: equal shapes, broadcasting both ways, a
/// transposed operand and a strided (every other column) operand.
fn binary_cases(f: fn(&Tensor, &Tensor) -> Result<Tensor>, lo: f32, hi: f32) -> Vec<Case> {
    vec![
        Case::new("same_shape", vec![Case::input(&[2, 3], lo, hi, 1), Case::input(&[2, 3], lo, hi, 2)], move |x| f(&x[0], &x[1])),
        Case::new("broadcast_row", vec![Case::input(&[3, 4], lo, hi, 3), Case::input(&[4], lo, hi, 4)], move |x| f(&x[0], &x[1])),
        Case::new("broadcast_both", vec![Case::input(&[2, 1, 3], lo, hi, 5), Case::input(&[4, 1], lo, hi, 6)], move |x| f(&x[0], &x[1])),
        Case::new("transposed", vec![Case::input(&[3, 2], lo, hi, 7), Case::input(&[2, 3], lo, hi, 8)], move |x| {
            f(&crate::transpose(&x[0], 0, 1)?, &x[1])
        }),
        Case::new("strided", vec![Case::input(&[2, 6], lo, hi, 9), Case::input(&[2, 3], lo, hi, 10)], move |x| {
            f(&crate::slice(&x[0], 1, 0, 6, 2)?, &x[1])
        }),
    ]
}

/// The standard cases of a unary operator: contiguous, transposed and strided inputs.
fn unary_cases(f: fn(&Tensor) -> Result<Tensor>, input: fn(&[usize], u64) -> Tensor) -> Vec<Case> {
    vec![
        Case::new("contiguous", vec![input(&[3, 4], 1)], move |x| f(&x[0])),
        Case::new("transposed", vec![input(&[4, 3], 2)], move |x| f(&crate::transpose(&x[0], 0, 1)?)),
        Case::new("strided", vec![input(&[3, 8], 3)], move |x| f(&crate::slice(&x[0], 1, 1, 8, 3)?)),
    ]
}

// ===== arithmetic =====

/// Element-wise sum `a + b` with broadcasting. Backward: `g` to each input (sum-to).
#[op]
pub mod add {
    use super::*;

    pub fn forward(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        binary_op(NAME, a, b, Binary::Add)
    }

    fn backward(_r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.a(g.clone());
        d.b(g.clone());
        Ok(())
    }

    fn cases() -> Vec<Case> {
        binary_cases(super::add, -1.0, 1.0)
    }
}

/// Element-wise difference `a − b` with broadcasting. Backward: `g`, `−g` (sum-to).
#[op]
pub mod sub {
    use super::*;

    pub fn forward(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        binary_op(NAME, a, b, Binary::Sub)
    }

    fn backward(_r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.a(g.clone());
        if d.needs_b() {
            d.b(crate::neg(g)?);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        binary_cases(super::sub, -1.0, 1.0)
    }
}

/// Element-wise product `a·b` with broadcasting. Backward: `g·b`, `g·a` (sum-to).
#[op(saved = [a if b, b if a])]
pub mod mul {
    use super::*;

    pub fn forward(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        binary_op(NAME, a, b, Binary::Mul)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        if d.needs_a() {
            d.a(crate::mul(g, r.b()?)?);
        }
        if d.needs_b() {
            d.b(crate::mul(g, r.a()?)?);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        binary_cases(super::mul, -1.0, 1.0)
    }
}

/// Element-wise quotient `a / b` with broadcasting. Backward: `g/b`, `−(g·a)/(b·b)` (sum-to).
#[op(saved = [a if b, b])]
pub mod div {
    use super::*;

    pub fn forward(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        binary_op(NAME, a, b, Binary::Div)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        if d.needs_a() {
            d.a(crate::div(g, r.b())?);
        }
        if d.needs_b() {
            let num = crate::mul(g, r.a()?)?;
            let den = crate::mul(r.b(), r.b())?;
            d.b(crate::neg(&crate::div(&num, &den)?)?);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        // Divisors stay in [1, 2) (the pole at 0 is avoided); numerators in [-1, 1).
        let mut cases = binary_cases(super::div, 1.0, 2.0);
        cases.push(Case::new("negative_divisor", vec![Case::input(&[2, 3], -1.0, 1.0, 11), Case::input(&[3], -2.0, -1.0, 12)], |x| {
            super::div(&x[0], &x[1])
        }));
        cases
    }
}

/// Element-wise negation `−x`. Backward: `−g`.
#[op]
pub mod neg {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        unary_op(NAME, x, Unary::Neg)
    }

    fn backward(_r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(crate::neg(g)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        unary_cases(super::neg, |s, seed| Case::input(s, -1.0, 1.0, seed))
    }
}

// ===== activations =====

/// Rectified linear unit `max(x, 0)`. Backward: `g` where the output is positive, else 0.
#[op(saved = [out])]
pub mod relu {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        unary_op(NAME, x, Unary::Relu)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(binary_op(NAME, g, r.out(), Binary::ReluBackward)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        // Inputs keep 0.1 away from the kink at 0.
        unary_cases(super::relu, |s, seed| Case::input_away_from_zero(s, 0.1, 1.0, seed))
    }
}

/// Logistic sigmoid `1 / (1 + e^(−x))`. Backward: `g·y·(1−y)` with `y` the output.
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
/// `g·(½(1+t) + ½x(1−t²)k(1+3·0.044715x²))` with `t = tanh(k(x+0.044715x³))` (tanh);
/// the slope is recomputed from the saved input.
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
#[op(saved = [x], attrs = [form: GeluForm])]
pub mod gelu {
    use super::*;

    pub fn forward(x: &Tensor, form: GeluForm) -> Result<Tensor> {
        match form {
            GeluForm::Erf => unary_op(NAME, x, Unary::GeluErf),
            GeluForm::Tanh => unary_op(NAME, x, Unary::GeluTanh),
        }
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let op = match r.form {
            GeluForm::Erf => Binary::GeluErfBackward,
            GeluForm::Tanh => Binary::GeluTanhBackward,
        };
        d.x(binary_op(NAME, g, r.x(), op)?);
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
