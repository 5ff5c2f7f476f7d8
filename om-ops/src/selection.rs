//! Selecting along one axis: `argmax`/`argmin` (Int32 winners, never recorded; one axis or
//! all elements flattened), `take_along_axis` (the recorded gather that carries the gradient
//! to the winner) and `max_dim`/`min_dim` (compositions returning values and indices).
//! PyTorch's CPU semantics: the first maximum (minimum) along the axis wins a tie, and the
//! first NaN wins over every number. Every loop here is scalar code (the same on every
//! path), so exact mode needs nothing special. The winner search ([`Extreme`], `winners`) is
//! shared with `amax`/`amin` in `reductions.rs`.

use crate::indexing::{expect_i32, gather_along, scatter_along};
use crate::reductions::{checked_plan, Plan};
use om_core::layout::normalize_axis;
use om_core::{Case, DType, Error, Result, Tensor};
use om_macros::op;

/// Which extreme a selecting reduction looks for.
#[derive(Clone, Copy)]
pub(crate) enum Extreme {
    Max,
    Min,
}

impl Extreme {
    /// Whether `v` replaces the current (non-NaN) winner `best`: strictly better, or NaN
    /// (PyTorch's `!(v <= best)` for max, `!(v >= best)` for min; a NaN winner stays).
    pub(crate) fn beats(self, v: f32, best: f32) -> bool {
        v.is_nan()
            || match self {
                Extreme::Max => v > best,
                Extreme::Min => v < best,
            }
    }
}

/// Index of the winner of each row `xs[o, .., i]` (`len` elements `inner` apart).
pub(crate) fn winners(xs: &[f32], outer: usize, len: usize, inner: usize, e: Extreme, mut each: impl FnMut(usize, usize)) {
    for o in 0..outer {
        for i in 0..inner {
            let row = o * len * inner + i;
            let (mut best, mut at) = (xs[row], 0);
            if !best.is_nan() {
                for j in 1..len {
                    let v = xs[row + j * inner];
                    if e.beats(v, best) {
                        (best, at) = (v, j);
                        if v.is_nan() {
                            break;
                        }
                    }
                }
            }
            each(o * inner + i, at);
        }
    }
}

/// Checks `x` is f32 with a non-empty reduced extent and returns the reduction's plan
/// (one axis, or all of them as one row: always read in place as `[outer, len, inner]`).
fn checked_geometry(op: &'static str, x: &Tensor, axis: Option<isize>, keep_dim: bool) -> Result<Plan> {
    checked_plan(op, x, &axis.into(), keep_dim, "there is no extreme to select")
}

/// `argmax`/`argmin`: the winner's position along `axis` (flat row-major index for `None`).
fn arg_extreme(op: &'static str, x: &Tensor, axis: Option<isize>, keep_dim: bool, e: Extreme) -> Result<Tensor> {
    let Plan { outer, len, inner, out_shape, .. } = checked_geometry(op, x, axis, keep_dim)?;
    if i32::try_from(len).is_err() {
        return Err(Error::argument(op, format!("a reduced extent of {len} is too large for i32 indices")));
    }
    x.try_with_f32(|xs| {
        Tensor::build_i32(&out_shape, |out| {
            winners(xs, outer, len, inner, e, |k, at| out[k] = at as i32);
            Ok(())
        })
    })?
}

/// Int32 results are never recorded, so this rule is unreachable; it refuses clearly.
fn no_gradient(op: &'static str) -> Result<()> {
    Err(Error::argument(op, "the result is an Int32 index and has no gradient"))
}

/// A case through an index result: `x · f32(argmax(x))`, piecewise linear in `x` (the
/// indices are constants away from ties); the inputs are distinct with gaps of 0.05.
fn index_case(name: &'static str, shape: &[usize], seed: u64, f: fn(&Tensor) -> Result<Tensor>) -> Case {
    Case::new(name, vec![Case::distinct_input(shape, seed)], move |x| crate::mul(&x[0], &crate::cast(&f(&x[0])?, DType::F32)?))
}

/// Position of the largest element along `axis` (of all elements, flattened row-major, for
/// `None`), as Int32: PyTorch's `x.argmax(dim, keepdim)`. Ties: the first occurrence; NaN:
/// the first NaN (PyTorch CPU). Backward: none; the Int32 result is not recorded.
///
/// # Examples
///
/// ```
/// use om_ops::{argmax, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 5.0, 2.0, 7.0, 0.0, 3.0], &[2, 3])?;
/// assert_eq!(argmax(&x, -1, false)?.to_vec_i32(), [1, 0]);
/// assert_eq!(argmax(&x, None, false)?.to_vec_i32(), [3]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [axis: Option<isize>, keep_dim: bool])]
pub mod argmax {
    use super::*;

    pub fn forward(x: &Tensor, axis: impl Into<Option<isize>>, keep_dim: bool) -> Result<Tensor> {
        arg_extreme(NAME, x, axis.into(), keep_dim, Extreme::Max)
    }

    fn backward(_r: &Record, _g: &Tensor, _d: &mut Grads) -> Result<()> {
        no_gradient(NAME)
    }

    fn cases() -> Vec<Case> {
        vec![
            index_case("axis1_keep_dim", &[3, 5], 1, |x| super::argmax(x, 1, true)),
            index_case("all_keep_dim", &[2, 3], 2, |x| super::argmax(x, None, true)),
        ]
    }
}

/// Position of the smallest element along `axis` (flattened for `None`), as Int32:
/// PyTorch's `x.argmin(dim, keepdim)`. Ties: the first occurrence; NaN: the first NaN
/// (PyTorch CPU). Backward: none; the Int32 result is not recorded.
///
/// # Examples
///
/// ```
/// use om_ops::{argmin, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 5.0, 2.0, 7.0, 0.0, 3.0], &[2, 3])?;
/// assert_eq!(argmin(&x, 0, true)?.to_vec_i32(), [0, 1, 0]);
/// assert_eq!(argmin(&x, None, false)?.to_vec_i32(), [4]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [axis: Option<isize>, keep_dim: bool])]
pub mod argmin {
    use super::*;

    pub fn forward(x: &Tensor, axis: impl Into<Option<isize>>, keep_dim: bool) -> Result<Tensor> {
        arg_extreme(NAME, x, axis.into(), keep_dim, Extreme::Min)
    }

    fn backward(_r: &Record, _g: &Tensor, _d: &mut Grads) -> Result<()> {
        no_gradient(NAME)
    }

    fn cases() -> Vec<Case> {
        vec![
            index_case("axis0_keep_dim", &[4, 3], 3, |x| super::argmin(x, 0, true)),
            index_case("all", &[2, 3], 4, |x| super::argmin(x, None, false)),
        ]
    }
}

// ===== gather =====

/// `y[.., j, ..] = x[.., indices[.., j, ..], ..]` along `axis` (PyTorch's `take_along_dim`
/// / `gather`, without broadcasting): `indices` is Int32 with `x`'s rank and shape except
/// along `axis`. Backward: `g` scatter-added into zeros of `x`'s shape at the indices
/// (repeated indices sum in f64 in element order).
///
/// # Examples
///
/// ```
/// use om_ops::{take_along_axis, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
/// let i = Tensor::from_vec_i32(vec![2, 0, 1, 1], &[2, 2])?;
/// assert_eq!(take_along_axis(&x, &i, 1)?.to_vec(), [3.0, 1.0, 5.0, 5.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [indices], attrs = [axis: isize])]
pub mod take_along_axis {
    use super::*;

    pub fn forward(x: &Tensor, indices: &Tensor, axis: isize) -> Result<Tensor> {
        x.expect_f32(NAME, "x")?;
        expect_i32(NAME, "indices", indices)?;
        let (xs, is) = (x.shape(), indices.shape());
        let a = normalize_axis(NAME, axis, xs.len(), false)?;
        let same = xs.len() == is.len() && xs.iter().zip(is).enumerate().all(|(d, (p, q))| d == a || p == q);
        if !same {
            return Err(Error::shape(NAME, &[xs, is], format!("`indices` must have the shape of `x` except along axis {a}")));
        }
        gather_along(NAME, x, indices, a)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let a = normalize_axis(NAME, r.axis, r.input_shapes[0].len(), false)?;
        d.x(scatter_along(NAME, g, r.indices(), &r.input_shapes[0], a)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let idx = |v: Vec<i32>, shape: &[usize]| Tensor::from_vec_i32(v, shape).unwrap_or_else(|e| panic!("{e}"));
        let (i1, i2) = (idx(vec![2, 0, 0, 1, 3, 3], &[2, 3]), idx(vec![1, 0, 2, 2, 0, 1, 1, 1], &[2, 4]));
        vec![
            Case::new("axis1_repeated", vec![Case::input(&[2, 4], -1.0, 1.0, 1)], move |x| super::take_along_axis(&x[0], &i1, 1)),
            Case::new("transposed_axis0", vec![Case::input(&[4, 3], -1.0, 1.0, 2)], move |x| {
                super::take_along_axis(&crate::transpose(&x[0], 0, 1)?, &i2, 0)
            }),
        ]
    }
}

/// Largest element along `axis` and its position (Int32): `(take_along_axis(x, i, axis),
/// i)` with `i = argmax(x, axis)`, squeezed unless `keep_dim`. Ties: the first occurrence;
/// NaN propagates (the first NaN wins), as PyTorch's `max(x, dim)` on CPU.
/// Backward: through `take_along_axis`, `g` to the winner, zero elsewhere.
///
/// # Examples
///
/// ```
/// use om_ops::{max_dim, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 5.0, 2.0, 7.0, 0.0, 3.0], &[2, 3])?;
/// let (values, indices) = max_dim(&x, 1, false)?;
/// assert_eq!((values.to_vec(), indices.to_vec_i32()), (vec![5.0, 7.0], vec![1, 0]));
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(composition)]
pub mod max_dim {
    use super::*;

    pub fn forward(x: &Tensor, axis: isize, keep_dim: bool) -> Result<(Tensor, Tensor)> {
        select_dim(NAME, x, axis, keep_dim, crate::argmax)
    }

    fn cases() -> Vec<Case> {
        select_cases(super::max_dim)
    }
}

/// Smallest element along `axis` and its position (Int32), as [`max_dim()`] with the order
/// reversed (first occurrence on ties, NaN propagates). Backward: through
/// `take_along_axis`, `g` to the winner.
///
/// # Examples
///
/// ```
/// use om_ops::{min_dim, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 5.0, 2.0, 7.0, 0.0, 3.0], &[2, 3])?;
/// let (values, indices) = min_dim(&x, 0, true)?;
/// assert_eq!((values.shape(), indices.to_vec_i32()), (&[1, 3][..], vec![0, 1, 0]));
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(composition)]
pub mod min_dim {
    use super::*;

    pub fn forward(x: &Tensor, axis: isize, keep_dim: bool) -> Result<(Tensor, Tensor)> {
        select_dim(NAME, x, axis, keep_dim, crate::argmin)
    }

    fn cases() -> Vec<Case> {
        select_cases(super::min_dim)
    }
}

pub(crate) type ArgFn = fn(&Tensor, Option<isize>, bool) -> Result<Tensor>;

/// Values and indices of `max_dim`/`min_dim`.
fn select_dim(op: &'static str, x: &Tensor, axis: isize, keep_dim: bool, arg: ArgFn) -> Result<(Tensor, Tensor)> {
    checked_geometry(op, x, Some(axis), keep_dim)?;
    let idx = arg(x, Some(axis), true)?;
    let values = crate::take_along_axis(x, &idx, axis)?;
    if keep_dim {
        return Ok((values, idx));
    }
    let a = normalize_axis(op, axis, x.shape().len(), false)? as isize;
    Ok((crate::squeeze(&values, a)?, crate::squeeze(&idx, a)?))
}

fn select_cases(f: fn(&Tensor, isize, bool) -> Result<(Tensor, Tensor)>) -> Vec<Case> {
    vec![
        Case::new("axis_last", vec![Case::distinct_input(&[3, 5], 1)], move |x| Ok(f(&x[0], -1, false)?.0)),
        Case::new("axis0_keep_dim", vec![Case::distinct_input(&[4, 2, 3], 2)], move |x| Ok(f(&x[0], 0, true)?.0)),
        Case::new("transposed", vec![Case::distinct_input(&[4, 3], 3)], move |x| Ok(f(&crate::transpose(&x[0], 0, 1)?, 1, false)?.0)),
        Case::new("strided", vec![Case::distinct_input(&[3, 8], 4)], move |x| Ok(f(&crate::slice(&x[0], 1, 1, None, 2)?, 0, false)?.0)),
    ]
}
