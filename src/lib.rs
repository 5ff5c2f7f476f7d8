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
//!
//! Without its default `cli` feature (`default-features = false`) the crate is the library
//! alone: the `om` binary's dependencies (clap, indicatif, plotters) are not compiled.
//!
//! ## Your own operators
//!
//! [`op`] (from `om-macros`) declares an operator in one item, as `docs/adding-an-op.md`
//! explains. Its expansion names the `om_core` crate, so a crate declaring operators also
//! depends on `om-core` (the version `onemodel` uses):
//!
//! ```
//! use onemodel::core::kernels::elementwise::{binary, unary};
//! use onemodel::core::Case;
//! use onemodel::{op, Result, Tensor};
//!
//! /// Element-wise cube `x³`. Backward: `3·x²·g`.
//! #[op(saved = [x])]
//! pub mod cube {
//!     use super::*;
//!
//!     pub fn forward(x: &Tensor) -> Result<Tensor> {
//!         unary(NAME, x, |v| v * v * v)
//!     }
//!
//!     fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
//!         d.x(binary(NAME, g, r.x(), |g, x| 3.0 * x * x * g)?);
//!         Ok(())
//!     }
//!
//!     fn cases() -> Vec<Case> {
//!         vec![Case::new("contiguous", vec![Case::input(&[3, 4], -1.0, 1.0, 1)], |x| super::cube(&x[0]))]
//!     }
//! }
//!
//! fn main() -> Result<()> {
//!     let x = Tensor::from_vec(vec![2.0, -1.0], &[2])?.requires_grad()?;
//!     onemodel::ops::sum(&cube(&x)?, None, false)?.backward()?;
//!     assert_eq!(x.grad().unwrap().to_vec(), vec![12.0, 3.0]);
//!     Ok(())
//! }
//! ```

pub use om_core::rng::{initial_seed, manual_seed};
pub use om_core::{self as core, compute, no_grad, Compute, DType, Error, KernelPath, Mode, NoGradGuard, Result, Tensor};
pub use om_dist as dist;
pub use om_macros::op;
pub use om_ops as ops;

/// The names most programs need: tensors, errors, settings, the operator methods, the
/// layers and the optimizers.
pub mod prelude {
    pub use om_core::rng::manual_seed;
    pub use om_core::{no_grad, Compute, DType, Error, Mode, Result, Tensor};
    pub use om_ops::nn::{self, Forward, Module};
    pub use om_ops::optim::{self, Optimizer};
    pub use om_ops::{self as ops, TensorOps};
}

/// The README's examples, compiled and run by `cargo test`.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The guide's examples (`docs/guide.md`), compiled and run by `cargo test`.
#[doc = include_str!("../docs/guide.md")]
#[cfg(doctest)]
pub struct GuideDoctests;
