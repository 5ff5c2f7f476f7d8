//! Selecting reductions over one axis: `argmax`/`argmin` (Int32 winners, never recorded;
//! one axis or all elements flattened), `take_along_axis` (the recorded gather that carries
//! the gradient to the winner), `max_dim`/`min_dim` (compositions returning values and
//! indices); then the reductions over [`Axes`] (one axis, several, or all with `None`,
//! with `keep_dim`, as `sum`/`mean`): `amax`/`amin` (gradient shared evenly among ties),
//! `logsumexp`, `var`/`std` (and `var_correction`/`std_correction`), and `vector_norm`
//! (ord 1, 2, ∞). PyTorch's CPU semantics: the first maximum (minimum) along the axis wins
//! a tie, and the first NaN wins over every number.
//! Exact mode needs nothing special: every loop here is scalar code (the same on every
//! path), sums are f64 in row-major order of the reduced axes, and `exp`/`log` are
//! `om_core::kernels::math`'s. Several reduced axes are read as `reduce::Plan` says: in place
//! when adjacent, else moved last first.

use crate::indexing::{expect_i32, gather_along, scatter_along};
use crate::reduce::Plan;
use om_core::layout::normalize_axis;
use om_core::{Axes, Case, DType, Error, Result, Tensor};
use om_macros::op;

/// Which extreme a selecting reduction looks for.
#[derive(Clone, Copy)]
enum Extreme {
    Max,
    Min,
}

impl Extreme {
    /// Whether `v` replaces the current (non-NaN) winner `best`: strictly better, or NaN
    /// (PyTorch's `!(v <= best)` for max, `!(v >= best)` for min; a NaN winner stays).
    fn beats(self, v: f32, best: f32) -> bool {
        v.is_nan()
            || match self {
                Extreme::Max => v > best,
                Extreme::Min => v < best,
            }
    }
}

/// The reduction geometry `(outer, len, inner, out_shape)` of `shape` over `axis` (`None`:
/// all elements, as one row).
fn geometry(op: &'static str, shape: &[usize], axis: Option<isize>, keep_dim: bool) -> Result<(usize, usize, usize, Vec<usize>)> {
    match axis {
        None => Ok((1, shape.iter().product(), 1, if keep_dim { vec![1; shape.len()] } else { vec![] })),
        Some(a) => {
            let a = normalize_axis(op, a, shape.len(), false)?;
            let mut out = shape.to_vec();
            if keep_dim {
                out[a] = 1;
            } else {
                out.remove(a);
            }
            Ok((shape[..a].iter().product(), shape[a], shape[a + 1..].iter().product(), out))
        }
    }
}

/// Index of the winner of each row `xs[o, .., i]` (`len` elements `inner` apart).
fn winners(xs: &[f32], outer: usize, len: usize, inner: usize, e: Extreme, mut each: impl FnMut(usize, usize)) {
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

/// Checks `x` is f32 with a non-empty reduced extent and returns the geometry.
fn checked_geometry(op: &'static str, x: &Tensor, axis: Option<isize>, keep_dim: bool) -> Result<(usize, usize, usize, Vec<usize>)> {
    x.expect_f32(op, "x")?;
    let g = geometry(op, x.shape(), axis, keep_dim)?;
    if g.1 == 0 {
        return Err(Error::shape(op, &[x.shape()], "the reduced extent is empty: there is no extreme to select"));
    }
    Ok(g)
}

/// `argmax`/`argmin`: the winner's position along `axis` (flat row-major index for `None`).
fn arg_extreme(op: &'static str, x: &Tensor, axis: Option<isize>, keep_dim: bool, e: Extreme) -> Result<Tensor> {
    let (outer, len, inner, out_shape) = checked_geometry(op, x, axis, keep_dim)?;
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

// ===== winners =====

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

type ArgFn = fn(&Tensor, Option<isize>, bool) -> Result<Tensor>;

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

// ===== extremes with shared ties =====

/// The plan of a reduction over `axes` of `x` (checked f32); unless `what` is empty, an
/// empty reduced extent is refused with `what` as the reason (no extreme of nothing).
fn checked_plan(op: &'static str, x: &Tensor, axes: &Axes, keep_dim: bool, what: &str) -> Result<Plan> {
    x.expect_f32(op, "x")?;
    let plan = Plan::new(op, x.shape(), axes, keep_dim)?;
    if plan.len == 0 && !what.is_empty() {
        return Err(Error::shape(op, &[x.shape()], format!("the reduced extent is empty: {what}")));
    }
    Ok(plan)
}

/// `amax`/`amin` forward: the extreme of each row (NaN propagates).
fn extreme_values(op: &'static str, x: &Tensor, axes: &Axes, keep_dim: bool, e: Extreme) -> Result<Tensor> {
    let plan = checked_plan(op, x, axes, keep_dim, "there is no extreme to select")?;
    let (outer, len, inner) = (plan.outer, plan.len, plan.inner);
    plan.source(x)?.try_with_f32(|xs| {
        Tensor::build_f32(&plan.out_shape, |out| {
            winners(xs, outer, len, inner, e, |k, at| out[k] = xs[(k / inner * len + at) * inner + k % inner]);
            Ok(())
        })
    })?
}

/// `amax`/`amin` backward, PyTorch's formula `(g / count) · mask` with `mask = (x == y)`
/// and `count` the number of ties in the reduced elements (a NaN result has `count = 0`, so
/// its gradient is NaN where `g ≠ 0`, as in PyTorch).
fn shared_grad(op: &'static str, x: &Tensor, y: &Tensor, g: &Tensor, axes: &Axes) -> Result<Tensor> {
    let plan = Plan::new(op, x.shape(), axes, false)?;
    let src = plan.source(x)?;
    let dx = src.try_with_f32(|xs| {
        y.try_with_f32(|ys| {
            g.try_with_f32(|gs| {
                Tensor::build_f32(src.shape(), |dx| {
                    for_rows(plan.outer, plan.len, plan.inner, |k, row| {
                        let count = row.indices().filter(|&i| xs[i] == ys[k]).count() as f32;
                        let share = gs[k] / count;
                        for i in row.indices() {
                            let mask = if xs[i] == ys[k] { 1.0 } else { 0.0 };
                            dx[i] = share * mask;
                        }
                    });
                    Ok(())
                })
            })
        })
    })????;
    plan.restore(&dx)
}

/// Cases for `amax`/`amin`; every input has distinct values (the shared gradient at exact
/// ties is checked against PyTorch by the oracle tests).
fn extreme_cases(f: fn(&Tensor, Axes, bool) -> Result<Tensor>) -> Vec<Case> {
    vec![
        Case::new("all", vec![Case::distinct_input(&[3, 4], 1)], move |x| f(&x[0], Axes::all(), false)),
        Case::new("axis0_keep_dim", vec![Case::distinct_input(&[4, 3], 2)], move |x| f(&x[0], 0.into(), true)),
        Case::new("axis_last", vec![Case::distinct_input(&[2, 3, 5], 3)], move |x| f(&x[0], (-1).into(), false)),
        Case::new("transposed", vec![Case::distinct_input(&[5, 3], 4)], move |x| f(&crate::transpose(&x[0], 0, 1)?, 1.into(), false)),
        Case::new("axes_adjacent", vec![Case::distinct_input(&[2, 3, 4], 5)], move |x| f(&x[0], [1, 2].into(), false)),
        Case::new("axes_apart_keep_dim", vec![Case::distinct_input(&[3, 2, 4], 6)], move |x| f(&x[0], [0, -1].into(), true)),
        Case::new("axes_transposed", vec![Case::distinct_input(&[4, 3, 2], 7)], move |x| {
            f(&crate::transpose(&x[0], 0, 2)?, [0, 2].into(), false)
        }),
    ]
}

/// Largest element over `axes` (one axis, several, or all with `None`; PyTorch's
/// `torch.amax(x, dim, keepdim)`); NaN propagates. An error over zero elements.
/// Backward: `g` shared evenly among the tied maxima, `(g / count) · (x == y)` (PyTorch).
///
/// # Examples
///
/// ```
/// use om_ops::{amax, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 5.0, 2.0, 7.0, 0.0, 3.0], &[1, 2, 3])?;
/// assert_eq!(amax(&x, -1, false)?.to_vec(), [5.0, 7.0]);
/// assert_eq!(amax(&x, [1, 2], false)?.to_vec(), [7.0]);
/// assert_eq!(amax(&x, None, false)?.item()?, 7.0);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x, out], attrs = [axes: Axes, keep_dim: bool])]
pub mod amax {
    use super::*;

    pub fn forward(x: &Tensor, axes: impl Into<Axes>, keep_dim: bool) -> Result<Tensor> {
        extreme_values(NAME, x, &axes.into(), keep_dim, Extreme::Max)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(shared_grad(NAME, r.x(), r.out(), g, &r.axes).map_err(|e| e.with_op(NAME))?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        extreme_cases(super::amax)
    }
}

/// Smallest element over `axes` (one axis, several, or all with `None`; PyTorch's
/// `torch.amin(x, dim, keepdim)`); NaN propagates. An error over zero elements.
/// Backward: `g` shared evenly among the tied minima, `(g / count) · (x == y)` (PyTorch).
///
/// # Examples
///
/// ```
/// use om_ops::{amin, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 5.0, 2.0, 7.0, 0.0, 3.0], &[2, 3])?;
/// assert_eq!(amin(&x, 0, true)?.to_vec(), [1.0, 0.0, 2.0]);
/// assert_eq!(amin(&x, [0, 1], false)?.item()?, 0.0);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x, out], attrs = [axes: Axes, keep_dim: bool])]
pub mod amin {
    use super::*;

    pub fn forward(x: &Tensor, axes: impl Into<Axes>, keep_dim: bool) -> Result<Tensor> {
        extreme_values(NAME, x, &axes.into(), keep_dim, Extreme::Min)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(shared_grad(NAME, r.x(), r.out(), g, &r.axes).map_err(|e| e.with_op(NAME))?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        extreme_cases(super::amin)
    }
}

// ===== smooth and moment reductions =====

/// One reduced row: `len` elements of the input, `step` apart from `start` (row-major).
#[derive(Clone, Copy)]
struct Row {
    start: usize,
    step: usize,
    len: usize,
}

impl Row {
    /// The element indices of the row, in increasing order along the reduced axes.
    fn indices(self) -> impl Iterator<Item = usize> {
        (0..self.len).map(move |j| self.start + j * self.step)
    }
}

/// Calls `each(k, row)` for every reduced row `k` of an `[outer, len, inner]` input.
fn for_rows(outer: usize, len: usize, inner: usize, mut each: impl FnMut(usize, Row)) {
    for o in 0..outer {
        for i in 0..inner {
            each(o * inner + i, Row { start: o * len * inner + i, step: inner, len });
        }
    }
}

/// The shift of a stable log-sum-exp: the row maximum, or 0 when it is infinite (as
/// PyTorch does, so that a row of −∞ gives −∞ and one +∞ gives +∞, not NaN).
fn lse_shift(xs: &[f32], row: impl Iterator<Item = usize>) -> f32 {
    let m = row.map(|r| xs[r]).fold(f32::NEG_INFINITY, |m, v| if !m.is_nan() && Extreme::Max.beats(v, m) { v } else { m });
    if m.is_infinite() {
        0.0
    } else {
        m
    }
}

/// `log Σ exp(x)` over `axes` (one axis, several, or all with `None`; PyTorch's
/// `torch.logsumexp(x, dim, keepdim)`), shifted by the maximum `m` of the reduced elements:
/// `m + log Σ exp(x − m)`, the exponentials summed in f64 in row-major order of the reduced
/// axes; `exp`/`log` are `om_core::kernels::math`'s (the same bits on every path and in
/// both modes). Backward: `g · exp(x − y)` (the softmax of the reduced elements).
///
/// # Examples
///
/// ```
/// use om_ops::{logsumexp, Tensor};
/// let x = Tensor::zeros(&[2, 2, 3])?;
/// let y = logsumexp(&x, [1, 2], false)?; // log(6 · e⁰)
/// assert_eq!(y.shape(), [2]);
/// assert!((y.to_vec()[0] - 6f32.ln()).abs() < 1e-6);
/// assert_eq!(logsumexp(&x, -1, true)?.shape(), [2, 2, 1]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x, out], attrs = [axes: Axes, keep_dim: bool])]
pub mod logsumexp {
    use super::*;
    use om_core::kernels::math::{exp, log};

    pub fn forward(x: &Tensor, axes: impl Into<Axes>, keep_dim: bool) -> Result<Tensor> {
        let plan = checked_plan(NAME, x, &axes.into(), keep_dim, "")?;
        plan.source(x)?.try_with_f32(|xs| {
            Tensor::build_f32(&plan.out_shape, |out| {
                for_rows(plan.outer, plan.len, plan.inner, |k, row| {
                    let m = lse_shift(xs, row.indices());
                    let s: f64 = row.indices().map(|r| exp(xs[r] - m) as f64).sum();
                    out[k] = log(s as f32) + m;
                });
                Ok(())
            })
        })?
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let x = r.x();
        let plan = Plan::new(NAME, x.shape(), &r.axes, false)?;
        let src = plan.source(x)?;
        let dx = src.try_with_f32(|xs| {
            r.out().try_with_f32(|ys| {
                g.try_with_f32(|gs| {
                    Tensor::build_f32(src.shape(), |dx| {
                        for_rows(plan.outer, plan.len, plan.inner, |k, row| row.indices().for_each(|i| dx[i] = gs[k] * exp(xs[i] - ys[k])));
                        Ok(())
                    })
                })
            })
        })????;
        d.x(plan.restore(&dx)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        vec![
            Case::new("all", vec![Case::input(&[3, 4], -2.0, 2.0, 1)], |x| super::logsumexp(&x[0], None, false)),
            Case::new("axis1", vec![Case::input(&[3, 5], -2.0, 2.0, 2)], |x| super::logsumexp(&x[0], 1, false)),
            Case::new("axis0_keep_dim", vec![Case::input(&[4, 2, 3], -2.0, 2.0, 3)], |x| super::logsumexp(&x[0], 0, true)),
            Case::new("transposed", vec![Case::input(&[4, 3], -2.0, 2.0, 4)], |x| {
                super::logsumexp(&crate::transpose(&x[0], 0, 1)?, -1, false)
            }),
            Case::new("expanded", vec![Case::input(&[3, 1], -2.0, 2.0, 5)], |x| super::logsumexp(&crate::expand(&x[0], [3, 4])?, 1, false)),
            Case::new("axes_adjacent", vec![Case::input(&[2, 3, 4], -2.0, 2.0, 6)], |x| super::logsumexp(&x[0], [1, 2], false)),
            Case::new("axes_apart_keep_dim", vec![Case::input(&[3, 2, 4], -2.0, 2.0, 7)], |x| super::logsumexp(&x[0], [-1, 0], true)),
        ]
    }
}

/// Row means and centred sums of squares, two-pass in f64: `(mean, Σ (x − mean)²)`.
fn moments(xs: &[f32], row: Row) -> (f64, f64) {
    let n = row.len as f64;
    let mean = row.indices().map(|r| xs[r] as f64).sum::<f64>() / n;
    (mean, row.indices().map(|r| (xs[r] as f64 - mean).powi(2)).sum())
}

/// The divisor of `var`/`std`: `max(0, n − correction)` (PyTorch's; 1 is Bessel's).
fn divisor(n: usize, correction: usize) -> f64 {
    (n as f64 - correction as f64).max(0.0)
}

/// Variance (or with `root` the standard deviation) of each reduced row, f64 two-pass.
fn moment_forward(op: &'static str, x: &Tensor, axes: &Axes, correction: usize, keep_dim: bool, root: bool) -> Result<Tensor> {
    let plan = checked_plan(op, x, axes, keep_dim, "the variance of zero elements is undefined")?;
    let d = divisor(plan.len, correction);
    plan.source(x)?.try_with_f32(|xs| {
        Tensor::build_f32(&plan.out_shape, |out| {
            for_rows(plan.outer, plan.len, plan.inner, |k, row| {
                let v = moments(xs, row).1 / d;
                out[k] = if root { v.sqrt() } else { v } as f32;
            });
            Ok(())
        })
    })?
}

/// `dx = g · 2(x − mean) / d` for `var`; for `std` (`y = √var`): `g · (x − mean) / (d · y)`.
fn moment_backward(op: &'static str, x: &Tensor, y: Option<&Tensor>, g: &Tensor, axes: &Axes, correction: usize) -> Result<Tensor> {
    let plan = Plan::new(op, x.shape(), axes, false)?;
    let d = divisor(plan.len, correction);
    let ys = y.map(|y| y.try_with_f32(|v| v.to_vec())).transpose()?;
    let src = plan.source(x)?;
    let dx = src.try_with_f32(|xs| {
        g.try_with_f32(|gs| {
            Tensor::build_f32(src.shape(), |dx| {
                for_rows(plan.outer, plan.len, plan.inner, |k, row| {
                    let mean = moments(xs, row).0;
                    let scale = match &ys {
                        None => 2.0 * gs[k] as f64 / d,
                        // PyTorch masks the gradient where the deviation is 0 (constant rows).
                        Some(ys) if ys[k] == 0.0 => 0.0,
                        Some(ys) => gs[k] as f64 / (d * ys[k] as f64),
                    };
                    row.indices().for_each(|r| dx[r] = ((xs[r] as f64 - mean) * scale) as f32);
                });
                Ok(())
            })
        })
    })???;
    plan.restore(&dx)
}

/// A moment reduction `f(x, axes, correction, keep_dim)` (`var`/`std` ignore `correction`).
type MomentFn = fn(&Tensor, Axes, usize, bool) -> Result<Tensor>;

/// Cases of the moment reductions; with `fixed` (Bessel's correction only) the cases of
/// another correction are left out.
fn moment_cases(f: MomentFn, fixed: bool) -> Vec<Case> {
    type View = fn(&Tensor) -> Result<Tensor>;
    /// Name, input shape, the view of the input reduced, axes, correction, keep_dim.
    type Spec = (&'static str, &'static [usize], View, Axes, usize, bool);
    let id: View = |x| Ok(x.clone());
    let cases: [Spec; 7] = [
        ("all_unbiased", &[3, 4], id, Axes::all(), 1, false),
        ("axis1_biased", &[3, 5], id, 1.into(), 0, false),
        ("axis0_keep_dim", &[4, 2, 3], id, 0.into(), 1, true),
        ("transposed", &[4, 3], |x| crate::transpose(x, 0, 1), (-1).into(), 1, false),
        ("strided", &[3, 8], |x| crate::slice(x, 1, 1, None, 2), 0.into(), 0, false),
        ("axes_adjacent", &[2, 3, 4], id, [1, 2].into(), 1, false),
        ("axes_apart_keep_dim", &[3, 2, 4], id, [0, 2].into(), 0, true),
    ];
    let seeds = 1u64..;
    cases
        .into_iter()
        .zip(seeds)
        .filter(|((.., correction, _), _)| !fixed || *correction == 1)
        .map(|((name, shape, view, axes, correction, keep), seed)| {
            Case::new(name, vec![Case::input(shape, -1.0, 1.0, seed)], move |x| f(&view(&x[0])?, axes.clone(), correction, keep))
        })
        .collect()
}

/// Variance over `axes` (one axis, several, or all with `None`) with Bessel's correction,
/// `Σ (x − mean)² / (n − 1)`: PyTorch's `torch.var(x, dim, keepdim=keep_dim)` (default
/// `correction=1`; [`var_correction()`] takes another). Two passes in f64, one rounding;
/// one element gives NaN, as in PyTorch; an error over zero elements.
/// Backward: `g · 2(x − mean) / (n − 1)`.
///
/// # Examples
///
/// ```
/// use om_ops::{var, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 6.0, 8.0], &[2, 3])?;
/// assert_eq!(var(&x, 1, false)?.to_vec(), [1.0, 4.0]);
/// assert_eq!(var(&x, [0, 1], true)?.shape(), [1, 1]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x], attrs = [axes: Axes, keep_dim: bool])]
pub mod var {
    use super::*;

    pub fn forward(x: &Tensor, axes: impl Into<Axes>, keep_dim: bool) -> Result<Tensor> {
        moment_forward(NAME, x, &axes.into(), 1, keep_dim, false)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(moment_backward(NAME, r.x(), None, g, &r.axes, 1).map_err(|e| e.with_op(NAME))?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        moment_cases(|x, a, _, k| super::var(x, a, k), true)
    }
}

/// Variance over `axes` divided by `max(0, n − correction)`: PyTorch's `torch.var(x, dim,
/// correction=correction, keepdim=keep_dim)`; `correction` 0 is the population variance,
/// 1 is [`var()`]. Backward: `g · 2(x − mean) / (n − correction)`.
///
/// # Examples
///
/// ```
/// use om_ops::{var_correction, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[4])?;
/// assert_eq!(var_correction(&x, None, 0, false)?.item()?, 1.25);
/// assert_eq!(var_correction(&x, 0, 1, false)?.item()?, 5.0 / 3.0);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x], attrs = [axes: Axes, correction: usize, keep_dim: bool])]
pub mod var_correction {
    use super::*;

    pub fn forward(x: &Tensor, axes: impl Into<Axes>, correction: usize, keep_dim: bool) -> Result<Tensor> {
        moment_forward(NAME, x, &axes.into(), correction, keep_dim, false)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(moment_backward(NAME, r.x(), None, g, &r.axes, r.correction).map_err(|e| e.with_op(NAME))?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        moment_cases(super::var_correction, false)
    }
}

/// Standard deviation over `axes` with Bessel's correction: `√var` (see [`var()`]; the
/// root taken in f64), PyTorch's `torch.std(x, dim, keepdim=keep_dim)`;
/// [`std_correction()`] takes another correction.
/// Backward: `g · (x − mean) / ((n − 1) · y)`, and 0 where `y = 0` (PyTorch's mask).
///
/// # Examples
///
/// ```
/// use om_ops::Tensor;
/// let x = Tensor::from_vec(vec![1.0, 3.0, 2.0, 2.0], &[2, 2])?;
/// assert_eq!(om_ops::std(&x, -1, false)?.to_vec(), [2f32.sqrt(), 0.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x, out], attrs = [axes: Axes, keep_dim: bool])]
pub mod std {
    use super::*;

    pub fn forward(x: &Tensor, axes: impl Into<Axes>, keep_dim: bool) -> Result<Tensor> {
        moment_forward(NAME, x, &axes.into(), 1, keep_dim, true)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(moment_backward(NAME, r.x(), Some(r.out()), g, &r.axes, 1).map_err(|e| e.with_op(NAME))?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        moment_cases(|x, a, _, k| super::std(x, a, k), true)
    }
}

/// Standard deviation over `axes` with `correction` (`√` of [`var_correction()`]):
/// PyTorch's `torch.std(x, dim, correction=correction, keepdim=keep_dim)`.
/// Backward: `g · (x − mean) / ((n − correction) · y)`, and 0 where `y = 0`.
///
/// # Examples
///
/// ```
/// use om_ops::{std_correction, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 3.0], &[2])?;
/// assert_eq!(std_correction(&x, None, 0, false)?.item()?, 1.0);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x, out], attrs = [axes: Axes, correction: usize, keep_dim: bool])]
pub mod std_correction {
    use super::*;

    pub fn forward(x: &Tensor, axes: impl Into<Axes>, correction: usize, keep_dim: bool) -> Result<Tensor> {
        moment_forward(NAME, x, &axes.into(), correction, keep_dim, true)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(moment_backward(NAME, r.x(), Some(r.out()), g, &r.axes, r.correction).map_err(|e| e.with_op(NAME))?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        moment_cases(super::std_correction, false)
    }
}

// ===== vector norms =====

/// `sign(v)` with `sign(0) = 0` (PyTorch's `sgn`).
fn sgn(v: f32) -> f32 {
    if v > 0.0 {
        1.0
    } else if v < 0.0 {
        -1.0
    } else {
        v // ±0, or NaN
    }
}

/// The vector norm of `x` over `axes` (one axis, several, or every element with `None`),
/// PyTorch's `torch.linalg.vector_norm(x, ord, dim, keepdim)` for `ord` 1 (`Σ|x|`), 2
/// (`√Σx²`) or `f32::INFINITY` (`max|x|`; NaN propagates). Sums are f64 in row-major order
/// of the reduced axes, rounded once. Backward, as PyTorch: `g·sgn(x)` (ord 1), `x·(g/‖x‖)`
/// with 0 where the norm is 0 (ord 2), `sgn(x)·(g/count)` at the elements whose `|x|`
/// equals the maximum, shared evenly among ties (ord ∞).
///
/// # Examples
///
/// ```
/// use om_ops::{vector_norm, Tensor};
/// let x = Tensor::from_vec(vec![3.0, -4.0, 0.0, 1.0], &[2, 2])?;
/// assert_eq!(vector_norm(&x, 2.0, None, false)?.item()?, 26f32.sqrt());
/// assert_eq!(vector_norm(&x, 1.0, 1, false)?.to_vec(), [7.0, 1.0]);
/// assert_eq!(vector_norm(&x, f32::INFINITY, [0, 1], true)?.to_vec(), [4.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x, out], attrs = [ord: f32, axes: Axes, keep_dim: bool])]
pub mod vector_norm {
    use super::*;

    pub fn forward(x: &Tensor, ord: f32, axes: impl Into<Axes>, keep_dim: bool) -> Result<Tensor> {
        x.expect_f32(NAME, "x")?;
        if !(ord == 1.0 || ord == 2.0 || ord == f32::INFINITY) {
            return Err(Error::argument(NAME, format!("ord must be 1, 2 or infinity, got {ord}")));
        }
        let plan = Plan::new(NAME, x.shape(), &axes.into(), keep_dim)?;
        if ord == f32::INFINITY && plan.len == 0 {
            return Err(Error::shape(NAME, &[x.shape()], "the infinity norm of zero elements is undefined"));
        }
        plan.source(x)?.try_with_f32(|xs| {
            Tensor::build_f32(&plan.out_shape, |out| {
                // Empty rows too: their norm is 0.
                for_rows(plan.outer, plan.len, plan.inner, |k, row| {
                    let values = row.indices().map(|i| xs[i]);
                    out[k] = if ord == 1.0 {
                        values.fold(0.0f64, |s, v| s + (v as f64).abs()) as f32
                    } else if ord == 2.0 {
                        values.fold(0.0f64, |s, v| s + v as f64 * v as f64).sqrt() as f32
                    } else {
                        values.fold(0.0f32, |m, v| if v.is_nan() || m.is_nan() { f32::NAN } else { m.max(v.abs()) })
                    };
                });
                Ok(())
            })
        })?
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let x = r.x();
        let plan = Plan::new(NAME, x.shape(), &r.axes, r.keep_dim)?;
        let src = plan.source(x)?;
        let ord = r.ord;
        let grad = src.try_with_f32(|xs| {
            g.try_with_f32(|gs| {
                r.out().try_with_f32(|ns| {
                    Tensor::build_f32(src.shape(), |dx| {
                        for_rows(plan.outer, plan.len, plan.inner, |k, row| {
                            let (g, n) = (gs[k], ns[k]);
                            if ord == 1.0 {
                                row.indices().for_each(|i| dx[i] = g * sgn(xs[i]));
                            } else if ord == 2.0 {
                                let s = if n == 0.0 { 0.0 } else { g / n };
                                row.indices().for_each(|i| dx[i] = xs[i] * s);
                            } else {
                                let ties = row.indices().filter(|&i| xs[i].abs() == n).count().max(1) as f32;
                                let s = g / ties;
                                row.indices().for_each(|i| dx[i] = if xs[i].abs() == n { sgn(xs[i]) * s } else { 0.0 });
                            }
                        });
                        Ok(())
                    })
                })
            })
        })????;
        // Back to the input's axis order (a view of the moved buffer).
        d.x(plan.restore(&grad)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let mut cases = Vec::new();
        for (ord, tag) in [(1.0f32, "l1"), (2.0, "l2"), (f32::INFINITY, "inf")] {
            // Distinct magnitudes away from 0 (the kinks of |x| and the max's ties).
            cases.push(Case::new(format!("{tag}_all"), vec![Case::distinct_input(&[3, 4], 1)], move |x| {
                super::vector_norm(&x[0], ord, None, false)
            }));
            cases.push(Case::new(format!("{tag}_axes_0_2_keep_dim"), vec![Case::distinct_input(&[2, 3, 4], 2)], move |x| {
                super::vector_norm(&x[0], ord, [0, 2], true)
            }));
            cases.push(Case::new(format!("{tag}_transposed_last"), vec![Case::distinct_input(&[4, 3], 3)], move |x| {
                super::vector_norm(&crate::transpose(&x[0], 0, 1)?, ord, -1, false)
            }));
        }
        cases
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracle::{assert_close, both_modes, Oracle};

    fn oracle() -> Oracle {
        Oracle::load_file("reductions", "tools/oracle_reductions.py")
    }

    /// The cases of `op` in the file with their `(axis, keep_dim)` (`None` for all axes).
    fn cases(o: &Oracle, op: &str) -> Vec<(String, Option<isize>, bool)> {
        cases_at_least(o, op, 9)
    }

    fn cases_at_least(o: &Oracle, op: &str, min: usize) -> Vec<(String, Option<isize>, bool)> {
        let names: Vec<String> = o
            .names()
            .filter_map(|k| k.strip_suffix("_params"))
            .filter(|k| k.strip_prefix(op).is_some_and(|rest| rest.starts_with("_p") || rest.starts_with("_t") || rest.starts_with("_n")))
            .map(str::to_string)
            .collect();
        assert!(names.len() >= min, "the oracle file holds the `{op}` cases");
        names
            .into_iter()
            .map(|n| {
                let p = o.get(&format!("{n}_params")).to_vec_i32();
                (n, (p[0] != -99).then_some(p[0] as isize), p[1] != 0)
            })
            .collect()
    }

    /// NaN positions must agree exactly (the scaled error ignores NaN).
    fn same_nans(name: &str, ours: &Tensor, want: &Tensor) {
        let nan = |t: &Tensor| t.to_vec().iter().map(|v| v.is_nan()).collect::<Vec<_>>();
        assert_eq!(nan(ours), nan(want), "{name}: NaN positions differ from PyTorch");
    }

    fn check_values(o: &Oracle, name: &str, x: &Tensor, y: &Tensor) {
        let want = o.get(&format!("{name}_y"));
        same_nans(&format!("{name}_y"), y, &want);
        assert_close(&format!("{name}_y"), y, &want);
        o.check_grads(name, y, &[("x", x)]);
        let (g, want) = (x.grad().expect("a gradient"), o.get(&format!("{name}_gx")));
        same_nans(&format!("{name}_gx"), &g, &want);
    }

    #[test]
    fn max_min_dim_match_pytorch() {
        let o = oracle();
        both_modes(|| {
            for (op, f) in [("max_dim", max_dim as fn(&Tensor, isize, bool) -> Result<(Tensor, Tensor)>), ("min_dim", min_dim)] {
                for (name, axis, keep) in cases(&o, op) {
                    let x = o.get(&format!("{name}_x"));
                    let (y, i) = f(&x, axis.expect("an axis"), keep).unwrap();
                    assert_eq!(i.to_vec_i32(), o.get(&format!("{name}_i")).to_vec_i32(), "{name}: indices");
                    assert_eq!(i.shape(), y.shape());
                    check_values(&o, &name, &x, &y);
                }
            }
        });
    }

    #[test]
    fn argmax_argmin_match_pytorch() {
        let o = oracle();
        for (op, f) in [("argmax", argmax as ArgFn), ("argmin", argmin)] {
            for (name, axis, keep) in cases(&o, op) {
                let x = o.get(&format!("{name}_x"));
                let i = f(&x, axis, keep).unwrap();
                let want = o.get(&format!("{name}_i"));
                assert_eq!(i.dtype(), DType::I32);
                assert!(!i.needs_grad(), "{name}: an index result is not recorded");
                assert_eq!((i.shape(), i.to_vec_i32()), (want.shape(), want.to_vec_i32()), "{name}");
            }
        }
    }

    #[test]
    fn amax_amin_match_pytorch() {
        let o = oracle();
        both_modes(|| {
            for (op, f) in [("amax", amax as fn(&Tensor, Option<isize>, bool) -> Result<Tensor>), ("amin", amin)] {
                for (name, axis, keep) in cases(&o, op) {
                    let x = o.get(&format!("{name}_x"));
                    let y = f(&x, axis, keep).unwrap();
                    check_values(&o, &name, &x, &y);
                }
            }
        });
    }

    #[test]
    fn logsumexp_matches_pytorch() {
        let o = oracle();
        both_modes(|| {
            for (name, axis, keep) in cases_at_least(&o, "logsumexp", 5) {
                let x = o.get(&format!("{name}_x"));
                check_values(&o, &name, &x, &logsumexp(&x, axis, keep).unwrap());
            }
            let (x, want) = (o.get("logsumexp_inf_x"), o.get("logsumexp_inf_y"));
            let y = logsumexp(&x, 1, false).unwrap();
            assert_eq!(y.to_vec()[..2], want.to_vec()[..2], "an infinite row keeps its infinity");
            assert_close("logsumexp_inf_y", &y, &want);
            let nan = Tensor::from_vec(vec![1.0, f32::NAN, 2.0], &[3]).unwrap();
            assert!(logsumexp(&nan, None, false).unwrap().to_vec()[0].is_nan(), "NaN propagates");
        });
    }

    #[test]
    fn var_std_match_pytorch() {
        let o = oracle();
        both_modes(|| {
            type Moment = fn(&Tensor, Option<isize>, usize, bool) -> Result<Tensor>;
            for (op, f) in [("var", var_correction as Moment), ("std", std_correction)] {
                for (name, axis, keep) in cases_at_least(&o, op, 6) {
                    let correction = o.get(&format!("{name}_params")).to_vec_i32()[2] as usize;
                    let x = o.get(&format!("{name}_x"));
                    check_values(&o, &name, &x, &f(&x, axis, correction, keep).unwrap());
                    if correction == 1 {
                        // `var`/`std` are Bessel's correction: the same bits.
                        let fixed = if op == "var" { var(&x, axis, keep) } else { crate::std(&x, axis, keep) };
                        assert_eq!(fixed.unwrap().to_vec(), f(&x, axis, 1, keep).unwrap().to_vec(), "{name}");
                    }
                }
            }
        });
    }

    /// `sum`/`mean` over several axes (the oracle cases written for the former
    /// `sum_axes`/`mean_axes`).
    #[test]
    fn sum_mean_axes_match_pytorch() {
        let o = oracle();
        both_modes(|| {
            for (op, f) in [("sum_axes", crate::sum as fn(&Tensor, Vec<isize>, bool) -> Result<Tensor>), ("mean_axes", crate::mean)] {
                for n in 0..4 {
                    let name = format!("{op}_{n}");
                    let p = o.get(&format!("{name}_params")).to_vec_i32();
                    let x = o.get(&format!("{name}_x"));
                    let axes: Vec<isize> = p[1..].iter().map(|&a| a as isize).collect();
                    let y = f(&x, axes, p[0] != 0).unwrap();
                    check_values(&o, &name, &x, &y);
                }
            }
        });
        let x = Tensor::zeros(&[2, 3]).unwrap();
        assert_eq!(crate::mean(&x, [1, -1], false).unwrap_err().op(), "mean");
        assert_eq!(crate::sum(&x, [2], false).unwrap_err().op(), "sum");
    }

    /// Several axes give the bits of one axis over the same elements gathered in row-major
    /// order of the reduced axes (moved last and merged), values and gradients.
    #[test]
    fn several_axes_equal_one_merged_axis() {
        type Reduce = fn(&Tensor, Axes, bool) -> Result<Tensor>;
        let reductions: [(&str, Reduce); 9] = [
            ("sum", |x, a, k| crate::sum(x, a, k)),
            ("mean", |x, a, k| crate::mean(x, a, k)),
            ("amax", |x, a, k| amax(x, a, k)),
            ("amin", |x, a, k| amin(x, a, k)),
            ("logsumexp", |x, a, k| logsumexp(x, a, k)),
            ("var", |x, a, k| var(x, a, k)),
            ("std_correction", |x, a, k| std_correction(x, a, 0, k)),
            ("vector_norm_2", |x, a, k| vector_norm(x, 2.0, a, k)),
            ("vector_norm_inf", |x, a, k| vector_norm(x, f32::INFINITY, a, k)),
        ];
        let data = Tensor::from_vec((0..120).map(|i| ((i * 37 % 120) as f32 - 60.0) / 17.0).collect(), &[2, 3, 4, 5]).unwrap();
        // (axes, the permutation moving them last, the merged shape)
        let layouts: [(&[isize], [isize; 4], [isize; 2]); 4] = [
            (&[1, 2], [0, 3, 1, 2], [10, 12]),
            (&[0, -1], [1, 2, 0, 3], [12, 10]),
            (&[3, 1, 0], [2, 0, 1, 3], [4, 30]),
            (&[0, 1, 2, 3], [0, 1, 2, 3], [1, 120]),
        ];
        both_modes(|| {
            for (op, f) in reductions {
                for (axes, order, merged) in layouts {
                    let x = data.detach().requires_grad().unwrap();
                    let y = f(&x, axes.into(), false).unwrap();
                    let x1 = data.detach().requires_grad().unwrap();
                    let m = crate::reshape(&crate::permute(&x1, order).unwrap(), merged).unwrap();
                    let y1 = f(&m, 1.into(), false).unwrap();
                    let bits = |t: &Tensor| t.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&y), bits(&y1), "{op} over {axes:?}");
                    let kept: Vec<usize> =
                        (0..4).filter(|a| !axes.iter().any(|&b| (b + 4) as usize % 4 == *a)).map(|a| data.shape()[a]).collect();
                    assert_eq!(y.shape(), &kept[..], "{op} over {axes:?}");
                    let w = Tensor::from_vec((0..y.numel()).map(|i| 0.5 + i as f32 / 7.0).collect(), y.shape()).unwrap();
                    crate::sum(&crate::mul(&y, &w).unwrap(), None, false).unwrap().backward().unwrap();
                    let w1 = crate::reshape(&w, y1.shape()).unwrap();
                    crate::sum(&crate::mul(&y1, &w1).unwrap(), None, false).unwrap().backward().unwrap();
                    assert_eq!(bits(&x.grad().unwrap()), bits(&x1.grad().unwrap()), "{op} over {axes:?}: gradient");
                    let yk = f(&x, axes.into(), true).unwrap();
                    assert_eq!((yk.rank(), bits(&yk)), (4, bits(&y)), "{op} over {axes:?} keeping the axes");
                }
            }
        });
    }

    #[test]
    fn vector_norm_matches_pytorch() {
        let o = oracle();
        both_modes(|| {
            for n in 0..9 {
                let name = format!("vector_norm_{n}");
                let p = o.get(&format!("{name}_params")).to_vec_i32();
                let ord = if p[0] < 0 { f32::INFINITY } else { p[0] as f32 };
                let axes = (p[2] != -99).then(|| p[2..].iter().map(|&a| a as isize).collect::<Vec<_>>());
                let x = o.get(&format!("{name}_x"));
                let axes = axes.map_or(Axes::all(), Axes::from);
                check_values(&o, &name, &x, &vector_norm(&x, ord, axes, p[1] != 0).unwrap());
            }
        });
        // Pinned: the 2-norm's gradient at a zero vector is 0 (PyTorch masks 0/0).
        let z = Tensor::zeros(&[3]).unwrap().requires_grad().unwrap();
        vector_norm(&z, 2.0, None, false).unwrap().backward().unwrap();
        assert_eq!(z.grad().unwrap().to_vec(), vec![0.0; 3]);
        let x = Tensor::zeros(&[2, 0]).unwrap();
        assert_eq!(vector_norm(&x, 2.0, vec![1], false).unwrap().to_vec(), vec![0.0, 0.0]);
        assert_eq!(vector_norm(&x, f32::INFINITY, vec![1], false).unwrap_err().op(), "vector_norm");
        assert_eq!(vector_norm(&x, 3.0, None, false).unwrap_err().op(), "vector_norm");
    }

    /// Blocks 2 and 3 of the API acceptance program (`shared/api/acceptance.rs`), as calls.
    #[test]
    fn acceptance_axes_and_shapes() {
        let x = Tensor::randn_with_seed(&[8, 1, 8, 8], 1).unwrap();
        assert_eq!(crate::sum(&x, 1, false).unwrap().shape(), &[8, 8, 8]);
        assert_eq!(crate::sum(&x, [2, 3], true).unwrap().shape(), &[8, 1, 1, 1]);
        assert_eq!(crate::sum(&x, None, false).unwrap().shape(), &[] as &[usize]);
        assert_eq!(crate::mean(&x, [-2, -1], false).unwrap().shape(), &[8, 1]);
        assert_eq!(amax(&x, [2, 3], false).unwrap().shape(), &[8, 1]);
        assert_eq!(amin(&x, [0, 2, 3], true).unwrap().shape(), &[1, 1, 1, 1]);
        assert_eq!(logsumexp(&x, [2, 3], false).unwrap().shape(), &[8, 1]);
        assert_eq!(var(&x, [2, 3], false).unwrap().shape(), &[8, 1]);
        assert_eq!(crate::std(&x, None, false).unwrap().shape(), &[] as &[usize]);
        assert_eq!(vector_norm(&x, 2.0, [1, 3], false).unwrap().shape(), &[8, 8]);
        let (values, indices) = max_dim(&x, 3, false).unwrap();
        assert_eq!((values.shape(), indices.shape()), (&[8, 1, 8][..], &[8, 1, 8][..]));
        assert_eq!(argmax(&x, -1, false).unwrap().shape(), &[8, 1, 8]);
        assert_eq!(argmin(&x, None, false).unwrap().shape(), &[] as &[usize]);
        assert_eq!(crate::softmax(&x, -1).unwrap().shape(), x.shape());
        let r = crate::reshape(&x, [8, -1]).unwrap();
        assert_eq!(r.shape(), &[8, 64]);
        assert_eq!(crate::reshape(&r, x.shape()).unwrap().shape(), x.shape());
        let f = crate::flatten(&x, 1).unwrap();
        assert_eq!(crate::squeeze(&crate::unsqueeze(&f, 0).unwrap(), 0).unwrap().shape(), &[8, 64]);
        // `var` is torch.var's default, unbiased: n − 1 = 63 for 64 elements.
        let (v, v0) = (var(&x, [2, 3], false).unwrap().to_vec(), var_correction(&x, [2, 3], 0, false).unwrap().to_vec());
        for (a, b) in v.iter().zip(&v0) {
            assert!((a * 63.0 - b * 64.0).abs() <= 1e-4 * b.abs().max(1.0), "{a} vs {b}");
        }
    }

    #[test]
    fn bad_arguments_are_errors_naming_the_op() {
        assert_eq!(var(&Tensor::zeros(&[0]).unwrap(), None, false).unwrap_err().op(), "var");
        assert_eq!(crate::std(&Tensor::zeros(&[2]).unwrap(), 1, false).unwrap_err().op(), "std");
        assert_eq!(var_correction(&Tensor::zeros(&[2, 0]).unwrap(), [0, 1], 0, false).unwrap_err().op(), "var_correction");
        assert_eq!(std_correction(&Tensor::zeros(&[2, 2]).unwrap(), [0, 0], 1, false).unwrap_err().op(), "std_correction");
        assert_eq!(logsumexp(&Tensor::zeros(&[2, 2]).unwrap(), [0, 2], false).unwrap_err().op(), "logsumexp");
        assert_eq!(amin(&Tensor::zeros(&[2, 2]).unwrap(), [1, -1], false).unwrap_err().op(), "amin");
        let x = Tensor::zeros(&[2, 3]).unwrap();
        let empty = Tensor::zeros(&[2, 0]).unwrap();
        assert_eq!(max_dim(&x, 2, false).unwrap_err().op(), "max_dim");
        assert_eq!(min_dim(&empty, -1, true).unwrap_err().op(), "min_dim");
        assert_eq!(argmin(&empty, 1, false).unwrap_err().op(), "argmin");
        assert_eq!(argmax(&x, -3, false).unwrap_err().op(), "argmax");
        assert_eq!(amax(&empty, None, false).unwrap_err().op(), "amax");
        let bad = Tensor::from_vec_i32(vec![0, 3, 1], &[1, 3]).unwrap();
        assert_eq!(take_along_axis(&x, &bad, 1).unwrap_err().op(), "take_along_axis");
        let wrong_shape = Tensor::from_vec_i32(vec![0, 1], &[1, 2]).unwrap();
        assert_eq!(take_along_axis(&x, &wrong_shape, 1).unwrap_err().op(), "take_along_axis");
        assert_eq!(take_along_axis(&x, &x, 1).unwrap_err().op(), "take_along_axis");
    }
}
