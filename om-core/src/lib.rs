//! # om-core
//!
//! The foundation of OneModel: [`Tensor`] (shape, strides, offset and dtype over shared,
//! versioned storage), the buffer [`pool`], grad mode, the reverse-mode [`autograd`]
//! engine, the arithmetic settings of [`compute`], the operator [`registry`] and
//! [`gradcheck`], the [`module`] trait models implement and the seedable default random
//! stream of [`rng`]. Operators themselves live in `om-ops`, each declared once with
//! `#[op]`; programs use both through the `onemodel` crate.
//!
//! The kernels, layout helpers, storage and inline vectors are public only because
//! `om-ops` and the `#[op]` expansion use them; they are hidden from these docs and are
//! not part of the API.
//!
//! ```
//! use om_core::Tensor;
//! let x = Tensor::from_vec(vec![1.0, 2.0], &[2])?.requires_grad()?;
//! assert!(x.needs_grad() && x.is_leaf());
//! # Ok::<(), om_core::Error>(())
//! ```

#![warn(missing_docs)]

pub mod args;
#[doc(hidden)]
pub mod arith;
pub mod autograd;
pub mod compute;
mod display;
pub mod dtype;
pub mod error;
pub mod gradcheck;
#[doc(hidden)]
pub mod inline_vec;
pub mod io;
#[doc(hidden)]
pub mod kernels;
#[doc(hidden)]
pub mod layout;
pub mod module;
pub mod pool;
mod recycle;
pub mod registry;
pub mod rng;
pub mod scope;
#[doc(hidden)]
pub mod storage;
pub mod tensor;

pub use args::{Axes, Shape};
pub use autograd::{is_grad_enabled, no_grad, NoGradGuard};
pub use compute::{Compute, KernelPath, Mode};
pub use dtype::DType;
pub use error::{Error, Result};
#[doc(hidden)]
pub use kernels::alloc_count;
pub use registry::Case;
pub use scope::{ActivationScope, ScopeStats};
pub use tensor::Tensor;

/// Every item the expansions of `#[op]`, `#[op_wrapper]` and `#[derive(Module)]` name:
/// they reach this crate only through this module, so its internal modules can stay
/// hidden. Not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::autograd::no_grad;
    pub use crate::autograd::record::{attach, check_grad_dtypes, should_record, Backward, GradSink, Saved};
    pub use crate::dtype::DType;
    pub use crate::error::{Error, Result};
    pub use crate::inline_vec::InlineVec;
    pub use crate::layout::{Dims, INLINE_RANK};
    pub use crate::module::{join, Module, Tensors};
    pub use crate::registry::{Case, OpEntry, OpKind, OpWrapper};
    pub use crate::tensor::Tensor;
    pub use inventory;
}
