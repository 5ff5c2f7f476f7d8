#![doc = include_str!("lib.md")]

pub use om_core::rng::{fork_rng, initial_seed, manual_seed};
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
/// (Its crate is `om-core`.)
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

pub mod data;

mod doctests;

/// What the module of an operator declared with [`op`] needs: tensors, errors, the
/// gradient-check [`Case`](om_core::Case), [`no_grad`], the element-wise kernel helpers `unary` and
/// `binary` (a scalar closure over strided and broadcast operands, as
/// `unary(NAME, x, |v| v * v)`). With `use onemodel::prelude::*;` (the operators as
/// methods, the layers) beside `use onemodel::op_support::*;` in the operator's module (or
/// its parent, with `use super::*`), the module has every name it needs.
///
/// # Examples
///
/// ```
/// use onemodel::op_support::*;
///
/// /// `x + 1`. Backward: `g`.
/// #[onemodel::op]
/// pub mod plus_one {
///     use super::*;
///
///     pub fn forward(x: &Tensor) -> Result<Tensor> {
///         unary(NAME, x, |v| v + 1.0)
///     }
///
///     fn backward(_r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
///         d.x(g.clone());
///         Ok(())
///     }
///
///     fn cases() -> Vec<Case> {
///         vec![Case::new("contiguous", vec![Case::input(&[2, 3], -1.0, 1.0, 7)], |x| super::plus_one(&x[0]))]
///     }
/// }
///
/// # fn main() -> Result<()> {
/// assert_eq!(plus_one(&Tensor::zeros(&[2])?)?.to_vec(), vec![1.0, 1.0]);
/// onemodel::gradcheck::check_op("plus_one")?;
/// # Ok(())
/// # }
/// ```
pub mod op_support {
    pub use om_core::maps::{binary, unary};
    pub use om_core::{no_grad, Case, DType, Error, Result, Tensor};
}

/// Gradient checks of registered operators — the library's and those a program declares
/// with [`op`]: analytic gradients against central differences, for every gradient-check
/// case of the declaration, in both compute modes (fast and exact).
///
/// # Examples
///
/// ```
/// onemodel::gradcheck::check_op("matmul")?;
/// assert!(onemodel::gradcheck::check_op("no_such_op").is_err());
/// # Ok::<(), onemodel::Error>(())
/// ```
pub mod gradcheck {
    pub use om_core::gradcheck::{CaseFailure, ModeWorst, OpCheck};

    /// Checks one registered operator by name: every case in both compute modes (exact
    /// mode at one thread, its values and gradients also compared bit for bit with two
    /// threads'). An
    /// `Error` names the operator, each failing case and mode, the input and its worst
    /// error, or says no operator has that name (see [`om_core::gradcheck::check_op`]).
    ///
    /// # Examples
    ///
    /// ```
    /// onemodel::gradcheck::check_op("relu")?;
    /// # Ok::<(), onemodel::Error>(())
    /// ```
    pub fn check_op(name: &str) -> crate::Result<()> {
        linked();
        om_core::gradcheck::check_op(name)
    }

    /// Checks every registered operator, one row per operator sorted by name; an `Error`
    /// only when a name is registered twice.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let failed: Vec<_> = onemodel::gradcheck::check_all()?.into_iter().filter(|r| !r.passed()).collect();
    /// assert!(failed.is_empty(), "{failed:?}");
    /// # Ok::<(), onemodel::Error>(())
    /// ```
    pub fn check_all() -> crate::Result<Vec<OpCheck>> {
        linked();
        om_core::gradcheck::check_all()
    }

    /// Reaches the operators' crate, so that its registrations are linked into a program
    /// that calls no operator directly.
    fn linked() {
        let _ = om_ops::registered_ops();
    }
}

/// Items the expansions of [`op`] and [`Module`](macro@ops::nn::Module) name in a crate whose only
/// dependency is `onemodel`; not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use om_core as core;
}

/// The names most programs need: tensors, errors, settings, every operator as a `Tensor`
/// method (`x.matmul(&w)?.relu()?`, generated from the operators' declarations), the
/// layers and the optimizers.
pub mod prelude {
    pub use crate::nn::{self, Forward, Module};
    pub use crate::ops::methods::*;
    pub use crate::ops::{self, Reduction};
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
