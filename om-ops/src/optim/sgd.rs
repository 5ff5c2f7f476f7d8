//! Stochastic gradient descent as `torch.optim.SGD`.

use super::config::{hyper_params, HyperParams};
use super::params::{checked_grads, for_each_grad, optimizer_impl, update_chunks, ParamState, Params};
#[cfg(doc)]
use super::Optimizer;
use om_core::{Error, Result};

hyper_params! {
    /// Hyper-parameters of [`Sgd`] (`torch.optim.SGD`'s arguments and defaults).
    ///
    /// # Examples
    ///
    /// ```
    /// use om_ops::optim::{Optimizer, SgdConfig};
    /// use om_ops::Tensor;
    /// let p = Tensor::ones(&[3])?.requires_grad()?;
    /// let opt = SgdConfig::default().lr(0.1).momentum(0.9).nesterov(true).build(vec![p])?;
    /// assert_eq!(opt.lr(), 0.1);
    /// assert!(SgdConfig::default().lr(-1.0).build(Vec::<Tensor>::new()).is_err());
    /// # Ok::<(), om_ops::Error>(())
    /// ```
    pub struct SgdConfig for "Sgd" {
        /// Learning rate.
        lr: f32 = 1e-3, NonNegative;
        /// Momentum factor μ (0 = none).
        momentum: f32 = 0.0, NonNegative;
        /// Dampening of the momentum's new term.
        dampening: f32 = 0.0, Finite;
        /// L2 penalty added to the gradient.
        weight_decay: f32 = 0.0, NonNegative;
        /// Nesterov momentum (needs a momentum and zero dampening).
        nesterov: bool = false;
    }
}

impl SgdConfig {
    /// Checks every field (and Nesterov's needs, as PyTorch does).
    pub fn validate(&self) -> Result<()> {
        self.check_ranges()?;
        if self.nesterov && (self.momentum <= 0.0 || self.dampening != 0.0) {
            return Err(Error::argument("Sgd", "Nesterov momentum needs a momentum and zero dampening"));
        }
        Ok(())
    }

    /// The state buffer (`momentum_buffer`): needed with a momentum, starting at 0.
    fn buffers(&self) -> [(bool, f32); 1] {
        [(self.momentum != 0.0, 0.0)]
    }

    /// An [`Sgd`] over `params` with this config.
    pub fn build(self, params: impl Into<Params>) -> Result<Sgd> {
        self.validate()?;
        let params = params.into().checked("Sgd")?;
        let mut state = ParamState::unallocated(SLOTS, &params);
        if self.momentum != 0.0 {
            state.allocate("Sgd", 0, &params, 0.0)?;
        }
        Ok(Sgd { params, config: self, state })
    }
}

const SLOTS: &[&str] = &["momentum_buffer"];

/// Stochastic gradient descent as `torch.optim.SGD`:
/// `d = g + wd·p`; with momentum `b = d` on a parameter's first step, then
/// `b = μ·b + (1 − dampening)·d`, and `d = d + μ·b` (Nesterov) or `d = b`; `p −= lr·d`.
/// Configured by [`SgdConfig`]; its state is a momentum buffer per parameter (the step
/// count is the number of momentum updates).
///
/// # Examples
///
/// ```
/// use om_ops::methods::*;
/// use om_ops::optim::{Optimizer, Sgd};
/// use om_ops::Tensor;
/// let w = Tensor::from_vec(vec![1.0, -2.0], &[2])?.requires_grad()?;
/// let mut opt = Sgd::new(vec![w.clone()], 0.25)?; // optim.SGD([w], lr=0.25)
/// for _ in 0..2 {
///     opt.zero_grad()?;
///     w.mul(&w)?.sum(None, false)?.backward()?; // gradient 2w
///     opt.step()?; // w −= 0.25·2w: halved
/// }
/// assert_eq!(w.to_vec(), [0.25, -0.5]);
/// # Ok::<(), om_ops::Error>(())
/// ```
pub struct Sgd {
    params: Params,
    config: SgdConfig,
    state: ParamState,
}

impl Sgd {
    /// Plain SGD with learning rate `lr` (see [`SgdConfig`] for the rest).
    pub fn new(params: impl Into<Params>, lr: f32) -> Result<Sgd> {
        SgdConfig::default().lr(lr).build(params)
    }

    /// One step (the [`Optimizer::step`] of this optimizer).
    fn update(&mut self) -> Result<()> {
        let SgdConfig { lr, momentum: mu, dampening: damp, weight_decay: wd, nesterov } = self.config;
        let grads = checked_grads("Sgd", self.params.tensors())?;
        if mu != 0.0 {
            // Momentum set after construction: its buffers are allocated on the first step.
            self.state.allocate("Sgd", 0, &self.params, 0.0)?;
        }
        let ParamState { bufs, steps, .. } = &mut self.state;
        for_each_grad(self.params.tensors(), &grads, |i, p, g| {
            if mu == 0.0 {
                return p.update_f32("Sgd", |pv| {
                    update_chunks(pv, g, [], |pv, g, []| {
                        for (p, &g) in pv.iter_mut().zip(g) {
                            let d = if wd != 0.0 { g + wd * *p } else { g };
                            *p -= lr * d;
                        }
                    })
                });
            }
            let first = steps[i] == 0;
            steps[i] += 1;
            p.update_f32("Sgd", |pv| {
                update_chunks(pv, g, [Some(&mut bufs[0][i])], |pv, g, [b]| {
                    let b = b.expect("the momentum buffer");
                    for ((p, &g), b) in pv.iter_mut().zip(g).zip(b) {
                        let d = if wd != 0.0 { g + wd * *p } else { g };
                        *b = if first { d } else { mu * *b + (1.0 - damp) * d };
                        let d = if nesterov { d + mu * *b } else { *b };
                        *p -= lr * d;
                    }
                })
            })
        })
    }
}

optimizer_impl!(Sgd, SgdConfig);
