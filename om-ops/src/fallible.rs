//! Reading optional operands through the pool's fallible path: [`with_f32_opt`] is
//! [`Tensor::try_with_f32`] for an optional tensor (a bias, γ, β), so a refused gathered
//! copy is an `Error::OutOfMemory` like every other buffer an operator requests.

use om_core::{Result, Tensor};

/// Runs `f` on the values of `t` in row-major order (`None` when `t` is absent); fails with
/// `Error::OutOfMemory` (naming no operator yet) if a gathered copy is refused.
pub(crate) fn with_f32_opt<R>(t: Option<&Tensor>, f: impl FnOnce(Option<&[f32]>) -> R) -> Result<R> {
    match t {
        Some(t) => t.try_with_f32(|s| f(Some(s))),
        None => Ok(f(None)),
    }
}
