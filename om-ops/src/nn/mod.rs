//! Layers that own their parameters, initialised as PyTorch's `torch.nn` does, containers
//! and activations, and their weights files.
//!
//! Every model is a [`Module`]: its named parameters and buffers (`conv1.weight`,
//! `bn1.running_mean`, ...) in a stable order — what optimizers, [`save`] and [`load`]
//! need — and its training mode. `#[derive(Module)]` writes the impl from the struct's
//! fields (see the derive's documentation for the field options); [`Forward`] is
//! implemented by modules applied to one tensor, which [`Sequential`] chains.
//!
//! Random initial weights come from the default stream of [`om_core::rng`]: each
//! constructor draws one seed from it (so `manual_seed(s)` makes a whole model
//! reproducible, and two layers built in turn differ), and `with_seed` variants take the
//! seed explicitly.
//!
//! ```
//! use om_ops::nn::{self, Forward, Module};
//! use om_ops::Tensor;
//! om_core::rng::manual_seed(7);
//! let net = nn::Sequential::new().push(nn::Linear::new(4, 8)?).push(nn::ReLU).push(nn::Linear::new(8, 3)?);
//! let y = net.forward(&Tensor::ones(&[2, 4])?)?;
//! assert_eq!(y.shape(), &[2, 3]);
//! let names: Vec<String> = net.parameters().into_iter().map(|(n, _)| n).collect();
//! assert_eq!(names, ["0.weight", "0.bias", "2.weight", "2.bias"]);
//! # Ok::<(), om_ops::Error>(())
//! ```

mod activation;
mod attention;
mod dropout;
mod layers;
mod pooling;
mod recurrent;
mod sequential;
mod weights;

/// The options of [`Conv2d`] and [`ConvTranspose2d`] are those of the operators.
pub use crate::conv::{Conv2dOptions, ConvTranspose2dOptions};
pub use activation::{LeakyReLU, LogSoftmax, ReLU, SiLU, Sigmoid, Softmax, Tanh, ELU, GELU};
pub use attention::MultiheadAttention;
pub use dropout::Dropout;
pub use layers::{BatchNorm2d, Conv2d, ConvTranspose2d, Embedding, LayerNorm, Linear};
pub use om_core::module::{Forward, Module, Tensors};
/// `#[derive(Module)]` (from om-macros; the trait and the derive share the name, so one
/// `use om_ops::nn::Module` brings both).
pub use om_macros::Module;
pub use pooling::{AvgPool2d, MaxPool2d};
pub use recurrent::{Gru, Lstm};
pub use sequential::{Flatten, Identity, Sequential};
pub use weights::{load, save, state};

use om_core::rng::Rng;
use om_core::{Result, Tensor};

/// The product of `factors` (a size computed from a layer's arguments), or an
/// `Error::Argument` naming `op` and `what` when it overflows.
fn checked_size(op: &'static str, what: &str, factors: &[usize]) -> Result<usize> {
    factors.iter().try_fold(1usize, |acc, &f| acc.checked_mul(f)).ok_or_else(|| {
        om_core::Error::argument(
            op,
            format!("{what} ({}) overflows", factors.iter().map(|f| f.to_string()).collect::<Vec<_>>().join(" × ")),
        )
    })
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
