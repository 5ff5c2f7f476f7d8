//! Adam and AdamW as `torch.optim.Adam` / `torch.optim.AdamW` (without amsgrad).

use super::config::{hyper_params, HyperParams};
use super::params::{checked_grads, for_each_grad, optimizer_impl, update_chunks, ParamState, Params};
#[cfg(doc)]
use super::Optimizer;
use om_core::Result;

hyper_params! {
    /// Hyper-parameters of [`Adam`] (`torch.optim.Adam`'s arguments and defaults;
    /// [`AdamConfig::adamw`] gives `torch.optim.AdamW`'s).
    ///
    /// # Examples
    ///
    /// ```
    /// use om_ops::optim::{AdamConfig, Optimizer};
    /// use om_ops::Tensor;
    /// let p = Tensor::ones(&[3])?.requires_grad()?;
    /// let opt = AdamConfig::adamw().lr(3e-4).betas((0.9, 0.95)).build(vec![p])?;
    /// assert_eq!(opt.config().weight_decay, 0.01);
    /// let e = AdamConfig::default().betas((1.0, 0.999)).build(Vec::<Tensor>::new()).err().unwrap();
    /// assert!(e.to_string().contains("betas.0 must be in [0, 1), got 1"), "{e}");
    /// # Ok::<(), om_ops::Error>(())
    /// ```
    pub struct AdamConfig for "Adam" {
        /// Learning rate.
        lr: f32 = 1e-3, NonNegative;
        /// (β₁, β₂): decay of the first and second moment estimates, each in `[0, 1)`.
        betas: (f32, f32) = (0.9, 0.999), Unit;
        /// Added to the denominator.
        eps: f32 = 1e-8, NonNegative;
        /// Weight decay: an L2 penalty (Adam) or decoupled (AdamW).
        weight_decay: f32 = 0.0, NonNegative;
        /// AdamW's decoupled weight decay.
        decoupled: bool = false;
    }
}

impl AdamConfig {
    /// AdamW's defaults: as [`AdamConfig::default`], with decoupled weight decay 0.01.
    pub fn adamw() -> AdamConfig {
        AdamConfig { decoupled: true, weight_decay: 0.01, ..AdamConfig::default() }
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        self.check_ranges()
    }

    /// The state buffers (`exp_avg`, `exp_avg_sq`): both needed, starting at 0.
    fn buffers(&self) -> [(bool, f32); 2] {
        [(true, 0.0), (true, 0.0)]
    }

    /// An [`Adam`] over `params` with this config (its moment buffers allocated here).
    pub fn build(self, params: impl Into<Params>) -> Result<Adam> {
        self.validate()?;
        let params = params.into().checked("Adam")?;
        let state = ParamState::filled("Adam", SLOTS, &params, 0.0)?;
        Ok(Adam { params, config: self, state })
    }
}

const SLOTS: &[&str] = &["exp_avg", "exp_avg_sq"];

/// Adam as `torch.optim.Adam` (and AdamW as `torch.optim.AdamW` with
/// [`Adam::adamw`]), without amsgrad: with step count `t`,
/// `g += wd·p` (Adam) or `p ·= 1 − lr·wd` (AdamW); `m = lerp(m, g, 1 − β₁)`;
/// `v = β₂·v + (1 − β₂)·g²`; `p −= lr/(1 − β₁ᵗ) · m / (√v/√(1 − β₂ᵗ) + ε)`.
/// Configured by [`AdamConfig`].
///
/// # Examples
///
/// ```
/// use om_ops::methods::*;
/// use om_ops::optim::{Adam, Optimizer};
/// use om_ops::Tensor;
/// let w = Tensor::from_vec(vec![1.0, -2.0], &[2])?.requires_grad()?;
/// let mut opt = Adam::new(vec![w.clone()], 0.1)?; // optim.Adam([w], lr=0.1)
/// w.mul(&w)?.sum(None, false)?.backward()?;
/// opt.step()?;
/// // The first step's bias-corrected m/√v is g/|g|: each weight moves by lr against its gradient.
/// let v = w.to_vec();
/// assert!((v[0] - 0.9).abs() < 1e-6 && (v[1] + 1.9).abs() < 1e-6);
///
/// // optim.AdamW([p], lr=0.1): weight decay 0.01, decoupled from the gradient.
/// let p = Tensor::ones(&[2])?.requires_grad()?;
/// let mut opt = Adam::adamw(vec![p.clone()], 0.1)?;
/// p.mul_scalar(0.0)?.sum(None, false)?.backward()?; // a zero gradient
/// opt.step()?;
/// assert_eq!(p.to_vec(), [1.0 - 0.1 * 0.01; 2]);
/// # Ok::<(), om_ops::Error>(())
/// ```
pub struct Adam {
    params: Params,
    config: AdamConfig,
    state: ParamState,
}

impl Adam {
    /// Adam with PyTorch's defaults and learning rate `lr`.
    pub fn new(params: impl Into<Params>, lr: f32) -> Result<Adam> {
        AdamConfig::default().lr(lr).build(params)
    }

    /// AdamW with PyTorch's defaults (decoupled weight decay 0.01) and learning rate `lr`.
    pub fn adamw(params: impl Into<Params>, lr: f32) -> Result<Adam> {
        AdamConfig::adamw().lr(lr).build(params)
    }

    /// One step (the [`Optimizer::step`] of this optimizer).
    fn update(&mut self) -> Result<()> {
        let AdamConfig { lr, betas: (b1, b2), eps, weight_decay: wd, decoupled } = self.config;
        let grads = checked_grads("Adam", self.params.tensors())?;
        let ParamState { bufs, steps, .. } = &mut self.state;
        let (m_slot, v_slot) = bufs.split_at_mut(1);
        let (ms, vs) = (&mut m_slot[0], &mut v_slot[0]);
        for_each_grad(self.params.tensors(), &grads, |i, p, g| {
            steps[i] += 1;
            let t = steps[i] as i32;
            let bc1 = 1.0 - (b1 as f64).powi(t);
            let bc2_sqrt = (1.0 - (b2 as f64).powi(t)).sqrt();
            let step_size = (lr as f64 / bc1) as f32;
            let bc2_sqrt = bc2_sqrt as f32;
            let (w1, w2) = (1.0 - b1, 1.0 - b2);
            p.update_f32("Adam", |pv| {
                update_chunks(pv, g, [Some(&mut ms[i]), Some(&mut vs[i])], |pv, g, [m, v]| {
                    let (ms, vs) = (m.expect("the first moments"), v.expect("the second moments"));
                    for (((p, &g), m), v) in pv.iter_mut().zip(g).zip(ms).zip(vs) {
                        let g = if decoupled {
                            *p *= 1.0 - lr * wd;
                            g
                        } else if wd != 0.0 {
                            g + wd * *p
                        } else {
                            g
                        };
                        // torch.lerp's two-sided formula
                        *m = if w1 < 0.5 { *m + w1 * (g - *m) } else { g - (g - *m) * (1.0 - w1) };
                        *v = *v * b2 + w2 * g * g;
                        let denom = v.sqrt() / bc2_sqrt + eps;
                        *p -= step_size * (*m / denom);
                    }
                })
            })
        })
    }
}

optimizer_impl!(Adam, AdamConfig);
