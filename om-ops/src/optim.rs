//! Optimizers with PyTorch's update rules: [`Sgd`] (momentum, dampening, Nesterov,
//! weight decay) and [`Adam`] (Adam, and AdamW's decoupled weight decay; bias-corrected).
//!
//! An optimizer holds handles on the parameters (the same storage as the model's) and
//! allocates its state buffers once, at construction. [`Optimizer::step`] updates every
//! parameter that has a gradient in place, under no-grad (each update bumps the
//! parameter's storage version); parameters without a gradient are skipped, as PyTorch
//! does. Buffers are `f32`, the arithmetic is PyTorch's `f32` formula order, and the bias
//! corrections are computed in `f64` as PyTorch's Python-side scalars are.
//!
//! A step is all-or-nothing: it checks every gradient against its parameter and allocates
//! any state it still needs before it writes anything, so a step that fails (a refused
//! state buffer is an `Error::OutOfMemory` naming the optimizer) leaves every parameter
//! and the optimizer's state as they were.

use om_core::pool::max_buffer_bytes;
use om_core::{no_grad, DType, Error, Result, Tensor};

/// What every optimizer does.
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
}

fn check_params(op: &'static str, params: &[Tensor]) -> Result<()> {
    for (i, p) in params.iter().enumerate() {
        if p.dtype() != DType::F32 || !p.is_contiguous() || !p.is_leaf() {
            return Err(Error::argument(op, format!("parameter {i} must be a contiguous f32 leaf")));
        }
    }
    Ok(())
}

fn check_hyper(op: &'static str, name: &str, v: f32, lo: f32, hi_open: f32) -> Result<()> {
    if !(v >= lo && v < hi_open) {
        return Err(Error::argument(op, format!("{name} must be in [{lo}, {hi_open}), got {v}")));
    }
    Ok(())
}

/// `len` zeros of optimizer state, or `Error::OutOfMemory` naming `op` when the request
/// is over the pool's limit ([`max_buffer_bytes`]) or the allocator refuses it.
fn zeroed_state(op: &'static str, len: usize) -> Result<Vec<f32>> {
    let bytes = len.saturating_mul(4);
    let limit = max_buffer_bytes();
    let refused = || Error::OutOfMemory { op, bytes: bytes as u64, limit: limit as u64 };
    if bytes > limit {
        return Err(refused());
    }
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| refused())?;
    v.resize(len, 0.0);
    Ok(v)
}

/// One zeroed state buffer per parameter (see [`zeroed_state`]).
fn zeroed_states(op: &'static str, params: &[Tensor]) -> Result<Vec<Vec<f32>>> {
    params.iter().map(|p| zeroed_state(op, p.numel())).collect()
}

/// The gradients an update reads, once every one is checked: read in place (every gradient
/// is contiguous, the usual case, since the engine makes them so: nothing is allocated), or
/// contiguous copies made before any parameter is written.
enum CheckedGrads {
    InPlace,
    Copies(Vec<(usize, Tensor)>),
}

/// Checks the gradient of every parameter that has one against its parameter (same shape,
/// the parameter a contiguous `f32` tensor), so that the updates made from them cannot fail.
fn checked_grads(op: &'static str, params: &[Tensor]) -> Result<CheckedGrads> {
    let mut contiguous = true;
    for (i, p) in params.iter().enumerate() {
        let Some(g) = p.grad() else { continue };
        if p.dtype() != DType::F32 || !p.is_contiguous() {
            return Err(Error::argument(op, format!("parameter {i} must be a contiguous f32 tensor")));
        }
        if g.shape() != p.shape() || g.dtype() != DType::F32 {
            return Err(Error::shape(op, &[p.shape(), g.shape()], format!("the gradient of parameter {i} must be f32 of its shape")));
        }
        contiguous &= g.is_contiguous();
    }
    if contiguous {
        return Ok(CheckedGrads::InPlace);
    }
    let mut copies = Vec::with_capacity(params.len());
    for (i, p) in params.iter().enumerate() {
        let Some(g) = p.grad() else { continue };
        let g = if g.is_contiguous() { g } else { g.try_to_contiguous().map_err(|e| e.with_op(op))? };
        copies.push((i, g));
    }
    Ok(CheckedGrads::Copies(copies))
}

/// Runs `f(index, param, grad)` for every parameter that has a gradient, under no-grad,
/// once every gradient has been checked (see [`checked_grads`]).
fn for_each_grad(params: &[Tensor], grads: &CheckedGrads, mut f: impl FnMut(usize, &Tensor, &[f32]) -> Result<()>) -> Result<()> {
    no_grad(|| {
        match grads {
            CheckedGrads::InPlace => {
                for (i, p) in params.iter().enumerate() {
                    if let Some(g) = p.grad() {
                        g.try_with_f32(|gv| f(i, p, gv))??;
                    }
                }
            }
            CheckedGrads::Copies(copies) => {
                for (i, g) in copies {
                    g.try_with_f32(|gv| f(*i, &params[*i], gv))??;
                }
            }
        }
        Ok(())
    })
}

/// Stochastic gradient descent as `torch.optim.SGD`:
/// `d = g + wd·p`; with momentum `b = d` on a parameter's first step, then
/// `b = μ·b + (1 − dampening)·d`, and `d = d + μ·b` (Nesterov) or `d = b`; `p −= lr·d`.
pub struct Sgd {
    params: Vec<Tensor>,
    /// Learning rate.
    pub lr: f32,
    /// Momentum factor μ (0 = none).
    pub momentum: f32,
    /// Dampening of the momentum's new term.
    pub dampening: f32,
    /// L2 penalty added to the gradient.
    pub weight_decay: f32,
    /// Nesterov momentum.
    pub nesterov: bool,
    bufs: Vec<Vec<f32>>,
    started: Vec<bool>,
}

impl Sgd {
    /// Plain SGD with learning rate `lr`; set the public fields (or use the builder
    /// methods) for momentum and weight decay.
    pub fn new(params: Vec<Tensor>, lr: f32) -> Result<Sgd> {
        check_params("Sgd", &params)?;
        check_hyper("Sgd", "lr", lr, 0.0, f32::INFINITY)?;
        Ok(Sgd { params, lr, momentum: 0.0, dampening: 0.0, weight_decay: 0.0, nesterov: false, bufs: Vec::new(), started: Vec::new() })
    }

    /// With momentum `m` (its buffers are allocated here, once).
    pub fn momentum(mut self, m: f32) -> Result<Sgd> {
        check_hyper("Sgd", "momentum", m, 0.0, f32::INFINITY)?;
        self.bufs = zeroed_states("Sgd", &self.params)?;
        self.momentum = m;
        self.started = vec![false; self.params.len()];
        Ok(self)
    }

    /// With weight decay (L2 penalty) `wd`.
    pub fn weight_decay(mut self, wd: f32) -> Result<Sgd> {
        check_hyper("Sgd", "weight_decay", wd, 0.0, f32::INFINITY)?;
        self.weight_decay = wd;
        Ok(self)
    }
}

impl Optimizer for Sgd {
    fn step(&mut self) -> Result<()> {
        let (lr, mu, damp, wd, nesterov) = (self.lr, self.momentum, self.dampening, self.weight_decay, self.nesterov);
        if nesterov && (mu <= 0.0 || damp != 0.0) {
            return Err(Error::argument("Sgd", "Nesterov momentum needs a momentum and zero dampening"));
        }
        let grads = checked_grads("Sgd", &self.params)?;
        if mu != 0.0 && self.bufs.len() != self.params.len() {
            // Momentum set through the field: its buffers are allocated on the first step.
            self.bufs = zeroed_states("Sgd", &self.params)?;
            self.started = vec![false; self.params.len()];
        }
        let (bufs, started) = (&mut self.bufs, &mut self.started);
        for_each_grad(&self.params, &grads, |i, p, g| {
            p.update_f32("Sgd", |pv| {
                if mu == 0.0 {
                    for (p, &g) in pv.iter_mut().zip(g) {
                        let d = if wd != 0.0 { g + wd * *p } else { g };
                        *p -= lr * d;
                    }
                    return;
                }
                let first = !started[i];
                started[i] = true;
                for ((p, &g), b) in pv.iter_mut().zip(g).zip(bufs[i].iter_mut()) {
                    let d = if wd != 0.0 { g + wd * *p } else { g };
                    *b = if first { d } else { mu * *b + (1.0 - damp) * d };
                    let d = if nesterov { d + mu * *b } else { *b };
                    *p -= lr * d;
                }
            })
        })
    }

    fn params(&self) -> &[Tensor] {
        &self.params
    }

    fn lr(&self) -> f32 {
        self.lr
    }

    fn set_lr(&mut self, lr: f32) {
        self.lr = lr;
    }
}

/// Adam as `torch.optim.Adam` (and AdamW as `torch.optim.AdamW` with
/// [`Adam::adamw`]), without amsgrad: with step count `t`,
/// `g += wd·p` (Adam) or `p ·= 1 − lr·wd` (AdamW); `m = lerp(m, g, 1 − β₁)`;
/// `v = β₂·v + (1 − β₂)·g²`; `p −= lr/(1 − β₁ᵗ) · m / (√v/√(1 − β₂ᵗ) + ε)`.
pub struct Adam {
    params: Vec<Tensor>,
    /// Learning rate.
    pub lr: f32,
    /// (β₁, β₂): decay of the first and second moment estimates.
    pub betas: (f32, f32),
    /// Added to the denominator.
    pub eps: f32,
    /// Weight decay: an L2 penalty (Adam) or decoupled (AdamW).
    pub weight_decay: f32,
    /// AdamW's decoupled weight decay.
    pub decoupled: bool,
    m: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
    steps: Vec<u64>,
}

impl Adam {
    /// Adam with PyTorch's defaults (β = (0.9, 0.999), ε = 1e-8, no weight decay).
    pub fn new(params: Vec<Tensor>, lr: f32) -> Result<Adam> {
        check_params("Adam", &params)?;
        check_hyper("Adam", "lr", lr, 0.0, f32::INFINITY)?;
        let m = zeroed_states("Adam", &params)?;
        let v = zeroed_states("Adam", &params)?;
        let steps = vec![0; params.len()];
        Ok(Adam { params, lr, betas: (0.9, 0.999), eps: 1e-8, weight_decay: 0.0, decoupled: false, m, v, steps })
    }

    /// AdamW with PyTorch's defaults (as [`Adam::new`], decoupled weight decay 0.01).
    pub fn adamw(params: Vec<Tensor>, lr: f32) -> Result<Adam> {
        let mut a = Adam::new(params, lr)?;
        a.decoupled = true;
        a.weight_decay = 0.01;
        Ok(a)
    }

    /// With betas `(β₁, β₂)`, each in `[0, 1)`.
    pub fn betas(mut self, b1: f32, b2: f32) -> Result<Adam> {
        check_hyper("Adam", "beta1", b1, 0.0, 1.0)?;
        check_hyper("Adam", "beta2", b2, 0.0, 1.0)?;
        self.betas = (b1, b2);
        Ok(self)
    }

    /// With weight decay `wd` (L2 for Adam, decoupled for AdamW).
    pub fn weight_decay(mut self, wd: f32) -> Result<Adam> {
        check_hyper("Adam", "weight_decay", wd, 0.0, f32::INFINITY)?;
        self.weight_decay = wd;
        Ok(self)
    }

    /// With ε `eps`.
    pub fn eps(mut self, eps: f32) -> Result<Adam> {
        check_hyper("Adam", "eps", eps, 0.0, f32::INFINITY)?;
        self.eps = eps;
        Ok(self)
    }
}

impl Optimizer for Adam {
    fn step(&mut self) -> Result<()> {
        let (lr, (b1, b2), eps, wd, decoupled) = (self.lr, self.betas, self.eps, self.weight_decay, self.decoupled);
        let grads = checked_grads("Adam", &self.params)?;
        let (ms, vs, steps) = (&mut self.m, &mut self.v, &mut self.steps);
        for_each_grad(&self.params, &grads, |i, p, g| {
            steps[i] += 1;
            let t = steps[i] as i32;
            let bc1 = 1.0 - (b1 as f64).powi(t);
            let bc2_sqrt = (1.0 - (b2 as f64).powi(t)).sqrt();
            let step_size = (lr as f64 / bc1) as f32;
            let bc2_sqrt = bc2_sqrt as f32;
            let (w1, w2) = (1.0 - b1, 1.0 - b2);
            p.update_f32("Adam", |pv| {
                for (((p, &g), m), v) in pv.iter_mut().zip(g).zip(ms[i].iter_mut()).zip(vs[i].iter_mut()) {
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
    }

    fn params(&self) -> &[Tensor] {
        &self.params
    }

    fn lr(&self) -> f32 {
        self.lr
    }

    fn set_lr(&mut self, lr: f32) {
        self.lr = lr;
    }
}
