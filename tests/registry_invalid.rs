//! Invalid arguments through every registered operator: an error, never a panic, and a
//! failed call changes nothing.
//!
//! For each gradient-check case of each registered operator (read from the registry, so a
//! new `#[op]` is covered with no list to keep), one input at a time is made wrong in one
//! way: the other dtype, one axis longer or of length one, an extra leading axis, the first
//! axis dropped, a scalar in its place, or (for integer inputs) every value pushed far out
//! of range. Many of these are still valid calls (broadcasting, ops that take any shape);
//! those must run, and their backward too. Every call runs under `catch_unwind`, and the
//! number of panics must be zero. When a call fails, its error must name an operator and
//! the call must have left everything as it was: every input's values, storage version,
//! gradient and `requires_grad`, and the graph behind it — each input that requires
//! gradients is fed to the case through a recorded `x * 1`, and after the failure a
//! backward pass through those records must still give every leaf the gradient one.

use om_core::registry::Case;
use om_core::{DType, Result, Tensor};
use om_ops::TensorOps;
use om_tests::{panic_message, reshaped_wrapping};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// One way of making input `input` of a case wrong.
#[derive(Clone, Copy, Debug)]
enum Mutation {
    /// The other dtype (`f32` ↔ `i32`, values truncated toward zero).
    DType,
    /// Axis `a` three longer (values wrapped around the old length).
    Longer(usize),
    /// Axis `a` of length one.
    LengthOne(usize),
    /// A new leading axis of length two.
    ExtraAxis,
    /// The first axis dropped (its first slice kept).
    DropAxis,
    /// A scalar (the first value).
    Scalar,
    /// An integer input's values plus (or minus) a million.
    OutOfRange(i32),
}

/// The mutations tried on `t`.
fn mutations(t: &Tensor) -> Vec<Mutation> {
    let mut out = vec![Mutation::DType, Mutation::ExtraAxis];
    for a in 0..t.shape().len() {
        out.push(Mutation::Longer(a));
        if t.shape()[a] > 1 {
            out.push(Mutation::LengthOne(a));
        }
    }
    if !t.shape().is_empty() {
        out.push(Mutation::DropAxis);
        if t.shape().len() > 1 || t.numel() > 1 {
            out.push(Mutation::Scalar);
        }
    }
    if t.dtype() == DType::I32 {
        out.extend([Mutation::OutOfRange(1_000_000), Mutation::OutOfRange(-1_000_000)]);
    }
    out
}

/// `t` changed by `m`: a fresh tensor, requiring gradients when `t` did and is still `f32`.
fn mutated(t: &Tensor, m: Mutation) -> Result<Tensor> {
    let fresh = match m {
        Mutation::DType => match t.dtype() {
            DType::F32 => Tensor::from_vec_i32(t.to_vec().iter().map(|&v| v as i32).collect(), t.shape())?,
            DType::I32 => Tensor::from_vec(t.to_vec_i32().iter().map(|&v| v as f32).collect(), t.shape())?,
        },
        Mutation::Longer(a) | Mutation::LengthOne(a) => {
            let mut shape = t.shape().to_vec();
            shape[a] = if let Mutation::Longer(_) = m { shape[a] + 3 } else { 1 };
            return reshaped_wrapping(t, &shape);
        }
        Mutation::ExtraAxis => {
            let mut shape = vec![2];
            shape.extend_from_slice(t.shape());
            match t.dtype() {
                DType::F32 => Tensor::from_vec(t.to_vec().repeat(2), &shape)?,
                DType::I32 => Tensor::from_vec_i32(t.to_vec_i32().repeat(2), &shape)?,
            }
        }
        Mutation::DropAxis => t.detach().select(0, 0)?.contiguous()?.detach(),
        Mutation::Scalar => match t.dtype() {
            DType::F32 => Tensor::from_vec(vec![t.to_vec()[0]], &[])?,
            DType::I32 => Tensor::from_vec_i32(vec![t.to_vec_i32()[0]], &[])?,
        },
        Mutation::OutOfRange(by) => Tensor::from_vec_i32(t.to_vec_i32().iter().map(|&v| v.saturating_add(by)).collect(), t.shape())?,
    };
    if t.needs_grad() && fresh.dtype() == DType::F32 {
        fresh.requires_grad()
    } else {
        Ok(fresh)
    }
}

/// What a leaf looked like before the call.
struct Snapshot {
    bits: Vec<u32>,
    version: u64,
    needs_grad: bool,
    has_grad: bool,
}

fn snapshot(t: &Tensor) -> Snapshot {
    let bits = match t.dtype() {
        DType::F32 => t.to_vec().iter().map(|v| v.to_bits()).collect(),
        DType::I32 => t.to_vec_i32().iter().map(|&v| v as u32).collect(),
    };
    Snapshot { bits, version: t.version(), needs_grad: t.needs_grad(), has_grad: t.grad().is_some() }
}

/// How one call ended.
enum Outcome {
    Ran,
    Failed,
    /// A problem to report (a panic, a nameless error, state changed by a failed call).
    Wrong(String),
}

/// Runs `case` with input `j` mutated by `m` and checks what the module doc promises.
fn run(case: &Case, j: usize, m: Mutation) -> Option<Outcome> {
    let leaves: Vec<Tensor> = (0..case.inputs.len())
        .map(|k| if k == j { mutated(&case.inputs[k], m) } else { reshaped_wrapping(&case.inputs[k], case.inputs[k].shape()) })
        .collect::<Result<_>>()
        .ok()?;
    // Inputs that require gradients reach the case through a recorded `x * 1`.
    let fed: Vec<Tensor> =
        leaves.iter().map(|x| if x.needs_grad() { x.mul_scalar(1.0) } else { Ok(x.clone()) }).collect::<Result<_>>().ok()?;
    let before: Vec<Snapshot> = leaves.iter().map(snapshot).collect();
    let call = catch_unwind(AssertUnwindSafe(|| {
        let out = (case.f)(&fed)?;
        if out.needs_grad() {
            out.backward_with(Some(&Tensor::ones(out.shape())?), false)?;
        }
        Ok::<_, om_core::Error>(())
    }));
    let err = match call {
        Err(p) => return Some(Outcome::Wrong(format!("PANIC: {}", panic_message(&*p)))),
        Ok(Ok(())) => return Some(Outcome::Ran),
        Ok(Err(e)) => e,
    };
    if err.op().is_empty() {
        return Some(Outcome::Wrong(format!("an error naming no operator: {err}")));
    }
    for (k, (x, b)) in leaves.iter().zip(&before).enumerate() {
        let now = snapshot(x);
        if now.bits != b.bits || now.version != b.version || now.needs_grad != b.needs_grad {
            return Some(Outcome::Wrong(format!("input {k} changed by a failed call ({err})")));
        }
        // A failure inside backward must not have written a leaf gradient either.
        if now.has_grad != b.has_grad {
            return Some(Outcome::Wrong(format!("input {k} got a gradient from a failed call ({err})")));
        }
    }
    // The graph behind the inputs still works: d(Σ fed)/d leaf = 1.
    let mut total: Option<Tensor> = None;
    for x in fed.iter().filter(|x| x.needs_grad()) {
        let s = x.sum(None, false).ok()?;
        total = Some(match total {
            None => s,
            Some(t) => t.add(&s).ok()?,
        });
    }
    if let Some(total) = total {
        if let Err(e) = total.backward() {
            return Some(Outcome::Wrong(format!("the inputs' graph is broken after a failed call ({err}): {e}")));
        }
        for (k, x) in leaves.iter().enumerate().filter(|(_, x)| x.needs_grad()) {
            if x.grad().map(|g| g.to_vec().iter().all(|&v| v == 1.0)) != Some(true) {
                return Some(Outcome::Wrong(format!("input {k}: wrong gradient through its graph after a failed call ({err})")));
            }
        }
    }
    Some(Outcome::Failed)
}

#[test]
fn invalid_arguments_to_every_op_are_errors_that_change_nothing() {
    let entries = om_ops::registered_ops().expect("no duplicate registrations");
    let (mut ran, mut failed) = (0usize, 0usize);
    let mut problems: Vec<String> = Vec::new();
    let mut ops_with_errors = 0;
    for entry in &entries {
        let errors_before = failed;
        for case in (entry.cases)() {
            for j in 0..case.inputs.len() {
                for m in mutations(&case.inputs[j]) {
                    match run(&case, j, m) {
                        None => {}
                        Some(Outcome::Ran) => ran += 1,
                        Some(Outcome::Failed) => failed += 1,
                        Some(Outcome::Wrong(what)) => problems.push(format!("{}::{} input {j} {m:?}: {what}", entry.name, case.name)),
                    }
                }
            }
        }
        if failed > errors_before {
            ops_with_errors += 1;
        }
    }
    eprintln!(
        "invalid arguments: {} calls over {} operators: {ran} still valid and ran, {failed} errors (in {ops_with_errors} operators), {} problems",
        ran + failed + problems.len(),
        entries.len(),
        problems.len()
    );
    assert!(failed >= 2000, "only {failed} calls failed: the mutations have stopped reaching the operators' checks");
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}
