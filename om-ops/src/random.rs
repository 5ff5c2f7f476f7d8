//! Random operators: `dropout` (the composition users call, drawing one seed per call from
//! the calling thread's default stream, `om_core::rng`) on the primitive
//! `dropout_with_seed`, whose mask is a pure function of the seed and each element's
//! row-major position (`om_core::rng::uniform_at`). Hence the mask does not depend on the
//! kernel thread count or path, and backward regenerates it from the saved seed instead of
//! keeping a mask tensor alive.
//!
//! What PyTorch can check (`tools/oracle_dropout.py`; its mask comes from its own generator,
//! so the masks differ): the factor `1/(1 − p)` bit for bit, every output and gradient bit at
//! the positions where both masks keep or both drop, and the identities (evaluation, `p = 0`,
//! `p = 1`). The keep rate and the preserved mean are checked statistically.

use om_core::compute::Compute;
use om_core::kernels::parallel::for_each_chunk_mut;
use om_core::rng::{fork_rng, next_seed, uniform_at};
use om_core::{Case, Error, Result, Tensor};
use om_macros::op;

/// Elements per parallel chunk (the mask depends on positions only, so any split works).
const CHUNK: usize = 32 * 1024;

/// Checks that `p` is a probability.
fn check_p(op: &'static str, p: f32) -> Result<()> {
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::argument(op, format!("dropout probability has to be between 0 and 1, but got {p}")));
    }
    Ok(())
}

/// The factor of element `i`: `1/(1 − p)` where the element is kept (`uniform_at(seed, i) ≥ p`,
/// probability `1 − p` up to the 24-bit resolution of the uniform), `0` where it is dropped;
/// `0` everywhere for `p = 1`. The factor is computed as PyTorch's `noise.div_(1 − p)` does,
/// an f32 division by `1 − p` rounded to f32 (`f32(1/(1 − p))` is one ulp off for 13% of the
/// f32 values of `p`, 0.8 among them; pinned by the oracle test).
#[derive(Clone, Copy)]
struct Mask {
    p: f32,
    scale: f32,
    seed: u64,
}

impl Mask {
    fn new(p: f32, seed: u64) -> Mask {
        let scale = if p < 1.0 { 1.0 / ((1.0 - p as f64) as f32) } else { 0.0 };
        Mask { p, scale, seed }
    }

    #[inline]
    fn factor(self, i: usize) -> f32 {
        if uniform_at(self.seed, i as u64) >= self.p {
            self.scale
        } else {
            0.0
        }
    }

    /// `v[i] · factor(i)` for every element of `t` (row-major), as a new tensor.
    fn apply(self, t: &Tensor) -> Result<Tensor> {
        let threads = Compute::settings().threads;
        t.try_with_f32(|v| {
            Tensor::build_f32(t.shape(), |out| {
                for_each_chunk_mut(threads, out, CHUNK, |c, o| {
                    let base = c * CHUNK;
                    for (j, (o, &x)) in o.iter_mut().zip(&v[base..]).enumerate() {
                        *o = x * self.factor(base + j);
                    }
                });
                Ok(())
            })
        })?
    }
}

/// Dropout with an explicit seed: element `i` (row-major) is `x[i] / (1 − p)` when
/// `uniform_at(seed, i) ≥ p` and `x[i] · 0` otherwise (so `p = 1` gives zeros, and NaN
/// where `x` is infinite or NaN, as PyTorch's `x * noise`). The same seed gives the same
/// mask for every input of the same number of elements. `p` must be in `[0, 1]`.
/// Backward: `g` times the same factors (regenerated from the seed).
///
/// # Examples
///
/// ```
/// use om_ops::{dropout_with_seed, sum, Tensor};
/// let x = Tensor::ones(&[8])?.requires_grad()?;
/// let y = dropout_with_seed(&x, 0.5, 42)?;
/// // Kept elements are scaled by 1/(1 − p) = 2, the others are zero; the seed fixes which.
/// assert!(y.to_vec().iter().all(|&v| v == 0.0 || v == 2.0));
/// assert_eq!(dropout_with_seed(&x, 0.5, 42)?.to_vec(), y.to_vec());
/// // The gradient goes through the same mask.
/// sum(&y, None, false)?.backward()?;
/// assert_eq!(x.grad().unwrap().to_vec(), y.to_vec());
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [p: f32, seed: u64])]
pub mod dropout_with_seed {
    use super::*;

    pub fn forward(x: &Tensor, p: f32, seed: u64) -> Result<Tensor> {
        x.expect_f32(NAME, "x")?;
        check_p(NAME, p)?;
        Mask::new(p, seed).apply(x).map_err(|e| e.with_op(NAME))
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(Mask::new(r.p, r.seed).apply(g).map_err(|e| e.with_op(NAME))?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let x = |s: &[usize], seed| Case::input(s, -1.0, 1.0, seed);
        vec![
            Case::new("contiguous", vec![x(&[4, 5], 1)], |x| super::dropout_with_seed(&x[0], 0.3, 7)),
            Case::new("transposed", vec![x(&[5, 4], 2)], |x| super::dropout_with_seed(&crate::transpose(&x[0], 0, 1)?, 0.5, 8)),
            Case::new("strided", vec![x(&[3, 8], 3)], |x| super::dropout_with_seed(&crate::slice(&x[0], 1, 1, 8, 2)?, 0.2, 9)),
            Case::new("all_dropped", vec![x(&[2, 3], 4)], |x| super::dropout_with_seed(&x[0], 1.0, 10)),
        ]
    }
}

/// PyTorch's `F.dropout(x, p, training)`: in training with `0 < p ≤ 1`,
/// [`dropout_with_seed()`] with the next seed of the calling thread's default stream
/// (`om_core::rng::next_seed`; reproducible after `om_core::rng::manual_seed`); `p = 0`, evaluation
/// (`training = false`) and empty inputs return `x` itself (the same tensor, no copy, no
/// draw). `p` must be in `[0, 1]` in every case.
///
/// # Examples
///
/// ```
/// use om_core::{rng, Tensor};
/// let x = Tensor::ones(&[1000])?;
/// rng::manual_seed(0);
/// let y = om_ops::dropout(&x, 0.25, true)?;
/// let kept = y.to_vec().iter().filter(|&&v| v != 0.0).count();
/// assert!((700..800).contains(&kept));
/// assert!(y.to_vec().iter().all(|&v| v == 0.0 || v == 1.0 / 0.75));
/// assert_eq!(om_ops::dropout(&x, 0.25, false)?.to_vec(), x.to_vec());
/// # Ok::<(), om_core::Error>(())
/// ```
#[op(composition)]
pub mod dropout {
    use super::*;

    pub fn forward(x: &Tensor, p: f32, training: bool) -> Result<Tensor> {
        x.expect_f32(NAME, "x")?;
        check_p(NAME, p)?;
        if !training || p == 0.0 || x.numel() == 0 {
            return Ok(x.clone());
        }
        crate::dropout_with_seed(x, p, next_seed())
    }

    fn cases() -> Vec<Case> {
        let x = |s: &[usize], seed| Case::input(s, -1.0, 1.0, seed);
        vec![
            Case::new("eval_identity", vec![x(&[3, 4], 1)], |x| super::dropout(&x[0], 0.5, false)),
            Case::new("p0_identity_transposed", vec![x(&[4, 3], 2)], |x| super::dropout(&crate::transpose(&x[0], 0, 1)?, 0.0, true)),
            Case::new("p1_zeros", vec![x(&[3, 4], 3)], |x| super::dropout(&x[0], 1.0, true)),
            // In training at 0 < p < 1: each evaluation of the case draws its seed from a
            // stream seeded the same way (`rng::fork_rng`), so the finite differences and
            // the backward pass see one mask.
            Case::new("train_p03", vec![x(&[4, 5], 4)], |x| fork_rng(11, || super::dropout(&x[0], 0.3, true))),
            Case::new("train_p05_transposed", vec![x(&[5, 4], 5)], |x| {
                fork_rng(12, || super::dropout(&crate::transpose(&x[0], 0, 1)?, 0.5, true))
            }),
            Case::new("train_p08_strided", vec![x(&[3, 8], 6)], |x| {
                fork_rng(13, || super::dropout(&crate::slice(&x[0], 1, 1, 8, 2)?, 0.8, true))
            }),
        ]
    }
}

#[cfg(test)]
mod tests {
    use crate::oracle::{both_modes, Oracle};
    use om_core::compute::{Compute, KernelPath, Mode, Settings};
    use om_core::{rng, Tensor};

    fn values(n: usize) -> Tensor {
        Tensor::from_vec((0..n).map(|i| 0.5 + (i % 7) as f32).collect(), &[n]).unwrap()
    }

    /// The keep rate is `1 − p` within 5 standard deviations of the binomial count, the kept
    /// values are `x / (1 − p)`, and the gradient uses the forward's mask.
    #[test]
    fn keep_rate_scale_and_gradient_follow_the_mask() {
        let n = 200_000;
        for p in [0.1f32, 0.5, 0.9] {
            let x = values(n).requires_grad().unwrap();
            let y = crate::dropout_with_seed(&x, p, 12345).unwrap();
            let (xs, ys) = (x.to_vec(), y.to_vec());
            let scale = (1.0 / (1.0 - p as f64)) as f32;
            let kept = xs.iter().zip(&ys).filter(|&(&x, &y)| y != 0.0 && y == x * scale).count();
            let dropped = ys.iter().filter(|&&y| y == 0.0).count();
            assert_eq!(kept + dropped, n, "every element is kept (scaled) or dropped");
            let (mean, sd) = (n as f64 * (1.0 - p as f64), (n as f64 * p as f64 * (1.0 - p as f64)).sqrt());
            assert!((kept as f64 - mean).abs() < 5.0 * sd, "p {p}: kept {kept}, expected {mean} ± {sd}");
            crate::sum(&y, None, false).unwrap().backward().unwrap();
            let g = x.grad().unwrap().to_vec();
            assert!(g.iter().zip(&ys).all(|(&g, &y)| g == if y == 0.0 { 0.0 } else { scale }));
        }
    }

    /// Neighbouring elements are independent: the rate of "both kept" is `(1 − p)²`.
    #[test]
    fn neighbouring_elements_are_independent() {
        let (n, p) = (100_000, 0.5f32);
        let y = crate::dropout_with_seed(&values(n), p, 99).unwrap().to_vec();
        let both = y.windows(2).filter(|w| w[0] != 0.0 && w[1] != 0.0).count() as f64 / (n - 1) as f64;
        assert!((both - 0.25).abs() < 0.01, "{both}");
    }

    #[test]
    fn the_mask_is_the_same_on_every_path_and_thread_count() {
        let x = values(100_000);
        let reference = Compute::with(Settings { mode: Mode::Exact, threads: 1, path: KernelPath::Scalar }, || {
            crate::dropout_with_seed(&x, 0.3, 5).unwrap().to_vec()
        });
        for mode in [Mode::Fast, Mode::Exact] {
            for path in KernelPath::supported() {
                for threads in [1, 2] {
                    let y = Compute::with(Settings { mode, threads, path }, || crate::dropout_with_seed(&x, 0.3, 5).unwrap().to_vec());
                    assert!(y.iter().zip(&reference).all(|(a, b)| a.to_bits() == b.to_bits()), "{path:?} {threads} {mode}");
                }
            }
        }
    }

    #[test]
    fn seeds_come_from_the_default_stream() {
        let x = values(1000);
        rng::manual_seed(3);
        let (a, b) = (crate::dropout(&x, 0.5, true).unwrap().to_vec(), crate::dropout(&x, 0.5, true).unwrap().to_vec());
        assert_ne!(a, b, "each call draws a new seed");
        rng::manual_seed(3);
        assert_eq!(crate::dropout(&x, 0.5, true).unwrap().to_vec(), a, "manual_seed replays the stream");
    }

    #[test]
    fn identities_zeros_and_bad_probabilities() {
        let x = values(10).requires_grad().unwrap();
        for (p, training) in [(0.5, false), (0.0, true)] {
            let y = crate::dropout(&x, p, training).unwrap();
            assert!(y.shares_storage(&x), "p {p}, training {training}: the input itself");
        }
        let y = crate::dropout(&x, 1.0, true).unwrap();
        assert!(y.to_vec().iter().all(|&v| v == 0.0));
        crate::sum(&y, None, false).unwrap().backward().unwrap();
        assert!(x.grad().unwrap().to_vec().iter().all(|&v| v == 0.0));
        for p in [-0.1, 1.5, f32::NAN] {
            for training in [true, false] {
                let e = crate::dropout(&x, p, training).unwrap_err().to_string();
                assert!(e.contains("dropout") && e.contains(&p.to_string()), "{e}");
            }
        }
    }

    /// Equal bits, or both NaN (the sign of a NaN made by `inf · 0` is the hardware's).
    fn same(a: f32, b: f32) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    /// Oracle (`tools/oracle_dropout.py`, PyTorch 2.15.0): PyTorch's mask differs from ours, so
    /// at each p the test compares what does not depend on it. The factor equals PyTorch's bit
    /// for bit (p = 0.8 and 0.1756556 are where `f32(1/(1 − p))` would be one ulp off), and at
    /// every position where both masks keep or both drop the element (told apart by the
    /// gradient of `sum(y·r)`, r never zero) the output and its gradient have PyTorch's bits:
    /// `x·factor`, `x·0` (−0 for a negative `x`, NaN for an infinite one), `r·factor`, `r·0`.
    /// Evaluation, `p = 0` and `p = 1` give PyTorch's output and gradient everywhere.
    #[test]
    fn oracle_factor_values_and_gradients_where_the_masks_agree_and_the_identities() {
        let o = Oracle::load_file("dropout", "tools/oracle_dropout.py");
        let r = o.get("r").detach();
        let grad_of = |y: &Tensor, x: &Tensor| {
            crate::sum(&crate::mul(y, &r).unwrap(), None, false).unwrap().backward().unwrap();
            x.grad().unwrap().to_vec()
        };
        both_modes(|| {
            let mut ps = 0;
            while o.has(&format!("drop{ps}_p")) {
                let tag = format!("drop{ps}");
                let p = o.get(&format!("{tag}_p")).to_vec()[0];
                let scale = o.get(&format!("{tag}_scale")).to_vec()[0];
                assert_eq!(super::Mask::new(p, 0).scale.to_bits(), scale.to_bits(), "p {p}: the factor 1/(1 − p)");
                let x = o.get("x");
                let y = crate::dropout_with_seed(&x, p, 1000 + ps as u64).unwrap();
                let (ours, ours_g) = (y.to_vec(), grad_of(&y, &x));
                let (want, want_g) = (o.get(&format!("{tag}_y")).to_vec(), o.get(&format!("{tag}_gx")).to_vec());
                let (mut both_kept, mut both_dropped) = (0, 0);
                for i in 0..ours.len() {
                    let (kept, torch_kept) = (ours_g[i] != 0.0, want_g[i] != 0.0);
                    if kept != torch_kept {
                        continue;
                    }
                    assert!(same(ours[i], want[i]), "p {p}, element {i} (kept {kept}): {} vs PyTorch {}", ours[i], want[i]);
                    assert!(same(ours_g[i], want_g[i]), "p {p}, gradient {i} (kept {kept}): {} vs PyTorch {}", ours_g[i], want_g[i]);
                    if kept {
                        both_kept += 1;
                    } else {
                        both_dropped += 1;
                    }
                }
                // About n(1 − p)² and n·p² positions: far more than 100 at every p here.
                assert!(both_kept > 100 && both_dropped > 100, "p {p}: {both_kept} kept and {both_dropped} dropped by both");
                ps += 1;
            }
            assert_eq!(ps, 5, "the oracle's values of p");
            for (tag, p, training) in [("eval", 0.5, false), ("p0", 0.0, true), ("p1", 1.0, true)] {
                let x = o.get("x");
                let y = crate::dropout(&x, p, training).unwrap();
                let (ours, ours_g) = (y.to_vec(), grad_of(&y, &x));
                let (want, want_g) = (o.get(&format!("{tag}_y")).to_vec(), o.get(&format!("{tag}_gx")).to_vec());
                assert!(ours.iter().zip(&want).all(|(&a, &b)| same(a, b)), "{tag}: output");
                assert!(ours_g.iter().zip(&want_g).all(|(&a, &b)| same(a, b)), "{tag}: gradient");
            }
        });
    }

    /// **Statistical test** (the mask is pseudo-random, so these are bounds that a correct
    /// generator meets with overwhelming probability, not exact values). For each p and 12
    /// seeds, the count of kept elements of n is Binomial(n, q), q = P(uniform_at ≥ p) =
    /// (2²⁴ − ⌈p·2²⁴⌉)/2²⁴ (the uniform has 24 bits): it must lie within 6 standard deviations
    /// `sqrt(n·q·(1 − q))` of `n·q` (a false alarm has probability below 2·10⁻⁹ per count).
    /// The mean is preserved: `E[y] = q·factor·x` with `|q·factor − 1| ≤ (factor + 2)·2⁻²⁴`
    /// (q is within 2⁻²⁴ of `1 − p`, the factor within two roundings of `1/(1 − p)`), and the
    /// sample mean of `y` lies within 6 standard deviations `factor·sqrt(q(1 − q)·Σx²)/n` of
    /// its expectation.
    #[test]
    fn statistical_keep_fraction_is_binomial_and_the_mean_is_preserved() {
        let n = 50_000;
        let xs: Vec<f32> = (0..n).map(|i| 0.25 + (i % 13) as f32 * 0.5).collect();
        let x = Tensor::from_vec(xs.clone(), &[n]).unwrap();
        let (sum_x, sum_x2) = xs.iter().fold((0.0f64, 0.0f64), |(s, s2), &v| (s + v as f64, s2 + (v as f64).powi(2)));
        let two24 = (1u64 << 24) as f64;
        for p in [0.1f32, 0.3, 0.5, 0.8, 0.95] {
            let q = (two24 - (p as f64 * two24).ceil()) / two24;
            let factor = super::Mask::new(p, 0).scale as f64;
            assert!((q * factor - 1.0).abs() <= (factor + 2.0) / two24, "p {p}: q·factor = {}", q * factor);
            for seed in 0..12u64 {
                let y = crate::dropout_with_seed(&x, p, seed * 7919 + 1).unwrap().to_vec();
                let kept = y.iter().filter(|&&v| v != 0.0).count() as f64;
                let (mean, sd) = (n as f64 * q, (n as f64 * q * (1.0 - q)).sqrt());
                assert!((kept - mean).abs() <= 6.0 * sd, "p {p}, seed {seed}: kept {kept}, expected {mean} ± {sd}");
                let mean_y = y.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
                let (want, sd_mean) = (q * factor * sum_x / n as f64, factor * (q * (1.0 - q) * sum_x2).sqrt() / n as f64);
                assert!((mean_y - want).abs() <= 6.0 * sd_mean, "p {p}, seed {seed}: mean {mean_y}, expected {want} ± {sd_mean}");
            }
        }
    }

    /// The gradient-check cases in training at 0 < p < 1 exercise a mask: each keeps some
    /// elements and drops others, and evaluating a case twice gives the same mask.
    #[test]
    fn the_training_cases_keep_some_elements_and_drop_others() {
        let entries = crate::registered_ops().unwrap();
        let mut checked = 0;
        for e in entries.iter().filter(|e| e.name == "dropout" || e.name == "dropout_with_seed") {
            for case in (e.cases)() {
                if ["eval_identity", "p0_identity_transposed", "p1_zeros", "all_dropped"].contains(&case.name.as_str()) {
                    continue;
                }
                let y = (case.f)(&case.inputs).unwrap().to_vec();
                assert_eq!((case.f)(&case.inputs).unwrap().to_vec(), y, "{} {}: the same mask each time", e.name, case.name);
                let kept = y.iter().filter(|&&v| v != 0.0).count();
                assert!(kept > 0 && kept < y.len(), "{} {}: {kept} of {} kept", e.name, case.name, y.len());
                checked += 1;
            }
        }
        assert_eq!(checked, 6);
    }
}
