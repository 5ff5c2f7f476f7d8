//! Operator overloading: `&a + &b`, `&a - &b`, `&a * &b`, `&a / &b`, `-&a` and the
//! scalar forms `&a + 1.0`, `1.0 + &a`, `&a - 1.0`, `1.0 - &a`, `&a * 2.0`, `2.0 * &a`,
//! `&a / 2.0`, `2.0 / &a` return `Result<Tensor>` and record like the named operators,
//! because they are the named operators: `om-ops` registers its `add`, `sub`, `mul`, `div`,
//! `neg` and `add_scalar`, `sub_scalar`, `rsub_scalar`, `mul_scalar`, `div_scalar`,
//! `rdiv_scalar` here through `inventory` (this crate cannot call `om-ops` directly).
//!
//! ```
//! # use om_core::Tensor;
//! # fn demo(a: &Tensor, b: &Tensor) -> om_core::Result<Tensor> {
//! let c = ((a + b)? * a)?; // the same as mul(&add(a, b)?, a)
//! # Ok(c) }
//! ```

use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Signature of a binary element-wise operator.
pub type BinaryFn = fn(&Tensor, &Tensor) -> Result<Tensor>;

/// The element-wise operators behind the arithmetic traits (registered by `om-ops`).
pub struct Arith {
    /// `a + b`
    pub add: BinaryFn,
    /// `a - b`
    pub sub: BinaryFn,
    /// `a * b`
    pub mul: BinaryFn,
    /// `a / b`
    pub div: BinaryFn,
    /// `-a`
    pub neg: fn(&Tensor) -> Result<Tensor>,
}

inventory::collect!(Arith);

/// Signature of an element-wise operator with a scalar operand.
pub type ScalarFn = fn(&Tensor, f32) -> Result<Tensor>;

/// The operators behind arithmetic with an `f32` operand (registered by `om-ops`).
pub struct ScalarArith {
    /// `a + s` and `s + a`
    pub add: ScalarFn,
    /// `a - s`
    pub sub: ScalarFn,
    /// `s - a`
    pub rsub: ScalarFn,
    /// `a * s` and `s * a`
    pub mul: ScalarFn,
    /// `a / s`
    pub div: ScalarFn,
    /// `s / a`
    pub rdiv: ScalarFn,
}

inventory::collect!(ScalarArith);

/// Registers the operators behind the arithmetic traits: `register_arith!(Arith { .. })`
/// or `register_arith!(ScalarArith { .. })`, once each, in the crate that implements them
/// (`om-ops`).
#[doc(hidden)]
#[macro_export]
macro_rules! register_arith {
    ($kind:ident { $($field:ident: $f:expr),* $(,)? }) => {
        $crate::__private::inventory::submit! {
            $crate::arith::$kind { $($field: $f),* }
        }
    };
}

/// The error when `om-ops` is not linked.
fn unlinked(op: &'static str) -> Error {
    Error::argument(op, "no operator implementation is linked; depend on `om-ops` (or the `onemodel` facade) to use arithmetic on tensors")
}

fn arith(op: &'static str) -> Result<&'static Arith> {
    inventory::iter::<Arith>.into_iter().next().ok_or_else(|| unlinked(op))
}

fn scalar_arith(op: &'static str) -> Result<&'static ScalarArith> {
    inventory::iter::<ScalarArith>.into_iter().next().ok_or_else(|| unlinked(op))
}

macro_rules! binary_trait {
    ($trait:ident, $method:ident, $field:ident, $name:literal) => {
        impl std::ops::$trait<&Tensor> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                (arith($name)?.$field)(self, rhs)
            }
        }

        impl std::ops::$trait<Tensor> for Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                (arith($name)?.$field)(&self, &rhs)
            }
        }

        impl std::ops::$trait<&Tensor> for Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                (arith($name)?.$field)(&self, rhs)
            }
        }

        impl std::ops::$trait<Tensor> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                (arith($name)?.$field)(self, &rhs)
            }
        }
    };
}

binary_trait!(Add, add, add, "add");
binary_trait!(Sub, sub, sub, "sub");
binary_trait!(Mul, mul, mul, "mul");
binary_trait!(Div, div, div, "div");

impl std::ops::Neg for &Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        (arith("neg")?.neg)(self)
    }
}

impl std::ops::Neg for Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        (arith("neg")?.neg)(&self)
    }
}

/// `tensor op f32` and `f32 op tensor` for owned and borrowed tensors; `$rfield` is the
/// operator of the scalar on the left.
macro_rules! scalar_trait {
    ($trait:ident, $method:ident, $field:ident, $rfield:ident, $name:literal, $rname:literal) => {
        impl std::ops::$trait<f32> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: f32) -> Result<Tensor> {
                (scalar_arith($name)?.$field)(self, rhs)
            }
        }

        impl std::ops::$trait<f32> for Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: f32) -> Result<Tensor> {
                (scalar_arith($name)?.$field)(&self, rhs)
            }
        }

        impl std::ops::$trait<&Tensor> for f32 {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                (scalar_arith($rname)?.$rfield)(rhs, self)
            }
        }

        impl std::ops::$trait<Tensor> for f32 {
            type Output = Result<Tensor>;
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                (scalar_arith($rname)?.$rfield)(&rhs, self)
            }
        }
    };
}

scalar_trait!(Add, add, add, add, "add_scalar", "add_scalar");
scalar_trait!(Sub, sub, sub, rsub, "sub_scalar", "rsub_scalar");
scalar_trait!(Mul, mul, mul, mul, "mul_scalar", "mul_scalar");
scalar_trait!(Div, div, div, rdiv, "div_scalar", "rdiv_scalar");
