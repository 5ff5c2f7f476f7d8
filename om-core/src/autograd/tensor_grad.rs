//! The gradient methods of [`Tensor`]: marking leaves ([`Tensor::requires_grad`]),
//! reading the graph ([`Tensor::needs_grad`], [`Tensor::is_leaf`],
//! [`Tensor::grad_fn_name`]), the accumulated gradient ([`Tensor::grad`],
//! [`Tensor::zero_grad`], [`Tensor::clear_grad`]) and running the engine
//! ([`Tensor::backward`], [`Tensor::backward_with`]).
//!
//! ```
//! use om_core::Tensor;
//! let x = Tensor::from_vec(vec![3.0], &[1])?.requires_grad()?;
//! assert!(x.is_leaf() && x.needs_grad() && x.grad().is_none());
//! x.backward()?; // a leaf's own gradient is the seed, 1
//! assert_eq!(x.grad().map(|g| g.to_vec()), Some(vec![1.0]));
//! x.zero_grad()?;
//! assert_eq!(x.grad().map(|g| g.to_vec()), Some(vec![0.0]));
//! # Ok::<(), om_core::Error>(())
//! ```

use super::{Meta, NodeRef};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{Inner, Tensor};
use std::sync::Arc;

impl Tensor {
    pub(crate) fn meta(&self) -> std::sync::MutexGuard<'_, Meta> {
        self.0.meta.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn inner_arc(&self) -> &Arc<Inner> {
        &self.0
    }

    /// Marks this tensor as a leaf that accumulates gradients (PyTorch's
    /// `requires_grad_()`). Only `f32` tensors can require gradients.
    pub fn requires_grad(self) -> Result<Tensor> {
        self.set_requires_grad(true)?;
        Ok(self)
    }

    /// Turns gradient tracking of a leaf on or off.
    pub fn set_requires_grad(&self, on: bool) -> Result<()> {
        if on && self.dtype() != DType::F32 {
            return Err(Error::DType { op: "requires_grad", arg: "self", expected: DType::F32, got: self.dtype() });
        }
        let mut m = self.meta();
        if m.grad_fn.is_some() {
            return Err(Error::argument("requires_grad", "only leaves can change requires_grad; call .detach() first to make a new leaf"));
        }
        m.requires_grad = on;
        Ok(())
    }

    /// Whether gradients flow to or through this tensor.
    pub fn needs_grad(&self) -> bool {
        let m = self.meta();
        m.requires_grad || m.grad_fn.is_some()
    }

    /// Whether this tensor is a leaf (not produced by a recorded operator).
    pub fn is_leaf(&self) -> bool {
        self.meta().grad_fn.is_none()
    }

    /// The name of the operator that produced this tensor, if it was recorded.
    pub fn grad_fn_name(&self) -> Option<&'static str> {
        self.meta().grad_fn.as_ref().map(|n| n.name())
    }

    pub(crate) fn grad_fn(&self) -> Option<NodeRef> {
        self.meta().grad_fn.clone()
    }

    /// The accumulated gradient of a leaf.
    pub fn grad(&self) -> Option<Tensor> {
        self.meta().grad.clone()
    }

    /// Zeroes the accumulated gradient in place (keeps its buffer).
    pub fn zero_grad(&self) -> Result<()> {
        let g = self.grad();
        match g {
            Some(g) => g.fill_(0.0),
            None => Ok(()),
        }
    }

    /// Frees the accumulated gradient.
    pub fn clear_grad(&self) {
        self.meta().grad = None;
    }

    /// Back-propagates from this one-element tensor (seed 1) and releases the graph.
    pub fn backward(&self) -> Result<()> {
        super::engine::backward(self, None, false)
    }

    /// Back-propagates `gradient` (of this tensor's shape; `None` seeds a one-element
    /// tensor with 1). With `retain_graph` the records are kept for another pass.
    pub fn backward_with(&self, gradient: Option<&Tensor>, retain_graph: bool) -> Result<()> {
        super::engine::backward(self, gradient, retain_graph)
    }
}
