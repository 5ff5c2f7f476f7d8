//! RMSprop as `torch.optim.RMSprop` (plain or centered, with or without momentum).

use super::config::{hyper_params, HyperParams};
use super::params::{checked_grads, for_each_grad, optimizer_impl, update_chunks, ParamState, Params};
#[cfg(doc)]
use super::Optimizer;
use om_core::Result;

hyper_params! {
    /// Hyper-parameters of [`RMSprop`] (`torch.optim.RMSprop`'s arguments and defaults).
    ///
    /// # Examples
    ///
    /// ```
    /// use om_ops::optim::RMSpropConfig;
    /// use om_ops::Tensor;
    /// let p = Tensor::ones(&[3])?.requires_grad()?;
    /// let opt = RMSpropConfig::default().lr(1e-3).momentum(0.9).centered(true).build(vec![p])?;
    /// assert!(RMSpropConfig::default().alpha(-0.5).build(Vec::<Tensor>::new()).is_err());
    /// # Ok::<(), om_ops::Error>(())
    /// ```
    pub struct RMSpropConfig for "RMSprop" {
        /// Learning rate.
        lr: f32 = 1e-2, NonNegative;
        /// Smoothing constant α of the squared-gradient average.
        alpha: f32 = 0.99, NonNegative;
        /// Added to the denominator.
        eps: f32 = 1e-8, NonNegative;
        /// L2 penalty added to the gradient.
        weight_decay: f32 = 0.0, NonNegative;
        /// Momentum factor μ (0 = none).
        momentum: f32 = 0.0, NonNegative;
        /// Centered RMSprop: normalise by an estimate of the gradient's variance.
        centered: bool = false;
    }
}

impl RMSpropConfig {
    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        self.check_ranges()
    }

    /// The state buffers (`square_avg`, `momentum_buffer`, `grad_avg`): the average
    /// always, the momentum buffer with a momentum, the gradient average when centered;
    /// all start at 0.
    fn buffers(&self) -> [(bool, f32); 3] {
        [(true, 0.0), (self.momentum > 0.0, 0.0), (self.centered, 0.0)]
    }

    /// An [`RMSprop`] over `params` with this config (its buffers allocated here).
    pub fn build(self, params: impl Into<Params>) -> Result<RMSprop> {
        self.validate()?;
        let params = params.into().checked("RMSprop")?;
        let mut state = ParamState::unallocated(SLOTS, &params);
        for (slot, (needed, init)) in self.buffers().into_iter().enumerate() {
            if needed {
                state.allocate("RMSprop", slot, &params, init)?;
            }
        }
        Ok(RMSprop { params, config: self, state })
    }
}

const SLOTS: &[&str] = &["square_avg", "momentum_buffer", "grad_avg"];

/// RMSprop as `torch.optim.RMSprop`: `g += wd·p`; `s = α·s + (1 − α)·g²`; centered:
/// `ḡ = lerp(ḡ, g, 1 − α)`, `a = √(s − ḡ²) + ε`, else `a = √s + ε`; with momentum
/// `b = μ·b + g/a`, `p −= lr·b`, else `p −= lr·g/a`. Configured by [`RMSpropConfig`].
///
/// # Examples
///
/// ```
/// use om_ops::methods::*;
/// use om_ops::optim::{Optimizer, RMSprop};
/// use om_ops::Tensor;
/// let w = Tensor::from_vec(vec![1.0, -2.0], &[2])?.requires_grad()?;
/// let mut opt = RMSprop::new(vec![w.clone()], 0.01)?; // optim.RMSprop([w]) (lr=0.01, alpha=0.99)
/// w.mul(&w)?.sum(None, false)?.backward()?;
/// opt.step()?;
/// // First step: s = 0.01·g², so g/√s = ±10 and each weight moves by 10·lr.
/// let v = w.to_vec();
/// assert!((v[0] - 0.9).abs() < 1e-5 && (v[1] + 1.9).abs() < 1e-5);
/// # Ok::<(), om_ops::Error>(())
/// ```
pub struct RMSprop {
    params: Params,
    config: RMSpropConfig,
    state: ParamState,
}

impl RMSprop {
    /// RMSprop with PyTorch's defaults and learning rate `lr`.
    pub fn new(params: impl Into<Params>, lr: f32) -> Result<RMSprop> {
        RMSpropConfig::default().lr(lr).build(params)
    }

    /// One step (the [`Optimizer::step`] of this optimizer).
    fn update(&mut self) -> Result<()> {
        let RMSpropConfig { lr, alpha, eps, weight_decay: wd, momentum: mu, centered } = self.config;
        let grads = checked_grads("RMSprop", self.params.tensors())?;
        for (slot, (needed, init)) in self.config.buffers().into_iter().enumerate() {
            if needed {
                self.state.allocate("RMSprop", slot, &self.params, init)?;
            }
        }
        let ParamState { bufs, steps, .. } = &mut self.state;
        let (sq, rest) = bufs.split_at_mut(1);
        let (mom, avg) = rest.split_at_mut(1);
        let (sq, mom, avg) = (&mut sq[0], &mut mom[0], &mut avg[0]);
        let w = 1.0 - alpha;
        for_each_grad(self.params.tensors(), &grads, |i, p, g| {
            steps[i] += 1;
            let mom = (mu > 0.0).then(|| &mut mom[i][..]);
            let avg = centered.then(|| &mut avg[i][..]);
            p.update_f32("RMSprop", |pv| {
                update_chunks(pv, g, [Some(&mut sq[i]), mom, avg], |pv, g, [sq, mom, avg]| {
                    // The buffers the config uses (the others are empty and never read).
                    let (sq, mom, avg) = (sq.expect("the squares"), mom.unwrap_or_default(), avg.unwrap_or_default());
                    for (k, (p, &g)) in pv.iter_mut().zip(g).enumerate() {
                        let g = if wd != 0.0 { g + wd * *p } else { g };
                        let s = &mut sq[k];
                        *s = *s * alpha + w * g * g;
                        let a = if centered {
                            let m = &mut avg[k];
                            // torch.lerp's two-sided formula
                            *m = if w < 0.5 { *m + w * (g - *m) } else { g - (g - *m) * (1.0 - w) };
                            (*s - *m * *m).sqrt()
                        } else {
                            s.sqrt()
                        } + eps;
                        if mu > 0.0 {
                            let b = &mut mom[k];
                            *b = *b * mu + g / a;
                            *p -= lr * *b;
                        } else {
                            *p -= lr * g / a;
                        }
                    }
                })
            })
        })
    }
}

optimizer_impl!(RMSprop, RMSpropConfig);
