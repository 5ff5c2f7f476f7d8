//! The engine (spec section 2): orders the records reachable from the root by an iterative
//! post-order depth-first search over input edges (in input order), runs them in reverse,
//! keeps one pending gradient per record summed in emission order, accumulates into leaves,
//! sums broadcast gradients down to each input's shape, and releases records unless asked
//! to retain them. Runs with recording off.
//!
//! A pass that fails (a released record, found before any work; a saved tensor changed in
//! place, found when its record runs; an error inside a rule, such as a refused allocation)
//! leaves every leaf gradient as it was: the gradients meant for leaves are held back
//! (summed exactly as they would have been summed into `.grad`, so the bits are the same)
//! and written only once every record has run. Records that ran before the failure are
//! released as usual unless `retain_graph`, so that graph cannot be run again (as in
//! PyTorch); with `retain_graph` the pass can be retried.
//!
//! The traversal's vectors, maps and the gradient sink are kept per thread and reused, so
//! a warm step's backward pass does not allocate them again.

use super::keys::{AddrMap, AddrSet};
use super::{lock, Backward, Edge, GradSink, NoGradGuard, NodeRef};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::basic;
use crate::tensor::{Inner, Tensor};
use std::cell::RefCell;
use std::sync::Arc;

/// The engine's working set, reused across calls on one thread (cleared after each).
#[derive(Default)]
struct Scratch {
    order: Vec<NodeRef>,
    seen: AddrSet<*const ()>,
    stack: Vec<(NodeRef, usize)>,
    index: AddrMap<*const (), usize>,
    pending: Vec<Option<Tensor>>,
    sink: GradSink,
    leaves: LeafUpdates,
}

/// The leaf gradients a pass will write, held back until every record has run.
#[derive(Default)]
struct LeafUpdates {
    /// Each leaf reached, in first-emission order, with its new gradient when it had none
    /// (built as emissions arrive: the first adopted or copied, the rest added into it, as
    /// `.grad` itself would have been).
    leaves: Vec<(Arc<Inner>, Option<Tensor>)>,
    index: AddrMap<*const Inner, usize>,
    /// Emissions to leaves that already had a gradient: (leaf position, contiguous
    /// gradient), in emission order, added into `.grad` at the end.
    adds: Vec<(usize, Tensor)>,
}

impl LeafUpdates {
    fn clear(&mut self) {
        self.leaves.clear();
        self.index.clear();
        self.adds.clear();
    }

    /// Holds back one emission to a leaf.
    fn emit(&mut self, leaf: &Arc<Inner>, grad: Tensor) -> Result<()> {
        let next = self.leaves.len();
        let i = *self.index.entry(Arc::as_ptr(leaf)).or_insert(next);
        if i == next {
            let fresh = lock(&leaf.meta).grad.is_none();
            self.leaves.push((leaf.clone(), None));
            if fresh {
                self.leaves[i].1 = Some(private_copy(grad)?);
                return Ok(());
            }
        }
        match &self.leaves[i].1 {
            Some(acc) => basic::add_assign(acc, &grad),
            None => {
                let grad = if grad.is_contiguous() { grad } else { basic::copy_contiguous(&grad)? };
                self.adds.push((i, grad));
                Ok(())
            }
        }
    }

    /// Writes the held-back gradients into the leaves.
    fn apply(&mut self) -> Result<()> {
        for (leaf, fresh) in &mut self.leaves {
            if let Some(g) = fresh.take() {
                install_leaf_grad(leaf, g)?;
            }
        }
        for (i, g) in self.adds.drain(..) {
            install_leaf_grad(&self.leaves[i].0, g)?;
        }
        Ok(())
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Owns the thread's scratch during one pass (a nested pass gets an empty one) and gives it
/// back emptied, keeping the capacity, however the pass ends.
struct Borrowed(Scratch);

impl Borrowed {
    fn take() -> Borrowed {
        Borrowed(SCRATCH.try_with(|s| std::mem::take(&mut *s.borrow_mut())).unwrap_or_default())
    }
}

impl Drop for Borrowed {
    fn drop(&mut self) {
        let mut s = std::mem::take(&mut self.0);
        s.order.clear();
        s.seen.clear();
        s.stack.clear();
        s.index.clear();
        s.pending.clear();
        s.sink.reset(&[]);
        s.leaves.clear();
        let _ = SCRATCH.try_with(|c| *c.borrow_mut() = s);
    }
}

/// Back-propagates from `root` (see [`Tensor::backward_with`]).
pub(crate) fn backward(root: &Tensor, gradient: Option<&Tensor>, retain_graph: bool) -> Result<()> {
    const OP: &str = "backward";
    if !root.needs_grad() {
        return Err(Error::NoGrad { op: OP });
    }
    let seed = match gradient {
        None => {
            if root.numel() != 1 {
                return Err(Error::shape(
                    OP,
                    &[root.shape()],
                    "backward without a gradient needs a one-element tensor; pass a gradient of the tensor's shape",
                ));
            }
            Tensor::full(root.shape(), 1.0)?
        }
        Some(g) => {
            if g.shape() != root.shape() {
                return Err(Error::shape(OP, &[root.shape(), g.shape()], "the gradient must have the tensor's shape"));
            }
            if g.dtype() != DType::F32 {
                return Err(Error::DType { op: OP, arg: "gradient", expected: DType::F32, got: g.dtype() });
            }
            basic::copy_contiguous(g).map_err(|e| e.with_op(OP))?
        }
    };
    let _no_grad = NoGradGuard::new();
    let Some(root_node) = root.grad_fn() else {
        // A leaf: the seed is its gradient.
        return install_leaf_grad(root.inner_arc(), seed).map_err(|e| e.with_op(OP));
    };

    let mut scratch = Borrowed::take();
    let Scratch { order, seen, stack, index, pending, sink, leaves } = &mut scratch.0;
    post_order(&root_node, order, seen, stack);
    // A released record anywhere in the graph fails the pass before any work is done.
    for node in order.iter() {
        if released(node) {
            return Err(Error::GraphReleased { op: node.name() });
        }
    }
    index.extend(order.iter().enumerate().map(|(i, n)| (n.key(), i)));
    pending.resize(order.len(), None);
    pending[order.len() - 1] = Some(seed);

    for i in (0..order.len()).rev() {
        let node = &order[i];
        let Some(g) = pending[i].take() else {
            // No gradient reached this record (its consumers emitted none for it).
            if !retain_graph {
                release(node);
            }
            continue;
        };
        sink.reset(node.edges());
        let mut g = Some(g);
        node.with_record(&mut |slot| {
            let record = slot.get().ok_or(Error::GraphReleased { op: node.name() })?;
            record.check_versions()?;
            // Dropped as soon as the rule has run (the closure runs once).
            if let Some(g) = g.take() {
                // A rule's own errors name its operator; one from a shared buffer helper
                // (a refused allocation) gets the name here.
                record.backward(&g, sink).map_err(|e| e.with_op(node.name()))?;
            }
            // The record is released once its input shapes have fitted the gradients (also
            // when routing them fails).
            let routed = route(node, record, sink, index, pending, leaves).map_err(|e| e.with_op(node.name()));
            if !retain_graph {
                slot.release();
            }
            routed
        })?;
    }
    leaves.apply().map_err(|e| e.with_op(OP))
}

/// Fits each gradient `record`'s rule emitted to its input's shape and sends it along its
/// edge: into the pending gradient of the record that produced the input, or held back for
/// a leaf.
fn route(
    node: &NodeRef,
    record: &dyn Backward,
    sink: &mut GradSink,
    index: &AddrMap<*const (), usize>,
    pending: &mut [Option<Tensor>],
    leaves: &mut LeafUpdates,
) -> Result<()> {
    for (j, edge) in node.edges().iter().enumerate() {
        let Some(edge) = edge else { continue };
        let Some(grad) = sink.grads[j].take() else {
            return Err(Error::argument(node.name(), format!("the backward rule emitted no gradient for input {j}, which needs one")));
        };
        let grad = fit_to_input(node.name(), record.input_shape(j), j, grad)?;
        let grad = super::mutation::apply(node.name(), j, grad)?;
        match edge {
            Edge::Node(target) => {
                let t = index[&target.key()];
                pending[t] = Some(match pending[t].take() {
                    None => grad,
                    Some(acc) => basic::add_same_shape(&acc, &grad)?,
                });
            }
            Edge::Leaf(leaf) => leaves.emit(leaf, grad)?,
        }
    }
    Ok(())
}

/// Whether a node's record was released.
fn released(node: &NodeRef) -> bool {
    let mut released = false;
    let _ = node.with_record(&mut |slot| {
        released = slot.get().is_none();
        Ok(())
    });
    released
}

/// Releases a node's record.
fn release(node: &NodeRef) {
    let _ = node.with_record(&mut |slot| {
        slot.release();
        Ok(())
    });
}

/// Iterative post-order DFS over node edges in input order into `order` (empty on entry);
/// the root comes last.
fn post_order(root: &NodeRef, order: &mut Vec<NodeRef>, seen: &mut AddrSet<*const ()>, stack: &mut Vec<(NodeRef, usize)>) {
    stack.push((root.clone(), 0));
    seen.insert(root.key());
    while let Some((node, next)) = stack.last_mut() {
        let node = node.clone();
        if *next < node.edges().len() {
            let e = *next;
            *next += 1;
            if let Some(Edge::Node(child)) = &node.edges()[e] {
                if seen.insert(child.key()) {
                    stack.push((child.clone(), 0));
                }
            }
        } else {
            stack.pop();
            order.push(node);
        }
    }
}

/// Checks an emitted gradient against its input's shape, summing a broadcast gradient
/// down to the input's shape (the engine does this once for every rule).
fn fit_to_input(op: &'static str, shape: &[usize], j: usize, grad: Tensor) -> Result<Tensor> {
    if grad.dtype() != DType::F32 {
        return Err(Error::DType { op, arg: "gradient", expected: DType::F32, got: grad.dtype() });
    }
    if grad.shape() == shape {
        return Ok(grad);
    }
    if !broadcasts_to(shape, grad.shape()) {
        return Err(Error::shape(
            op,
            &[shape, grad.shape()],
            format!("the backward rule emitted a gradient for input {j} that does not broadcast from the input's shape"),
        ));
    }
    basic::sum_to(&grad, shape)
}

fn broadcasts_to(from: &[usize], to: &[usize]) -> bool {
    from.len() <= to.len() && from.iter().rev().zip(to.iter().rev()).all(|(&f, &t)| f == t || f == 1)
}

/// `grad` as a contiguous tensor no one else sees: itself when it already is one (one
/// handle, sole owner of a contiguous f32 buffer), else a copy.
fn private_copy(grad: Tensor) -> Result<Tensor> {
    if grad.is_sole_contiguous_owner() {
        Ok(grad)
    } else {
        basic::copy_contiguous(&grad)
    }
}

/// Adds `grad` into a leaf's gradient, or makes it the gradient (privately) if it has none.
fn install_leaf_grad(leaf: &Arc<Inner>, grad: Tensor) -> Result<()> {
    let mut m = lock(&leaf.meta);
    match &m.grad {
        None => m.grad = Some(private_copy(grad)?),
        Some(acc) => return basic::add_assign(acc, &grad),
    }
    if let Some(g) = &m.grad {
        g.forget_observed(); // leaf gradients are never tied to a scope
    }
    Ok(())
}
