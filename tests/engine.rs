//! The engine rules of spec section 2, one test each.

use om_core::compute::{Compute, KernelPath, Mode, Settings};
use om_core::{is_grad_enabled, no_grad, Case, Error, Result, Tensor};
use om_macros::op;
use om_ops as ops;
use std::sync::Mutex;

/// Backward runs recorded by `trace`: (tag, grad mode during backward).
static TRACE: Mutex<Vec<(usize, bool)>> = Mutex::new(Vec::new());

/// Identity that logs when its backward runs (test-only operator).
#[op(attrs = [tag: usize])]
mod trace {
    use super::*;

    pub fn forward(x: &Tensor, tag: usize) -> Result<Tensor> {
        let _ = tag;
        Ok(x.to_contiguous())
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        TRACE.lock().unwrap().push((r.tag, is_grad_enabled()));
        // Anything computed here must not be recorded.
        let y = ops::mul(g, g)?;
        assert!(!y.needs_grad(), "an operator recorded during backward");
        d.x(g.clone());
        Ok(())
    }

    fn cases() -> Vec<Case> {
        vec![Case::new("identity", vec![Case::input(&[3], -1.0, 1.0, 1)], |x| super::trace(&x[0], 0))]
    }
}

fn leaf(v: &[f32]) -> Tensor {
    Tensor::from_slice(v, &[v.len()]).unwrap().requires_grad().unwrap()
}

fn total(t: &Tensor) -> Tensor {
    ops::sum(t, None, false).unwrap()
}

#[test]
fn scalar_root_is_seeded_with_one() {
    let x = leaf(&[1.0, 2.0, 3.0]);
    total(&ops::mul(&x, &x).unwrap()).backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![2.0, 4.0, 6.0]);
}

#[test]
fn non_scalar_root_needs_a_gradient_of_its_shape() {
    let x = leaf(&[1.0, 2.0]);
    let y = ops::mul(&x, &x).unwrap();
    assert!(matches!(y.backward(), Err(Error::Shape { op: "backward", .. })));
    let wrong = Tensor::ones(&[3]).unwrap();
    assert!(matches!(y.backward_with(Some(&wrong), false), Err(Error::Shape { op: "backward", .. })));
    assert!(x.grad().is_none(), "a failed backward wrote a gradient");
    let g = Tensor::from_vec(vec![10.0, 100.0], &[2]).unwrap();
    y.backward_with(Some(&g), false).unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![20.0, 400.0]);
}

#[test]
fn records_run_in_reverse_topological_order_on_a_diamond() {
    let x = leaf(&[1.0, 2.0]);
    let _guard = serial();
    TRACE.lock().unwrap().clear();
    let t1 = trace(&x, 1).unwrap();
    let t2 = trace(&t1, 2).unwrap();
    let t3 = trace(&t1, 3).unwrap();
    let y = total(&ops::add(&t2, &t3).unwrap());
    y.backward().unwrap();
    let log: Vec<usize> = TRACE.lock().unwrap().iter().map(|(t, _)| *t).collect();
    // Post-order over input edges in input order is t1, t2, t3, add, sum; reversed: sum, add, t3, t2, t1.
    assert_eq!(log, vec![3, 2, 1]);
    assert!(TRACE.lock().unwrap().iter().all(|(_, grad_on)| !grad_on), "backward ran with recording on");
    assert_eq!(x.grad().unwrap().to_vec(), vec![2.0, 2.0]);
}

fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn an_input_used_twice_gets_both_contributions() {
    let x = leaf(&[3.0, -1.0]);
    let y = ops::add(&ops::mul(&x, &x).unwrap(), &x).unwrap();
    total(&y).backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![7.0, -1.0]);
}

#[test]
fn gradients_accumulate_across_calls_until_zeroed_or_cleared() {
    let x = leaf(&[1.0, 2.0]);
    total(&ops::mul(&x, &x).unwrap()).backward().unwrap();
    total(&ops::mul(&x, &x).unwrap()).backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![4.0, 8.0]);
    let g = x.grad().unwrap();
    x.zero_grad().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![0.0, 0.0]);
    assert!(x.grad().unwrap().shares_storage(&g), "zero_grad keeps the buffer");
    x.clear_grad();
    assert!(x.grad().is_none());
}

#[test]
fn retain_graph_allows_a_second_pass() {
    let x = leaf(&[1.0, 2.0]);
    let y = total(&ops::mul(&x, &x).unwrap());
    y.backward_with(None, true).unwrap();
    y.backward_with(None, false).unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![4.0, 8.0]);
}

#[test]
fn a_released_graph_fails_before_any_work() {
    let x = leaf(&[1.0, 2.0]);
    let w = leaf(&[5.0, 6.0]);
    let shared = ops::mul(&x, &x).unwrap();
    let y1 = total(&shared);
    y1.backward().unwrap();
    // y2 reaches the released `mul` record through `shared`, and a live `mul` with `w`.
    let y2 = total(&ops::add(&shared, &ops::mul(&w, &w).unwrap()).unwrap());
    let err = y2.backward().unwrap_err();
    assert!(matches!(err, Error::GraphReleased { op: "mul" }), "{err}");
    assert!(w.grad().is_none(), "work was done before the released record was detected");
    assert_eq!(x.grad().unwrap().to_vec(), vec![2.0, 4.0]);
    assert!(matches!(y1.backward(), Err(Error::GraphReleased { .. })));
}

#[test]
fn modifying_a_saved_tensor_in_place_is_an_error() {
    let a = leaf(&[1.0, 2.0]);
    let b = Tensor::from_vec(vec![3.0, 4.0], &[2]).unwrap();
    let y = total(&ops::mul(&a, &b).unwrap());
    b.fill_(0.0).unwrap();
    let err = y.backward().unwrap_err();
    assert!(matches!(err, Error::TensorVersion { op: "mul", slot: "b", saved: 0, now: 1 }), "{err}");
}

#[test]
fn modifying_an_unsaved_tensor_is_fine() {
    // `mul(c, b)` with only `b` needing a gradient saves `c` (for b's gradient) but not `b`,
    // so writing `b` in place after the forward pass is allowed.
    let c = Tensor::from_vec(vec![9.0, 7.0], &[2]).unwrap();
    let b = leaf(&[3.0, 4.0]);
    let y = total(&ops::mul(&c, &b).unwrap());
    b.fill_(1.0).unwrap();
    y.backward().unwrap();
    assert_eq!(b.grad().unwrap().to_vec(), vec![9.0, 7.0]);
}

#[test]
fn nothing_is_recorded_under_no_grad() {
    let x = leaf(&[1.0, 2.0]);
    let y = no_grad(|| ops::mul(&x, &x)).unwrap();
    assert!(!y.needs_grad() && y.grad_fn_name().is_none());
    let _g = om_core::NoGradGuard::new();
    assert!(!ops::relu(&x).unwrap().needs_grad());
}

#[test]
fn recording_attaches_only_when_an_input_needs_grad() {
    let a = Tensor::ones(&[2]).unwrap();
    assert!(ops::mul(&a, &a).unwrap().grad_fn_name().is_none());
    let x = leaf(&[1.0, 2.0]);
    assert_eq!(ops::mul(&a, &x).unwrap().grad_fn_name(), Some("mul"));
}

#[test]
fn backward_on_a_tensor_without_grad_is_an_error() {
    let a = Tensor::ones(&[1]).unwrap();
    assert!(matches!(a.backward(), Err(Error::NoGrad { .. })));
}

#[test]
fn leaf_root_receives_the_seed() {
    let x = leaf(&[4.0]);
    x.backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![1.0]);
}

#[test]
fn broadcast_gradients_are_summed_to_the_input_shape() {
    let a = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap().requires_grad().unwrap();
    let b = leaf(&[1.0, 1.0, 1.0]);
    total(&ops::mul(&a, &b).unwrap()).backward().unwrap();
    assert_eq!(b.grad().unwrap().shape(), &[3]);
    assert_eq!(b.grad().unwrap().to_vec(), vec![5.0, 7.0, 9.0]);
}

#[test]
fn gradcheck_catches_a_wrong_rule() {
    // A deliberately wrong backward (missing the factor 2 of x²) must fail gradcheck.
    let case = (wrong_square::cases)().remove(0);
    let rep = om_core::gradcheck::run(&case).unwrap();
    assert!(!rep.passed(), "gradcheck accepted a wrong gradient: {rep:?}");
    assert!(rep.worst_abs() > 0.1);
}

/// `x²` with a wrong derivative (`x` instead of `2x`), to prove gradcheck can fail.
#[op(saved = [x])]
mod wrong_square {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        ops::mul(x, x)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(ops::mul(g, r.x())?);
        Ok(())
    }

    pub fn cases() -> Vec<Case> {
        vec![Case::new("wrong", vec![Case::input(&[4], 0.5, 1.5, 1)], |x| super::wrong_square(&x[0]))]
    }
}

/// The factors `w1`, `w2`, `w3` of three consumers of one tensor, per element: the first
/// three elements are where the three ways to pair a float32 sum of three terms differ
/// (`1e8 + 1` rounds to `1e8`), the rest mix magnitudes.
fn emission_factors() -> [Vec<f32>; 3] {
    let mut w = [vec![1.0, -1e8, 1e8], vec![1e8, 1.0, -1e8], vec![-1e8, 1e8, 1.0]];
    for i in 0..13 {
        let k = i as f32;
        w[0].push((k - 6.0) * 3.0e7 + 0.7);
        w[1].push(1.0 / (k + 1.0) - 0.37);
        w[2].push((6.5 - k) * 2.9e7 + 0.013);
    }
    w
}

/// Spec section 2, rule 3, bit for bit: emissions to a record's pending gradient, and to a
/// leaf's gradient, are added in the order they happen, which the reverse of the post-order
/// traversal fixes. In `sum((h·w1 + h·w2) + h·w3)` with `h = −x`, the post-order over input
/// edges in input order is `h, m1, m2, add, m3, add, sum` (`mK = h·wK`), so the records run
/// `sum, add, m3, add, m2, m1, h`: `h` receives `w3`, then `w2`, then `w1`, and its pending
/// gradient is `(w3 + w2) + w1` in float32; `x` gets its negation. With `x` itself in place
/// of `h`, the leaf's gradient is built in the same order. The expected bits are those f32
/// additions; the factors are chosen so that either other pairing gives other bits.
#[test]
fn emissions_are_summed_in_the_spec_order_bit_for_bit() {
    let [w1, w2, w3] = emission_factors();
    let n = w1.len();
    let spec: Vec<f32> = (0..n).map(|i| (w3[i] + w2[i]) + w1[i]).collect();
    // The test can tell the spec's order from the other two pairings.
    let differs = |other: &dyn Fn(f32, f32, f32) -> f32| (0..n).any(|i| other(w1[i], w2[i], w3[i]).to_bits() != spec[i].to_bits());
    assert!(differs(&|a, b, c| (a + b) + c), "(w1 + w2) + w3 gives the spec's bits");
    assert!(differs(&|a, b, c| (a + c) + b), "(w1 + w3) + w2 gives the spec's bits");
    let w: Vec<Tensor> = [&w1, &w2, &w3].iter().map(|v| Tensor::from_slice(v, &[n]).unwrap()).collect();
    let consumers = |h: &Tensor| -> Tensor {
        let (m1, m2, m3) = (ops::mul(h, &w[0]).unwrap(), ops::mul(h, &w[1]).unwrap(), ops::mul(h, &w[2]).unwrap());
        total(&ops::add(&ops::add(&m1, &m2).unwrap(), &m3).unwrap())
    };
    for mode in [Mode::Fast, Mode::Exact] {
        for threads in [1, 2] {
            Compute::with(Settings { mode, threads, path: KernelPath::best() }, || {
                // Through a record's pending gradient.
                let x = leaf(&vec![0.5; n]);
                consumers(&ops::neg(&x).unwrap()).backward().unwrap();
                let got = x.grad().unwrap().to_vec();
                for i in 0..n {
                    assert_eq!(got[i].to_bits(), (-spec[i]).to_bits(), "{mode} {threads} threads, element {i}: {} vs {}", got[i], -spec[i]);
                }
                // Into a leaf's gradient.
                let x = leaf(&vec![0.5; n]);
                consumers(&x).backward().unwrap();
                let got = x.grad().unwrap().to_vec();
                for i in 0..n {
                    assert_eq!(
                        got[i].to_bits(),
                        spec[i].to_bits(),
                        "{mode} {threads} threads, leaf element {i}: {} vs {}",
                        got[i],
                        spec[i]
                    );
                }
            });
        }
    }
}
