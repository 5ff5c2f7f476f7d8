//! # OneModel
//!
//! Float32 CPU tensors with eager operators and reverse-mode automatic differentiation.
//! This facade re-exports [`om_core`] (tensors, the engine, compute settings) and
//! [`om_ops`] (the operators).
//!
//! ```
//! use onemodel::{ops, Tensor};
//! let x = Tensor::from_vec(vec![1.0, -2.0, 3.0], &[3])?.requires_grad()?;
//! let y = ops::sum(&ops::mul(&x, &x)?, None, false)?;
//! y.backward()?;
//! assert_eq!(x.grad().unwrap().to_vec(), vec![2.0, -4.0, 6.0]);
//! # Ok::<(), onemodel::Error>(())
//! ```

pub use om_core::{self as core, compute, no_grad, Compute, DType, Error, KernelPath, Mode, NoGradGuard, Result, Tensor};
pub use om_ops as ops;

/// The names most programs need: tensors, errors, settings, the operator methods, the
/// layers and the optimizers.
pub mod prelude {
    pub use om_core::{no_grad, Compute, DType, Error, Mode, Result, Tensor};
    pub use om_ops::nn::{self, Module};
    pub use om_ops::optim::{self, Optimizer};
    pub use om_ops::{self as ops, TensorOps};
}

/// The README's examples, compiled and run by `cargo test`.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
