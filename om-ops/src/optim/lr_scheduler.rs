//! Learning-rate schedulers as `torch.optim.lr_scheduler`: [`StepLR`], [`MultiStepLR`],
//! [`ExponentialLR`], [`CosineAnnealingLR`], [`LinearLR`] (linear warm-up),
//! [`OneCycleLR`] and [`SequentialLR`] (one after another at milestones), each computing its rates with PyTorch's `get_lr` — the chained form
//! (from the previous rate) where PyTorch chains, in `f64` as PyTorch's Python floats —
//! so the sequence of rates is PyTorch's, bit for bit (`tests/optim_oracle.rs` compares them).
//!
//! A scheduler is made from the optimizer (whose learning rate is the base rate) and, as
//! in PyTorch, sets the optimizer's rate for epoch 0 at once; each [`LrScheduler::step`]
//! (after the optimizer's steps of an epoch, or of a batch for [`OneCycleLR`]) moves to
//! the next epoch and sets its rate. The optimizer receives the rate rounded to `f32`.
//!
//! ```
//! use om_ops::optim::{LrScheduler, Optimizer, Sgd, StepLR};
//! use om_ops::Tensor;
//! let mut opt = Sgd::new(vec![Tensor::ones(&[2])?.requires_grad()?], 0.5)?;
//! let mut sched = StepLR::new(&mut opt, 2, 0.5)?;
//! let mut rates = vec![opt.lr()];
//! for _epoch in 0..4 {
//!     // ... the epoch's optimizer steps ...
//!     sched.step(&mut opt)?;
//!     rates.push(opt.lr());
//! }
//! assert_eq!(rates, [0.5, 0.5, 0.25, 0.25, 0.125]);
//! # Ok::<(), om_ops::Error>(())
//! ```

use super::Optimizer;
use om_core::{Error, Result};
use std::f64::consts::PI;

/// What every scheduler does: PyTorch's `step()`, `get_last_lr()` and `last_epoch`.
///
/// # Examples
///
/// ```
/// use om_ops::optim::{ExponentialLR, LrScheduler, Optimizer, Sgd};
/// use om_ops::Tensor;
/// let mut opt = Sgd::new(vec![Tensor::ones(&[2])?.requires_grad()?], 1.0)?;
/// let mut sched = ExponentialLR::new(&mut opt, 0.5)?;
/// assert_eq!((sched.last_epoch(), sched.lr()), (0, 1.0));
/// sched.step(&mut opt)?; // PyTorch's scheduler.step()
/// assert_eq!((sched.last_epoch(), sched.lr(), opt.lr()), (1, 0.5, 0.5));
/// // `advance` computes the next rate without an optimizer (to plot a schedule).
/// assert_eq!(sched.advance()?, 0.25);
/// assert_eq!(opt.lr(), 0.5);
/// # Ok::<(), om_ops::Error>(())
/// ```
pub trait LrScheduler {
    /// The rate of the current epoch (PyTorch's `get_last_lr()`).
    fn lr(&self) -> f64;

    /// The current epoch, 0 at construction (PyTorch's `last_epoch`).
    fn last_epoch(&self) -> usize;

    /// Moves to the next epoch and returns its rate (PyTorch's `get_lr` after
    /// `last_epoch += 1`), without touching an optimizer.
    fn advance(&mut self) -> Result<f64>;

    /// Moves to the next epoch and sets the optimizer's rate to it (PyTorch's `step()`).
    fn step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        let lr = self.advance()?;
        opt.set_lr(lr as f32);
        Ok(())
    }

    /// The base rate the schedule starts from (PyTorch's `base_lrs[0]`): the optimizer's
    /// rate when the scheduler was made ([`OneCycleLR`]: `max_lr / div_factor`).
    fn base_lr(&self) -> f64;

    /// Starts the schedule again at epoch 0 from the base rate `base_lr` and returns epoch
    /// 0's rate, without touching an optimizer: what [`SequentialLR`] does at a milestone
    /// (PyTorch's `scheduler.step(0)`). A scheduler that cannot start again returns an
    /// error (the default).
    fn restart(&mut self, base_lr: f64) -> Result<f64> {
        let _ = base_lr;
        Err(Error::argument("LrScheduler::restart", "this scheduler cannot start again at epoch 0"))
    }
}

/// The state every scheduler keeps: the base rate, the current rate (PyTorch's
/// `group["lr"]`, from which chained forms go on) and the epoch.
#[derive(Clone, Copy, Debug)]
struct Schedule {
    base_lr: f64,
    lr: f64,
    epoch: usize,
}

impl Schedule {
    /// A schedule not started yet (replaced by [`begin`] before a scheduler is returned).
    const UNSTARTED: Schedule = Schedule { base_lr: 0.0, lr: 0.0, epoch: 0 };

    /// Moves to the next epoch with the rate `next(epoch, previous rate, base rate)`.
    fn advance(&mut self, next: impl FnOnce(usize, f64, f64) -> Result<f64>) -> Result<f64> {
        let epoch = self.epoch + 1;
        self.lr = next(epoch, self.lr, self.base_lr)?;
        self.epoch = epoch;
        Ok(self.lr)
    }
}

/// Starts `s` at epoch 0 from `opt`'s rate and sets epoch 0's rate on `opt`, as a
/// PyTorch scheduler's constructor does.
fn begin<S: LrScheduler>(mut s: S, opt: &mut dyn Optimizer) -> Result<S> {
    let lr = s.restart(opt.lr() as f64)?;
    opt.set_lr(lr as f32);
    Ok(s)
}

/// Implements [`LrScheduler`] for a scheduler with a `schedule` field, a
/// `first(&self, base_lr) -> Result<(f64, f64)>` method (the base rate it uses and epoch
/// 0's rate) and a `next(&self, epoch, lr, base_lr) -> Result<f64>` method.
macro_rules! scheduler {
    ($name:ident) => {
        impl LrScheduler for $name {
            fn lr(&self) -> f64 {
                self.schedule.lr
            }

            fn last_epoch(&self) -> usize {
                self.schedule.epoch
            }

            fn advance(&mut self) -> Result<f64> {
                let this = &*self;
                let mut schedule = this.schedule;
                let lr = schedule.advance(|e, lr, base| this.next(e, lr, base))?;
                self.schedule = schedule;
                Ok(lr)
            }

            fn base_lr(&self) -> f64 {
                self.schedule.base_lr
            }

            fn restart(&mut self, base_lr: f64) -> Result<f64> {
                let (base_lr, lr) = self.first(base_lr)?;
                self.schedule = Schedule { base_lr, lr, epoch: 0 };
                Ok(lr)
            }
        }
    };
}

fn check(op: &'static str, ok: bool, what: impl FnOnce() -> String) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::argument(op, what()))
    }
}

fn check_gamma(op: &'static str, gamma: f64) -> Result<()> {
    check(op, gamma.is_finite() && gamma >= 0.0, || format!("gamma must be a finite number ≥ 0, got {gamma}"))
}

/// `torch.optim.lr_scheduler.StepLR`: the rate times `gamma` every `step_size` epochs.
///
/// # Examples
///
/// ```
/// use om_ops::optim::{LrScheduler, Optimizer, Sgd, StepLR};
/// use om_ops::Tensor;
/// let mut opt = Sgd::new(vec![Tensor::ones(&[2])?.requires_grad()?], 0.05)?;
/// // StepLR(optimizer, step_size=30, gamma=0.1): 0.05 for epochs 0–29, 0.005 for 30–59, …
/// let mut sched = StepLR::new(&mut opt, 30, 0.1)?;
/// let mut rates = Vec::new();
/// for _epoch in 0..61 {
///     rates.push(opt.lr()); // the epoch's rate
///     // ... the epoch's optimizer steps ...
///     sched.step(&mut opt)?;
/// }
/// let near = |a: f32, b: f32| (a - b).abs() < 1e-9;
/// assert!(near(rates[29], 0.05) && near(rates[30], 0.005) && near(rates[60], 0.0005));
/// # Ok::<(), om_ops::Error>(())
/// ```
pub struct StepLR {
    schedule: Schedule,
    step_size: usize,
    gamma: f64,
}

impl StepLR {
    /// Decays `opt`'s rate by `gamma` every `step_size` (≥ 1) epochs.
    pub fn new(opt: &mut dyn Optimizer, step_size: usize, gamma: f64) -> Result<StepLR> {
        check("StepLR", step_size >= 1, || "step_size must be at least 1".into())?;
        check_gamma("StepLR", gamma)?;
        begin(StepLR { schedule: Schedule::UNSTARTED, step_size, gamma }, opt)
    }

    fn first(&self, base: f64) -> Result<(f64, f64)> {
        Ok((base, base))
    }

    fn next(&self, epoch: usize, lr: f64, _: f64) -> Result<f64> {
        Ok(if epoch.is_multiple_of(self.step_size) { lr * self.gamma } else { lr })
    }
}
scheduler!(StepLR);

/// `torch.optim.lr_scheduler.MultiStepLR`: the rate times `gamma` at each milestone
/// epoch (`gamma^n` at a milestone listed `n` times).
///
/// # Examples
///
/// ```
/// use om_ops::optim::{LrScheduler, Optimizer, Sgd, MultiStepLR};
/// use om_ops::Tensor;
/// let mut opt = Sgd::new(vec![Tensor::ones(&[2])?.requires_grad()?], 0.05)?;
/// // MultiStepLR(optimizer, milestones=[30, 80], gamma=0.1)
/// let mut sched = MultiStepLR::new(&mut opt, &[30, 80], 0.1)?;
/// let mut rates = vec![sched.lr()];
/// for _ in 0..90 {
///     sched.step(&mut opt)?;
///     rates.push(sched.lr());
/// }
/// let base = 0.05f32 as f64; // the optimizer's rate
/// let near = |a: f64, b: f64| (a - b).abs() < 1e-12;
/// assert!(near(rates[29], base) && near(rates[30], base * 0.1) && near(rates[79], base * 0.1));
/// assert!(near(rates[80], base * 0.01));
/// # Ok::<(), om_ops::Error>(())
/// ```
pub struct MultiStepLR {
    schedule: Schedule,
    milestones: Vec<usize>,
    gamma: f64,
}

impl MultiStepLR {
    /// Decays `opt`'s rate by `gamma` at each epoch of `milestones`.
    pub fn new(opt: &mut dyn Optimizer, milestones: &[usize], gamma: f64) -> Result<MultiStepLR> {
        check_gamma("MultiStepLR", gamma)?;
        begin(MultiStepLR { schedule: Schedule::UNSTARTED, milestones: milestones.to_vec(), gamma }, opt)
    }

    fn first(&self, base: f64) -> Result<(f64, f64)> {
        // PyTorch's get_lr also applies at epoch 0 (a milestone 0 decays the first rate).
        Ok((base, decay_at(&self.milestones, self.gamma, 0, base)))
    }

    fn next(&self, epoch: usize, lr: f64, _: f64) -> Result<f64> {
        Ok(decay_at(&self.milestones, self.gamma, epoch, lr))
    }
}
scheduler!(MultiStepLR);

/// `lr` decayed by `gamma` for each time `epoch` is listed in `milestones`.
fn decay_at(milestones: &[usize], gamma: f64, epoch: usize, lr: f64) -> f64 {
    let n = milestones.iter().filter(|&&m| m == epoch).count();
    if n == 0 {
        lr
    } else {
        lr * gamma.powf(n as f64)
    }
}

/// `torch.optim.lr_scheduler.ExponentialLR`: the rate times `gamma` every epoch.
///
/// # Examples
///
/// ```
/// use om_ops::optim::{LrScheduler, Optimizer, Sgd, ExponentialLR};
/// use om_ops::Tensor;
/// let mut opt = Sgd::new(vec![Tensor::ones(&[2])?.requires_grad()?], 0.1)?;
/// let mut sched = ExponentialLR::new(&mut opt, 0.9)?; // ExponentialLR(optimizer, gamma=0.9)
/// for _ in 0..3 {
///     sched.step(&mut opt)?;
/// }
/// assert!((sched.lr() - 0.1f32 as f64 * 0.9f64.powi(3)).abs() < 1e-12);
/// # Ok::<(), om_ops::Error>(())
/// ```
pub struct ExponentialLR {
    schedule: Schedule,
    gamma: f64,
}

impl ExponentialLR {
    /// Decays `opt`'s rate by `gamma` every epoch.
    pub fn new(opt: &mut dyn Optimizer, gamma: f64) -> Result<ExponentialLR> {
        check_gamma("ExponentialLR", gamma)?;
        begin(ExponentialLR { schedule: Schedule::UNSTARTED, gamma }, opt)
    }

    fn first(&self, base: f64) -> Result<(f64, f64)> {
        Ok((base, base))
    }

    fn next(&self, _: usize, lr: f64, _: f64) -> Result<f64> {
        Ok(lr * self.gamma)
    }
}
scheduler!(ExponentialLR);

/// `torch.optim.lr_scheduler.CosineAnnealingLR`: from the base rate down to `eta_min`
/// along half a cosine over `t_max` epochs (then back up, periodically), in PyTorch's
/// chained form: `η_e = (1 + cos(π·e/T)) / (1 + cos(π·(e−1)/T)) · (η_{e−1} − η_min) + η_min`,
/// and `η_e = η_{e−1} + (η_base − η_min)·(1 − cos(π/T))/2` when `(e − 1 − T) mod 2T = 0`.
///
/// # Examples
///
/// ```
/// use om_ops::optim::{LrScheduler, Optimizer, Sgd, CosineAnnealingLR};
/// use om_ops::Tensor;
/// let mut opt = Sgd::new(vec![Tensor::ones(&[2])?.requires_grad()?], 1.0)?;
/// // CosineAnnealingLR(optimizer, T_max=4) (eta_min=0): (1 + cos(π·e/4)) / 2
/// let mut sched = CosineAnnealingLR::new(&mut opt, 4, 0.0)?;
/// for e in 1..=4 {
///     sched.step(&mut opt)?;
///     let want = (1.0 + (std::f64::consts::PI * e as f64 / 4.0).cos()) / 2.0;
///     assert!((sched.lr() - want).abs() < 1e-12, "epoch {e}");
/// }
/// assert!(sched.lr().abs() < 1e-12); // eta_min at epoch T_max
/// # Ok::<(), om_ops::Error>(())
/// ```
pub struct CosineAnnealingLR {
    schedule: Schedule,
    t_max: usize,
    eta_min: f64,
}

impl CosineAnnealingLR {
    /// Anneals `opt`'s rate to `eta_min` over `t_max` (≥ 1) epochs.
    pub fn new(opt: &mut dyn Optimizer, t_max: usize, eta_min: f64) -> Result<CosineAnnealingLR> {
        check("CosineAnnealingLR", t_max >= 1, || "t_max must be at least 1".into())?;
        check("CosineAnnealingLR", eta_min.is_finite(), || format!("eta_min must be finite, got {eta_min}"))?;
        begin(CosineAnnealingLR { schedule: Schedule::UNSTARTED, t_max, eta_min }, opt)
    }

    fn first(&self, base: f64) -> Result<(f64, f64)> {
        Ok((base, base))
    }

    fn next(&self, epoch: usize, lr: f64, base: f64) -> Result<f64> {
        let (e, t, eta_min) = (epoch as f64, self.t_max as f64, self.eta_min);
        // In i128: `2·t_max` and `epoch − 1 − t_max` overflow i64 for t_max near usize::MAX.
        Ok(if (epoch as i128 - 1 - self.t_max as i128).rem_euclid(2 * self.t_max as i128) == 0 {
            lr + (base - eta_min) * (1.0 - (PI / t).cos()) / 2.0
        } else {
            (1.0 + (PI * e / t).cos()) / (1.0 + (PI * (e - 1.0) / t).cos()) * (lr - eta_min) + eta_min
        })
    }
}
scheduler!(CosineAnnealingLR);

/// `torch.optim.lr_scheduler.LinearLR` (linear warm-up): the rate times a factor going
/// linearly from `start_factor` to `end_factor` over `total_iters` epochs, then constant;
/// in PyTorch's chained form
/// `η_e = η_{e−1}·(1 + (end − start) / (T·start + (e − 1)·(end − start)))`.
///
/// # Examples
///
/// ```
/// use om_ops::optim::{LrScheduler, Optimizer, Sgd, LinearLR};
/// use om_ops::Tensor;
/// let mut opt = Sgd::new(vec![Tensor::ones(&[2])?.requires_grad()?], 0.1)?;
/// // LinearLR(optimizer, start_factor=1/3, end_factor=1, total_iters=5): PyTorch's defaults
/// let mut sched = LinearLR::new(&mut opt, 1.0 / 3.0, 1.0, 5)?;
/// let mut factors = vec![sched.lr() / 0.1f32 as f64];
/// for _ in 0..6 {
///     sched.step(&mut opt)?;
///     factors.push(sched.lr() / 0.1f32 as f64);
/// }
/// // 1/3 + (2/3)·e/5, then 1
/// let want = [5.0, 7.0, 9.0, 11.0, 13.0, 15.0, 15.0].map(|n| n / 15.0);
/// assert!(factors.iter().zip(want).all(|(f, w)| (f - w).abs() < 1e-12), "{factors:?}");
/// # Ok::<(), om_ops::Error>(())
/// ```
pub struct LinearLR {
    schedule: Schedule,
    start_factor: f64,
    end_factor: f64,
    total_iters: usize,
}

impl LinearLR {
    /// Scales `opt`'s rate from `start_factor` (in `(0, 1]`) to `end_factor` (in
    /// `[0, 1]`) over `total_iters` epochs (PyTorch's defaults: 1/3, 1, 5).
    pub fn new(opt: &mut dyn Optimizer, start_factor: f64, end_factor: f64, total_iters: usize) -> Result<LinearLR> {
        check("LinearLR", start_factor > 0.0 && start_factor <= 1.0, || format!("start_factor must be in (0, 1], got {start_factor}"))?;
        check("LinearLR", (0.0..=1.0).contains(&end_factor), || format!("end_factor must be in [0, 1], got {end_factor}"))?;
        begin(LinearLR { schedule: Schedule::UNSTARTED, start_factor, end_factor, total_iters }, opt)
    }

    fn first(&self, base: f64) -> Result<(f64, f64)> {
        Ok((base, base * self.start_factor))
    }

    fn next(&self, epoch: usize, lr: f64, _: f64) -> Result<f64> {
        if epoch > self.total_iters {
            return Ok(lr);
        }
        let (s, d) = (self.start_factor, self.end_factor - self.start_factor);
        Ok(lr * (1.0 + d / (self.total_iters as f64 * s + (epoch - 1) as f64 * d)))
    }
}
scheduler!(LinearLR);

/// How [`OneCycleLR`] moves between two rates (PyTorch's `anneal_strategy`; the
/// example of [`OneCycleOptions`] uses [`Anneal::Linear`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anneal {
    /// Half a cosine: `end + (start − end)/2 · (cos(π·pct) + 1)` (PyTorch's `"cos"`).
    Cos,
    /// A straight line: `(end − start)·pct + start` (PyTorch's `"linear"`).
    Linear,
}

/// Options of [`OneCycleLR`] (PyTorch's defaults).
///
/// # Examples
///
/// ```
/// use om_ops::optim::{Anneal, LrScheduler, OneCycleLR, OneCycleOptions, Optimizer, Sgd};
/// use om_ops::Tensor;
/// let o = OneCycleOptions::default();
/// assert_eq!((o.pct_start, o.anneal, o.div_factor, o.final_div_factor, o.three_phase), (0.3, Anneal::Cos, 25.0, 1e4, false));
/// // OneCycleLR(optimizer, max_lr=1.0, total_steps=11, pct_start=0.5, anneal_strategy='linear')
/// let mut opt = Sgd::new(vec![Tensor::ones(&[2])?.requires_grad()?], 0.1)?;
/// let o = OneCycleOptions { pct_start: 0.5, anneal: Anneal::Linear, ..o };
/// let mut sched = OneCycleLR::new(&mut opt, 1.0, 11, o)?;
/// let mut rates = vec![sched.lr()];
/// for _ in 0..10 {
///     sched.step(&mut opt)?;
///     rates.push(sched.lr());
/// }
/// // Up in a straight line from 1/25 to 1 by step 4.5, then down to 1/25/1e4 at step 10.
/// assert!((rates[0] - 0.04).abs() < 1e-12 && (rates[4] - (0.04 + 0.96 * 4.0 / 4.5)).abs() < 1e-12);
/// assert!((rates[10] - 4e-6).abs() < 1e-15);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OneCycleOptions {
    /// Fraction of the steps spent raising the rate, in `[0, 1]` (0.3).
    pub pct_start: f64,
    /// The annealing shape ([`Anneal::Cos`]).
    pub anneal: Anneal,
    /// The first rate is `max_lr / div_factor` (25).
    pub div_factor: f64,
    /// The last rate is the first divided by `final_div_factor` (1e4).
    pub final_div_factor: f64,
    /// Three phases (up, back down to the first rate, then to the last) instead of two.
    pub three_phase: bool,
}

impl Default for OneCycleOptions {
    fn default() -> OneCycleOptions {
        OneCycleOptions { pct_start: 0.3, anneal: Anneal::Cos, div_factor: 25.0, final_div_factor: 1e4, three_phase: false }
    }
}

/// One phase of a one-cycle schedule: up to step `end_step`, from rate `start` to `end`.
#[derive(Clone, Copy, Debug)]
struct Phase {
    end_step: f64,
    start: f64,
    end: f64,
}

/// `torch.optim.lr_scheduler.OneCycleLR`: the 1cycle policy over `total_steps` steps
/// (stepped per batch) — from `max_lr/div_factor` up to `max_lr`, then down to
/// `max_lr/(div_factor·final_div_factor)`, each phase annealed by [`Anneal`]; the
/// optimizer's own rate is replaced. Momentum is not cycled (PyTorch's
/// `cycle_momentum=False`; the rates are the same either way).
///
/// # Examples
///
/// ```
/// use om_ops::optim::{LrScheduler, OneCycleLR, OneCycleOptions, Optimizer, Sgd};
/// use om_ops::Tensor;
/// let mut opt = Sgd::new(vec![Tensor::ones(&[2])?.requires_grad()?], 0.1)?;
/// // OneCycleLR(optimizer, max_lr=0.01, total_steps=100): stepped after every batch
/// let mut sched = OneCycleLR::new(&mut opt, 0.01, 100, OneCycleOptions::default())?;
/// assert!((opt.lr() - 0.01 / 25.0).abs() < 1e-9); // the optimizer's own rate is replaced
/// let mut peak = 0.0f64;
/// for _batch in 0..99 {
///     // ... the batch's optimizer step ...
///     sched.step(&mut opt)?;
///     peak = peak.max(sched.lr());
/// }
/// assert!((peak - 0.01).abs() < 1e-12); // max_lr after pct_start·total_steps steps
/// assert!((sched.lr() - 0.01 / 25.0 / 1e4).abs() < 1e-12); // the 100th rate
/// # Ok::<(), om_ops::Error>(())
/// ```
pub struct OneCycleLR {
    schedule: Schedule,
    total_steps: usize,
    anneal: Anneal,
    /// The first rate, `max_lr / div_factor` (the base rate).
    initial: f64,
    phases: Vec<Phase>,
}

impl OneCycleLR {
    /// A one-cycle schedule peaking at `max_lr` over `total_steps` (≥ 1) steps.
    pub fn new(opt: &mut dyn Optimizer, max_lr: f64, total_steps: usize, o: OneCycleOptions) -> Result<OneCycleLR> {
        const OP: &str = "OneCycleLR";
        check(OP, total_steps >= 1, || "total_steps must be at least 1".into())?;
        check(OP, (0.0..=1.0).contains(&o.pct_start), || format!("pct_start must be in [0, 1], got {}", o.pct_start))?;
        check(OP, max_lr.is_finite() && max_lr >= 0.0, || format!("max_lr must be a finite number ≥ 0, got {max_lr}"))?;
        check(OP, o.div_factor.is_finite() && o.div_factor > 0.0, || format!("div_factor must be above 0, got {}", o.div_factor))?;
        check(OP, o.final_div_factor.is_finite() && o.final_div_factor > 0.0, || {
            format!("final_div_factor must be above 0, got {}", o.final_div_factor)
        })?;
        let initial = max_lr / o.div_factor;
        let min = initial / o.final_div_factor;
        let (n, p) = (total_steps as f64, o.pct_start);
        let last = (total_steps - 1) as f64;
        let phases = if o.three_phase {
            vec![
                Phase { end_step: p * n - 1.0, start: initial, end: max_lr },
                Phase { end_step: 2.0 * p * n - 2.0, start: max_lr, end: initial },
                Phase { end_step: last, start: initial, end: min },
            ]
        } else {
            vec![Phase { end_step: p * n - 1.0, start: initial, end: max_lr }, Phase { end_step: last, start: max_lr, end: min }]
        };
        begin(OneCycleLR { schedule: Schedule::UNSTARTED, total_steps, anneal: o.anneal, initial, phases }, opt)
    }

    /// The optimizer's own rate is replaced: the base is always `max_lr / div_factor`.
    fn first(&self, _: f64) -> Result<(f64, f64)> {
        Ok((self.initial, self.next(0, self.initial, self.initial)?))
    }

    fn next(&self, step: usize, _: f64, _: f64) -> Result<f64> {
        if step > self.total_steps {
            return Err(Error::argument("OneCycleLR", format!("stepped {step} times, past its {} total steps", self.total_steps)));
        }
        let step_num = step as f64;
        let mut start_step = 0.0;
        for (i, ph) in self.phases.iter().enumerate() {
            if step_num <= ph.end_step || i == self.phases.len() - 1 {
                let pct = (step_num - start_step) / (ph.end_step - start_step);
                if !pct.is_finite() {
                    return Err(Error::argument(
                        "OneCycleLR",
                        format!("phase {i} is empty (pct_start too small for {} steps)", self.total_steps),
                    ));
                }
                return Ok(match self.anneal {
                    Anneal::Cos => ph.end + (ph.start - ph.end) / 2.0 * ((PI * pct).cos() + 1.0),
                    Anneal::Linear => (ph.end - ph.start) * pct + ph.start,
                });
            }
            start_step = ph.end_step;
        }
        Ok(self.schedule.lr)
    }
}
scheduler!(OneCycleLR);

/// `torch.optim.lr_scheduler.SequentialLR`: `schedulers` one after another, switching at
/// the `milestones` (one fewer than the schedulers, non-decreasing, each at least 1): at
/// milestone `m_i` scheduler `i + 1` starts again at its epoch 0 from the first scheduler's
/// base rate (PyTorch's `step(0)`), and steps from there. Each scheduler is made over the
/// same optimizer first (their constructors' changes to its rate are undone, as in PyTorch).
///
/// # Examples
///
/// ```
/// use om_ops::optim::{CosineAnnealingLR, LinearLR, LrScheduler, Optimizer, SequentialLR, Sgd};
/// use om_ops::Tensor;
/// let mut opt = Sgd::new(vec![Tensor::ones([2])?.requires_grad()?], 0.5)?;
/// // Linear warm-up for 4 epochs, then a cosine over 8:
/// // SequentialLR(opt, [LinearLR(opt, 0.25, total_iters=4), CosineAnnealingLR(opt, 8)], [4])
/// let warm = LinearLR::new(&mut opt, 0.25, 1.0, 4)?;
/// let cosine = CosineAnnealingLR::new(&mut opt, 8, 0.0)?;
/// let mut sched = SequentialLR::new(&mut opt, vec![Box::new(warm), Box::new(cosine)], &[4])?;
/// let mut rates = vec![opt.lr()];
/// for _epoch in 0..12 {
///     sched.step(&mut opt)?;
///     rates.push(opt.lr());
/// }
/// assert_eq!((rates[0], rates[3], rates[4], rates[12]), (0.125, 0.40625, 0.5, 0.0));
/// assert!(SequentialLR::new(&mut opt, vec![], &[]).is_err());
/// # Ok::<(), om_ops::Error>(())
/// ```
pub struct SequentialLR {
    schedulers: Vec<Box<dyn LrScheduler>>,
    milestones: Vec<usize>,
    schedule: Schedule,
}

impl SequentialLR {
    /// `schedulers` (at least one) switching at `milestones` (one fewer), starting with
    /// the first scheduler's epoch 0, whose rate is set on `opt`.
    pub fn new(opt: &mut dyn Optimizer, schedulers: Vec<Box<dyn LrScheduler>>, milestones: &[usize]) -> Result<SequentialLR> {
        const OP: &str = "SequentialLR";
        check(OP, !schedulers.is_empty(), || "needs at least one scheduler".into())?;
        check(OP, milestones.len() + 1 == schedulers.len(), || {
            format!(
                "needs one milestone fewer than schedulers, got {} scheduler(s) and {} milestone(s)",
                schedulers.len(),
                milestones.len()
            )
        })?;
        check(OP, milestones.iter().all(|&m| m >= 1) && milestones.is_sorted(), || {
            format!("milestones must be non-decreasing epochs of at least 1, got {milestones:?}")
        })?;
        let mut s = SequentialLR { schedulers, milestones: milestones.to_vec(), schedule: Schedule::UNSTARTED };
        let base = s.schedulers[0].base_lr();
        let lr = s.restart(base).map_err(|e| e.with_op(OP))?;
        opt.set_lr(lr as f32);
        Ok(s)
    }
}

impl LrScheduler for SequentialLR {
    fn lr(&self) -> f64 {
        self.schedule.lr
    }

    fn last_epoch(&self) -> usize {
        self.schedule.epoch
    }

    fn advance(&mut self) -> Result<f64> {
        let epoch = self.schedule.epoch + 1;
        // PyTorch's `bisect_right(milestones, epoch)`: the scheduler of this epoch.
        let i = self.milestones.partition_point(|&m| m <= epoch);
        let lr = if i > 0 && self.milestones[i - 1] == epoch {
            self.schedulers[i].restart(self.schedule.base_lr)?
        } else {
            self.schedulers[i].advance()?
        };
        self.schedule.epoch = epoch;
        self.schedule.lr = lr;
        Ok(lr)
    }

    fn base_lr(&self) -> f64 {
        self.schedule.base_lr
    }

    /// Every scheduler starts again from `base_lr`; the first one's epoch 0 is the rate.
    fn restart(&mut self, base_lr: f64) -> Result<f64> {
        for s in self.schedulers.iter_mut().rev() {
            self.schedule.lr = s.restart(base_lr)?;
        }
        self.schedule.base_lr = base_lr;
        self.schedule.epoch = 0;
        Ok(self.schedule.lr)
    }
}
