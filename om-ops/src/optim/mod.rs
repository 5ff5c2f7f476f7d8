//! Optimizers with PyTorch's update rules — [`Sgd`] (momentum, dampening, Nesterov,
//! weight decay), [`Adam`] (and AdamW's decoupled weight decay), [`RMSprop`] and
//! [`Adagrad`] — with learning-rate schedulers ([`lr_scheduler`]), gradient clipping
//! ([`clip_grad_norm`], [`clip_grad_value`]) and state files ([`save`], [`load`]) to resume
//! a run bit-identically. `docs/optim.md` gives every formula and what matches PyTorch.
//!
//! Each optimizer is configured one way: a config struct with PyTorch's defaults and a
//! chaining setter per hyper-parameter (`AdamConfig::default().lr(3e-4).betas((0.9,
//! 0.95))`), checked when it builds the optimizer (`.build(params)`) or replaces its
//! config (`set_config`). `Sgd::new(params, lr)` and friends are the short forms.
//!
//! ```
//! use om_ops::optim::{Optimizer, SgdConfig};
//! use om_ops::methods::*;
//! use om_ops::Tensor;
//! let w = Tensor::from_vec(vec![1.0, -2.0], &[2])?.requires_grad()?;
//! let mut opt = SgdConfig::default().lr(0.1).momentum(0.9).build(vec![w.clone()])?;
//! w.mul(&w)?.sum(None, false)?.backward()?; // gradient 2w
//! opt.step()?;
//! assert_eq!(w.to_vec(), [0.8, -1.6]);
//! # Ok::<(), om_ops::Error>(())
//! ```
//!
//! An optimizer holds handles on the parameters (the same storage as the model's) and
//! allocates its state buffers once, at construction (or on the first step that needs a
//! buffer a new config asks for). [`Optimizer::step`] updates every parameter that has a
//! gradient in place, under no-grad (each update bumps the parameter's storage version);
//! parameters without a gradient are skipped, as PyTorch does. Buffers are `f32`, the
//! arithmetic is PyTorch's `f32` formula order, and scalar factors (bias corrections,
//! Adagrad's decayed rate) are computed in `f64` as PyTorch's Python-side scalars are.
//!
//! A step is all-or-nothing: it checks every gradient against its parameter and allocates
//! any state it still needs before it writes anything, so a step that fails (a refused
//! state buffer is an `Error::OutOfMemory` naming the optimizer) leaves every parameter
//! and the optimizer's state as they were.

mod adagrad;
mod adam;
mod clip;
pub(crate) mod config;
pub mod lr_scheduler;
mod params;
mod rmsprop;
mod sgd;
pub(crate) mod state;

pub use adagrad::{Adagrad, AdagradConfig};
pub use adam::{Adam, AdamConfig};
pub use clip::{clip_grad_norm, clip_grad_value};
pub use lr_scheduler::{
    Anneal, CosineAnnealingLR, ExponentialLR, LinearLR, LrScheduler, MultiStepLR, OneCycleLR, OneCycleOptions, SequentialLR, StepLR,
};
pub use params::Params;
pub use rmsprop::{RMSprop, RMSpropConfig};
pub use sgd::{Sgd, SgdConfig};
pub use state::{load, save};

use om_core::{Error, Result, Tensor};
use std::collections::BTreeMap;

/// What every optimizer does (`torch.optim.Optimizer`'s `step`, `zero_grad`, the rate of
/// its parameter group, `state_dict`/`load_state_dict`). A training loop can take any
/// optimizer as `&mut dyn Optimizer`.
///
/// # Examples
///
/// ```
/// use om_ops::methods::*;
/// use om_ops::optim::{Adam, Optimizer, Sgd};
/// use om_ops::{Result, Tensor};
/// /// Minimises Σ (w − 3)² from w = 0.
/// fn fit(opt: &mut dyn Optimizer, w: &Tensor) -> Result<f32> {
///     for _ in 0..200 {
///         opt.zero_grad()?;
///         let d = (w - 3.0)?;
///         d.mul(&d)?.sum(None, false)?.backward()?;
///         opt.step()?;
///     }
///     Ok(w.to_vec()[0])
/// }
/// let w = Tensor::zeros(&[1])?.requires_grad()?;
/// assert!((fit(&mut Sgd::new(vec![w.clone()], 0.1)?, &w)? - 3.0).abs() < 1e-4);
/// let w = Tensor::zeros(&[1])?.requires_grad()?;
/// let mut adam = Adam::new(vec![w.clone()], 0.1)?;
/// adam.set_lr(0.2); // what a scheduler does
/// assert_eq!(adam.lr(), 0.2);
/// assert!((fit(&mut adam, &w)? - 3.0).abs() < 1e-2);
/// # Ok::<(), om_ops::Error>(())
/// ```
pub trait Optimizer {
    /// Applies one update from the parameters' current gradients.
    fn step(&mut self) -> Result<()>;

    /// The parameters it updates.
    fn params(&self) -> &[Tensor];

    /// Zeroes every parameter's gradient in place (buffers are kept).
    fn zero_grad(&self) -> Result<()> {
        self.params().iter().try_for_each(|p| p.zero_grad())
    }

    /// The learning rate.
    fn lr(&self) -> f32;

    /// Changes the learning rate (for a schedule).
    fn set_lr(&mut self, lr: f32);

    /// The hyper-parameters and per-parameter state as named tensors (what [`save`]
    /// writes; the keys are listed in `docs/optim.md`). An optimizer of your own that does
    /// not override it cannot be saved.
    fn state_dict(&self) -> Result<Vec<(String, Tensor)>> {
        Err(Error::argument("optim::save", "this optimizer does not implement state_dict"))
    }

    /// Replaces the hyper-parameters and state with those of `tensors` (read from
    /// `from`, which errors name); on any error nothing changes. An optimizer of your own
    /// that does not override it cannot be loaded.
    fn load_state_dict(&mut self, tensors: BTreeMap<String, Tensor>, from: &str) -> Result<()> {
        let _ = tensors;
        Err(Error::argument("optim::load", format!("{from}: this optimizer does not implement load_state_dict")))
    }
}
