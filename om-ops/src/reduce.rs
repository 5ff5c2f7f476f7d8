//! Reductions: `sum` and `mean`, over everything or over one axis (with `keep_dim`).
//! Sums accumulate in f64 in increasing element order and round once.
//! Backward: `g` broadcast back to the input's shape (`mean`: divided by the count).

use om_core::kernels::reduce::{sum_axis, sum_view};
use om_core::layout::{normalize_axis, Dims, SignedDims};
use om_core::{Case, DType, Error, Result, Tensor};
use om_macros::op;

/// A view with more than this many elements per stored one is summed where it lies
/// ([`sum_view`]) rather than gathered first: gathering a mostly repeated view would spend
/// memory (possibly more than exists) on copies of the same values.
const VIEW_SUM_RATIO: usize = 4;

/// Reduces `x` over `axis` (or all axes) with `scale` applied to each f64 sum.
fn reduce(op: &'static str, x: &Tensor, axis: Option<isize>, keep_dim: bool, mean: bool) -> Result<Tensor> {
    if x.dtype() != DType::F32 {
        return Err(Error::DType { op, arg: "x", expected: DType::F32, got: x.dtype() });
    }
    let shape = x.shape();
    let (outer, len, inner, out_shape) = match axis {
        None => {
            let out_shape = if keep_dim { Dims::from_elem(1, shape.len()) } else { Dims::new() };
            (1, x.numel(), 1, out_shape)
        }
        Some(a) => {
            let a = normalize_axis(op, a, shape.len(), false)?;
            let mut out_shape = Dims::from_slice(shape);
            if keep_dim {
                out_shape[a] = 1;
            } else {
                out_shape.remove(a);
            }
            (shape[..a].iter().product(), shape[a], shape[a + 1..].iter().product(), out_shape)
        }
    };
    if mean && len == 0 {
        return Err(Error::shape(op, &[shape], "mean over zero elements is undefined"));
    }
    let scale = if mean { 1.0 / len as f64 } else { 1.0 };
    // A view much larger than its storage (an expansion) is summed in place, never copied.
    let storage_len = x.with_storage_f32(|s| s.len());
    if !x.is_contiguous() && x.numel() / VIEW_SUM_RATIO > storage_len {
        let axis = axis.map(|a| normalize_axis(op, a, shape.len(), false)).transpose()?;
        return x.with_storage_f32(|src| {
            Tensor::build_f32(&out_shape, |out| {
                sum_view(src, shape, x.strides(), x.offset(), axis, scale, out);
                Ok(())
            })
        });
    }
    x.try_with_f32(|xs| Tensor::build_f32(&out_shape, |out| sum_axis(xs, outer, len, inner, scale, out)))?
}

/// `g` (of the reduced shape) broadcast back to `input_shape`.
fn broadcast_back(g: &Tensor, input_shape: &[usize], axis: Option<isize>, keep_dim: bool) -> Result<Tensor> {
    let rank = input_shape.len() as isize;
    let g = match axis {
        Some(a) if !keep_dim => crate::unsqueeze(g, if a < 0 { a + rank } else { a })?,
        None if !keep_dim => crate::reshape(g, &SignedDims::from_elem(1, input_shape.len()))?,
        _ => g.clone(),
    };
    crate::expand(&g, &input_shape.iter().map(|&d| d as isize).collect::<SignedDims>())
}

fn cases_for(f: fn(&Tensor, Option<isize>, bool) -> Result<Tensor>) -> Vec<Case> {
    vec![
        Case::new("all", vec![Case::input(&[3, 4], -1.0, 1.0, 1)], move |x| f(&x[0], None, false)),
        Case::new("all_keep_dim", vec![Case::input(&[3, 4], -1.0, 1.0, 2)], move |x| f(&x[0], None, true)),
        Case::new("axis0", vec![Case::input(&[3, 4], -1.0, 1.0, 3)], move |x| f(&x[0], Some(0), false)),
        Case::new("axis_last_keep_dim", vec![Case::input(&[2, 3, 4], -1.0, 1.0, 4)], move |x| f(&x[0], Some(-1), true)),
        Case::new("transposed", vec![Case::input(&[4, 3], -1.0, 1.0, 5)], move |x| f(&crate::transpose(&x[0], 0, 1)?, Some(1), false)),
        Case::new("strided", vec![Case::input(&[3, 8], -1.0, 1.0, 6)], move |x| f(&crate::slice(&x[0], 1, 1, 8, 2)?, Some(0), false)),
    ]
}

/// Sum over all elements (`axis = None`) or over one axis, optionally keeping it as size 1.
/// Backward: `g` broadcast to the input's shape.
#[op(attrs = [axis: Option<isize>, keep_dim: bool])]
pub mod sum {
    use super::*;

    pub fn forward(x: &Tensor, axis: Option<isize>, keep_dim: bool) -> Result<Tensor> {
        reduce(NAME, x, axis, keep_dim, false)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(broadcast_back(g, &r.input_shapes[0], r.axis, r.keep_dim)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        cases_for(super::sum)
    }
}

/// Mean over all elements or over one axis, optionally keeping it as size 1.
/// Backward: `g / n` broadcast to the input's shape.
#[op(attrs = [axis: Option<isize>, keep_dim: bool])]
pub mod mean {
    use super::*;

    pub fn forward(x: &Tensor, axis: Option<isize>, keep_dim: bool) -> Result<Tensor> {
        reduce(NAME, x, axis, keep_dim, true)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let shape = &r.input_shapes[0];
        let n = match r.axis {
            None => shape.iter().product::<usize>(),
            Some(a) => shape[normalize_axis(NAME, a, shape.len(), false)?],
        };
        let scaled = om_core::kernels::elementwise::unary(NAME, g, |v| v / n as f32)?;
        d.x(broadcast_back(&scaled, shape, r.axis, r.keep_dim)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        cases_for(super::mean)
    }
}
