//! Reductions: `sum` and `mean` over one axis, several, or all of them (`None`), with
//! `keep_dim`, as PyTorch's `torch.sum(x, dim, keepdim)`. Every output is one f64 sum of
//! its elements in row-major order of the reduced axes, rounded once (so one axis, several
//! and all give the same bits as summing the gathered elements in that order).
//! Backward: `g` broadcast back to the input's shape (`mean`: divided by the count).
//!
//! `Plan` is how every reduction over [`Axes`] walks its input (shared with
//! `reductions.rs`): adjacent reduced axes are read in place as `[outer, len, inner]`;
//! others are moved last first.

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

#[cfg(test)]
mod tests {
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
