//! The standard gradient-check cases shared by the element-wise families (`arith.rs`,
//! `pointwise.rs`, `activations.rs`).

use om_core::{Case, Result, Tensor};

/// The standard cases of a unary map: contiguous, transposed and strided inputs drawn by
/// `input(shape, seed)`.
pub(crate) fn unary_cases(
    f: impl Fn(&Tensor) -> Result<Tensor> + Copy + Send + Sync + 'static,
    input: fn(&[usize], u64) -> Tensor,
) -> Vec<Case> {
    vec![
        Case::new("contiguous", vec![input(&[3, 4], 1)], move |x| f(&x[0])),
        Case::new("transposed", vec![input(&[4, 3], 2)], move |x| f(&crate::transpose(&x[0], 0, 1)?)),
        Case::new("strided", vec![input(&[3, 8], 3)], move |x| f(&crate::slice(&x[0], 1, 1, 8, 3)?)),
    ]
}
