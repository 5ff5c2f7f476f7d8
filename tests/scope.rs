//! `ActivationScope` (spec section 3): nesting, a reopened scope starting from zero, leaf
//! gradients untouched, a leaked handle reported, and the scope's figures equal to the
//! pool's counter deltas (on one thread and
//! with the kernels' helper threads). The tests share the process-wide pool, so they take
//! turns.

use om_core::alloc_count::CountingAlloc;
use om_core::compute::Compute;
use om_core::{pool, ActivationScope, Result, Tensor};
use om_ops as ops;
use om_ops::nn::{Conv2d, Conv2dOptions, Forward, Module};
use std::sync::Mutex;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

struct Net {
    conv: Conv2d,
    x: Tensor,
}

impl Net {
    fn new() -> Result<Net> {
        Ok(Net {
            conv: Conv2d::with_seed(2, 8, [3, 3], Conv2dOptions::default().padding(1), 1)?,
            x: Tensor::randn_with_seed(&[4, 2, 12, 12], 5)?,
        })
    }

    /// Forward to the activation after the relu, and the loss.
    fn forward(&self) -> Result<(Tensor, Tensor)> {
        let h = ops::relu(&self.conv.forward(&self.x)?)?;
        let loss = ops::sum(&ops::max_pool2d(&h, 2)?, None, false)?;
        Ok((h, loss))
    }

    fn step(&self) -> Result<()> {
        for p in self.conv.parameter_tensors() {
            p.clear_grad();
        }
        self.forward()?.1.backward()
    }
}

#[test]
fn scopes_nest_and_inner_figures_count_in_the_outer_scope() -> Result<()> {
    let _turn = turn();
    let net = Net::new()?;
    net.step()?;
    let outer = ActivationScope::new();
    let kept = Tensor::zeros(&[10])?;
    let inner_stats = {
        let inner = ActivationScope::new();
        net.step()?;
        inner.finish()
    };
    let outer_stats = outer.finish();
    assert!(inner_stats.pool_requests > 0);
    assert_eq!(outer_stats.pool_requests, inner_stats.pool_requests + 1);
    assert_eq!(outer_stats.pool_bytes_requested, inner_stats.pool_bytes_requested + 64);
    assert_eq!(inner_stats.live_tensors_created, 0);
    assert_eq!(outer_stats.live_tensors_created, 1, "the zeros made in the outer scope are alive");
    assert!(outer_stats.peak_outstanding_bytes >= inner_stats.peak_outstanding_bytes);
    assert!(inner_stats.heap_allocations.is_some(), "this binary installs the counting allocator");
    drop(kept);
    Ok(())
}

#[test]
fn a_reopened_scope_starts_from_zero_and_opening_one_allocates_nothing_when_warm() -> Result<()> {
    let _turn = turn();
    let net = Net::new()?;
    let outer = ActivationScope::new();
    let first = {
        let inner = ActivationScope::new();
        net.step()?;
        inner.finish()
    };
    // The next scope reuses the ended scope's counters: they start again from zero, and the
    // outer scope still counts both inner ones.
    let heap_before = om_core::alloc_count::process();
    let second = ActivationScope::new();
    let opening = om_core::alloc_count::process().since(heap_before);
    assert_eq!(second.stats().pool_requests, 0);
    let kept = Tensor::zeros(&[10])?;
    let second = second.finish();
    assert_eq!((second.pool_requests, second.pool_bytes_requested, second.live_tensors_created), (1, 64, 1));
    assert_eq!(outer.stats().pool_requests, first.pool_requests + 1);
    assert_eq!((opening.allocations, opening.bytes), (0, 0), "opening a scope after one ended");
    drop(kept);
    Ok(())
}

#[test]
fn leaf_gradients_are_not_tied_to_the_scope() -> Result<()> {
    let _turn = turn();
    let net = Net::new()?;
    let stats = {
        let scope = ActivationScope::new();
        net.step()?;
        scope.finish()
    };
    assert_eq!(stats.live_tensors_created, 0, "leaf gradients created in the scope are not reported");
    for p in net.conv.parameter_tensors() {
        let g = p.grad().expect("the gradient outlives the scope");
        assert_eq!(g.shape(), p.shape());
        assert!(g.to_vec().iter().any(|&v| v != 0.0));
    }
    // The same gradients as a step without a scope.
    let with_scope: Vec<Vec<f32>> = net.conv.parameter_tensors().iter().map(|p| p.grad().unwrap().to_vec()).collect();
    net.step()?;
    let without: Vec<Vec<f32>> = net.conv.parameter_tensors().iter().map(|p| p.grad().unwrap().to_vec()).collect();
    assert_eq!(with_scope, without);
    Ok(())
}

#[test]
fn a_leaked_activation_is_reported_and_everything_else_returns_to_the_pool() -> Result<()> {
    let _turn = turn();
    let net = Net::new()?;
    let mut leaked = Vec::new();
    let mut step = |leak: bool| -> Result<_> {
        let scope = ActivationScope::new();
        for p in net.conv.parameter_tensors() {
            p.clear_grad();
        }
        let (h, loss) = net.forward()?;
        loss.backward()?;
        drop(loss);
        if leak {
            leaked.push(h);
        } else {
            drop(h);
        }
        let live: Vec<_> = scope.live_tensors().iter().map(|t| (t.shape().to_vec(), t.grad_fn_name())).collect();
        Ok((scope.finish(), live))
    };
    step(false)?;
    let before = pool::stats();
    let (clean, live) = step(false)?;
    let after = pool::stats();
    assert_eq!(clean.live_tensors_created, 0, "{live:?}");
    assert_eq!(after.outstanding_bytes, before.outstanding_bytes, "a scoped step gives every buffer back");
    let (leaky, live) = step(true)?;
    assert_eq!(leaky.live_tensors_created, 1);
    assert_eq!(live, vec![(vec![4, 8, 12, 12], Some("relu"))], "the leaked handle is named by its shape and operator");
    assert!(pool::stats().outstanding_bytes > after.outstanding_bytes, "the leaked activation holds its buffer");
    drop(leaked);
    assert_eq!(pool::stats().outstanding_bytes, after.outstanding_bytes);
    Ok(())
}

#[test]
fn scope_figures_equal_the_pool_counter_deltas() -> Result<()> {
    let _turn = turn();
    let net = Net::new()?;
    let mut requests = Vec::new();
    for threads in [1, 2, 3] {
        Compute::set_threads(threads)?;
        pool::trim(); // the first step allocates natively again
        for warm in [false, true] {
            let before = pool::stats();
            let scope = ActivationScope::new();
            net.step()?;
            let s = scope.finish();
            let after = pool::stats();
            assert_eq!(s.pool_native_allocations, after.native_allocations - before.native_allocations, "threads {threads}");
            assert_eq!(s.pool_bytes_requested, after.requested_bytes - before.requested_bytes, "threads {threads}");
            assert!(s.peak_outstanding_bytes <= after.peak_outstanding_bytes);
            assert!(s.peak_outstanding_bytes >= before.outstanding_bytes.max(after.outstanding_bytes));
            if warm {
                // The kernels take a parallel section's scratch up front (one part per
                // thread that may take part), never inside a chunk, so the memory a step
                // needs does not depend on which helpers join in time: one step warms the
                // pool at every thread count (issue 22).
                assert_eq!(s.pool_native_allocations, 0, "a warm step allocates nothing (threads {threads})");
                requests.push((s.pool_requests, s.pool_bytes_requested));
            } else {
                assert!(s.pool_native_allocations > 0, "after a trim the pool allocates (threads {threads})");
            }
        }
    }
    Compute::set_threads(1)?;
    // The same requests at every thread count above one (the scratch of a section is one
    // request); with more threads, its parts make it larger. One thread may skip a buffer
    // that only a split among threads needs (the convolution's weight gradient runs as one
    // band at one thread and reads `g` in place: `kernels/conv/mod.rs`, `weight_bands`).
    assert_eq!(requests[1].0, requests[2].0, "the same pool requests at 2 and 3 threads: {requests:?}");
    assert!(requests[0].0 <= requests[1].0, "one thread needs no more requests: {requests:?}");
    assert!(requests[1].1 < requests[2].1, "three threads' scratch parts: {requests:?}");
    Ok(())
}

/// Scopes ended out of order (spec section 3 assumes nesting; a Rust guard can be moved or
/// dropped early) count as if they had nested: a step in an inner scope whose outer scope
/// ended first has the figures of a step in a scope of its own, live tensors included, and
/// so does a scope opened inside it that outlives it (before, the outer's end stopped the
/// inner's counting and cleared the log of live tensors under it).
#[test]
fn scopes_ended_out_of_order_count_as_nested_ones() -> Result<()> {
    let _turn = turn();
    let net = Net::new()?;
    net.step()?;
    // A step and a forward pass whose activation is kept, in a scope of its own.
    let plain = {
        let scope = ActivationScope::new();
        net.step()?;
        let (h, _) = net.forward()?;
        let s = scope.stats();
        drop(h);
        s
    };
    assert!(plain.pool_requests > 0 && plain.live_tensors_created > 0, "{plain:?}");
    let plain_step = {
        let scope = ActivationScope::new();
        net.step()?;
        scope.finish()
    };
    // The same in an inner scope whose outer scope ends first.
    let outer = ActivationScope::new();
    let inner = ActivationScope::new();
    drop(outer);
    net.step()?;
    let (h, _) = net.forward()?;
    let s = inner.stats();
    assert_eq!(
        (s.pool_requests, s.pool_bytes_requested, s.live_tensors_created),
        (plain.pool_requests, plain.pool_bytes_requested, plain.live_tensors_created),
        "an inner scope whose outer scope ended first"
    );
    assert!(inner.live_tensors().iter().any(|t| t.grad_fn_name() == Some("relu")), "the kept activation is logged");
    drop(h);
    // A scope opened inside that one and still open when it ends.
    let last = ActivationScope::new();
    drop(inner);
    net.step()?;
    let s = last.finish();
    assert_eq!(
        (s.pool_requests, s.pool_bytes_requested, s.live_tensors_created),
        (plain_step.pool_requests, plain_step.pool_bytes_requested, 0),
        "a scope that outlived the scope around it"
    );
    Ok(())
}
