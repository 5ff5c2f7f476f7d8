//! Losses, and the [`Reduction`] every loss takes (with [`KlDivReduction`], `kl_div`'s, which
//! adds PyTorch's `'batchmean'`):
//! - `regression.rs`: `mse_loss`, `l1_loss`, `smooth_l1_loss`, `huber_loss`;
//! - `classification.rs`: class-index losses `nll_loss` and `cross_entropy`, the binary
//!   losses `binary_cross_entropy` and `binary_cross_entropy_with_logits`, and `kl_div`;
//! - `ctc.rs`: `ctc_loss`.
//!
//! Input and target of an element-wise loss must have the same shape: where PyTorch
//! broadcasts a mismatched target with only a warning (an `[n]` target against an `[n, 1]`
//! prediction silently becomes an `[n, n]` loss), these losses return [`Error::Shape`]
//! naming both shapes. Broadcast on purpose with an explicit `expand`.
//!
//! Each element-wise loss is one primitive: forward maps the element pairs with a scalar
//! closure (the same code on every path, so exact mode is bit-identical across paths and
//! threads) and reduces with [`crate::sum()`] / [`crate::mean()`] (f64 in element order,
//! rounded once). Backward is `g · ∂loss/∂x` per element, with `g/n` for a mean over `n`
//! elements (the product taken in f64). Logarithms and exponentials use the fixed
//! `om_core::kernels::math` functions.

pub(crate) mod classification;
pub(crate) mod ctc;
pub(crate) mod regression;

pub use classification::*;
pub use ctc::*;
pub use regression::*;

use om_core::maps::{binary, unary};
use om_core::{Case, Error, Result, Tensor};

/// How a loss combines its per-element losses (per sequence for `ctc_loss`), PyTorch's
/// `reduction` argument. `Default` is `Mean`, PyTorch's default.
///
/// # Examples
///
/// ```
/// use om_core::Tensor;
/// use om_ops::{mse_loss, Reduction};
/// let p = Tensor::from_vec(vec![1.0, 2.0, 4.0], &[3])?;
/// let y = Tensor::from_vec(vec![1.0, 1.0, 1.0], &[3])?;
/// assert_eq!(mse_loss(&p, &y, Reduction::None)?.to_vec(), vec![0.0, 1.0, 9.0]);
/// assert_eq!(mse_loss(&p, &y, Reduction::Sum)?.item()?, 10.0);
/// // PyTorch's default, the mean:
/// assert_eq!(Reduction::default(), Reduction::Mean);
/// assert!((mse_loss(&p, &y, Default::default())?.item()? - 10.0 / 3.0).abs() < 1e-6);
/// # Ok::<(), om_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Reduction {
    /// The losses themselves, one per element (per sequence, shape `[B]`, for `ctc_loss`).
    None,
    /// The sum of the losses, a scalar.
    Sum,
    /// The mean of the losses, a scalar (PyTorch's default): the sum over the number of
    /// elements; for `nll_loss`/`cross_entropy` with class weights the sum over the summed
    /// weights, and for `ctc_loss` each loss first divided by `max(1, target length)`, as in
    /// PyTorch.
    #[default]
    Mean,
}

/// How [`kl_div`](crate::kl_div()) combines its element-wise losses: the three
/// [`Reduction`]s (any `Reduction` converts into this) plus PyTorch's `'batchmean'`, the
/// sum divided by the batch size (the first dimension; 1 for a 0-d input), which is the
/// mathematical KL divergence of each row averaged over the batch. `Default` is `Mean`,
/// PyTorch's default (the mean over all elements, which PyTorch warns is not the KL
/// divergence).
///
/// # Examples
///
/// ```
/// use om_core::Tensor;
/// use om_ops::{kl_div, KlDivReduction, Reduction};
/// // Two rows of log-probabilities against two target distributions.
/// let x = Tensor::from_vec(vec![0.5f32.ln(), 0.5f32.ln(), 0.25f32.ln(), 0.75f32.ln()], &[2, 2])?;
/// let t = Tensor::from_vec(vec![0.5, 0.5, 0.5, 0.5], &[2, 2])?;
/// let sum = kl_div(&x, &t, Reduction::Sum, false)?.item()?;
/// let batch_mean = kl_div(&x, &t, KlDivReduction::BatchMean, false)?.item()?;
/// assert_eq!(batch_mean, sum / 2.0);
/// # Ok::<(), om_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KlDivReduction {
    /// The losses themselves, of the input's shape.
    None,
    /// The sum of the losses, a scalar.
    Sum,
    /// The mean over all elements, a scalar (PyTorch's default).
    #[default]
    Mean,
    /// The sum divided by the batch size (the input's first dimension, or 1 for a 0-d
    /// input), a scalar: PyTorch's `reduction='batchmean'`.
    BatchMean,
}

impl From<Reduction> for KlDivReduction {
    fn from(r: Reduction) -> Self {
        match r {
            Reduction::None => KlDivReduction::None,
            Reduction::Sum => KlDivReduction::Sum,
            Reduction::Mean => KlDivReduction::Mean,
        }
    }
}

/// The batch size of a loss of `shape` for [`KlDivReduction::BatchMean`]: the first
/// dimension, or 1 for a 0-d loss.
pub(crate) fn batch_size(shape: &[usize]) -> usize {
    shape.first().copied().unwrap_or(1)
}

/// Applies the reduction to the element-wise losses. ([`KlDivReduction`] is a superset of
/// [`Reduction`], so this and [`chain`] serve every loss of the file.)
pub(crate) fn reduce(loss: Tensor, reduction: impl Into<KlDivReduction>) -> Result<Tensor> {
    match reduction.into() {
        KlDivReduction::None => Ok(loss),
        KlDivReduction::Sum => crate::sum(&loss, None, false),
        KlDivReduction::Mean => crate::mean(&loss, None, false),
        KlDivReduction::BatchMean => {
            // As PyTorch: the sum, then divided by the batch size in f32.
            let batch = batch_size(loss.shape()) as f32;
            let sum = crate::sum(&loss, None, false)?;
            unary("kl_div", &sum, move |s| s / batch)
        }
    }
}

/// `g · deriv` per element, where `deriv` has the shape of the losses and `g` is the output
/// gradient: of that shape (`None`) or a scalar (`Sum`, `Mean` with the factor `1/n` over
/// the `n` elements, `BatchMean` with `1/batch`).
pub(crate) fn chain(op: &'static str, deriv: &Tensor, g: &Tensor, reduction: impl Into<KlDivReduction>) -> Result<Tensor> {
    let scale = match reduction.into() {
        KlDivReduction::Mean => 1.0 / deriv.numel() as f64,
        KlDivReduction::BatchMean => 1.0 / batch_size(deriv.shape()) as f64,
        KlDivReduction::None | KlDivReduction::Sum => 1.0,
    };
    binary(op, deriv, g, move |d, g| (d as f64 * g as f64 * scale) as f32)
}

/// Checks that `input` and `target` are `f32` tensors of one shape. PyTorch broadcasts a
/// mismatched pair with a warning; here it is an error naming both shapes.
pub(crate) fn check_pair(op: &'static str, input: &Tensor, target: &Tensor) -> Result<()> {
    input.expect_f32(op, "input")?;
    target.expect_f32(op, "target")?;
    if input.shape() != target.shape() {
        let msg =
            "input and target must have the same shape (PyTorch broadcasts them with only a warning; expand one explicitly to broadcast)";
        return Err(Error::shape(op, &[input.shape(), target.shape()], msg));
    }
    Ok(())
}

/// The gradient-check cases of a regression loss `f(input, target, reduction)`: every
/// reduction, a target expanded along rows, a transposed and a strided input. `input` and
/// `target` build the checked values (kept away from the loss's kinks by the caller).
pub(crate) fn pair_cases<F>(prefix: &str, f: F, input: fn(&[usize], u64) -> Tensor, target: fn(&[usize], u64) -> Tensor) -> Vec<Case>
where
    F: Fn(&Tensor, &Tensor, Reduction) -> Result<Tensor> + Copy + Send + Sync + 'static,
{
    vec![
        Case::new(format!("{prefix}mean"), vec![input(&[3, 4], 1), target(&[3, 4], 2)], move |x| f(&x[0], &x[1], Reduction::Mean)),
        Case::new(format!("{prefix}sum_broadcast_target"), vec![input(&[2, 3, 4], 3), target(&[4], 4)], move |x| {
            f(&x[0], &crate::expand(&x[1], [2, 3, 4])?, Reduction::Sum)
        }),
        Case::new(format!("{prefix}none_transposed"), vec![input(&[4, 3], 5), target(&[3, 4], 6)], move |x| {
            f(&crate::transpose(&x[0], 0, 1)?, &x[1], Reduction::None)
        }),
        Case::new(format!("{prefix}mean_strided"), vec![input(&[3, 8], 7), target(&[3, 4], 8)], move |x| {
            f(&crate::slice(&x[0], 1, 0, 8, 2)?, &x[1], Reduction::Mean)
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracle::{assert_close, both_modes, Oracle};

    const REDUCTIONS: [(&str, Reduction); 3] = [("none", Reduction::None), ("sum", Reduction::Sum), ("mean", Reduction::Mean)];

    fn load() -> Oracle {
        Oracle::load_file("losses", "tools/oracle_losses.py")
    }

    /// Checks `f(x, t, reduction)` against the oracle set `prefix` for every reduction:
    /// the value and the gradients of `x` and `t`. A `t` of another shape than `x` (the
    /// `*_bc` sets, broadcast by PyTorch) is expanded to `x`'s shape explicitly: the losses
    /// refuse mismatched shapes, and the expansion's gradient sums back to `t`'s shape.
    fn check(o: &Oracle, prefix: &str, f: impl Fn(&Tensor, &Tensor, Reduction) -> Result<Tensor>) {
        let (x, t) = (o.get(&format!("{prefix}_x")), o.get(&format!("{prefix}_t")));
        for (red, reduction) in REDUCTIONS {
            let name = format!("{prefix}_{red}");
            let shape: Vec<isize> = x.shape().iter().map(|&d| d as isize).collect();
            let te = if t.shape() == x.shape() { t.clone() } else { crate::expand(&t, &shape).unwrap() };
            let y = f(&x, &te, reduction).unwrap();
            assert_close(&format!("{name}_y"), &y, &o.get(&format!("{name}_y")));
            o.check_grads(&name, &y, &[("x", &x), ("t", &t)]);
        }
    }

    #[test]
    fn regression_losses_match_pytorch() {
        let o = load();
        both_modes(|| {
            for bc in ["", "_bc"] {
                check(&o, &format!("mse{bc}"), crate::mse_loss);
                check(&o, &format!("l1{bc}"), crate::l1_loss);
                check(&o, &format!("sl1{bc}"), |x, t, r| crate::smooth_l1_loss(x, t, 0.5, r));
                check(&o, &format!("sl1b0{bc}"), |x, t, r| crate::smooth_l1_loss(x, t, 0.0, r));
                check(&o, &format!("hub{bc}"), |x, t, r| crate::huber_loss(x, t, 0.7, r));
            }
        });
    }

    #[test]
    fn l1_gradient_at_zero_difference_is_zero() {
        // The oracle's first three l1 pairs are equal: PyTorch's sign(0) = 0 passes nothing.
        let o = load();
        let (x, t) = (o.get("l1_x"), o.get("l1_t"));
        crate::l1_loss(&x, &t, Reduction::Sum).unwrap().backward().unwrap();
        let (gx, gt) = (x.grad().unwrap().to_vec(), t.grad().unwrap().to_vec());
        assert_eq!(&gx[..3], &[0.0; 3]);
        assert_eq!(&gt[..3], &[0.0; 3]);
        assert!(gx[3..].iter().all(|v| v.abs() == 1.0));
    }

    #[test]
    fn binary_losses_match_pytorch() {
        let o = load();
        both_modes(|| {
            check(&o, "bce", |x, t, r| crate::binary_cross_entropy(x, t, None, r));
            check(&o, "bcel", |x, t, r| crate::binary_cross_entropy_with_logits(x, t, None, None, r));
            let pw = o.get("bcelpw_pw").detach();
            check(&o, "bcelpw", |x, t, r| crate::binary_cross_entropy_with_logits(x, t, None, Some(&pw), r));
            // Inputs exactly 0 and 1: the log clamped at −100 and the input gradient divided
            // by max(x(1 − x), 1e−12), as PyTorch.
            let (x, t) = (o.get("bce_edge_x"), o.get("bce_edge_t").detach());
            let y = crate::binary_cross_entropy(&x, &t, None, Reduction::None).unwrap();
            assert_close("bce_edge_y", &y, &o.get("bce_edge_y"));
            o.check_grads("bce_edge", &y, &[("x", &x)]);
        });
    }

    #[test]
    fn kl_div_matches_pytorch() {
        let o = load();
        both_modes(|| {
            check(&o, "kl", |x, t, r| crate::kl_div(x, t, r, false));
            check(&o, "kllog", |x, t, r| crate::kl_div(x, t, r, true));
            check(&o, "kl_bc", |x, t, r| crate::kl_div(x, t, r, false));
        });
    }

    #[test]
    fn kl_div_target_gradient_is_nan_at_zero_target_as_in_pytorch() {
        // PyTorch 2.15: F.kl_div(x, t) with t = 0 gives loss 0 and target gradient NaN.
        let x = Tensor::from_vec(vec![-1.0, -0.5], &[2]).unwrap().requires_grad().unwrap();
        let t = Tensor::from_vec(vec![0.0, 0.5], &[2]).unwrap().requires_grad().unwrap();
        let y = crate::kl_div(&x, &t, Reduction::None, false).unwrap();
        assert_eq!(y.to_vec()[0], 0.0);
        crate::sum(&y, None, false).unwrap().backward().unwrap();
        let gt = t.grad().unwrap().to_vec();
        assert!(gt[0].is_nan() && gt[1].is_finite());
        assert_eq!(x.grad().unwrap().to_vec(), vec![0.0, -0.5]);
    }

    #[test]
    fn bad_arguments_are_errors_naming_the_op() {
        let x = Tensor::from_vec(vec![0.5, 1.5], &[2]).unwrap();
        let t = Tensor::from_vec(vec![0.0, 1.0], &[2]).unwrap();
        let e = crate::binary_cross_entropy(&x, &t, None, Reduction::Mean).unwrap_err().to_string();
        assert!(e.contains("binary_cross_entropy") && e.contains("1.5"), "{e}");
        let t3 = Tensor::from_vec(vec![0.0, 1.0, 0.0], &[3]).unwrap();
        let e = crate::binary_cross_entropy_with_logits(&x, &t3, None, None, Reduction::Mean).unwrap_err().to_string();
        assert!(e.contains("binary_cross_entropy_with_logits"), "{e}");
        let pw = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3, 1]).unwrap();
        let e = crate::binary_cross_entropy_with_logits(&x, &t, None, Some(&pw), Reduction::Mean).unwrap_err().to_string();
        assert!(e.contains("pos_weight"), "{e}");
        let e = crate::smooth_l1_loss(&x, &t, -1.0, Reduction::Mean).unwrap_err().to_string();
        assert!(e.contains("smooth_l1_loss") && e.contains("beta"), "{e}");
        let e = crate::huber_loss(&x, &t, 0.0, Reduction::Mean).unwrap_err().to_string();
        assert!(e.contains("huber_loss") && e.contains("delta"), "{e}");
        let e = crate::mse_loss(&x, &t3, Reduction::Mean).unwrap_err().to_string();
        assert!(e.contains("mse_loss"), "{e}");
    }

    /// The values of `w` broadcast to `shape`, row-major.
    fn broadcast_values(w: &Tensor, shape: &[usize]) -> Vec<f32> {
        let shape: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
        crate::expand(w, &shape).unwrap().to_vec()
    }

    /// `(x, t)` for a binary loss: probabilities (or logits) and soft targets, `[3, 4]`, as leaves.
    fn binary_pair(lo: f32, hi: f32, seed: u64) -> (Tensor, Tensor) {
        let x = Tensor::rand_uniform(&[3, 4], lo, hi, seed).unwrap().requires_grad().unwrap();
        let t = Tensor::rand_uniform(&[3, 4], 0.0, 1.0, seed + 1).unwrap().requires_grad().unwrap();
        (x, t)
    }

    /// A binary loss `f(x, t, weight, reduction)` with the rescaling weight, checked from
    /// the definition `ℓ_w = w·ℓ` for weights of several broadcast shapes: the unreduced
    /// losses are the weight times the unweighted ones bit for bit; `Sum` and `Mean` are
    /// the sum and mean of those (within one rounding of the f64 sum); the gradients of
    /// the input and target under `Sum` are the weight times the unweighted ones, bit for
    /// bit.
    fn check_weighted(name: &str, f: impl Fn(&Tensor, &Tensor, Option<&Tensor>, Reduction) -> Result<Tensor>, x: &Tensor, t: &Tensor) {
        let weights = [
            Tensor::from_vec(vec![0.5, 2.0, -1.0, 0.0], &[4]).unwrap(),
            Tensor::rand_uniform(&[3, 4], -1.0, 3.0, 7).unwrap(),
            Tensor::from_vec(vec![3.0, 0.25, 1.5], &[3, 1]).unwrap(),
            Tensor::scalar(1.75),
            Tensor::from_vec(vec![0.125], &[1]).unwrap(),
        ];
        let plain = f(x, t, None, Reduction::None).unwrap().to_vec();
        x.clear_grad();
        t.clear_grad();
        f(x, t, None, Reduction::Sum).unwrap().backward().unwrap();
        let (gx, gt) = (x.grad().unwrap().to_vec(), t.grad().unwrap().to_vec());
        for w in &weights {
            let wv = broadcast_values(w, x.shape());
            let none = f(x, t, Some(w), Reduction::None).unwrap();
            assert_eq!(none.shape(), x.shape());
            let want: Vec<f32> = plain.iter().zip(&wv).map(|(l, w)| l * w).collect();
            assert_eq!(none.to_vec(), want, "{name}: weight {:?}, none", w.shape());
            let exact: f64 = want.iter().map(|&v| v as f64).sum();
            let sum = f(x, t, Some(w), Reduction::Sum).unwrap().item().unwrap();
            assert!((sum as f64 - exact).abs() <= f32::EPSILON as f64 * exact.abs(), "{name}: sum {sum} vs {exact}");
            let n = want.len() as f64;
            let mean = f(x, t, Some(w), Reduction::Mean).unwrap().item().unwrap();
            assert!((mean as f64 - exact / n).abs() <= f32::EPSILON as f64 * (exact / n).abs(), "{name}: mean {mean} vs {}", exact / n);
            x.clear_grad();
            t.clear_grad();
            f(x, t, Some(w), Reduction::Sum).unwrap().backward().unwrap();
            let scaled = |g: &[f32]| g.iter().zip(&wv).map(|(g, w)| g * w).collect::<Vec<f32>>();
            assert_eq!(x.grad().unwrap().to_vec(), scaled(&gx), "{name}: weight {:?}, input gradient", w.shape());
            assert_eq!(t.grad().unwrap().to_vec(), scaled(&gt), "{name}: weight {:?}, target gradient", w.shape());
        }
    }

    #[test]
    fn weighted_binary_losses_are_the_weight_times_the_loss() {
        both_modes(|| {
            let (x, t) = binary_pair(0.05, 0.95, 1);
            check_weighted("binary_cross_entropy", crate::binary_cross_entropy, &x, &t);
            let (x, t) = binary_pair(-4.0, 4.0, 3);
            check_weighted("bce_with_logits", |x, t, w, r| crate::binary_cross_entropy_with_logits(x, t, w, None, r), &x, &t);
            // With pos_weight too (a leaf requiring a gradient, whose gradient is scaled as well).
            let pw = Tensor::from_vec(vec![0.5, 1.0, 2.0, 3.0], &[4]).unwrap().requires_grad().unwrap();
            check_weighted(
                "bce_with_logits_pos_weight",
                |x, t, w, r| crate::binary_cross_entropy_with_logits(x, t, w, Some(&pw), r),
                &x,
                &t,
            );
            // pos_weight's gradient from the definition: ∂(Σℓ)/∂p_j = Σ_i r_i·(−t_ij·log σ(x_ij))
            // for a rescaling weight r_i per row (evaluated in f64).
            let r = Tensor::from_vec(vec![3.0, 0.25, 1.5], &[3, 1]).unwrap();
            pw.clear_grad();
            crate::binary_cross_entropy_with_logits(&x, &t, Some(&r), Some(&pw), Reduction::Sum).unwrap().backward().unwrap();
            let (xv, tv, rv) = (x.to_vec(), t.to_vec(), r.to_vec());
            for (j, &got) in pw.grad().unwrap().to_vec().iter().enumerate() {
                let want: f64 = (0..3)
                    .map(|i| {
                        let (xi, ti) = (xv[i * 4 + j] as f64, tv[i * 4 + j] as f64);
                        rv[i] as f64 * ti * (1.0 + (-xi).exp()).ln()
                    })
                    .sum();
                assert!((got as f64 - want).abs() <= 1e-5 * want.abs().max(1.0), "pos_weight gradient {j}: {got} vs {want}");
            }
        });
    }

    #[test]
    fn kl_div_batchmean_is_the_sum_over_the_batch_size() {
        both_modes(|| {
            for log_target in [false, true] {
                let x = crate::log_softmax(&Tensor::randn_with_seed(&[4, 5], 11).unwrap(), 1).unwrap().detach().requires_grad().unwrap();
                let t = crate::softmax(&Tensor::randn_with_seed(&[4, 5], 12).unwrap(), 1).unwrap();
                let t = if log_target { crate::log(&t).unwrap() } else { t };
                let sum = crate::kl_div(&x, &t, Reduction::Sum, log_target).unwrap().item().unwrap();
                let y = crate::kl_div(&x, &t, KlDivReduction::BatchMean, log_target).unwrap();
                assert!(y.shape().is_empty());
                // PyTorch's definition: the sum, divided by the batch size.
                assert_eq!(y.item().unwrap(), sum / 4.0);
                y.backward().unwrap();
                // ∂/∂x = −t/4 (−e^t/4 with log_target), from the definition, in f64.
                let tv = t.to_vec();
                for (g, &t) in x.grad().unwrap().to_vec().iter().zip(&tv) {
                    let p = if log_target { (t as f64).exp() } else { t as f64 };
                    let want = -p / 4.0;
                    assert!((*g as f64 - want).abs() <= 4.0 * f32::EPSILON as f64 * want.abs(), "{g} vs {want}");
                }
            }
            // A 0-d input: the batch size is 1, so batch mean and sum agree.
            let (x, t) = (Tensor::scalar(-0.5), Tensor::scalar(0.25));
            let bm = crate::kl_div(&x, &t, KlDivReduction::BatchMean, false).unwrap().item().unwrap();
            assert_eq!(bm, crate::kl_div(&x, &t, Reduction::Sum, false).unwrap().item().unwrap());
            // An empty batch: 0 / 0, NaN, as in PyTorch.
            let e = Tensor::zeros(&[0, 3]).unwrap();
            assert!(crate::kl_div(&e, &e, KlDivReduction::BatchMean, false).unwrap().item().unwrap().is_nan());
        });
    }

    #[test]
    fn reductions_default_to_pytorchs_mean() {
        assert_eq!(Reduction::default(), Reduction::Mean);
        assert_eq!(KlDivReduction::default(), KlDivReduction::Mean);
        for (r, k) in
            [(Reduction::None, KlDivReduction::None), (Reduction::Sum, KlDivReduction::Sum), (Reduction::Mean, KlDivReduction::Mean)]
        {
            assert_eq!(KlDivReduction::from(r), k);
        }
    }

    #[test]
    fn bad_weights_are_errors_naming_the_op() {
        let x = Tensor::rand_uniform(&[3, 4], 0.1, 0.9, 1).unwrap();
        let t = Tensor::rand_uniform(&[3, 4], 0.0, 1.0, 2).unwrap();
        let bce = |w: &Tensor| crate::binary_cross_entropy(&x, &t, Some(w), Reduction::Mean);
        let bcel = |w: &Tensor| crate::binary_cross_entropy_with_logits(&x, &t, Some(w), None, Reduction::Mean);
        for (op, f) in [("binary_cross_entropy", &bce as &dyn Fn(&Tensor) -> Result<Tensor>), ("binary_cross_entropy_with_logits", &bcel)] {
            // A weight that does not broadcast to the input, or would enlarge it.
            for shape in [&[5][..], &[3, 3], &[2, 3, 4], &[4, 1]] {
                let w = Tensor::ones(shape).unwrap();
                match f(&w) {
                    Err(Error::Shape { op: o, shapes, msg }) => {
                        assert_eq!(o, op);
                        assert_eq!(shapes, vec![vec![3, 4], shape.to_vec()]);
                        assert!(msg.contains("weight"), "{msg}");
                    }
                    other => panic!("{op}: weight {shape:?} gave {other:?}"),
                }
            }
            // A weight that requires a gradient: PyTorch has no derivative for it.
            let w = Tensor::ones(&[4]).unwrap().requires_grad().unwrap();
            let e = f(&w).unwrap_err();
            assert!(matches!(e, Error::Argument { op: o, .. } if o == op), "{e}");
            assert!(e.to_string().contains("weight"), "{e}");
            // Not f32.
            let w = Tensor::from_vec_i32(vec![1; 4], &[4]).unwrap();
            assert!(matches!(f(&w).unwrap_err(), Error::DType { op: o, arg: "weight", .. } if o == op));
        }
    }

    fn load_options() -> Oracle {
        Oracle::load_file("loss_options", "tools/oracle_loss_options.py")
    }

    #[test]
    fn weighted_binary_losses_match_pytorch() {
        let o = load_options();
        both_modes(|| {
            for name in ["col", "row", "full"] {
                let w = o.get(&format!("bcew_{name}_w")).detach();
                check(&o, &format!("bcew_{name}"), |x, t, r| crate::binary_cross_entropy(x, t, Some(&w), r));
            }
            for name in ["col", "row"] {
                let w = o.get(&format!("bcelw_{name}_w")).detach();
                check(&o, &format!("bcelw_{name}"), |x, t, r| crate::binary_cross_entropy_with_logits(x, t, Some(&w), None, r));
            }
            let (w, pw) = (o.get("bcelwpw_w").detach(), o.get("bcelwpw_pw").detach());
            check(&o, "bcelwpw", |x, t, r| crate::binary_cross_entropy_with_logits(x, t, Some(&w), Some(&pw), r));
        });
    }

    #[test]
    fn kl_div_batchmean_matches_pytorch() {
        let o = load_options();
        both_modes(|| {
            for name in ["kl", "kllog", "kl3", "0d"] {
                let key = format!("bm_{name}");
                let (x, t) = (o.get(&format!("{key}_x")), o.get(&format!("{key}_t")));
                let y = crate::kl_div(&x, &t, KlDivReduction::BatchMean, name == "kllog").unwrap();
                assert_close(&format!("{key}_y"), &y, &o.get(&format!("{key}_y")));
                o.check_grads(&key, &y, &[("x", &x), ("t", &t)]);
            }
        });
    }
}
