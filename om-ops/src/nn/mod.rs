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
pub use attention::{causal_mask, MultiheadAttention};
pub use dropout::Dropout;
pub use layers::{BatchNorm2d, Conv2d, ConvTranspose2d, Embedding, LayerNorm, Linear};
/// A module applied to one tensor, `y = m(x)` (`torch.nn.Module.forward`): what
/// [`Sequential`] chains.
///
/// # Examples
///
/// ```
/// use om_ops::methods::*;
/// use om_ops::nn::{self, Forward, Module};
/// use om_ops::{Result, Tensor};
/// #[derive(Module)]
/// struct Mlp {
///     fc1: nn::Linear,
///     fc2: nn::Linear,
/// }
/// impl Forward for Mlp {
///     fn forward(&self, x: &Tensor) -> Result<Tensor> {
///         self.fc2.forward(&self.fc1.forward(x)?.relu()?)
///     }
/// }
/// let mlp = Mlp { fc1: nn::Linear::new(4, 16)?, fc2: nn::Linear::new(16, 3)? };
/// assert_eq!(mlp.forward(&Tensor::randn(&[8, 4])?)?.shape(), &[8, 3]);
/// // A Forward module is a layer like any other.
/// let net = nn::Sequential::new().push(mlp).push(nn::Softmax::new(-1));
/// let p = net.forward(&Tensor::randn(&[8, 4])?)?.sum(-1, false)?.to_vec();
/// assert!(p.iter().all(|s| (s - 1.0).abs() < 1e-5));
/// # Ok::<(), om_ops::Error>(())
/// ```
///
/// # Details
pub use om_core::module::Forward;
/// A layer or model: its named parameters and buffers and its training flag
/// (`torch.nn.Module`'s `named_parameters`, `named_buffers`, `train`/`eval`).
///
/// # Examples
///
/// ```
/// use om_ops::nn::{self, Module};
/// use om_ops::Tensor;
/// // class Net(nn.Module): fc1 = nn.Linear(4, 8); bn = nn.BatchNorm2d(8); scale = nn.Parameter(...)
/// #[derive(Module)]
/// struct Net {
///     fc1: nn::Linear,
///     bn: nn::BatchNorm2d,
///     #[module(param)]
///     scale: Tensor,
/// }
/// let scale = Tensor::ones(&[1])?.requires_grad()?;
/// let mut net = Net { fc1: nn::Linear::new(4, 8)?, bn: nn::BatchNorm2d::new(8)?, scale };
/// let names: Vec<String> = net.parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["fc1.weight", "fc1.bias", "bn.weight", "bn.bias", "scale"]);
/// assert_eq!(net.buffers().len(), 2); // bn.running_mean, bn.running_var
/// assert_eq!(net.parameter_tensors().len(), 5); // what an optimizer takes
/// net.eval(); // reaches the children
/// assert!(!net.bn.training);
/// # Ok::<(), om_ops::Error>(())
/// ```
///
/// # Details
pub use om_core::module::Module;
/// A field that holds tensors directly (`#[module(param)]` / `#[module(buffer)]` fields:
/// a `Tensor`, an `Option<Tensor>`, a `Vec` or array of tensors).
///
/// # Examples
///
/// ```
/// use om_ops::nn::{Module, Tensors};
/// use om_ops::Tensor;
/// #[derive(Module)]
/// struct Heads {
///     #[module(param)]
///     w: Vec<Tensor>,
///     #[module(param)]
///     b: Option<Tensor>,
/// }
/// let h = Heads { w: vec![Tensor::ones(&[2])?, Tensor::ones(&[3])?], b: None };
/// let names: Vec<String> = h.parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["w.0", "w.1"]);
/// let mut seen = Vec::new();
/// h.w.visit_tensors("w", &mut |n, _| seen.push(n.to_string()));
/// assert_eq!(seen, names);
/// # Ok::<(), om_ops::Error>(())
/// ```
///
/// # Details
pub use om_core::module::Tensors;
/// `#[derive(Module)]` (from om-macros; the trait and the derive share the name, so one
/// `use om_ops::nn::Module` brings both).
///
/// # Examples
///
/// ```
/// use om_ops::nn::{self, Module};
/// use om_ops::Tensor;
/// #[derive(Module)]
/// struct Block {
///     conv: nn::Conv2d, // a child: conv.weight, conv.bias
///     #[module(flatten)]
///     norm: nn::LayerNorm, // a child without the prefix: weight, bias
///     #[module(buffer, name = "ema")]
///     average: Tensor, // saved, not trained, named `ema`
///     #[module(training)]
///     training: bool,
///     #[module(skip)]
///     label: String,
/// }
/// let mut b = Block {
///     conv: nn::Conv2d::new(1, 2, 3)?,
///     norm: nn::LayerNorm::new(4)?,
///     average: Tensor::zeros(&[4])?,
///     training: true,
///     label: "block".into(),
/// };
/// let names: Vec<String> = nn::state(&b).into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["conv.weight", "conv.bias", "weight", "bias", "ema"]);
/// b.eval();
/// assert!(!b.training && b.label == "block");
/// # Ok::<(), om_ops::Error>(())
/// ```
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
