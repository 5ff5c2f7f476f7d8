//! # om-ops
//!
//! Every operator of OneModel, each declared once with `#[op]` in the file of its family.
//! The declaration generates the public function (re-exported here), the backward record,
//! the dispatch and the registered gradient-check cases.

// The operator `std` (standard deviation) is declared as `pub mod std` in `reductions`;
// the glob re-export below would then shadow the standard library for every path `std::..`
// here and in any crate that glob-imports this one. This item keeps `std` (type namespace)
// the standard library at the root: the glob still exports the function `std`.
#[allow(clippy::useless_attribute)] // the `allow` below is what silences rustc here
#[allow(hidden_glob_reexports)]
extern crate std;

pub mod conv;
pub mod ctc;
pub mod elementwise;
mod fallible;
mod image;
pub mod indexing;
pub mod linalg;
pub mod lookup;
pub mod loss;
pub mod losses;
pub mod math;
pub mod methods;
pub mod models;
pub mod nn;
pub mod norm;
pub mod optim;
pub mod pooling;
pub mod probability;
pub mod random;
pub mod recurrent;
pub mod reduce;
pub mod reductions;
pub mod resize;
pub mod transformer;
pub mod views;

#[cfg(test)]
mod oracle;

// Every family's operators (and their argument types) at the crate root.
pub use conv::*;
pub use ctc::*;
pub use elementwise::*;
pub use indexing::*;
pub use linalg::*;
pub use lookup::*;
pub use loss::*;
pub use losses::*;
pub use math::*;
pub use methods::TensorOps;
pub use norm::*;
pub use pooling::*;
pub use probability::*;
pub use random::*;
pub use recurrent::*;
pub use reduce::*;
pub use reductions::*;
pub use resize::*;
pub use transformer::*;
pub use views::*;

pub use om_core::{Error, Result, Tensor};

/// Every registered operator, sorted by name, or the names registered more than once
/// ([`om_core::registry::entries`]). Reaching the registry through this crate links the
/// crate, and so its registrations, into a program that calls no operator directly.
pub fn registered_ops() -> std::result::Result<Vec<&'static om_core::registry::OpEntry>, Vec<&'static str>> {
    om_core::registry::entries()
}
