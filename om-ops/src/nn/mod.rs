//! Layers that own their parameters, initialised as PyTorch's `torch.nn` does (from a
//! `u64` seed, so a model is reproducible on every machine), and their weights files.
//!
//! Each layer has an inherent `forward`; the [`Module`] trait only lists the named
//! parameters and buffers (`conv1.weight`, `bn1.running_mean`, ...) in a stable order, which
//! is what optimizers, [`save`] and [`load`] need. A model is a struct of layers whose
//! `Module` impl concatenates its children's lists with [`prefixed`].
//!
//! ```
//! use om_ops::nn::{self, Module};
//! use om_ops::Tensor;
//! let fc = nn::Linear::new(4, 3, 0)?;
//! let y = fc.forward(&Tensor::ones(&[2, 4])?)?;
//! assert_eq!(y.shape(), &[2, 3]);
//! let names: Vec<String> = fc.parameters().into_iter().map(|(n, _)| n).collect();
//! assert_eq!(names, ["weight", "bias"]);
//! # Ok::<(), om_ops::Error>(())
//! ```

mod attention;
mod dropout;
mod layers;
mod recurrent;
mod weights;

pub use attention::MultiheadAttention;
pub use dropout::Dropout;
pub use layers::{BatchNorm2d, Conv2d, Conv2dOptions, ConvTranspose2d, Embedding, LayerNorm, Linear};
pub use recurrent::{Gru, Lstm};
pub use weights::{load, save, state};

use om_core::rng::Rng;
use om_core::{Result, Tensor};

/// A layer or model: its named trainable parameters and (non-trainable) buffers.
pub trait Module {
    /// The trainable parameters, named (`weight`, `conv1.bias`, ...) in a stable order.
    fn parameters(&self) -> Vec<(String, Tensor)>;

    /// State that is saved with the weights but not trained (batch-norm running stats).
    fn buffers(&self) -> Vec<(String, Tensor)> {
        Vec::new()
    }

    /// Switches between training (`true`, the default) and evaluation behaviour; only
    /// layers that differ (batch norm) and containers override it.
    fn set_training(&mut self, _training: bool) {}

    /// The parameter tensors alone, in the order of [`Module::parameters`] (what an
    /// optimizer takes).
    fn parameter_tensors(&self) -> Vec<Tensor> {
        self.parameters().into_iter().map(|(_, t)| t).collect()
    }
}

/// `list` with every name prefixed by `prefix.` (for a model's `Module` impl).
pub fn prefixed(prefix: &str, list: Vec<(String, Tensor)>) -> Vec<(String, Tensor)> {
    list.into_iter().map(|(n, t)| (format!("{prefix}.{n}"), t)).collect()
}

/// A leaf of `shape` requiring gradients, with values `U(−bound, bound)` drawn from `rng`
/// (row-major order).
fn uniform_param(shape: &[usize], bound: f32, rng: &mut Rng) -> Result<Tensor> {
    Tensor::build_f32(shape, |out| {
        out.iter_mut().for_each(|v| *v = rng.uniform(-bound, bound));
        Ok(())
    })?
    .requires_grad()
}

/// A leaf of `shape` filled with `v`, requiring gradients.
fn const_param(shape: &[usize], v: f32) -> Result<Tensor> {
    Tensor::full(shape, v)?.requires_grad()
}
