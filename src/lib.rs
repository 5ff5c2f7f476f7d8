#![doc = include_str!("lib.md")]

pub use om_core::rng::{initial_seed, manual_seed};
pub use om_core::{compute, no_grad, Compute, DType, Error, KernelPath, Mode, NoGradGuard, Result, Tensor};
pub use om_macros::op;
#[doc(inline)]
pub use om_ops::{nn, optim};

/// Every operator as a function (`ops::relu(&x)`), with its argument types (options,
/// [`ops::Reduction`], ...). Each is also a [`Tensor`] method of the same name, and the
/// crate front page lists them by category. `ops::nn` and `ops::optim` are [`nn`] and
/// [`optim`].
pub mod ops {
    #[doc(inline)]
    pub use om_ops::*;
}

/// The engine beneath the operators: tensor files ([`core::io`]), the buffer pool
/// ([`core::pool`]), activation scopes, gradient checking, the operator registry,
/// grad mode, the random stream ([`core::rng`]) and the axis and shape arguments.
/// (Its crate is `om-core`; `#[derive(Module)]` names this path in a crate that depends on
/// `onemodel` alone.)
pub mod core {
    #[doc(inline)]
    pub use om_core::*;
}

/// Data-parallel training, bit-identical in exact mode at any number of processes
/// (`docs/distributed.md`): the [`dist::Communicator`] trait, [`dist::DataParallel`], and
/// communicators over threads and (cargo feature `mpi`) MPI.
pub mod dist {
    #[doc(inline)]
    pub use om_dist::*;
}

mod doctests;

/// The names most programs need: tensors, errors, settings, the operator methods, the
/// layers and the optimizers.
pub mod prelude {
    pub use crate::nn::{self, Forward, Module};
    pub use crate::ops::{self, Reduction, TensorOps};
    pub use crate::optim::{self, Optimizer};
    pub use om_core::rng::manual_seed;
    pub use om_core::{no_grad, Compute, DType, Error, Mode, Result, Tensor};
}

/// The README's examples, compiled and run by `cargo test`.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The guide's examples (`docs/guide.md`), compiled and run by `cargo test`.
#[doc = include_str!("../docs/guide.md")]
#[cfg(doctest)]
pub struct GuideDoctests;
