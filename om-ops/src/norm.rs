//! Normalisation: `layer_norm` (over the last axis) and `batch_norm2d` (per channel of
//! `[N, C, H, W]`, training or eval, with PyTorch's in-place running-stat update).
//! Means, variances and the sums of the backward rules accumulate in f64 in increasing
//! element order and round once to f32; everything else is plain f32 arithmetic in a fixed
//! order, so both modes, every kernel path and every thread count give the same bits. The
//! arithmetic lives in `om_core::kernels::norm` (sums in lockstep, vectorised output loops,
//! rows or channels in parallel; see `docs/kernels-norm-pool.md`).

use om_core::compute::Compute;
use om_core::kernels::norm::{self as kernel, Affine, BatchShape, NormGrad, NormOut, ParamSums, Stats};
use om_core::maps;
use om_core::pool::F64Scratch;
use om_core::{Case, Error, Result, Tensor};
use om_macros::op;

/// An optional per-feature tensor must be `f32` of shape `[len]`.
fn check_param(op: &'static str, arg: &'static str, t: Option<&Tensor>, len: usize, x: &Tensor) -> Result<()> {
    if let Some(t) = t {
        t.expect_f32(op, arg)?;
        if t.shape() != [len] {
            return Err(Error::shape(op, &[x.shape(), t.shape()], format!("`{arg}` must have shape [{len}], got {:?}", t.shape())));
        }
    }
    Ok(())
}

/// `eps` must be finite and non-negative.
fn check_eps(op: &'static str, eps: f32) -> Result<()> {
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(Error::argument(op, format!("eps must be finite and non-negative, got {eps}")));
    }
    Ok(())
}

// ===== layer norm =====

/// Layer normalisation over the last axis: `y = (x − μ)/σ·γ + β` with the mean `μ` and
/// biased variance `var` of each row (f64 sums) and `σ = sqrt(var + ε)`; `γ`, `β` of shape
/// `[D]` are optional. Backward (Ba et al. 2016), with `x̂ = (x−μ)/σ` and `ĝ = g·γ`:
/// `dx = (ĝ − mean(ĝ) − x̂·mean(ĝ·x̂))/σ`, `dγ = Σ g·x̂`, `dβ = Σ g` over rows.
///
/// # Examples
///
/// ```
/// use om_ops::{layer_norm, Tensor};
/// // Each row normalised to mean 0 and variance 1 (biased variance, as PyTorch).
/// let x = Tensor::from_vec(vec![1.0, 3.0, 2.0, 6.0], &[2, 2])?;
/// let y = layer_norm(&x, None, None, 0.0)?.to_vec();
/// for (v, e) in y.iter().zip([-1.0, 1.0, -1.0, 1.0]) {
///     assert!((v - e).abs() < 1e-5);
/// }
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x, gamma, mean: owned, rstd: owned], attrs = [eps: f32])]
pub mod layer_norm {
    use super::*;

    pub fn forward(x: &Tensor, gamma: Option<&Tensor>, beta: Option<&Tensor>, eps: f32) -> Result<(Tensor, Owned)> {
        x.expect_f32(NAME, "x")?;
        let Some(&d) = x.shape().last() else {
            return Err(Error::shape(NAME, &[x.shape()], "x needs at least one axis (the normalised one)"));
        };
        if d == 0 {
            return Err(Error::shape(NAME, &[x.shape()], "the normalised axis is empty"));
        }
        check_param(NAME, "gamma", gamma, d, x)?;
        check_param(NAME, "beta", beta, d, x)?;
        check_eps(NAME, eps)?;
        let lead = &x.shape()[..x.rank() - 1];
        let settings = Compute::settings();
        let [y, mean, rstd] = x.try_with_f32(|xs| {
            Tensor::try_with_f32_opt(gamma, |gamma| {
                Tensor::try_with_f32_opt(beta, |beta| {
                    Tensor::build_many_f32([x.shape(), lead, lead], |[y, mean, rstd]| {
                        kernel::layer_norm(settings, xs, d, Affine { gamma, beta }, eps, NormOut { y, mean, rstd });
                        Ok(())
                    })
                })
            })
        })????;
        Ok((y, Owned { mean, rstd }))
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let shape = &r.input_shapes[0];
        let n = shape[shape.len() - 1];
        let (need_x, need_g, need_b) = (d.needs_x(), d.needs_gamma(), d.needs_beta());
        let sums_len = if need_g || need_b { n } else { 0 };
        let mut dgamma = F64Scratch::try_zeroed(sums_len)?;
        let mut dbeta = F64Scratch::try_zeroed(sums_len)?;
        let settings = Compute::settings();
        let dx = r.x().try_with_f32(|xs| {
            g.try_with_f32(|gs| {
                r.mean().try_with_f32(|m| {
                    r.rstd().try_with_f32(|s| {
                        Tensor::try_with_f32_opt(r.gamma().ok(), |gamma| {
                            let sums = (need_g || need_b).then(|| ParamSums { dgamma: dgamma.values(), dbeta: dbeta.values() });
                            let grad = NormGrad { x: xs, g: gs, stats: Stats { mean: m, rstd: s }, gamma };
                            if !need_x {
                                kernel::layer_norm_backward(settings, n, grad, None, sums);
                                return Ok(None);
                            }
                            Tensor::build_f32(shape, |dx| {
                                kernel::layer_norm_backward(settings, n, grad, Some(dx), sums);
                                Ok(())
                            })
                            .map(Some)
                        })
                    })
                })
            })
        })??????;
        if let Some(dx) = dx {
            d.x(dx);
        }
        if need_g {
            d.gamma(round_sums(&mut dgamma, n)?);
        }
        if need_b {
            d.beta(round_sums(&mut dbeta, n)?);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let inp = Case::input;
        vec![
            Case::new("affine", vec![inp(&[3, 5], -2.0, 2.0, 1), inp(&[5], 0.5, 1.5, 2), inp(&[5], -1.0, 1.0, 3)], |x| {
                super::layer_norm(&x[0], Some(&x[1]), Some(&x[2]), 1e-5)
            }),
            Case::new("plain_rank3", vec![inp(&[2, 3, 4], -2.0, 2.0, 4)], |x| super::layer_norm(&x[0], None, None, 1e-5)),
            Case::new("gamma_only", vec![inp(&[4, 6], -2.0, 2.0, 5), inp(&[6], -1.5, 1.5, 6)], |x| {
                super::layer_norm(&x[0], Some(&x[1]), None, 1e-3)
            }),
            Case::new("beta_only_1d", vec![inp(&[7], -2.0, 2.0, 7), inp(&[7], -1.0, 1.0, 8)], |x| {
                super::layer_norm(&x[0], None, Some(&x[1]), 1e-5)
            }),
            Case::new("transposed", vec![inp(&[5, 3], -2.0, 2.0, 9), inp(&[5], 0.5, 1.5, 10), inp(&[5], -1.0, 1.0, 11)], |x| {
                super::layer_norm(&crate::transpose(&x[0], 0, 1)?, Some(&x[1]), Some(&x[2]), 1e-5)
            }),
            Case::new("strided", vec![inp(&[3, 10], -2.0, 2.0, 12), inp(&[5], 0.5, 1.5, 13)], |x| {
                super::layer_norm(&crate::slice(&x[0], 1, 1, 10, 2)?, Some(&x[1]), None, 1e-5)
            }),
        ]
    }
}

/// A `[len]` tensor of the f64 sums, each rounded once.
fn round_sums(acc: &mut F64Scratch, len: usize) -> Result<Tensor> {
    let a = acc.values();
    Tensor::build_f32(&[len], |out| {
        for (o, &s) in out.iter_mut().zip(a.iter()) {
            *o = s as f32;
        }
        Ok(())
    })
}

// ===== batch norm =====

/// Checks a running-stat tensor: `f32`, shape `[c]`, contiguous (updated in place) and not
/// requiring gradients.
fn check_running(op: &'static str, arg: &'static str, t: Option<&Tensor>, c: usize, x: &Tensor) -> Result<()> {
    check_param(op, arg, t, c, x)?;
    if let Some(t) = t {
        if t.needs_grad() {
            return Err(Error::argument(op, format!("`{arg}` must not require gradients (running statistics are buffers)")));
        }
        if !t.is_contiguous() {
            return Err(Error::argument(op, format!("`{arg}` must be contiguous (it is updated in place)")));
        }
    }
    Ok(())
}

/// How [`batch_norm2d`] normalises: in training (batch statistics, running stats updated
/// with `momentum`) or eval (the running stats), and the `eps` added to the variance.
/// PyTorch's defaults: momentum 0.1, eps 1e-5.
///
/// # Examples
///
/// ```
/// use om_ops::BatchNormOptions;
/// // F.batch_norm(..., training=True, momentum=0.3, eps=1e-3)
/// let o = BatchNormOptions::train().momentum(0.3).eps(1e-3);
/// assert!(o.is_training());
/// assert!(!BatchNormOptions::eval().is_training());
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchNormOptions {
    training: bool,
    momentum: f32,
    eps: f32,
}

impl BatchNormOptions {
    /// Training: normalise with the batch's statistics and update the running stats, if
    /// given; momentum 0.1, eps 1e-5.
    pub fn train() -> BatchNormOptions {
        BatchNormOptions { training: true, momentum: 0.1, eps: 1e-5 }
    }

    /// Eval: normalise with the running stats (required); eps 1e-5.
    pub fn eval() -> BatchNormOptions {
        BatchNormOptions { training: false, ..BatchNormOptions::train() }
    }

    /// Training (`true`) or eval, keeping momentum and eps.
    pub fn training(self, training: bool) -> BatchNormOptions {
        BatchNormOptions { training, ..self }
    }

    /// The running stats' update weight (finite): `running = (1 − m)·running + m·batch`.
    pub fn momentum(self, momentum: f32) -> BatchNormOptions {
        BatchNormOptions { momentum, ..self }
    }

    /// Added to the variance before the square root (finite, non-negative).
    pub fn eps(self, eps: f32) -> BatchNormOptions {
        BatchNormOptions { eps, ..self }
    }

    /// Whether these options normalise with the batch's statistics.
    pub fn is_training(&self) -> bool {
        self.training
    }
}

/// Batch normalisation of `[N, C, H, W]` per channel: `y = (x − μ)/σ·γ + β`, `σ = sqrt(var + ε)`.
/// Training uses the batch mean and biased variance over N, H, W (f64 sums) and, when
/// running stats are given, updates them in place as PyTorch does:
/// `running = (1 − momentum)·running + momentum·batch` with the unbiased variance
/// (`n/(n−1)`). Eval normalises with the running stats (required). Running stats never
/// take gradients. Mode, momentum and ε come in `options` ([`BatchNormOptions`]).
/// Backward (Ioffe and Szegedy 2015): training
/// `dx = γ/σ·(g − mean(g) − x̂·mean(g·x̂))` over N, H, W; eval `dx = γ/σ·g`;
/// `dγ = Σ g·x̂`, `dβ = Σ g`.
///
/// # Examples
///
/// ```
/// use om_ops::{batch_norm2d, BatchNormOptions, Tensor};
/// // Two images of one channel, 1×2 each: the channel's values are 1, 3, 5, 7.
/// let x = Tensor::from_vec(vec![1.0, 3.0, 5.0, 7.0], &[2, 1, 1, 2])?;
/// let (running_mean, running_var) = (Tensor::zeros(&[1])?, Tensor::ones(&[1])?);
/// let options = BatchNormOptions::train().momentum(0.1).eps(0.0);
/// let y = batch_norm2d(&x, None, None, Some(&running_mean), Some(&running_var), options)?;
/// // Normalised with the batch mean 4 and biased variance 5.
/// let want = [-3.0, -1.0, 1.0, 3.0].map(|v: f32| v / 5f32.sqrt());
/// assert!(y.to_vec().iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6));
/// // The running stats moved by `momentum` towards the batch's (unbiased variance 20/3).
/// assert!((running_mean.to_vec()[0] - 0.4).abs() < 1e-6);
/// assert!((running_var.to_vec()[0] - (0.9 + 0.1 * 20.0 / 3.0)).abs() < 1e-6);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x, gamma, mean: owned, rstd: owned], attrs = [options: BatchNormOptions])]
pub mod batch_norm2d {
    use super::*;

    pub fn forward(
        x: &Tensor,
        gamma: Option<&Tensor>,
        beta: Option<&Tensor>,
        running_mean: Option<&Tensor>,
        running_var: Option<&Tensor>,
        options: BatchNormOptions,
    ) -> Result<(Tensor, Owned)> {
        let BatchNormOptions { training, momentum, eps } = options;
        x.expect_f32(NAME, "x")?;
        if x.rank() != 4 {
            return Err(Error::shape(NAME, &[x.shape()], format!("x must be [N, C, H, W], got rank {}", x.rank())));
        }
        let (n, c, hw) = (x.shape()[0], x.shape()[1], x.shape()[2] * x.shape()[3]);
        check_param(NAME, "gamma", gamma, c, x)?;
        check_param(NAME, "beta", beta, c, x)?;
        check_running(NAME, "running_mean", running_mean, c, x)?;
        check_running(NAME, "running_var", running_var, c, x)?;
        check_eps(NAME, eps)?;
        if running_mean.is_some() != running_var.is_some() {
            return Err(Error::argument(NAME, "give both running_mean and running_var, or neither"));
        }
        if !momentum.is_finite() {
            return Err(Error::argument(NAME, format!("momentum must be finite, got {momentum}")));
        }
        let count = n * hw;
        let shape = BatchShape { n, c, hw };
        let settings = Compute::settings();
        if training && count == 1 {
            return Err(Error::shape(NAME, &[x.shape()], "training needs more than one value per channel"));
        }
        let mut sq = F64Scratch::try_zeroed(if training { c } else { 0 })?;
        let [y, mean, rstd] = x.try_with_f32(|xs| {
            Tensor::try_with_f32_opt(gamma, |gamma| {
                Tensor::try_with_f32_opt(beta, |beta| {
                    let affine = Affine { gamma, beta };
                    Tensor::build_many_f32([x.shape(), &[c], &[c]], |[y, mean, rstd]| {
                        if training {
                            kernel::batch_norm(settings, shape, xs, affine, eps, NormOut { y, mean, rstd }, sq.values());
                            return Ok(());
                        }
                        let (Some(rm), Some(rv)) = (running_mean, running_var) else {
                            return Err(Error::argument(NAME, "eval mode needs running_mean and running_var"));
                        };
                        // Contiguous (checked above): read in place, nothing to allocate.
                        rm.try_with_f32(|v| mean.copy_from_slice(v))?;
                        rv.try_with_f32(|v| rstd.iter_mut().zip(v).for_each(|(s, &v)| *s = 1.0 / (v + eps).sqrt()))?;
                        kernel::batch_norm_apply(settings, shape, xs, Stats { mean, rstd }, affine, y);
                        Ok(())
                    })
                })
            })
        })????;
        // Every buffer exists now: the running stats are written last, so a refused
        // request leaves them unchanged. An empty batch leaves them as they are (PyTorch).
        if let (true, true, Some(rm), Some(rv)) = (training, count > 0, running_mean, running_var) {
            mean.try_with_f32(|mean| update_running(rm, rv, momentum, mean, sq.values(), count))??;
        }
        Ok((y, Owned { mean, rstd }))
    }

    /// PyTorch's running-stat update: `running = (1 − m)·running + m·batch`, the variance
    /// unbiased (`sq/(count − 1)`).
    fn update_running(rm: &Tensor, rv: &Tensor, momentum: f32, mean: &[f32], sq: &[f64], count: usize) -> Result<()> {
        let m = momentum as f64;
        rm.update_f32(NAME, |v| {
            for (r, &b) in v.iter_mut().zip(mean) {
                *r = (m * b as f64 + (1.0 - m) * *r as f64) as f32;
            }
        })?;
        rv.update_f32(NAME, |v| {
            for (r, &s) in v.iter_mut().zip(sq) {
                let unbiased = (s / (count - 1) as f64) as f32;
                *r = (m * unbiased as f64 + (1.0 - m) * *r as f64) as f32;
            }
        })
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let shape = &r.input_shapes[0];
        let (n, c, hw) = (shape[0], shape[1], shape[2] * shape[3]);
        let shape4 = BatchShape { n, c, hw };
        let settings = Compute::settings();
        let mut sg = F64Scratch::try_zeroed(c)?;
        let mut sgx = F64Scratch::try_zeroed(c)?;
        let need_x = d.needs_x();
        if need_x && r.options.training {
            // `dx` over `g`'s buffer when the engine's handle is its only one.
            let over = maps::over_gradient(NAME, g, |gs| {
                with_saved(r, |xs, stats, gamma| {
                    let sums = ParamSums { dgamma: sgx.values(), dbeta: sg.values() };
                    kernel::batch_norm_backward_over_g(settings, shape4, xs, stats, gamma, sums, gs);
                    Ok(())
                })
            });
            if let Some(dx) = over {
                d.x(dx?);
                return param_grads(d, &mut sg, &mut sgx, c);
            }
        }
        let dx = g.try_with_f32(|gs| {
            with_saved(r, |xs, stats, gamma| {
                let sums = ParamSums { dgamma: sgx.values(), dbeta: sg.values() };
                let grad = NormGrad { x: xs, g: gs, stats, gamma };
                if !need_x {
                    kernel::batch_norm_backward(settings, shape4, grad, r.options.training, sums, None);
                    return Ok(None);
                }
                Tensor::build_f32(shape, |dx| {
                    kernel::batch_norm_backward(settings, shape4, grad, r.options.training, sums, Some(dx));
                    Ok(())
                })
                .map(Some)
            })
        })??;
        if let Some(dx) = dx {
            d.x(dx);
        }
        param_grads(d, &mut sg, &mut sgx, c)
    }

    /// Runs `f` on the forward's saved input, batch statistics and scale (if any).
    fn with_saved<T>(r: &Record, f: impl FnOnce(&[f32], Stats<'_>, Option<&[f32]>) -> Result<T>) -> Result<T> {
        r.x().try_with_f32(|xs| {
            r.mean().try_with_f32(|mean| {
                r.rstd().try_with_f32(|rstd| Tensor::try_with_f32_opt(r.gamma().ok(), |gamma| f(xs, Stats { mean, rstd }, gamma)))
            })
        })????
    }

    /// `dγ` and `dβ` from their f64 sums, where wanted.
    fn param_grads(d: &mut Grads, sg: &mut F64Scratch, sgx: &mut F64Scratch, c: usize) -> Result<()> {
        if d.needs_gamma() {
            d.gamma(round_sums(sgx, c)?);
        }
        if d.needs_beta() {
            d.beta(round_sums(sg, c)?);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let inp = Case::input;
        let x = || inp(&[2, 3, 2, 2], -2.0, 2.0, 1);
        let gb = |seed| vec![inp(&[3], 0.5, 1.5, seed), inp(&[3], -1.0, 1.0, seed + 1)];
        let stats = || vec![Tensor::from_vec(vec![0.1, -0.2, 0.3], &[3]).unwrap(), Tensor::from_vec(vec![0.8, 1.5, 1.2], &[3]).unwrap()];
        vec![
            Case::new("train_affine", [vec![x()], gb(2)].concat(), |x| {
                super::batch_norm2d(&x[0], Some(&x[1]), Some(&x[2]), None, None, BatchNormOptions::train())
            }),
            Case::new("train_plain", vec![inp(&[3, 2, 2, 3], -2.0, 2.0, 4)], |x| {
                super::batch_norm2d(&x[0], None, None, None, None, BatchNormOptions::train().eps(1e-3))
            }),
            // Fresh running stats on every call keep the function deterministic.
            Case::new("train_running_stats", [vec![x()], gb(5)].concat(), |x| {
                let (rm, rv) = (Tensor::zeros(&[3])?, Tensor::ones(&[3])?);
                super::batch_norm2d(&x[0], Some(&x[1]), Some(&x[2]), Some(&rm), Some(&rv), BatchNormOptions::train())
            }),
            // Channels-last storage read as [N, C, H, W].
            Case::new("train_transposed", [vec![inp(&[2, 2, 2, 3], -2.0, 2.0, 7)], gb(8)].concat(), |x| {
                super::batch_norm2d(&crate::permute(&x[0], [0, 3, 1, 2])?, Some(&x[1]), Some(&x[2]), None, None, BatchNormOptions::train())
            }),
            Case::new("eval_affine", [vec![x()], gb(10), stats()].concat(), |x| {
                super::batch_norm2d(&x[0], Some(&x[1]), Some(&x[2]), Some(&x[3]), Some(&x[4]), BatchNormOptions::eval())
            }),
            Case::new("eval_plain_transposed", [vec![inp(&[2, 2, 3, 2], -2.0, 2.0, 12)], stats()].concat(), |x| {
                super::batch_norm2d(&crate::transpose(&x[0], 1, 2)?, None, None, Some(&x[1]), Some(&x[2]), BatchNormOptions::eval())
            }),
        ]
    }
}

#[cfg(test)]
mod tests {
    use crate::oracle::{assert_close, both_modes, Oracle};
    use crate::BatchNormOptions;
    use om_core::{Error, Tensor};

    #[test]
    fn layer_norm_matches_pytorch() {
        let o = Oracle::load();
        both_modes(|| {
            let (x, g, b) = (o.get("ln_x"), o.get("ln_gamma"), o.get("ln_beta"));
            let y = crate::layer_norm(&x, Some(&g), Some(&b), 1e-5).unwrap();
            assert_close("ln_affine_y", &y, &o.get("ln_affine_y"));
            o.check_grads("ln_affine", &y, &[("x", &x), ("gamma", &g), ("beta", &b)]);
            let y = crate::layer_norm(&x, None, None, 1e-3).unwrap();
            assert_close("ln_plain_y", &y, &o.get("ln_plain_y"));
            o.check_grads("ln_plain", &y, &[("x", &x)]);
            let (xt, g6) = (o.get("ln_t_x"), o.get("ln_t_gamma"));
            let y = crate::layer_norm(&crate::transpose(&xt, 0, 1).unwrap(), Some(&g6), None, 1e-5).unwrap();
            assert_close("ln_t_y", &y, &o.get("ln_t_y"));
            o.check_grads("ln_t", &y, &[("x", &xt), ("gamma", &g6)]);
            let y = crate::layer_norm(&o.get("ln_big_x"), None, None, 1e-5).unwrap();
            assert_close("ln_big_y", &y, &o.get("ln_big_y"));
        });
    }

    #[test]
    fn batch_norm2d_matches_pytorch() {
        let o = Oracle::load();
        both_modes(|| {
            let (x, g, b) = (o.get("bn_x"), o.get("bn_gamma"), o.get("bn_beta"));
            let fresh = |name: &str| Tensor::from_vec(o.get(name).to_vec(), &[3]).unwrap();
            let (rm, rv) = (fresh("bn_rm0"), fresh("bn_rv0"));
            let y = crate::batch_norm2d(&x, Some(&g), Some(&b), Some(&rm), Some(&rv), BatchNormOptions::train()).unwrap();
            assert_close("bn_train_y", &y, &o.get("bn_train_y"));
            assert_close("bn_train_rm", &rm, &o.get("bn_train_rm"));
            assert_close("bn_train_rv", &rv, &o.get("bn_train_rv"));
            o.check_grads("bn_train", &y, &[("x", &x), ("gamma", &g), ("beta", &b)]);

            let (rm, rv) = (fresh("bn_rm0"), fresh("bn_rv0"));
            let y = crate::batch_norm2d(&x, Some(&g), Some(&b), Some(&rm), Some(&rv), BatchNormOptions::eval()).unwrap();
            assert_close("bn_eval_y", &y, &o.get("bn_eval_y"));
            assert_eq!(rm.to_vec(), o.get("bn_rm0").to_vec(), "eval must not touch the running mean");
            o.check_grads("bn_eval", &y, &[("x", &x), ("gamma", &g), ("beta", &b)]);

            let y = crate::batch_norm2d(&x, None, None, None, None, BatchNormOptions::train().momentum(0.3).eps(1e-3)).unwrap();
            assert_close("bn_plain_y", &y, &o.get("bn_plain_y"));
            o.check_grads("bn_plain", &y, &[("x", &x)]);

            let (rm, rv) = (fresh("bn_rm0"), fresh("bn_rv0"));
            let y = crate::batch_norm2d(&x.detach(), None, None, Some(&rm), Some(&rv), BatchNormOptions::train().momentum(0.3)).unwrap();
            assert_close("bn_m3_y", &y, &o.get("bn_m3_y"));
            assert_close("bn_m3_rm", &rm, &o.get("bn_m3_rm"));
            assert_close("bn_m3_rv", &rv, &o.get("bn_m3_rv"));
        });
    }

    #[test]
    fn batch_norm2d_running_stat_update_bumps_versions_and_needs_no_grad() {
        let x = Tensor::randn_with_seed(&[2, 2, 2, 2], 1).unwrap().requires_grad().unwrap();
        let (rm, rv) = (Tensor::zeros(&[2]).unwrap(), Tensor::ones(&[2]).unwrap());
        let v = rm.version();
        let y = crate::batch_norm2d(&x, None, None, Some(&rm), Some(&rv), BatchNormOptions::train()).unwrap();
        assert!(rm.version() > v);
        crate::sum(&y, None, false).unwrap().backward().unwrap();
        assert!(x.grad().is_some());
        let rg = Tensor::zeros(&[2]).unwrap().requires_grad().unwrap();
        let e = crate::batch_norm2d(&x, None, None, Some(&rg), Some(&rv), BatchNormOptions::train()).unwrap_err();
        assert!(matches!(e, Error::Argument { op: "batch_norm2d", .. }), "{e}");
    }
}
