//! `Dropout`: `torch.nn.Dropout`, a layer without parameters that applies
//! [`crate::dropout()`] in training and is the identity in evaluation.

use super::{Forward, Module};
use om_core::{Error, Result, Tensor};

/// `torch.nn.Dropout(p)`: zeroes each element with probability `p` and scales the rest by
/// `1/(1 − p)` while training (seeds from the thread's default stream, `om_core::rng`);
/// returns its input unchanged after `set_training(false)`.
///
/// # Examples
///
/// ```
/// use om_ops::nn::{Dropout, Forward, Module};
/// use om_ops::Tensor;
/// let mut drop = Dropout::new(0.5)?;
/// let x = Tensor::ones(&[4, 8])?;
/// assert_eq!(drop.forward(&x)?.shape(), [4, 8]);
/// // Kept values are scaled by 1/(1 − p) = 2.
/// assert!(drop.forward(&x)?.to_vec().iter().all(|&v| v == 0.0 || v == 2.0));
/// drop.set_training(false);
/// assert_eq!(drop.forward(&x)?.to_vec(), x.to_vec());
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Module, Clone, Debug)]
pub struct Dropout {
    /// The probability of zeroing an element, in `[0, 1]`.
    pub p: f32,
    /// Training (the default) or evaluation behaviour.
    #[module(training)]
    pub training: bool,
}

impl Dropout {
    /// A dropout layer in training mode; `p` must be in `[0, 1]`.
    pub fn new(p: f32) -> Result<Dropout> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::argument("Dropout", format!("dropout probability has to be between 0 and 1, but got {p}")));
        }
        Ok(Dropout { p, training: true })
    }
}

impl Forward for Dropout {
    /// [`crate::dropout()`] with this layer's probability and mode.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::dropout(x, self.p, self.training)
    }
}
