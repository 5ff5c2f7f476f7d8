//! The oracle models of spec section 6 against PyTorch 2.15.0 (`testdata/autograd/`,
//! written by `tools/autograd_oracle.py` and `tools/rnn_oracle.py`): the loss within 1e-5
//! relative, every parameter and input gradient within 1e-4 scaled error
//! `max|ours − torch| / max|torch|`, gradients that are zero in theory below 1e-5 of the
//! model's largest gradient, and the CRNN's CTC losses (reductions none/mean/sum,
//! zero_infinity) within 1e-5 relative. Run with `--nocapture` to see the worst errors.

mod models;

use models::{kind, zero_in_theory, Model};
use om_core::compute::{Compute, Mode};
use om_core::Tensor;
use om_ops as ops;
use std::collections::BTreeMap;

const GRAD_TOLERANCE: f64 = 1e-4;
const LOSS_TOLERANCE: f64 = 1e-5;
const ZERO_TOLERANCE: f64 = 1e-5;

fn max_abs(v: &[f32]) -> f64 {
    v.iter().map(|&x| (x as f64).abs()).fold(0.0, f64::max)
}

/// `max|ours − want| / max|want|` (shapes must agree).
fn scaled_error(ours: &Tensor, want: &Tensor) -> f64 {
    assert_eq!(ours.shape(), want.shape(), "shapes differ");
    let (a, b) = (ours.to_vec(), want.to_vec());
    let diff = a.iter().zip(&b).map(|(&x, &y)| (x as f64 - y as f64).abs()).fold(0.0, f64::max);
    let scale = max_abs(&b);
    if scale == 0.0 {
        diff
    } else {
        diff / scale
    }
}

/// Element-wise relative error `max |a − b| / max(|b|, tiny)` of finite values; infinities
/// must match exactly.
fn relative_error(ours: &[f32], want: &[f32]) -> f64 {
    assert_eq!(ours.len(), want.len());
    ours.iter()
        .zip(want)
        .map(|(&a, &b)| {
            if b.is_infinite() || a.is_infinite() {
                assert_eq!(a, b, "infinite values differ");
                0.0
            } else {
                (a as f64 - b as f64).abs() / (b as f64).abs().max(1e-30)
            }
        })
        .fold(0.0, f64::max)
}

/// Runs one training step of `model` in `mode` and checks it against PyTorch; returns the
/// worst scaled error per gradient kind.
fn check_model(name: &'static str, mode: Mode) -> BTreeMap<&'static str, f64> {
    Compute::set_mode(mode);
    let m = Model::load(name);
    let loss = m.step().unwrap_or_else(|e| panic!("{name}: {e}"));
    let loss_err = relative_error(&loss.to_vec(), &m.stored("loss").to_vec());
    println!("{name} [{mode}]: loss {:.6}, relative error {loss_err:.2e}", loss.item().unwrap());
    assert!(loss_err <= LOSS_TOLERANCE, "{name} [{mode}]: loss relative error {loss_err:.3e}");
    let largest = m.leaves.keys().map(|k| max_abs(&m.stored(&format!("grad.{k}")).to_vec())).fold(0.0, f64::max);
    let mut worst: BTreeMap<&'static str, f64> = BTreeMap::new();
    let mut failures = Vec::new();
    for (key, g) in m.grads() {
        let want = m.stored(&format!("grad.{key}"));
        if zero_in_theory(name, key) {
            let (ours, theirs) = (max_abs(&g.to_vec()) / largest, max_abs(&want.to_vec()) / largest);
            println!("  {key:<24} zero in theory: ours {ours:.2e}, torch {theirs:.2e} of the largest gradient");
            if ours > ZERO_TOLERANCE {
                failures.push(format!("{key}: {ours:.3e} of the largest gradient, should be zero"));
            }
            let e = worst.entry("zero-in-theory").or_insert(0.0);
            *e = e.max(ours);
            continue;
        }
        let e = scaled_error(&g, want);
        println!("  {key:<24} {:<10} scaled error {e:.2e}", kind(key));
        if e > GRAD_TOLERANCE {
            failures.push(format!("{key}: scaled error {e:.3e}"));
        }
        let w = worst.entry(kind(key)).or_insert(0.0);
        *w = w.max(e);
    }
    let summary: Vec<String> = worst.iter().map(|(k, e)| format!("{k} {e:.2e}")).collect();
    println!("{name} [{mode}] worst: {}", summary.join(", "));
    Compute::set_mode(Mode::Fast);
    assert!(failures.is_empty(), "{name} [{mode}]:\n{}", failures.join("\n"));
    worst
}

fn check_both_modes(name: &'static str) {
    for mode in [Mode::Fast, Mode::Exact] {
        check_model(name, mode);
    }
}

#[test]
fn convnet_matches_pytorch() {
    check_both_modes("convnet");
}

#[test]
fn encoder_matches_pytorch() {
    check_both_modes("encoder");
}

#[test]
fn crnn_matches_pytorch() {
    check_both_modes("crnn");
}

#[test]
fn gru_matches_pytorch() {
    check_both_modes("gru");
}

#[test]
fn decoder_matches_pytorch() {
    check_both_modes("decoder");
}

#[test]
fn crnn_ctc_reductions_and_zero_infinity_match_pytorch() {
    let m = Model::load("crnn");
    let lp = m.crnn_log_probs().unwrap().detach();
    let c = |k| m.stored(k);
    let (targets, il, tl) = (c("c.targets"), c("c.input_lengths"), c("c.target_lengths"));
    for (red, r) in [("none", ops::Reduction::None), ("mean", ops::Reduction::Mean), ("sum", ops::Reduction::Sum)] {
        let y = ops::ctc_loss(&lp, targets, il, tl, 0, r, false).unwrap();
        let e = relative_error(&y.to_vec(), &m.stored(&format!("out.ctc_{red}")).to_vec());
        println!("crnn ctc reduction {red}: {:?}, relative error {e:.2e}", y.to_vec());
        assert!(e <= LOSS_TOLERANCE, "ctc reduction {red}: relative error {e:.3e}");
    }
    // Sequence 1 of the zi batch cannot be aligned: +inf, or 0 with zero_infinity; its
    // gradient is zero either way, the other sequence's is not.
    let (zt, zil, ztl) = (c("c.zi_targets"), c("c.zi_input_lengths"), c("c.zi_target_lengths"));
    let inf = ops::ctc_loss(&lp, zt, zil, ztl, 0, ops::Reduction::None, false).unwrap().to_vec();
    assert!(inf[1].is_infinite() && inf[1] > 0.0, "impossible alignment without zero_infinity: {inf:?}");
    let e = relative_error(&inf, &c("out.zi_none_inf").to_vec());
    assert!(e <= LOSS_TOLERANCE, "zero_infinity off: relative error {e:.3e}");
    let leaf = Tensor::from_vec(lp.to_vec(), lp.shape()).and_then(Tensor::requires_grad).unwrap();
    for r in [ops::Reduction::None, ops::Reduction::Mean, ops::Reduction::Sum] {
        leaf.clear_grad();
        let y = ops::ctc_loss(&leaf, zt, zil, ztl, 0, r, true).unwrap();
        if r == ops::Reduction::None {
            let v = y.to_vec();
            assert_eq!(v[1], 0.0, "zero_infinity gives loss 0 for the impossible sequence");
            let e = relative_error(&v, &c("out.zi_none").to_vec());
            println!("crnn ctc zero_infinity none: {v:?}, relative error {e:.2e}");
            assert!(e <= LOSS_TOLERANCE, "zero_infinity on: relative error {e:.3e}");
        }
        ops::sum(&y, None, false).unwrap().backward().unwrap();
        let g = leaf.grad().unwrap();
        let s = g.shape().to_vec(); // [T, B, C]
        let g = g.to_vec();
        let (b, classes) = (s[1], s[2]);
        let seq = |k: usize| (0..s[0]).flat_map(move |t| (0..classes).map(move |j| (t * b + k) * classes + j));
        assert!(g.iter().all(|v| v.is_finite()), "{r:?}: gradient not finite");
        assert!(seq(1).all(|i| g[i] == 0.0), "{r:?}: the impossible sequence has a non-zero gradient");
        assert!(seq(0).any(|i| g[i] != 0.0), "{r:?}: the possible sequence has no gradient");
    }
}
