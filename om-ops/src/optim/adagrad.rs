//! Adagrad as `torch.optim.Adagrad`.

use super::config::{hyper_params, HyperParams};
use super::params::{checked_grads, for_each_grad, optimizer_impl, update_chunks, ParamState, Params};
#[cfg(doc)]
use super::Optimizer;
use om_core::Result;

hyper_params! {
    /// Hyper-parameters of [`Adagrad`] (`torch.optim.Adagrad`'s arguments and defaults).
    ///
    /// # Examples
    ///
    /// ```
    /// use om_ops::optim::AdagradConfig;
    /// use om_ops::Tensor;
    /// let p = Tensor::ones(&[3])?.requires_grad()?;
    /// let opt = AdagradConfig::default().lr(0.1).lr_decay(1e-3).build(vec![p])?;
    /// assert!(AdagradConfig::default().initial_accumulator_value(-1.0).build(Vec::<Tensor>::new()).is_err());
    /// # Ok::<(), om_ops::Error>(())
    /// ```
    pub struct AdagradConfig for "Adagrad" {
        /// Learning rate.
        lr: f32 = 1e-2, NonNegative;
        /// Decay of the learning rate per step: `lr / (1 + (t − 1)·lr_decay)`.
        lr_decay: f32 = 0.0, NonNegative;
        /// L2 penalty added to the gradient.
        weight_decay: f32 = 0.0, NonNegative;
        /// Starting value of the sum of squared gradients.
        initial_accumulator_value: f32 = 0.0, NonNegative;
        /// Added to the denominator.
        eps: f32 = 1e-10, NonNegative;
    }
}

impl AdagradConfig {
    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        self.check_ranges()
    }

    /// The state buffer (`sum`): needed, starting at `initial_accumulator_value`.
    fn buffers(&self) -> [(bool, f32); 1] {
        [(true, self.initial_accumulator_value)]
    }

    /// An [`Adagrad`] over `params` with this config (its sums allocated here).
    pub fn build(self, params: impl Into<Params>) -> Result<Adagrad> {
        self.validate()?;
        let params = params.into().checked("Adagrad")?;
        let state = ParamState::filled("Adagrad", SLOTS, &params, self.initial_accumulator_value)?;
        Ok(Adagrad { params, config: self, state })
    }
}

const SLOTS: &[&str] = &["sum"];

/// Adagrad as `torch.optim.Adagrad`: with step count `t`, `g += wd·p`;
/// `clr = lr / (1 + (t − 1)·lr_decay)` (in `f64`, as PyTorch's Python scalar);
/// `s += g²`; `p −= clr·g / (√s + ε)`. Configured by [`AdagradConfig`].
///
/// # Examples
///
/// ```
/// use om_ops::methods::*;
/// use om_ops::optim::{Adagrad, Optimizer};
/// use om_ops::Tensor;
/// let w = Tensor::from_vec(vec![1.0, -2.0], &[2])?.requires_grad()?;
/// let mut opt = Adagrad::new(vec![w.clone()], 0.1)?; // optim.Adagrad([w], lr=0.1)
/// w.mul(&w)?.sum(None, false)?.backward()?;
/// opt.step()?;
/// // First step: s = g², so each weight moves by lr against its gradient's sign.
/// let v = w.to_vec();
/// assert!((v[0] - 0.9).abs() < 1e-6 && (v[1] + 1.9).abs() < 1e-6);
/// # Ok::<(), om_ops::Error>(())
/// ```
pub struct Adagrad {
    params: Params,
    config: AdagradConfig,
    state: ParamState,
}

impl Adagrad {
    /// Adagrad with PyTorch's defaults and learning rate `lr`.
    pub fn new(params: impl Into<Params>, lr: f32) -> Result<Adagrad> {
        AdagradConfig::default().lr(lr).build(params)
    }

    /// One step (the [`Optimizer::step`] of this optimizer).
    fn update(&mut self) -> Result<()> {
        let AdagradConfig { lr, lr_decay, weight_decay: wd, eps, .. } = self.config;
        let grads = checked_grads("Adagrad", self.params.tensors())?;
        let ParamState { bufs, steps, .. } = &mut self.state;
        let sums = &mut bufs[0];
        for_each_grad(self.params.tensors(), &grads, |i, p, g| {
            steps[i] += 1;
            let clr = (lr as f64 / (1.0 + (steps[i] - 1) as f64 * lr_decay as f64)) as f32;
            p.update_f32("Adagrad", |pv| {
                update_chunks(pv, g, [Some(&mut sums[i])], |pv, g, [s]| {
                    for ((p, &g), s) in pv.iter_mut().zip(g).zip(s.expect("the sums")) {
                        let g = if wd != 0.0 { g + wd * *p } else { g };
                        *s += g * g;
                        *p -= clr * g / (s.sqrt() + eps);
                    }
                })
            })
        })
    }
}

optimizer_impl!(Adagrad, AdagradConfig);
