//! Arithmetic: `add`, `sub`, `mul`, `div`, `neg` (full broadcasting over strided and
//! transposed operands; broadcast gradients are summed back to each input's shape by the
//! engine) and the scalar operands `add_scalar`, `sub_scalar`, `rsub_scalar`, `mul_scalar`,
//! `div_scalar`, `rdiv_scalar`; then the registration that makes `&a + &b`, `&a - &b`,
//! `&a * &b`, `&a / &b`, `-&a` and their scalar forms (`&x + 1.0`, `1.0 - &x`, `&x * 2.0`,
//! `2.0 / &x`, ..) call them (see `om_core::arith`, which defines the operator traits on
//! `Tensor`). Each has PyTorch's forward value and gradient; the scalar forms are scalar
//! closures (`maps::unary`), the same code on every path and thread count.

use crate::elementwise_cases::unary_cases;
use om_core::kernels::lanes::{Binary, Unary};
use om_core::maps::{binary, binary_op, unary, unary_op};
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

// ===== arithmetic =====

/// Element-wise sum `a + b` with broadcasting. Backward: `g` to each input (sum-to).
///
/// # Examples
///
/// ```
/// use om_ops::{add, Tensor};
/// let a = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
/// let b = Tensor::from_vec(vec![10.0, 20.0], &[2])?; // broadcast along the rows
/// assert_eq!(add(&a, &b)?.to_vec(), vec![11.0, 22.0, 13.0, 24.0]);
/// assert_eq!((&a + &b)?.to_vec(), add(&a, &b)?.to_vec());
/// # Ok::<(), om_ops::Error>(())
/// ```
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
///
/// # Examples
///
/// ```
/// use om_ops::{sub, Tensor};
/// let a = Tensor::from_vec(vec![5.0, 7.0], &[2])?;
/// let b = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// assert_eq!(sub(&a, &b)?.to_vec(), vec![4.0, 5.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
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
///
/// # Examples
///
/// ```
/// use om_ops::{mul, Tensor};
/// let a = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
/// let b = Tensor::from_vec(vec![2.0, 0.5], &[2])?; // broadcast along the rows
/// assert_eq!(mul(&a, &b)?.to_vec(), vec![2.0, 1.0, 6.0, 2.0]);
/// assert_eq!((&a * &b)?.to_vec(), mul(&a, &b)?.to_vec());
/// # Ok::<(), om_ops::Error>(())
/// ```
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
///
/// # Examples
///
/// ```
/// use om_ops::{div, Tensor};
/// let a = Tensor::from_vec(vec![1.0, 3.0], &[2])?;
/// let b = Tensor::from_vec(vec![2.0, 4.0], &[2])?;
/// assert_eq!(div(&a, &b)?.to_vec(), vec![0.5, 0.75]);
/// # Ok::<(), om_ops::Error>(())
/// ```
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
///
/// # Examples
///
/// ```
/// use om_ops::{neg, Tensor};
/// let x = Tensor::from_vec(vec![1.0, -2.0], &[2])?;
/// assert_eq!(neg(&x)?.to_vec(), vec![-1.0, 2.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
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

// ===== scalar operands =====

/// `x + s` for a scalar `s` (`&x + s`, `s + &x`). Backward: `g`.
///
/// # Examples
///
/// ```
/// use om_ops::{add_scalar, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// assert_eq!(add_scalar(&x, 0.5)?.to_vec(), vec![1.5, 2.5]);
/// assert_eq!((&x + 0.5)?.to_vec(), vec![1.5, 2.5]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [s: f32])]
pub mod add_scalar {
    use super::*;

    pub fn forward(x: &Tensor, s: f32) -> Result<Tensor> {
        unary(NAME, x, move |v| v + s)
    }

    fn backward(_r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(g.clone());
        Ok(())
    }

    fn cases() -> Vec<Case> {
        unary_cases(|x| super::add_scalar(x, 1.5), |s, seed| Case::input(s, -1.0, 1.0, seed))
    }
}

/// `x − s` for a scalar `s` (`&x - s`). Backward: `g`.
///
/// # Examples
///
/// ```
/// use om_ops::{sub_scalar, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// assert_eq!(sub_scalar(&x, 0.5)?.to_vec(), vec![0.5, 1.5]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [s: f32])]
pub mod sub_scalar {
    use super::*;

    pub fn forward(x: &Tensor, s: f32) -> Result<Tensor> {
        unary(NAME, x, move |v| v - s)
    }

    fn backward(_r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(g.clone());
        Ok(())
    }

    fn cases() -> Vec<Case> {
        unary_cases(|x| super::sub_scalar(x, 0.75), |s, seed| Case::input(s, -1.0, 1.0, seed))
    }
}

/// `s − x` for a scalar `s` (`s - &x`). Backward: `−g`.
///
/// # Examples
///
/// ```
/// use om_ops::{rsub_scalar, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// assert_eq!(rsub_scalar(&x, 3.0)?.to_vec(), vec![2.0, 1.0]); // 3 − x
/// assert_eq!((3.0 - &x)?.to_vec(), vec![2.0, 1.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [s: f32])]
pub mod rsub_scalar {
    use super::*;

    pub fn forward(x: &Tensor, s: f32) -> Result<Tensor> {
        unary(NAME, x, move |v| s - v)
    }

    fn backward(_r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(crate::neg(g)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        unary_cases(|x| super::rsub_scalar(x, 2.0), |s, seed| Case::input(s, -1.0, 1.0, seed))
    }
}

/// `x·s` for a scalar `s` (`&x * s`, `s * &x`). Backward: `g·s`.
///
/// # Examples
///
/// ```
/// use om_ops::{mul_scalar, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// assert_eq!(mul_scalar(&x, 3.0)?.to_vec(), vec![3.0, 6.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [s: f32])]
pub mod mul_scalar {
    use super::*;

    pub fn forward(x: &Tensor, s: f32) -> Result<Tensor> {
        unary(NAME, x, move |v| v * s)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let s = r.s;
        d.x(unary(NAME, g, move |g| g * s)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        unary_cases(|x| super::mul_scalar(x, -2.5), |s, seed| Case::input(s, -1.0, 1.0, seed))
    }
}

/// `x / s` for a scalar `s` (`&x / s`; `s = 0` gives ±∞ or NaN, as IEEE division).
/// Backward: `g / s`.
///
/// # Examples
///
/// ```
/// use om_ops::{div_scalar, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// assert_eq!(div_scalar(&x, 4.0)?.to_vec(), vec![0.25, 0.5]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [s: f32])]
pub mod div_scalar {
    use super::*;

    pub fn forward(x: &Tensor, s: f32) -> Result<Tensor> {
        unary(NAME, x, move |v| v / s)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let s = r.s;
        d.x(unary(NAME, g, move |g| g / s)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        unary_cases(|x| super::div_scalar(x, 3.0), |s, seed| Case::input(s, -1.0, 1.0, seed))
    }
}

/// `s / x` for a scalar `s` (`s / &x`). Backward: `−g·s / x²`.
///
/// # Examples
///
/// ```
/// use om_ops::{rdiv_scalar, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 4.0], &[2])?;
/// assert_eq!(rdiv_scalar(&x, 2.0)?.to_vec(), vec![2.0, 0.5]); // 2 / x
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x], attrs = [s: f32])]
pub mod rdiv_scalar {
    use super::*;

    pub fn forward(x: &Tensor, s: f32) -> Result<Tensor> {
        unary(NAME, x, move |v| s / v)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let s = r.s;
        d.x(binary(NAME, g, r.x(), move |g, x| -(g * s) / (x * x))?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        // Inputs keep 0.5 away from the pole at 0.
        unary_cases(|x| super::rdiv_scalar(x, 2.0), |s, seed| Case::input_away_from_zero(s, 0.5, 2.0, seed))
    }
}

// ===== the `+ - * /` operators =====

om_core::register_arith!(Arith { add: crate::add, sub: crate::sub, mul: crate::mul, div: crate::div, neg: crate::neg });

om_core::register_arith!(ScalarArith {
    add: crate::add_scalar,
    sub: crate::sub_scalar,
    rsub: crate::rsub_scalar,
    mul: crate::mul_scalar,
    div: crate::div_scalar,
    rdiv: crate::rdiv_scalar,
});

#[cfg(test)]
mod operator_tests {
    use crate::methods::*;
    use om_core::Tensor;

    #[test]
    fn operators_record_like_the_named_functions() {
        let a = Tensor::from_vec(vec![1.0, 2.0], &[2]).unwrap().requires_grad().unwrap();
        let b = Tensor::from_vec(vec![3.0, 5.0], &[2]).unwrap();
        let y = ((&a * &b).unwrap() - (-&a).unwrap()).unwrap();
        assert_eq!(y.grad_fn_name(), Some("sub"));
        crate::sum(&y, None, false).unwrap().backward().unwrap();
        // d/da (a·b + a) = b + 1
        assert_eq!(a.grad().unwrap().to_vec(), vec![4.0, 6.0]);
        assert!((&a / &Tensor::ones(&[3]).unwrap()).is_err());
        let z = ((&a + &a).unwrap() * &a).unwrap();
        assert_eq!(z.to_vec(), a.add(&a).unwrap().mul(&a).unwrap().to_vec());
    }
}
