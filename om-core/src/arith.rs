//! Operator overloading: `&a + &b`, `&a - &b`, `&a * &b`, `&a / &b` and `-&a` return
//! `Result<Tensor>` and record like the named operators, because they are the named
//! operators: `om-ops` registers its `add`, `sub`, `mul`, `div` and `neg` here through
//! `inventory` (this crate cannot call `om-ops` directly).
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

fn arith(op: &'static str) -> Result<&'static Arith> {
    inventory::iter::<Arith>.into_iter().next().ok_or_else(|| {
        Error::argument(
            op,
            "no operator implementation is linked; depend on `om-ops` (or the `onemodel` facade) to use arithmetic on tensors",
        )
    })
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
