//! The triangular parts of matrices: `tril` keeps the elements on and below the diagonal
//! `diagonal` of the last two axes and zeroes the rest, `triu` those on and above it
//! (PyTorch's `torch.tril`/`torch.triu`; batch axes in front are kept). Diagonal `0` is the
//! main one, positive `k` the `k`-th above it, negative below. The dropped elements become
//! `+0.0` whatever they held (NaN and infinities included): a selection, not a product.
//! Backward: `g` with the same elements dropped, so both modes and every thread count give
//! the same bits.

use om_core::{Case, Error, Result, Tensor};
use om_macros::op;

/// Which triangle an operator keeps.
#[derive(Clone, Copy)]
enum Keep {
    /// On and below the diagonal (`col − row ≤ k`).
    Lower,
    /// On and above the diagonal (`col − row ≥ k`).
    Upper,
}

/// `x` with the elements outside the kept triangle of each matrix (the last two axes) set
/// to zero; `what` names the argument in errors.
fn triangle(op: &'static str, what: &'static str, x: &Tensor, diagonal: i64, keep: Keep) -> Result<Tensor> {
    x.expect_f32(op, what)?;
    let shape = x.shape();
    if shape.len() < 2 {
        return Err(Error::shape(op, &[shape], format!("`{what}` must have at least 2 dimensions (a matrix, or a batch of them)")));
    }
    let (rows, cols) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    let kept = |r: usize, c: usize| {
        let offset = c as i64 - r as i64;
        match keep {
            Keep::Lower => offset <= diagonal,
            Keep::Upper => offset >= diagonal,
        }
    };
    x.try_with_f32(|xv| {
        Tensor::build_f32(shape, |out| {
            // `max(1)`: a zero-size input has no matrices to visit.
            let size = (rows * cols).max(1);
            for (o, i) in out.chunks_mut(size).zip(xv.chunks(size)) {
                for r in 0..rows {
                    for c in 0..cols {
                        o[r * cols + c] = if kept(r, c) { i[r * cols + c] } else { 0.0 };
                    }
                }
            }
            Ok(())
        })
    })?
}

/// Cases shared by `tril` and `triu`: a square matrix, a wide batch through a transposed
/// view, and diagonals off the main one on both sides and past the matrix.
fn triangle_cases(f: fn(&Tensor, i64) -> Result<Tensor>) -> Vec<Case> {
    vec![
        Case::new("square_main_diagonal", vec![Case::input(&[4, 4], -1.0, 1.0, 1)], move |x| f(&x[0], 0)),
        Case::new("batch_wide_above", vec![Case::input(&[2, 3, 5], -1.0, 1.0, 2)], move |x| f(&x[0], 1)),
        Case::new("tall_transposed_below", vec![Case::input(&[3, 5], -1.0, 1.0, 3)], move |x| f(&crate::transpose(&x[0], 0, 1)?, -2)),
        Case::new("past_the_matrix", vec![Case::input(&[2, 3], -1.0, 1.0, 4)], move |x| crate::add(&f(&x[0], 7)?, &f(&x[0], -7)?)),
    ]
}

/// The lower triangle of each matrix in `x` (the last two axes): elements with
/// `col − row ≤ diagonal` kept, the rest zero (PyTorch's `torch.tril(x, diagonal)`).
/// Backward: `tril(g, diagonal)`.
///
/// # Examples
///
/// ```
/// use om_ops::{tril, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
/// assert_eq!(tril(&x, 0)?.to_vec(), [1.0, 0.0, 0.0, 4.0, 5.0, 0.0]);
/// assert_eq!(tril(&x, 1)?.to_vec(), [1.0, 2.0, 0.0, 4.0, 5.0, 6.0]);
/// assert!(tril(&Tensor::ones([3])?, 0).is_err()); // needs a matrix
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [diagonal: i64])]
pub mod tril {
    use super::*;

    pub fn forward(x: &Tensor, diagonal: i64) -> Result<Tensor> {
        triangle(NAME, "x", x, diagonal, Keep::Lower)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(triangle(NAME, "g", g, r.diagonal, Keep::Lower)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        triangle_cases(super::tril)
    }
}

/// The upper triangle of each matrix in `x` (the last two axes): elements with
/// `col − row ≥ diagonal` kept, the rest zero (PyTorch's `torch.triu(x, diagonal)`).
/// Backward: `triu(g, diagonal)`.
///
/// # Examples
///
/// ```
/// use om_ops::{triu, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
/// assert_eq!(triu(&x, 0)?.to_vec(), [1.0, 2.0, 3.0, 0.0, 5.0, 6.0]);
/// assert_eq!(triu(&x, -1)?.to_vec(), x.to_vec());
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [diagonal: i64])]
pub mod triu {
    use super::*;

    pub fn forward(x: &Tensor, diagonal: i64) -> Result<Tensor> {
        triangle(NAME, "x", x, diagonal, Keep::Upper)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(triangle(NAME, "g", g, r.diagonal, Keep::Upper)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        triangle_cases(super::triu)
    }
}

#[cfg(test)]
mod oracle_tests {
    use super::{tril, triu};
    use crate::oracle::{assert_close, both_modes, Oracle};

    #[test]
    fn tril_and_triu_match_pytorch() {
        let o = Oracle::load_file("triangular", "tools/oracle_triangular.py");
        both_modes(|| {
            for (name, k) in [("square", 0), ("batch_above", 2), ("tall_below", -1), ("wide_below", -3), ("past", 9), ("special", 0)] {
                let x = o.get(&format!("{name}_x"));
                for (op, y) in [("tril", tril(&x, k).unwrap()), ("triu", triu(&x, k).unwrap())] {
                    let key = format!("{name}_{op}");
                    let want = o.get(&format!("{key}_y"));
                    assert_close(&format!("{key}_y"), &y, &want);
                    // A selection gives PyTorch's bits, except NaN payloads (exact mode writes
                    // the canonical NaN).
                    let bits = |t: &om_core::Tensor| {
                        t.to_vec().iter().map(|v| if v.is_nan() { u32::MAX } else { v.to_bits() }).collect::<Vec<_>>()
                    };
                    assert_eq!(bits(&y), bits(&want), "{key}: not PyTorch's bits");
                    if o.has(&format!("{key}_gx")) {
                        o.check_grads(&key, &y, &[("x", &x)]);
                    }
                }
            }
        });
    }
}
