//! Reductions over [`Axes`] (one axis, several, or all of them with `None`, with
//! `keep_dim`, as PyTorch's `torch.sum(x, dim, keepdim)`): `sum` and `mean`, `amax`/`amin`
//! (gradient shared evenly among ties), `logsumexp`, `var`/`std` (and
//! `var_correction`/`std_correction`), and `vector_norm` (ord 1, 2, ∞).
//!
//! Every output of `sum`/`mean` is one f64 sum of its elements in row-major order of the
//! reduced axes, rounded once (so one axis, several and all give the same bits as summing
//! the gathered elements in that order); their backward broadcasts `g` back to the input's
//! shape (`mean`: divided by the count). The other loops are scalar code (the same on every
//! path), sums are f64 in row-major order of the reduced axes, and `exp`/`log` are
//! `om_core::kernels::math`'s, so exact mode needs nothing special.
//!
//! `Plan` is how every reduction over [`Axes`] walks its input: adjacent reduced axes are
//! read in place as `[outer, len, inner]`; others are moved last first. The first NaN wins
//! `amax`/`amin` over every number, as in PyTorch.

use crate::selection::{winners, Extreme};
use om_core::kernels::reduce::{sum_axis, sum_view};
use om_core::layout::{Dims, SignedDims};
use om_core::{Axes, Case, DType, Error, Result, Shape, Tensor};
use om_macros::op;

/// A view with more than this many elements per stored one is summed where it lies
/// ([`sum_view`]) rather than gathered first: gathering a mostly repeated view would spend
/// memory (possibly more than exists) on copies of the same values.
const VIEW_SUM_RATIO: usize = 4;

/// How a reduction over a set of axes reads its input: as `[outer, len, inner]` (each
/// output `o·inner + i` reduces the `len` elements `inner` apart from `o·len·inner + i`,
/// in row-major order of the reduced axes) of the input itself when the reduced axes are
/// adjacent, or of the input with the reduced axes moved last (`order`, kept axes first,
/// both in their order; then `inner = 1`). No heap allocation up to the inline rank.
pub(crate) struct Plan {
    pub outer: usize,
    pub len: usize,
    pub inner: usize,
    /// The output's shape (a reduced axis kept as 1 with `keep_dim`, else removed).
    pub out_shape: Dims,
    /// The input's shape with every reduced axis 1: where the output broadcasts back.
    pub kept_shape: SignedDims,
    /// How many axes are reduced (all of them for `None` or an empty list).
    pub reduced: usize,
    /// The reduced axis when exactly one is reduced.
    pub single: Option<usize>,
    /// The permutation moving the reduced axes last, when they are not adjacent.
    pub order: Option<SignedDims>,
}

impl Plan {
    /// The plan of reducing `axes` of `shape`; an error naming `op` for an axis out of
    /// range or given twice.
    pub fn new(op: &'static str, shape: &[usize], axes: &Axes, keep_dim: bool) -> Result<Plan> {
        let rank = shape.len();
        let mask = axes.mask(op, rank)?;
        let out_shape: Dims = (0..rank).filter_map(|a| if mask[a] { keep_dim.then_some(1) } else { Some(shape[a]) }).collect();
        let kept_shape: SignedDims = (0..rank).map(|a| if mask[a] { 1 } else { shape[a] as isize }).collect();
        let reduced = mask.iter().filter(|&&m| m).count();
        let first = mask.iter().position(|&m| m);
        let last = mask.iter().rposition(|&m| m);
        let len = (0..rank).filter(|&a| mask[a]).map(|a| shape[a]).product();
        let single = if reduced == 1 { first } else { None };
        let (Some(first), Some(last)) = (first, last) else {
            // A scalar: its one element is the whole reduction.
            return Ok(Plan { outer: 1, len, inner: 1, out_shape, kept_shape, reduced, single, order: None });
        };
        if (first..=last).all(|a| mask[a]) {
            let (outer, inner) = (shape[..first].iter().product(), shape[last + 1..].iter().product());
            return Ok(Plan { outer, len, inner, out_shape, kept_shape, reduced, single, order: None });
        }
        let order: SignedDims = (0..rank).filter(|&a| !mask[a]).chain((0..rank).filter(|&a| mask[a])).map(|a| a as isize).collect();
        let outer = (0..rank).filter(|&a| !mask[a]).map(|a| shape[a]).product();
        Ok(Plan { outer, len, inner: 1, out_shape, kept_shape, reduced, single, order: Some(order) })
    }

    /// `x` in the plan's axis order (itself, or a view with the reduced axes last).
    pub fn source(&self, x: &Tensor) -> Result<Tensor> {
        match &self.order {
            None => Ok(x.clone()),
            Some(order) => crate::permute(x, order),
        }
    }

    /// A tensor in the plan's axis order (the shape of [`source`](Self::source)) back in
    /// the input's axis order (a view).
    pub fn restore(&self, t: &Tensor) -> Result<Tensor> {
        match &self.order {
            None => Ok(t.clone()),
            Some(order) => {
                let mut inverse = SignedDims::from_elem(0, order.len());
                for (i, &a) in order.iter().enumerate() {
                    inverse[a as usize] = i as isize;
                }
                crate::permute(t, inverse)
            }
        }
    }

    /// `g` (of the output's shape) broadcast back to `input_shape` (a view).
    pub fn broadcast_back(&self, g: &Tensor, input_shape: &[usize]) -> Result<Tensor> {
        let g = crate::reshape(g, Shape::from(&self.kept_shape))?;
        crate::expand(&g, input_shape)
    }
}

/// Reduces `x` over `axes` with each f64 sum scaled by `1/len` for a mean.
fn reduce(op: &'static str, x: &Tensor, axes: &Axes, keep_dim: bool, mean: bool) -> Result<Tensor> {
    if x.dtype() != DType::F32 {
        return Err(Error::DType { op, arg: "x", expected: DType::F32, got: x.dtype() });
    }
    let shape = x.shape();
    let plan = Plan::new(op, shape, axes, keep_dim)?;
    if mean && plan.len == 0 {
        return Err(Error::shape(op, &[shape], "mean over zero elements is undefined"));
    }
    let scale = if mean { 1.0 / plan.len as f64 } else { 1.0 };
    // A view much larger than its storage (an expansion) is summed in place, never copied
    // (over every axis or over one; several are gathered).
    let storage_len = x.with_storage_f32(|s| s.len());
    let all = plan.reduced == shape.len();
    if !x.is_contiguous() && x.numel() / VIEW_SUM_RATIO > storage_len && (all || plan.single.is_some()) {
        let axis = if all { None } else { plan.single };
        return x.with_storage_f32(|src| {
            Tensor::build_f32(&plan.out_shape, |out| {
                sum_view(src, shape, x.strides(), x.offset(), axis, scale, out);
                Ok(())
            })
        });
    }
    let (outer, len, inner) = (plan.outer, plan.len, plan.inner);
    plan.source(x)?.try_with_f32(|xs| Tensor::build_f32(&plan.out_shape, |out| sum_axis(xs, outer, len, inner, scale, out)))?
}

fn cases_for(f: fn(&Tensor, Axes, bool) -> Result<Tensor>) -> Vec<Case> {
    vec![
        Case::new("all", vec![Case::input(&[3, 4], -1.0, 1.0, 1)], move |x| f(&x[0], None.into(), false)),
        Case::new("all_keep_dim", vec![Case::input(&[3, 4], -1.0, 1.0, 2)], move |x| f(&x[0], None.into(), true)),
        Case::new("axis0", vec![Case::input(&[3, 4], -1.0, 1.0, 3)], move |x| f(&x[0], 0.into(), false)),
        Case::new("axis_last_keep_dim", vec![Case::input(&[2, 3, 4], -1.0, 1.0, 4)], move |x| f(&x[0], (-1).into(), true)),
        Case::new("transposed", vec![Case::input(&[4, 3], -1.0, 1.0, 5)], move |x| f(&crate::transpose(&x[0], 0, 1)?, 1.into(), false)),
        Case::new("strided", vec![Case::input(&[3, 8], -1.0, 1.0, 6)], move |x| f(&crate::slice(&x[0], 1, 1, None, 2)?, 0.into(), false)),
        Case::new("axes_0_2", vec![Case::input(&[2, 3, 4], -1.0, 1.0, 7)], move |x| f(&x[0], [0, 2].into(), false)),
        Case::new("axes_last_two_keep_dim", vec![Case::input(&[2, 3, 4], -1.0, 1.0, 8)], move |x| f(&x[0], [-1, -2].into(), true)),
        Case::new("axes_transposed", vec![Case::input(&[4, 2, 3], -1.0, 1.0, 9)], move |x| {
            f(&crate::transpose(&x[0], 0, 2)?, [0, 1].into(), false)
        }),
        Case::new("axes_expanded", vec![Case::input(&[3, 1, 2], -1.0, 1.0, 10)], move |x| {
            f(&crate::expand(&x[0], [3, 4, 2])?, [1, 2].into(), true)
        }),
    ]
}

/// Sum over `axes`: one axis (`1`, `-1`), several (`[0, 2]`), or all (`None`), each
/// reduced axis kept as size 1 with `keep_dim` (PyTorch's `torch.sum(x, dim, keepdim)`).
/// Each output is one f64 sum in row-major order of the reduced axes, rounded once.
/// Backward: `g` broadcast to the input's shape.
///
/// # Examples
///
/// ```
/// use om_ops::{sum, Tensor};
/// let x = Tensor::from_vec((1..=6).map(|v| v as f32).collect(), &[2, 3])?;
/// assert_eq!(sum(&x, 1, false)?.to_vec(), [6.0, 15.0]);
/// assert_eq!(sum(&x, [0, 1], true)?.shape(), [1, 1]);
/// assert_eq!(sum(&x, None, false)?.item()?, 21.0);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [axes: Axes, keep_dim: bool])]
pub mod sum {
    use super::*;

    pub fn forward(x: &Tensor, axes: impl Into<Axes>, keep_dim: bool) -> Result<Tensor> {
        reduce(NAME, x, &axes.into(), keep_dim, false)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let shape = &r.input_shapes[0];
        d.x(Plan::new(NAME, shape, &r.axes, r.keep_dim)?.broadcast_back(g, shape)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        cases_for(super::sum)
    }
}

/// Mean over `axes` (one axis, several, or all with `None`; PyTorch's `torch.mean(x, dim,
/// keepdim)`): the f64 sum of [`sum()`] scaled by `1/count` before rounding. An error over
/// zero elements (PyTorch gives NaN).
/// Backward: `g / count` broadcast to the input's shape.
///
/// # Examples
///
/// ```
/// use om_ops::{mean, Tensor};
/// let x = Tensor::from_vec((1..=6).map(|v| v as f32).collect(), &[2, 3])?;
/// assert_eq!(mean(&x, -1, true)?.to_vec(), [2.0, 5.0]);
/// assert_eq!(mean(&x, None, false)?.item()?, 3.5);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [axes: Axes, keep_dim: bool])]
pub mod mean {
    use super::*;

    pub fn forward(x: &Tensor, axes: impl Into<Axes>, keep_dim: bool) -> Result<Tensor> {
        reduce(NAME, x, &axes.into(), keep_dim, true)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let shape = &r.input_shapes[0];
        let plan = Plan::new(NAME, shape, &r.axes, r.keep_dim)?;
        let n = plan.len;
        let scaled = om_core::kernels::elementwise::unary(NAME, g, |v| v / n as f32)?;
        d.x(plan.broadcast_back(&scaled, shape)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        cases_for(super::mean)
    }
}

// ===== extremes with shared ties =====

/// The plan of a reduction over `axes` of `x` (checked f32); unless `what` is empty, an
/// empty reduced extent is refused with `what` as the reason (no extreme of nothing).
pub(crate) fn checked_plan(op: &'static str, x: &Tensor, axes: &Axes, keep_dim: bool, what: &str) -> Result<Plan> {
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
    use crate::selection::*;

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

#[cfg(test)]
mod sum_mean_tests {
    use super::*;

    #[test]
    fn plans_read_adjacent_axes_in_place() {
        let p = Plan::new("t", &[2, 3, 4, 5], &Axes::from([1, 2]), false).unwrap();
        assert_eq!((p.outer, p.len, p.inner, &p.out_shape[..], p.order.is_none()), (2, 12, 5, &[2, 5][..], true));
        let p = Plan::new("t", &[2, 3, 4], &Axes::from([0, -1]), true).unwrap();
        assert_eq!((p.outer, p.len, p.inner, &p.out_shape[..]), (3, 8, 1, &[1, 3, 1][..]));
        assert_eq!(p.order.as_deref(), Some(&[1, 0, 2][..]));
        let p = Plan::new("t", &[], &Axes::all(), false).unwrap();
        assert_eq!((p.outer, p.len, p.inner, p.out_shape.len()), (1, 1, 1, 0));
    }

    #[test]
    fn bad_axes_are_errors_naming_the_op() {
        let x = Tensor::zeros(&[2, 3]).unwrap();
        assert_eq!(sum(&x, [1, -1], false).unwrap_err().op(), "sum");
        assert_eq!(mean(&x, 2, false).unwrap_err().op(), "mean");
        assert_eq!(mean(&Tensor::zeros(&[2, 0]).unwrap(), [0, 1], false).unwrap_err().op(), "mean");
        // An empty list reduces every axis, as PyTorch's `dim=[]`.
        assert_eq!(sum(&x, Vec::<isize>::new(), false).unwrap().shape(), &[] as &[usize]);
    }
}
