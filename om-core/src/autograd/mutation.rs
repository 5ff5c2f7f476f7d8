//! A test-only hook in the engine for mutation testing of the gradient check
//! (`tests/gradcheck_mutation.rs`): while [`with_mutant`] runs, the gradient a named
//! operator's backward rule emits for one input is made deliberately wrong (scaled,
//! dropped or permuted) where the engine receives it, so no operator's code is edited.
//! [`trace`] lists the (operator, input) gradients a pass routes. Hidden from the docs;
//! unused, it costs the engine one relaxed atomic load per routed gradient.

use crate::error::Result;
use crate::tensor::Tensor;
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How a mutant changes a gradient.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    /// Every element multiplied by the factor (`1.01`: a 1% error).
    Scale(f32),
    /// The gradient replaced by zeros (an input's gradient forgotten).
    Drop,
    /// The elements permuted: the last two axes transposed in memory (as if a rule used a
    /// transposed operand), or, for a gradient with fewer than two axes longer than one,
    /// the elements in reverse order.
    Permute,
}

/// One deliberately wrong backward: `kind` applied to the gradient operator `op` emits for
/// its input `input`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mutant {
    /// The record's operator name (`Tensor::grad_fn_name`).
    pub op: &'static str,
    /// The input position in the operator's tensor inputs.
    pub input: usize,
    /// The change.
    pub kind: Kind,
}

/// What a mutant did during [`with_mutant`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Effect {
    /// Gradients it applied to.
    pub fired: usize,
    /// Of those, the ones whose values it changed (a permutation of a constant gradient, or
    /// a scaled or dropped zero gradient, changes nothing).
    pub changed: usize,
}

/// What the hook does on this thread.
enum Hook {
    Mutate(Mutant, Effect),
    Trace(Vec<(&'static str, usize)>),
}

/// Threads with a hook installed; zero means the engine skips the thread-local look-up.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
}

/// Installs `hook` on this thread while `f` runs (the previous one comes back after, also
/// if `f` panics) and returns what the hook holds then.
fn with_hook<R>(hook: Hook, f: impl FnOnce() -> R) -> (R, Option<Hook>) {
    /// Puts the previous hook back.
    struct Restore(Option<Hook>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let prev = self.0.take();
            HOOK.with(|h| *h.borrow_mut() = prev);
            ACTIVE.fetch_sub(1, Ordering::Relaxed);
        }
    }
    ACTIVE.fetch_add(1, Ordering::Relaxed);
    let restore = Restore(HOOK.with(|h| h.borrow_mut().replace(hook)));
    let r = f();
    let mine = HOOK.with(|h| h.borrow_mut().take());
    drop(restore);
    (r, mine)
}

/// Runs `f` with `mutant` applied to every gradient its operator emits for its input on
/// this thread, and says how often it applied.
///
/// # Examples
///
/// ```
/// use om_core::autograd::mutation::{with_mutant, Kind, Mutant};
/// use om_core::Tensor;
/// // No backward pass runs inside, so the mutant never applies.
/// let m = Mutant { op: "mul", input: 0, kind: Kind::Drop };
/// let (v, effect) = with_mutant(m, || Tensor::ones(&[2]).map(|t| t.to_vec()));
/// assert_eq!(v?, vec![1.0, 1.0]);
/// assert_eq!(effect.fired, 0);
/// # Ok::<(), om_core::Error>(())
/// ```
pub fn with_mutant<R>(mutant: Mutant, f: impl FnOnce() -> R) -> (R, Effect) {
    match with_hook(Hook::Mutate(mutant, Effect::default()), f) {
        (r, Some(Hook::Mutate(_, effect))) => (r, effect),
        (r, _) => (r, Effect::default()),
    }
}

/// Runs `f` and lists every (operator, input) gradient the engine routed on this thread
/// meanwhile, in routing order, each pair once.
///
/// # Examples
///
/// ```
/// use om_core::autograd::mutation::trace;
/// let (_, routed) = trace(|| ());
/// assert!(routed.is_empty());
/// ```
pub fn trace<R>(f: impl FnOnce() -> R) -> (R, Vec<(&'static str, usize)>) {
    match with_hook(Hook::Trace(Vec::new()), f) {
        (r, Some(Hook::Trace(seen))) => (r, seen),
        (r, _) => (r, Vec::new()),
    }
}

/// The engine's call for the gradient `op` emitted for input `input` (already fitted to
/// the input's shape): unchanged unless a hook on this thread asks otherwise.
#[inline]
pub(crate) fn apply(op: &'static str, input: usize, grad: Tensor) -> Result<Tensor> {
    if ACTIVE.load(Ordering::Relaxed) == 0 {
        return Ok(grad);
    }
    HOOK.with(|h| match &mut *h.borrow_mut() {
        None => Ok(grad),
        Some(Hook::Trace(seen)) => {
            if !seen.contains(&(op, input)) {
                seen.push((op, input));
            }
            Ok(grad)
        }
        Some(Hook::Mutate(m, effect)) if m.op == op && m.input == input => {
            let before = grad.try_with_f32(<[f32]>::to_vec)?;
            let after = mutate(m.kind, grad.shape(), &before);
            effect.fired += 1;
            // By value: dropping a gradient of signed zeros changes bits but nothing a check
            // can see.
            if before.iter().zip(&after).any(|(a, b)| a != b && !(a.is_nan() && b.is_nan())) {
                effect.changed += 1;
            }
            Tensor::from_vec(after, grad.shape())
        }
        Some(Hook::Mutate(..)) => Ok(grad),
    })
}

/// `v` (row-major, of `shape`) changed by `kind`.
fn mutate(kind: Kind, shape: &[usize], v: &[f32]) -> Vec<f32> {
    match kind {
        Kind::Scale(s) => v.iter().map(|&x| x * s).collect(),
        Kind::Drop => vec![0.0; v.len()],
        Kind::Permute => {
            let r = shape.len();
            if r >= 2 && shape[r - 2] > 1 && shape[r - 1] > 1 {
                let (rows, cols) = (shape[r - 2], shape[r - 1]);
                let mut out = Vec::with_capacity(v.len());
                for m in v.chunks(rows * cols) {
                    out.extend((0..rows * cols).map(|k| m[(k % rows) * cols + k / rows]));
                }
                out
            } else {
                v.iter().rev().copied().collect()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permute_transposes_the_last_two_axes_or_reverses() {
        // [2,3] → its transpose [3,2] read back as [2,3].
        assert_eq!(mutate(Kind::Permute, &[2, 3], &[1., 2., 3., 4., 5., 6.]), vec![1., 4., 2., 5., 3., 6.]);
        assert_eq!(mutate(Kind::Permute, &[3, 1], &[1., 2., 3.]), vec![3., 2., 1.]);
        assert_eq!(mutate(Kind::Scale(2.0), &[2], &[1., -2.]), vec![2., -4.]);
        assert_eq!(mutate(Kind::Drop, &[2], &[1., -2.]), vec![0., 0.]);
    }
}
