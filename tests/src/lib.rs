//! Shared helpers for the cross-cutting tests.

use om_core::{DType, Result, Tensor};
use std::any::Any;

/// `t` with each axis in `axes` resized to `len`, its values read with indices wrapped
/// around the old length (so indices stay in range and values in their domain); a fresh
/// leaf requiring gradients when `t` did.
pub fn resized(t: &Tensor, axes: &[usize], len: usize) -> Result<Tensor> {
    let mut shape = t.shape().to_vec();
    for &a in axes {
        shape[a] = len;
    }
    reshaped_wrapping(t, &shape)
}

/// `t`'s values at a new shape of the same rank, each index wrapped around the old axis
/// length; a fresh leaf requiring gradients when `t` did.
pub fn reshaped_wrapping(t: &Tensor, shape: &[usize]) -> Result<Tensor> {
    let old = t.shape();
    assert_eq!(old.len(), shape.len(), "reshaped_wrapping keeps the rank");
    let n: usize = shape.iter().product();
    let source = |flat: usize| {
        let (mut rem, mut src, mut stride) = (flat, 0, 1);
        for a in (0..shape.len()).rev() {
            let i = rem % shape[a];
            rem /= shape[a];
            src += (i % old[a].max(1)) * stride;
            stride *= old[a];
        }
        src
    };
    let fresh = match t.dtype() {
        DType::F32 => {
            let v = t.to_vec();
            Tensor::from_vec((0..n).map(|k| v[source(k)]).collect(), shape)?
        }
        DType::I32 => {
            let v = t.to_vec_i32();
            Tensor::from_vec_i32((0..n).map(|k| v[source(k)]).collect(), shape)?
        }
    };
    if t.needs_grad() {
        fresh.requires_grad()
    } else {
        Ok(fresh)
    }
}

/// The text of a caught panic's payload.
pub fn panic_message(p: &(dyn Any + Send)) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}
