//! Selecting reductions over one axis: `argmax`/`argmin` (Int32 winners, never recorded),
//! `take_along_axis` (the recorded gather that carries the gradient to the winner),
//! `max_dim`/`min_dim` (compositions returning values and indices) and `amax`/`amin`
//! (gradient shared evenly among ties), then `logsumexp`, `var`/`std_dev` and the
//! multi-axis `sum_axes`/`mean_axes`, and `vector_norm` (ord 1, 2, ∞ over any axes). PyTorch's CPU semantics: the first maximum
//! (minimum) along the axis wins a tie, and the first NaN wins over every number.
//! Exact mode needs nothing special: every loop here is scalar code (the same on every
//! path), sums are f64 in element order, and `exp`/`log` are `om_core::kernels::math`'s.

use crate::indexing::{expect_i32, gather_along, scatter_along};
use om_core::layout::normalize_axis;
use om_core::{Case, DType, Error, Result, Tensor};
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
/// `None`), as Int32. Ties: the first occurrence; NaN: the first NaN (PyTorch CPU).
/// Backward: none; the Int32 result is not recorded.
#[op(attrs = [axis: Option<isize>, keep_dim: bool])]
pub mod argmax {
    use super::*;

    pub fn forward(x: &Tensor, axis: Option<isize>, keep_dim: bool) -> Result<Tensor> {
        arg_extreme(NAME, x, axis, keep_dim, Extreme::Max)
    }

    fn backward(_r: &Record, _g: &Tensor, _d: &mut Grads) -> Result<()> {
        no_gradient(NAME)
    }

    fn cases() -> Vec<Case> {
        vec![
            index_case("axis1_keep_dim", &[3, 5], 1, |x| super::argmax(x, Some(1), true)),
            index_case("all_keep_dim", &[2, 3], 2, |x| super::argmax(x, None, true)),
        ]
    }
}

/// Position of the smallest element along `axis` (flattened for `None`), as Int32. Ties:
/// the first occurrence; NaN: the first NaN (PyTorch CPU). Backward: none; the Int32
/// result is not recorded.
#[op(attrs = [axis: Option<isize>, keep_dim: bool])]
pub mod argmin {
    use super::*;

    pub fn forward(x: &Tensor, axis: Option<isize>, keep_dim: bool) -> Result<Tensor> {
        arg_extreme(NAME, x, axis, keep_dim, Extreme::Min)
    }

    fn backward(_r: &Record, _g: &Tensor, _d: &mut Grads) -> Result<()> {
        no_gradient(NAME)
    }

    fn cases() -> Vec<Case> {
        vec![
            index_case("axis0_keep_dim", &[4, 3], 3, |x| super::argmin(x, Some(0), true)),
            index_case("all", &[2, 3], 4, |x| super::argmin(x, None, false)),
        ]
    }
}

// ===== gather =====

/// `y[.., j, ..] = x[.., indices[.., j, ..], ..]` along `axis` (PyTorch's `take_along_dim`
/// / `gather`, without broadcasting): `indices` is Int32 with `x`'s rank and shape except
/// along `axis`. Backward: `g` scatter-added into zeros of `x`'s shape at the indices
/// (repeated indices sum in f64 in element order).
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
    Ok((crate::squeeze(&values, Some(a))?, crate::squeeze(&idx, Some(a))?))
}

fn select_cases(f: fn(&Tensor, isize, bool) -> Result<(Tensor, Tensor)>) -> Vec<Case> {
    vec![
        Case::new("axis_last", vec![Case::distinct_input(&[3, 5], 1)], move |x| Ok(f(&x[0], -1, false)?.0)),
        Case::new("axis0_keep_dim", vec![Case::distinct_input(&[4, 2, 3], 2)], move |x| Ok(f(&x[0], 0, true)?.0)),
        Case::new("transposed", vec![Case::distinct_input(&[4, 3], 3)], move |x| Ok(f(&crate::transpose(&x[0], 0, 1)?, 1, false)?.0)),
        Case::new("strided", vec![Case::distinct_input(&[3, 8], 4)], move |x| Ok(f(&crate::slice(&x[0], 1, 1, 8, 2)?, 0, false)?.0)),
    ]
}

// ===== extremes with shared ties =====

/// `amax`/`amin` forward: the extreme of each row (NaN propagates).
fn extreme_values(op: &'static str, x: &Tensor, axis: Option<isize>, keep_dim: bool, e: Extreme) -> Result<Tensor> {
    let (outer, len, inner, out_shape) = checked_geometry(op, x, axis, keep_dim)?;
    x.try_with_f32(|xs| {
        Tensor::build_f32(&out_shape, |out| {
            winners(xs, outer, len, inner, e, |k, at| out[k] = xs[(k / inner * len + at) * inner + k % inner]);
            Ok(())
        })
    })?
}

/// `amax`/`amin` backward, PyTorch's formula `(g / count) · mask` with `mask = (x == y)`
/// and `count` the number of ties in the row (a NaN row has `count = 0`, so its gradient is
/// NaN where `g ≠ 0`, as in PyTorch).
fn shared_grad(op: &'static str, x: &Tensor, y: &Tensor, g: &Tensor, axis: Option<isize>) -> Result<Tensor> {
    let (outer, len, inner, _) = geometry(op, x.shape(), axis, false)?;
    x.try_with_f32(|xs| {
        y.try_with_f32(|ys| {
            g.try_with_f32(|gs| {
                Tensor::build_f32(x.shape(), |dx| {
                    for o in 0..outer {
                        for i in 0..inner {
                            let (k, row) = (o * inner + i, o * len * inner + i);
                            let count = (0..len).filter(|&j| xs[row + j * inner] == ys[k]).count() as f32;
                            let share = gs[k] / count;
                            for j in 0..len {
                                let mask = if xs[row + j * inner] == ys[k] { 1.0 } else { 0.0 };
                                dx[row + j * inner] = share * mask;
                            }
                        }
                    }
                    Ok(())
                })
            })
        })
    })???
}

/// Cases for `amax`/`amin`; `tied` has exact ties (the shared gradient is still smooth along
/// the checked directions only when ties move together, so it is checked with the oracle).
fn extreme_cases(f: ArgFn) -> Vec<Case> {
    vec![
        Case::new("all", vec![Case::distinct_input(&[3, 4], 1)], move |x| f(&x[0], None, false)),
        Case::new("axis0_keep_dim", vec![Case::distinct_input(&[4, 3], 2)], move |x| f(&x[0], Some(0), true)),
        Case::new("axis_last", vec![Case::distinct_input(&[2, 3, 5], 3)], move |x| f(&x[0], Some(-1), false)),
        Case::new("transposed", vec![Case::distinct_input(&[5, 3], 4)], move |x| f(&crate::transpose(&x[0], 0, 1)?, Some(1), false)),
    ]
}

/// Largest element over `axis` (all elements for `None`); NaN propagates.
/// Backward: `g` shared evenly among the tied maxima, `(g / count) · (x == y)` (PyTorch).
#[op(saved = [x, out], attrs = [axis: Option<isize>, keep_dim: bool])]
pub mod amax {
    use super::*;

    pub fn forward(x: &Tensor, axis: Option<isize>, keep_dim: bool) -> Result<Tensor> {
        extreme_values(NAME, x, axis, keep_dim, Extreme::Max)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(shared_grad(NAME, r.x(), r.out(), g, r.axis).map_err(|e| e.with_op(NAME))?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        extreme_cases(super::amax)
    }
}

/// Smallest element over `axis` (all elements for `None`); NaN propagates.
/// Backward: `g` shared evenly among the tied minima, `(g / count) · (x == y)` (PyTorch).
#[op(saved = [x, out], attrs = [axis: Option<isize>, keep_dim: bool])]
pub mod amin {
    use super::*;

    pub fn forward(x: &Tensor, axis: Option<isize>, keep_dim: bool) -> Result<Tensor> {
        extreme_values(NAME, x, axis, keep_dim, Extreme::Min)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(shared_grad(NAME, r.x(), r.out(), g, r.axis).map_err(|e| e.with_op(NAME))?);
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
    /// The element indices of the row, in increasing order along the reduced axis.
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

/// `log Σ exp(x)` over `axis` (all elements for `None`), shifted by the row maximum `m`:
/// `m + log Σ exp(x − m)`, the exponentials summed in f64 in element order; `exp`/`log` are
/// `om_core::kernels::math`'s (the same bits on every path and in both modes).
/// Backward: `g · exp(x − y)` (the softmax of the row).
#[op(saved = [x, out], attrs = [axis: Option<isize>, keep_dim: bool])]
pub mod logsumexp {
    use super::*;
    use om_core::kernels::math::{exp, log};

    pub fn forward(x: &Tensor, axis: Option<isize>, keep_dim: bool) -> Result<Tensor> {
        x.expect_f32(NAME, "x")?;
        let (outer, len, inner, out_shape) = geometry(NAME, x.shape(), axis, keep_dim)?;
        x.try_with_f32(|xs| {
            Tensor::build_f32(&out_shape, |out| {
                for_rows(outer, len, inner, |k, row| {
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
        let (outer, len, inner, _) = geometry(NAME, x.shape(), r.axis, false)?;
        let dx = x.try_with_f32(|xs| {
            r.out().try_with_f32(|ys| {
                g.try_with_f32(|gs| {
                    Tensor::build_f32(x.shape(), |dx| {
                        for_rows(outer, len, inner, |k, row| row.indices().for_each(|i| dx[i] = gs[k] * exp(xs[i] - ys[k])));
                        Ok(())
                    })
                })
            })
        })????;
        d.x(dx);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        vec![
            Case::new("all", vec![Case::input(&[3, 4], -2.0, 2.0, 1)], |x| super::logsumexp(&x[0], None, false)),
            Case::new("axis1", vec![Case::input(&[3, 5], -2.0, 2.0, 2)], |x| super::logsumexp(&x[0], Some(1), false)),
            Case::new("axis0_keep_dim", vec![Case::input(&[4, 2, 3], -2.0, 2.0, 3)], |x| super::logsumexp(&x[0], Some(0), true)),
            Case::new("transposed", vec![Case::input(&[4, 3], -2.0, 2.0, 4)], |x| {
                super::logsumexp(&crate::transpose(&x[0], 0, 1)?, Some(-1), false)
            }),
            Case::new("expanded", vec![Case::input(&[3, 1], -2.0, 2.0, 5)], |x| {
                super::logsumexp(&crate::expand(&x[0], vec![3, 4])?, Some(1), false)
            }),
        ]
    }
}

/// Row means and centred sums of squares, two-pass in f64: `(mean, Σ (x − mean)², n)`.
fn moments(xs: &[f32], row: Row) -> (f64, f64) {
    let n = row.len as f64;
    let mean = row.indices().map(|r| xs[r] as f64).sum::<f64>() / n;
    (mean, row.indices().map(|r| (xs[r] as f64 - mean).powi(2)).sum())
}

/// The divisor of `var`/`std`: `n − 1` when `unbiased` (Bessel), else `n`.
fn divisor(n: usize, unbiased: bool) -> f64 {
    n as f64 - f64::from(u8::from(unbiased))
}

/// Variance or standard deviation of each row (f64 two-pass), and its backward.
fn moment_forward(op: &'static str, x: &Tensor, axis: Option<isize>, unbiased: bool, keep_dim: bool, root: bool) -> Result<Tensor> {
    x.expect_f32(op, "x")?;
    let (outer, len, inner, out_shape) = geometry(op, x.shape(), axis, keep_dim)?;
    if len == 0 {
        return Err(Error::shape(op, &[x.shape()], "the variance of zero elements is undefined"));
    }
    x.try_with_f32(|xs| {
        Tensor::build_f32(&out_shape, |out| {
            for_rows(outer, len, inner, |k, row| {
                let v = moments(xs, row).1 / divisor(len, unbiased);
                out[k] = if root { v.sqrt() } else { v } as f32;
            });
            Ok(())
        })
    })?
}

/// `dx = g · 2(x − mean) / d` for `var`; for `std` (`y = √var`): `g · (x − mean) / (d · y)`.
fn moment_backward(op: &'static str, x: &Tensor, y: Option<&Tensor>, g: &Tensor, axis: Option<isize>, unbiased: bool) -> Result<Tensor> {
    let (outer, len, inner, _) = geometry(op, x.shape(), axis, false)?;
    let d = divisor(len, unbiased);
    let ys = y.map(|y| y.try_with_f32(|v| v.to_vec())).transpose()?;
    x.try_with_f32(|xs| {
        g.try_with_f32(|gs| {
            Tensor::build_f32(x.shape(), |dx| {
                for_rows(outer, len, inner, |k, row| {
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
    })??
}

fn moment_cases(f: fn(&Tensor, Option<isize>, bool, bool) -> Result<Tensor>) -> Vec<Case> {
    vec![
        Case::new("all_unbiased", vec![Case::input(&[3, 4], -1.0, 1.0, 1)], move |x| f(&x[0], None, true, false)),
        Case::new("axis1_biased", vec![Case::input(&[3, 5], -1.0, 1.0, 2)], move |x| f(&x[0], Some(1), false, false)),
        Case::new("axis0_keep_dim", vec![Case::input(&[4, 2, 3], -1.0, 1.0, 3)], move |x| f(&x[0], Some(0), true, true)),
        Case::new("transposed", vec![Case::input(&[4, 3], -1.0, 1.0, 4)], move |x| {
            f(&crate::transpose(&x[0], 0, 1)?, Some(-1), true, false)
        }),
        Case::new("strided", vec![Case::input(&[3, 8], -1.0, 1.0, 5)], move |x| {
            f(&crate::slice(&x[0], 1, 1, 8, 2)?, Some(0), false, false)
        }),
    ]
}

/// Variance over `axis` (all elements for `None`): `Σ (x − mean)² / (n − 1)` when
/// `unbiased`, `/ n` otherwise (PyTorch's `correction` 1 or 0); two passes in f64, one
/// rounding. One element with `unbiased` gives NaN, as in PyTorch.
/// Backward: `g · 2(x − mean) / (n − 1 or n)`.
#[op(saved = [x], attrs = [axis: Option<isize>, unbiased: bool, keep_dim: bool])]
pub mod var {
    use super::*;

    pub fn forward(x: &Tensor, axis: Option<isize>, unbiased: bool, keep_dim: bool) -> Result<Tensor> {
        moment_forward(NAME, x, axis, unbiased, keep_dim, false)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(moment_backward(NAME, r.x(), None, g, r.axis, r.unbiased).map_err(|e| e.with_op(NAME))?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        moment_cases(super::var)
    }
}

/// Standard deviation over `axis`: `√var` (see [`var()`]; the root taken in f64). PyTorch's
/// `std`, named `std_dev` so that it never shadows the `std` crate in a glob import.
/// Backward: `g · (x − mean) / ((n − 1 or n) · y)`, and 0 where `y = 0` (PyTorch's mask).
#[op(saved = [x, out], attrs = [axis: Option<isize>, unbiased: bool, keep_dim: bool])]
pub mod std_dev {
    use super::*;

    pub fn forward(x: &Tensor, axis: Option<isize>, unbiased: bool, keep_dim: bool) -> Result<Tensor> {
        moment_forward(NAME, x, axis, unbiased, keep_dim, true)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(moment_backward(NAME, r.x(), Some(r.out()), g, r.axis, r.unbiased).map_err(|e| e.with_op(NAME))?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        moment_cases(super::std_dev)
    }
}

// ===== sums over several axes =====

/// Validated axes of a multi-axis reduction, as a sorted set of distinct non-negative axes.
fn axis_set(op: &'static str, shape: &[usize], axes: &[isize]) -> Result<Vec<usize>> {
    if axes.is_empty() {
        return Err(Error::argument(op, "name at least one axis (sum(x, None, ..) reduces all of them)"));
    }
    let mut set = axes.iter().map(|&a| normalize_axis(op, a, shape.len(), false)).collect::<Result<Vec<_>>>()?;
    set.sort_unstable();
    if set.windows(2).any(|w| w[0] == w[1]) {
        return Err(Error::argument(op, format!("axis listed twice in {axes:?}")));
    }
    Ok(set)
}

/// `x` with the `axes` moved last (kept axes in order first), reduced in one f64 sum per
/// output over the moved axes in row-major order, scaled by `1/count` for a mean.
fn sum_over(op: &'static str, x: &Tensor, axes: &[isize], keep_dim: bool, mean: bool) -> Result<Tensor> {
    x.expect_f32(op, "x")?;
    let shape = x.shape();
    let set = axis_set(op, shape, axes)?;
    let kept: Vec<usize> = (0..shape.len()).filter(|a| !set.contains(a)).collect();
    let len: usize = set.iter().map(|&a| shape[a]).product();
    if mean && len == 0 {
        return Err(Error::shape(op, &[shape], "mean over zero elements is undefined"));
    }
    let out_shape: Vec<usize> =
        (0..shape.len()).filter_map(|a| if set.contains(&a) { keep_dim.then_some(1) } else { Some(shape[a]) }).collect();
    if let [a] = set[..] {
        // One axis: `sum`/`mean` themselves, which sum a large expanded view in place.
        let a = Some(a as isize);
        return if mean { crate::mean(x, a, keep_dim) } else { crate::sum(x, a, keep_dim) };
    }
    let order: Vec<isize> = kept.iter().chain(&set).map(|&a| a as isize).collect();
    let moved = crate::permute(x, order)?;
    let scale = if mean { 1.0 / len as f64 } else { 1.0 };
    moved.try_with_f32(|xs| Tensor::build_f32(&out_shape, |out| om_core::kernels::reduce::sum_axis(xs, out.len(), len, 1, scale, out)))?
}

/// `g` (reduced over `axes`) broadcast back to `shape`, divided by the count for a mean.
fn sum_over_backward(op: &'static str, g: &Tensor, shape: &[usize], axes: &[isize], mean: bool) -> Result<Tensor> {
    let set = axis_set(op, shape, axes)?;
    let kept_shape: Vec<isize> = (0..shape.len()).map(|a| if set.contains(&a) { 1 } else { shape[a] as isize }).collect();
    let g = if mean {
        let n = set.iter().map(|&a| shape[a]).product::<usize>() as f32;
        om_core::kernels::elementwise::unary(op, g, |v| v / n)?
    } else {
        g.clone()
    };
    crate::expand(&crate::reshape(&g, kept_shape)?, shape.iter().map(|&d| d as isize).collect())
}

fn sum_over_cases(f: fn(&Tensor, Vec<isize>, bool) -> Result<Tensor>) -> Vec<Case> {
    vec![
        Case::new("axes_0_2", vec![Case::input(&[2, 3, 4], -1.0, 1.0, 1)], move |x| f(&x[0], vec![0, 2], false)),
        Case::new("axes_last_two_keep_dim", vec![Case::input(&[2, 3, 4], -1.0, 1.0, 2)], move |x| f(&x[0], vec![-1, -2], true)),
        Case::new("one_axis", vec![Case::input(&[3, 4], -1.0, 1.0, 3)], move |x| f(&x[0], vec![1], false)),
        Case::new("transposed", vec![Case::input(&[4, 2, 3], -1.0, 1.0, 4)], move |x| {
            f(&crate::transpose(&x[0], 0, 2)?, vec![0, 1], false)
        }),
        Case::new("expanded", vec![Case::input(&[3, 1, 2], -1.0, 1.0, 5)], move |x| {
            f(&crate::expand(&x[0], vec![3, 4, 2])?, vec![1, 2], true)
        }),
    ]
}

/// Sum over several axes at once (distinct, at least one; any order, negative allowed),
/// optionally keeping them as size 1: one f64 sum per output in row-major order of the
/// reduced axes, rounded once (one axis is [`sum`](crate::sum()) itself; several gather the
/// view first). Backward: `g` broadcast to the input's shape.
#[op(attrs = [axes: Vec<isize>, keep_dim: bool])]
pub mod sum_axes {
    use super::*;

    pub fn forward(x: &Tensor, axes: Vec<isize>, keep_dim: bool) -> Result<Tensor> {
        sum_over(NAME, x, &axes, keep_dim, false)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(sum_over_backward(NAME, g, &r.input_shapes[0], &r.axes, false)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        sum_over_cases(super::sum_axes)
    }
}

/// Mean over several axes at once: [`sum_axes()`] scaled by `1/count` in f64 before rounding.
/// Backward: `g / count` broadcast to the input's shape.
#[op(attrs = [axes: Vec<isize>, keep_dim: bool])]
pub mod mean_axes {
    use super::*;

    pub fn forward(x: &Tensor, axes: Vec<isize>, keep_dim: bool) -> Result<Tensor> {
        sum_over(NAME, x, &axes, keep_dim, true)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(sum_over_backward(NAME, g, &r.input_shapes[0], &r.axes, true)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        sum_over_cases(super::mean_axes)
    }
}

// ===== vector norms =====

/// The layout of a reduction over `axes` (`None`: every axis): the permutation that moves
/// the reduced axes last (kept axes first, both in order), the output shape, and the
/// number of elements per output.
fn moved_layout(op: &'static str, shape: &[usize], axes: &Option<Vec<isize>>, keep_dim: bool) -> Result<(Vec<isize>, Vec<usize>, usize)> {
    let set = match axes {
        None => (0..shape.len()).collect(),
        Some(a) => axis_set(op, shape, a)?,
    };
    let kept: Vec<usize> = (0..shape.len()).filter(|a| !set.contains(a)).collect();
    let order = kept.iter().chain(&set).map(|&a| a as isize).collect();
    let out_shape = (0..shape.len()).filter_map(|a| if set.contains(&a) { keep_dim.then_some(1) } else { Some(shape[a]) }).collect();
    Ok((order, out_shape, set.iter().map(|&a| shape[a]).product()))
}

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

/// The vector norm of `x` over `axes` (`None`: every element), PyTorch's
/// `torch.linalg.vector_norm(x, ord, dim, keepdim)` for `ord` 1 (`Σ|x|`), 2 (`√Σx²`) or
/// `f32::INFINITY` (`max|x|`; NaN propagates). Sums are f64 in row-major order of the
/// reduced axes, rounded once. Backward, as PyTorch: `g·sgn(x)` (ord 1), `x·(g/‖x‖)` with 0
/// where the norm is 0 (ord 2), `sgn(x)·(g/count)` at the elements whose `|x|` equals the
/// maximum, shared evenly among ties (ord ∞).
#[op(saved = [x, out], attrs = [ord: f32, axes: Option<Vec<isize>>, keep_dim: bool])]
pub mod vector_norm {
    use super::*;

    pub fn forward(x: &Tensor, ord: f32, axes: Option<Vec<isize>>, keep_dim: bool) -> Result<Tensor> {
        x.expect_f32(NAME, "x")?;
        if !(ord == 1.0 || ord == 2.0 || ord == f32::INFINITY) {
            return Err(Error::argument(NAME, format!("ord must be 1, 2 or infinity, got {ord}")));
        }
        let (order, out_shape, len) = moved_layout(NAME, x.shape(), &axes, keep_dim)?;
        if ord == f32::INFINITY && len == 0 {
            return Err(Error::shape(NAME, &[x.shape()], "the infinity norm of zero elements is undefined"));
        }
        crate::permute(x, order)?.try_with_f32(|xs| {
            Tensor::build_f32(&out_shape, |out| {
                for (i, o) in out.iter_mut().enumerate() {
                    let row = &xs[i * len..(i + 1) * len]; // empty rows too: their norm is 0
                    *o = if ord == 1.0 {
                        row.iter().fold(0.0f64, |s, &v| s + (v as f64).abs()) as f32
                    } else if ord == 2.0 {
                        row.iter().fold(0.0f64, |s, &v| s + v as f64 * v as f64).sqrt() as f32
                    } else {
                        row.iter().fold(0.0f32, |m, &v| if v.is_nan() || m.is_nan() { f32::NAN } else { m.max(v.abs()) })
                    };
                }
                Ok(())
            })
        })?
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let x = r.x();
        let (order, _, len) = moved_layout(NAME, x.shape(), &r.axes, r.keep_dim)?;
        let moved = crate::permute(x, order.clone())?;
        let ord = r.ord;
        let grad = moved.try_with_f32(|xs| {
            g.try_with_f32(|gs| {
                r.out().try_with_f32(|ns| {
                    Tensor::build_f32(moved.shape(), |dx| {
                        for (((dr, row), &g), &n) in dx.chunks_mut(len.max(1)).zip(xs.chunks(len.max(1))).zip(gs).zip(ns) {
                            if ord == 1.0 {
                                dr.iter_mut().zip(row).for_each(|(d, &v)| *d = g * sgn(v));
                            } else if ord == 2.0 {
                                let s = if n == 0.0 { 0.0 } else { g / n };
                                dr.iter_mut().zip(row).for_each(|(d, &v)| *d = v * s);
                            } else {
                                let ties = row.iter().filter(|v| v.abs() == n).count().max(1) as f32;
                                let s = g / ties;
                                dr.iter_mut().zip(row).for_each(|(d, &v)| *d = if v.abs() == n { sgn(v) * s } else { 0.0 });
                            }
                        }
                        Ok(())
                    })
                })
            })
        })????;
        // Back to the input's axis order (a view of the moved buffer).
        let mut inverse = vec![0isize; order.len()];
        for (i, &a) in order.iter().enumerate() {
            inverse[a as usize] = i as isize;
        }
        d.x(crate::permute(&grad, inverse)?);
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
                super::vector_norm(&x[0], ord, Some(vec![0, 2]), true)
            }));
            cases.push(Case::new(format!("{tag}_transposed_last"), vec![Case::distinct_input(&[4, 3], 3)], move |x| {
                super::vector_norm(&crate::transpose(&x[0], 0, 1)?, ord, Some(vec![-1]), false)
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
            for (op, f) in [("amax", amax as ArgFn), ("amin", amin)] {
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
            let y = logsumexp(&x, Some(1), false).unwrap();
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
            for (op, f) in [("var", var as fn(&Tensor, Option<isize>, bool, bool) -> Result<Tensor>), ("std", std_dev)] {
                for (name, axis, keep) in cases_at_least(&o, op, 6) {
                    let unbiased = o.get(&format!("{name}_params")).to_vec_i32()[2] != 0;
                    let x = o.get(&format!("{name}_x"));
                    check_values(&o, &name, &x, &f(&x, axis, unbiased, keep).unwrap());
                }
            }
        });
    }

    #[test]
    fn sum_mean_axes_match_pytorch() {
        let o = oracle();
        both_modes(|| {
            for (op, f) in [("sum_axes", sum_axes as fn(&Tensor, Vec<isize>, bool) -> Result<Tensor>), ("mean_axes", mean_axes)] {
                for n in 0..4 {
                    let name = format!("{op}_{n}");
                    let p = o.get(&format!("{name}_params")).to_vec_i32();
                    let x = o.get(&format!("{name}_x"));
                    let y = f(&x, p[1..].iter().map(|&a| a as isize).collect(), p[0] != 0).unwrap();
                    check_values(&o, &name, &x, &y);
                }
            }
        });
        let x = Tensor::zeros(&[2, 3]).unwrap();
        assert_eq!(sum_axes(&x, vec![], false).unwrap_err().op(), "sum_axes");
        assert_eq!(mean_axes(&x, vec![1, -1], false).unwrap_err().op(), "mean_axes");
        assert_eq!(sum_axes(&x, vec![2], false).unwrap_err().op(), "sum_axes");
    }

    #[test]
    fn vector_norm_matches_pytorch() {
        let o = oracle();
        both_modes(|| {
            for n in 0..9 {
                let name = format!("vector_norm_{n}");
                let p = o.get(&format!("{name}_params")).to_vec_i32();
                let ord = if p[0] < 0 { f32::INFINITY } else { p[0] as f32 };
                let axes = (p[2] != -99).then(|| p[2..].iter().map(|&a| a as isize).collect());
                let x = o.get(&format!("{name}_x"));
                check_values(&o, &name, &x, &vector_norm(&x, ord, axes, p[1] != 0).unwrap());
            }
        });
        // Pinned: the 2-norm's gradient at a zero vector is 0 (PyTorch masks 0/0).
        let z = Tensor::zeros(&[3]).unwrap().requires_grad().unwrap();
        vector_norm(&z, 2.0, None, false).unwrap().backward().unwrap();
        assert_eq!(z.grad().unwrap().to_vec(), vec![0.0; 3]);
        let x = Tensor::zeros(&[2, 0]).unwrap();
        assert_eq!(vector_norm(&x, 2.0, Some(vec![1]), false).unwrap().to_vec(), vec![0.0, 0.0]);
        assert_eq!(vector_norm(&x, f32::INFINITY, Some(vec![1]), false).unwrap_err().op(), "vector_norm");
        assert_eq!(vector_norm(&x, 3.0, None, false).unwrap_err().op(), "vector_norm");
    }

    #[test]
    fn bad_arguments_are_errors_naming_the_op() {
        assert_eq!(var(&Tensor::zeros(&[0]).unwrap(), None, true, false).unwrap_err().op(), "var");
        assert_eq!(std_dev(&Tensor::zeros(&[2]).unwrap(), Some(1), true, false).unwrap_err().op(), "std_dev");
        let x = Tensor::zeros(&[2, 3]).unwrap();
        let empty = Tensor::zeros(&[2, 0]).unwrap();
        assert_eq!(max_dim(&x, 2, false).unwrap_err().op(), "max_dim");
        assert_eq!(min_dim(&empty, -1, true).unwrap_err().op(), "min_dim");
        assert_eq!(argmin(&empty, Some(1), false).unwrap_err().op(), "argmin");
        assert_eq!(amax(&empty, None, false).unwrap_err().op(), "amax");
        let bad = Tensor::from_vec_i32(vec![0, 3, 1], &[1, 3]).unwrap();
        assert_eq!(take_along_axis(&x, &bad, 1).unwrap_err().op(), "take_along_axis");
        let wrong_shape = Tensor::from_vec_i32(vec![0, 1], &[1, 2]).unwrap();
        assert_eq!(take_along_axis(&x, &wrong_shape, 1).unwrap_err().op(), "take_along_axis");
        assert_eq!(take_along_axis(&x, &x, 1).unwrap_err().op(), "take_along_axis");
    }
}
