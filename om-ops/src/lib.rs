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

mod arith_ops;
#[doc(hidden)]
pub mod conv;
#[doc(hidden)]
pub mod ctc;
#[doc(hidden)]
pub mod elementwise;
mod fallible;
mod image;
#[doc(hidden)]
pub mod indexing;
#[doc(hidden)]
pub mod linalg;
#[doc(hidden)]
pub mod lookup;
#[doc(hidden)]
pub mod loss;
#[doc(hidden)]
pub mod losses;
#[doc(hidden)]
pub mod math;
#[doc(hidden)]
pub mod methods;
#[doc(hidden)]
pub mod models;
pub mod nn;
#[doc(hidden)]
pub mod norm;
pub mod optim;
#[doc(hidden)]
pub mod pooling;
#[doc(hidden)]
pub mod probability;
#[doc(hidden)]
pub mod random;
#[doc(hidden)]
pub mod recurrent;
#[doc(hidden)]
pub mod reduce;
#[doc(hidden)]
pub mod reductions;
#[doc(hidden)]
pub mod resize;
#[doc(hidden)]
pub mod transformer;
#[doc(hidden)]
pub mod views;

#[cfg(test)]
mod oracle;

// Every family's operators (and their argument types) at the crate root.
#[doc(inline)]
pub use conv::*;
#[doc(inline)]
pub use ctc::*;
#[doc(inline)]
pub use elementwise::*;
#[doc(inline)]
pub use indexing::*;
#[doc(inline)]
pub use linalg::*;
#[doc(inline)]
pub use lookup::*;
#[doc(inline)]
pub use loss::*;
#[doc(inline)]
pub use losses::*;
#[doc(inline)]
pub use math::*;
#[doc(inline)]
pub use norm::*;
#[doc(inline)]
pub use pooling::*;
#[doc(inline)]
pub use probability::*;
#[doc(inline)]
pub use random::*;
#[doc(inline)]
pub use recurrent::*;
#[doc(inline)]
pub use reduce::*;
#[doc(inline)]
pub use reductions::*;
#[doc(inline)]
pub use resize::*;
#[doc(inline)]
pub use transformer::*;
#[doc(inline)]
pub use views::*;

pub use om_core::{Error, Result, Tensor};

/// Every registered operator, sorted by name, or the names registered more than once
/// ([`om_core::registry::entries`]). Reaching the registry through this crate links the
/// crate, and so its registrations, into a program that calls no operator directly.
pub fn registered_ops() -> std::result::Result<Vec<&'static om_core::registry::OpEntry>, Vec<&'static str>> {
    om_core::registry::entries()
}
