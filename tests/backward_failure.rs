//! A backward pass that fails leaves every leaf gradient as it was (docs/autograd.md, "When
//! backward fails"): the failure may come from a saved tensor changed in place (found when its
//! record runs) or from inside a rule (a refused allocation), after other records have already
//! produced gradients for leaves. With `retain_graph` the pass can be retried and then gives the
//! gradients a clean pass gives, bit for bit.

use om_core::{pool, Error, Tensor};
use om_ops::TensorOps;
use std::sync::Mutex;

/// The pool's size limit is process-wide: tests that lower it run one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn leaf(values: Vec<f32>) -> Tensor {
    let n = values.len();
    Tensor::from_vec(values, &[n]).unwrap().requires_grad().unwrap()
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec().iter().map(|v| v.to_bits()).collect()
}

/// The leaves' gradients (`None` for none) as bits.
fn grads(leaves: &[&Tensor]) -> Vec<Option<Vec<u32>>> {
    leaves.iter().map(|t| t.grad().map(|g| bits(&g))).collect()
}

/// `loss = sum(w * c) + sum(x * 3) + sum(x * x)`: the records of the `x` terms run (and emit
/// to `x`) before the record of `w * c`, which is first in input order and so runs last.
fn graph(x: &Tensor, w: &Tensor, c: &Tensor) -> Tensor {
    let first = w.mul(c).unwrap().sum(None, false).unwrap();
    let second = x.mul_scalar(3.0).unwrap().sum(None, false).unwrap();
    let third = x.mul(x).unwrap().sum(None, false).unwrap();
    first.add(&second).unwrap().add(&third).unwrap()
}

#[test]
fn a_saved_tensor_changed_after_other_records_ran_leaves_leaf_gradients_untouched() {
    for accumulated in [false, true] {
        let x = leaf(vec![0.5, -1.25, 2.0]);
        let w = leaf(vec![1.5, 2.5, -0.75]);
        let c = Tensor::from_vec(vec![0.1, 0.2, 0.3], &[3]).unwrap();
        if accumulated {
            graph(&x, &w, &c).backward().unwrap();
        }
        let before = grads(&[&x, &w]);
        let loss = graph(&x, &w, &c);
        c.fill_(7.0).unwrap(); // saved by `w * c`
        let e = loss.backward_with(None, true).unwrap_err();
        assert!(matches!(e, Error::TensorVersion { op: "mul", .. }), "{e:?}");
        assert_eq!(grads(&[&x, &w]), before, "accumulated = {accumulated}");
    }
}

#[test]
fn a_refused_allocation_inside_a_rule_leaves_leaf_gradients_untouched_and_can_be_retried() {
    let _one = serial();
    for accumulated in [false, true] {
        let x = leaf(vec![0.5, -1.25, 2.0]);
        // Large enough that `w * c`'s backward (g * c, 256 KiB) is refused under the limit
        // below while the `x` terms' small gradients are not.
        let n = 1 << 16;
        let w = Tensor::randn_with_seed(&[n], 3).unwrap().requires_grad().unwrap();
        let c = Tensor::randn_with_seed(&[n], 4).unwrap();
        if accumulated {
            graph(&x, &w, &c).backward().unwrap();
        }
        let before = grads(&[&x, &w]);
        let loss = graph(&x, &w, &c);
        let old = pool::set_max_buffer_bytes(4096);
        let e = loss.backward_with(None, true);
        pool::set_max_buffer_bytes(old);
        let e = e.unwrap_err();
        assert!(matches!(e, Error::OutOfMemory { .. }), "{e:?}");
        assert_eq!(grads(&[&x, &w]), before, "accumulated = {accumulated}");

        // Retried with the graph retained, the pass gives what a clean pass gives.
        loss.backward().unwrap();
        let (x2, w2) = (leaf(x.to_vec()), Tensor::from_vec(w.to_vec(), &[n]).unwrap().requires_grad().unwrap());
        if accumulated {
            graph(&x2, &w2, &c).backward().unwrap();
        }
        graph(&x2, &w2, &c).backward().unwrap();
        assert_eq!(grads(&[&x, &w]), grads(&[&x2, &w2]), "accumulated = {accumulated}");
    }
}

#[test]
fn a_leaf_reached_several_times_sums_its_gradients_in_emission_order() {
    // Reverse post-order runs `x * x` (emitting x, then x again, once per operand) before
    // `x * 3` (emitting 3): the held-back sum must be ((x + x) + 3) as `.grad` itself would
    // have summed it, and ((g + x) + x) + 3 on top of an existing gradient g.
    let x = leaf(vec![0.1, 1e-8, 3.0e7]);
    let w = leaf(vec![1.0, 1.0, 1.0]);
    let c = Tensor::from_vec(vec![1.0, 1.0, 1.0], &[3]).unwrap();
    graph(&x, &w, &c).backward().unwrap();
    let once: Vec<f32> = x.to_vec().iter().map(|&v| (v + v) + 3.0f32).collect();
    assert_eq!(bits(&x.grad().unwrap()), once.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    graph(&x, &w, &c).backward().unwrap();
    let twice: Vec<f32> = once.iter().zip(x.to_vec()).map(|(&g, v)| ((g + v) + v) + 3.0f32).collect();
    assert_eq!(bits(&x.grad().unwrap()), twice.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
}

#[test]
fn a_refused_allocation_in_the_engines_own_buffers_names_the_operator() {
    let _one = serial();
    // `x + c` broadcasts `x` ([n]) over `c` ([4, n]); add's rule passes the gradient through
    // at the output's shape and the engine sums it down to `[n]`, in a buffer of its own
    // (16 KiB), refused under the limit below.
    let n = 1 << 12;
    let x = Tensor::randn_with_seed(&[n], 5).unwrap().requires_grad().unwrap();
    let c = Tensor::randn_with_seed(&[4, n], 6).unwrap();
    let loss = x.add(&c).unwrap().sum(None, false).unwrap();
    let old = pool::set_max_buffer_bytes(8192);
    let e = loss.backward_with(None, true);
    pool::set_max_buffer_bytes(old);
    let e = e.unwrap_err();
    assert!(matches!(e, Error::OutOfMemory { op: "add", .. }), "{e:?}");
    assert!(x.grad().is_none());
    loss.backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![4.0; n]);
}
