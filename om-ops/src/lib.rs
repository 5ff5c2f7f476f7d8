//! # om-ops
//!
//! Every operator of OneModel, each declared once with `#[op]` in the file of its family.
//! The declaration generates the public function, the backward record, the dispatch and the
//! registered gradient-check cases. Programs reach all of it through the `onemodel` crate
//! (`onemodel::ops`, `onemodel::nn`, `onemodel::optim`).
//!
//! The operators and their argument types are documented here at the crate root (the
//! family modules that declare them are an implementation detail, hidden from the docs);
//! [`nn`] holds the layers and [`optim`] the optimizers.
//!
//! ```
//! use om_ops::Tensor;
//! let x = Tensor::from_vec(vec![-1.0, 2.0], &[2])?;
//! assert_eq!(om_ops::relu(&x)?.to_vec(), vec![0.0, 2.0]);
//! # Ok::<(), om_ops::Error>(())
//! ```

// The operator `std` (standard deviation) is declared as `pub mod std` in `reductions`;
// the glob re-export below would then shadow the standard library for every path `std::..`
// here and in any crate that glob-imports this one. This item keeps `std` (type namespace)
// the standard library at the root: the glob still exports the function `std`.
#[allow(clippy::useless_attribute)] // the `allow` below is what silences rustc here
#[allow(hidden_glob_reexports)]
extern crate std;

mod activations;
mod arith;
// The file is `attention.rs`; the module has another name because the operator `attention`
// (its generated `pub mod attention`) is re-exported at the root.
#[path = "attention.rs"]
mod attention_family;
mod conv;
mod elementwise_cases;
mod fallible;
mod image;
mod indexing;
mod linalg;
mod losses;
#[doc(hidden)]
pub mod methods;
pub mod nn;
mod norm;
mod normalizers;
pub mod optim;
mod pointwise;
mod pooling;
mod random;
mod recurrent;
mod reductions;
mod resize;
mod selection;
mod triangular;
mod views;

#[cfg(test)]
mod test_support;
// The operator tests import `crate::oracle`.
#[cfg(test)]
use test_support::oracle;

// Every family's operators (and their argument types) at the crate root.
pub use activations::*;
pub use arith::*;
pub use attention_family::*;
pub use conv::*;
pub use indexing::*;
pub use linalg::*;
pub use losses::*;
pub use norm::*;
pub use normalizers::*;
pub use pointwise::*;
pub use pooling::*;
pub use random::*;
pub use recurrent::*;
pub use reductions::*;
pub use resize::*;
pub use selection::*;
pub use triangular::*;
pub use views::*;

pub use om_core::{Error, Result, Tensor};

/// Every registered operator, sorted by name, or the names registered more than once
/// ([`om_core::registry::entries`]). Reaching the registry through this crate links the
/// crate, and so its registrations, into a program that calls no operator directly.
pub fn registered_ops() -> std::result::Result<Vec<&'static om_core::registry::OpEntry>, Vec<&'static str>> {
    om_core::registry::entries()
}
