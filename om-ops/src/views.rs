//! View operators: `slice`, `select`, `permute`, `transpose`, `reshape`, `view`,
//! `squeeze`, `unsqueeze`, `flatten`, `flatten_range`, `contiguous`, `expand` share the
//! input's storage where the layout allows (`reshape`, `flatten` and `contiguous` copy when
//! it does not; `view` refuses); `flip` and `cast` copy. Shapes are [`Shape`]s (`[8, -1]`,
//! `&[isize]`, another tensor's `shape()`), axis lists [`Axes`] (`[1, 0]`, `&[isize]`).
//! Backward: scatter into zeros, inverse permutation, reshape back, sum-to, flip, cast back.

use om_core::inline_vec::InlineVec;
use om_core::layout::{contiguous_strides, for_each_offset, normalize_axis, Dims, SignedDims};
use om_core::{Axes, Case, DType, Error, Result, Shape, Tensor};
use om_macros::op;

/// A strided layout: shape, strides, offset.
type Layout = (Dims, Dims, usize);

/// A borrowed strided layout: shape, strides, offset.
type LayoutRef<'a> = (&'a [usize], &'a [usize], usize);

/// The gradient of a view: zeros of the input's shape with `g` written where the view
/// (computed by `layout` on a contiguous input) reads.
fn scatter_into_zeros(g: &Tensor, input_shape: &[usize], layout: impl Fn(LayoutRef) -> Result<Layout>) -> Result<Tensor> {
    let (shape, strides, offset) = layout((input_shape, &contiguous_strides(input_shape), 0))?;
    g.try_with_f32(|gv| {
        Tensor::build_f32(input_shape, |out| {
            out.fill(0.0);
            let mut i = 0;
            for_each_offset(&shape, &strides, offset, |o| {
                out[o] += gv[i];
                i += 1;
            });
            Ok(())
        })
    })?
}

/// The view of `x` with layout `l`. An empty view gets offset 0: its computed offset can
/// lie past the end of the storage (selecting from a tensor with another zero-size axis),
/// where readers that slice the storage at the offset would go out of bounds.
fn view_of(x: &Tensor, l: Layout) -> Result<Tensor> {
    let offset = if l.0.contains(&0) { 0 } else { l.2 };
    x.as_strided(l.0, l.1, offset)
}

/// Python's slice bound: a negative `i` counts from the end, and the result is clamped to
/// `0..=dim` (as `x[i:]` in Python and PyTorch).
fn slice_bound(i: isize, dim: usize) -> usize {
    if i < 0 {
        dim.saturating_sub(i.unsigned_abs())
    } else {
        (i as usize).min(dim)
    }
}

fn slice_layout(
    op: &'static str,
    (shape, strides, offset): LayoutRef,
    axis: isize,
    start: isize,
    end: Option<isize>,
    step: isize,
) -> Result<Layout> {
    let a = normalize_axis(op, axis, shape.len(), false)?;
    let dim = shape[a];
    if step <= 0 {
        return Err(Error::argument(op, format!("step must be positive, got {step} (axis {axis}, shape {shape:?})")));
    }
    let (start, end) = (slice_bound(start, dim), end.map_or(dim, |e| slice_bound(e, dim)));
    let mut s = Dims::from_slice(shape);
    let mut st = Dims::from_slice(strides);
    s[a] = end.saturating_sub(start).div_ceil(step as usize);
    st[a] = strides[a] * step as usize;
    let off = if s[a] == 0 { offset } else { offset + start * strides[a] };
    Ok((s, st, off))
}

fn cases_1(f: impl Fn(&Tensor) -> Result<Tensor> + Send + Sync + Clone + 'static, shape: &[usize]) -> Vec<Case> {
    let g = f.clone();
    let mut t = shape.to_vec();
    t.reverse();
    vec![
        Case::new("contiguous", vec![Case::input(shape, -1.0, 1.0, 1)], move |x| f(&x[0])),
        Case::new("transposed", vec![Case::input(&t, -1.0, 1.0, 2)], move |x| {
            let r = x[0].rank();
            let dims: SignedDims = (0..r as isize).rev().collect();
            g(&crate::permute(&x[0], &dims[..])?)
        }),
    ]
}

// ===== slicing =====

/// Elements `start, start+step, .. < end` along `axis` (a view), with Python's slice
/// semantics: `slice(x, a, start, end, step)` is PyTorch's `x[.., start:end:step]` on axis
/// `a`, and `end = None` is an open end (`x[.., start::step]`). A negative `start`/`end`
/// counts from the end of the axis, both are clamped to `0..=len` (so `end <= start` gives
/// an empty axis); `step` must be positive (PyTorch has no negative steps either), an
/// error otherwise. Backward: `g` scattered into zeros of the input's shape.
///
/// # Examples
///
/// ```
/// # use om_core::Tensor;
/// let x = Tensor::from_vec((0..6).map(|v| v as f32).collect(), &[6])?;
/// // x[-4::2], x[1:100] and x[:-2]
/// assert_eq!(om_ops::slice(&x, 0, -4, None, 2)?.to_vec(), [2.0, 4.0]);
/// assert_eq!(om_ops::slice(&x, 0, 1, 100, 1)?.shape(), [5]);
/// assert_eq!(om_ops::slice(&x, 0, 0, -2, 1)?.to_vec(), [0.0, 1.0, 2.0, 3.0]);
/// # Ok::<(), om_core::Error>(())
/// ```
#[op(attrs = [axis: isize, start: isize, end: Option<isize>, step: isize])]
pub mod slice {
    use super::*;

    pub fn forward(x: &Tensor, axis: isize, start: isize, end: impl Into<Option<isize>>, step: isize) -> Result<Tensor> {
        view_of(x, slice_layout(NAME, (x.shape(), x.strides(), x.offset()), axis, start, end.into(), step)?)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(scatter_into_zeros(g, &r.input_shapes[0], |l| slice_layout(NAME, l, r.axis, r.start, r.end, r.step))
            .map_err(|e| e.with_op(NAME))?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let mut c = cases_1(|x| super::slice(x, 1, 1, 4, 2), &[3, 5]);
        c.push(Case::new("negative_axis", vec![Case::input(&[2, 3, 4], -1.0, 1.0, 3)], |x| super::slice(&x[0], -1, 0, 3, 1)));
        c.push(Case::new("negative_bounds", vec![Case::input(&[3, 6], -1.0, 1.0, 4)], |x| super::slice(&x[0], 1, -5, -1, 2)));
        c.push(Case::new("clamped_end_transposed", vec![Case::input(&[5, 3], -1.0, 1.0, 5)], |x| {
            super::slice(&crate::transpose(&x[0], 0, 1)?, 1, 2, 100, 1)
        }));
        c.push(Case::new("open_end", vec![Case::input(&[3, 7], -1.0, 1.0, 6)], |x| super::slice(&x[0], 1, -5, None, 2)));
        c
    }
}

fn select_layout(op: &'static str, (shape, strides, offset): LayoutRef, axis: isize, index: isize) -> Result<Layout> {
    let a = normalize_axis(op, axis, shape.len(), false)?;
    let dim = shape[a] as isize;
    let i = if index < 0 { index + dim } else { index };
    if i < 0 || i >= dim {
        return Err(Error::argument(op, format!("index {index} is out of range for axis {axis} of size {dim}")));
    }
    let mut s = Dims::from_slice(shape);
    let mut st = Dims::from_slice(strides);
    s.remove(a);
    st.remove(a);
    Ok((s, st, offset + i as usize * strides[a]))
}

/// The slice at `index` along `axis`, removing that axis (a view; negative indices count
/// from the end). Backward: `g` scattered into zeros.
///
/// # Examples
///
/// ```
/// use om_ops::{select, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
/// assert_eq!(select(&x, 1, -1)?.to_vec(), [3.0, 6.0]); // x[:, -1]
/// assert_eq!(select(&x, 0, 0)?.shape(), [3]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [axis: isize, index: isize])]
pub mod select {
    use super::*;

    pub fn forward(x: &Tensor, axis: isize, index: isize) -> Result<Tensor> {
        view_of(x, select_layout(NAME, (x.shape(), x.strides(), x.offset()), axis, index)?)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(scatter_into_zeros(g, &r.input_shapes[0], |l| select_layout(NAME, l, r.axis, r.index)).map_err(|e| e.with_op(NAME))?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let mut c = cases_1(|x| super::select(x, 0, -1), &[3, 4]);
        c.push(Case::new("middle_axis", vec![Case::input(&[2, 3, 4], -1.0, 1.0, 4)], |x| super::select(&x[0], 1, 1)));
        c
    }
}

// ===== axis order =====

fn check_permutation(op: &'static str, dims: &Axes, rank: usize) -> Result<Dims> {
    let Some(dims) = dims.as_given() else {
        return Err(Error::argument(op, format!("needs the new order of all {rank} axes (e.g. [1, 0]), got None")));
    };
    if dims.len() != rank {
        return Err(Error::argument(op, format!("permutation {dims:?} has {} axes but the tensor has rank {rank}", dims.len())));
    }
    let mut seen = InlineVec::<bool, { om_core::layout::INLINE_RANK }>::from_elem(false, rank);
    let mut out = Dims::new();
    for &d in dims {
        let a = normalize_axis(op, d, rank, false)?;
        if std::mem::replace(&mut seen[a], true) {
            return Err(Error::argument(op, format!("axis {d} appears twice in permutation {dims:?}")));
        }
        out.push(a);
    }
    Ok(out)
}

/// Reorders the axes: output axis `i` is input axis `dims[i]` (a view; PyTorch's
/// `x.permute(dims)`), `dims` a permutation of every axis written as an array, slice or
/// vector (negative axes count from the end). Backward: the inverse permutation of `g`.
///
/// # Examples
///
/// ```
/// use om_ops::{permute, Tensor};
/// let x = Tensor::zeros(&[2, 3, 4])?;
/// assert_eq!(permute(&x, [2, 0, 1])?.shape(), [4, 2, 3]);
/// assert_eq!(permute(&x, &[0, -1, 1][..])?.shape(), [2, 4, 3]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [dims: Axes])]
pub mod permute {
    use super::*;

    pub fn forward(x: &Tensor, dims: impl Into<Axes>) -> Result<Tensor> {
        let p = check_permutation(NAME, &dims.into(), x.rank())?;
        let shape: Dims = p.iter().map(|&a| x.shape()[a]).collect();
        let strides: Dims = p.iter().map(|&a| x.strides()[a]).collect();
        x.as_strided(shape, strides, x.offset())
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let p = check_permutation(NAME, &r.dims, r.input_shapes[0].len())?;
        let mut inv = SignedDims::from_elem(0, p.len());
        for (i, &a) in p.iter().enumerate() {
            inv[a] = i as isize;
        }
        d.x(crate::permute(g, &inv[..])?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        cases_1(|x| super::permute(x, [2, 0, 1]), &[2, 3, 4])
    }
}

/// Swaps two axes (a view). Backward: the same swap of `g`.
///
/// # Examples
///
/// ```
/// use om_ops::{transpose, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
/// let t = transpose(&x, 0, -1)?;
/// assert_eq!((t.shape(), t.to_vec()), (&[3, 2][..], vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]));
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [dim0: isize, dim1: isize])]
pub mod transpose {
    use super::*;

    pub fn forward(x: &Tensor, dim0: isize, dim1: isize) -> Result<Tensor> {
        let a = normalize_axis(NAME, dim0, x.rank(), false)?;
        let b = normalize_axis(NAME, dim1, x.rank(), false)?;
        let mut shape = Dims::from_slice(x.shape());
        let mut strides = Dims::from_slice(x.strides());
        shape.swap(a, b);
        strides.swap(a, b);
        x.as_strided(shape, strides, x.offset())
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(crate::transpose(g, r.dim0, r.dim1)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let mut c = cases_1(|x| super::transpose(x, 0, -1), &[2, 3, 4]);
        c.push(Case::new("strided", vec![Case::input(&[4, 6], -1.0, 1.0, 5)], |x| {
            super::transpose(&crate::slice(&x[0], 1, 0, None, 2)?, 0, 1)
        }));
        c
    }
}

// ===== shape changes =====

/// Resolves a requested shape with at most one `-1` against `numel` elements.
fn resolve_shape(op: &'static str, from: &[usize], requested: &[isize], numel: usize) -> Result<Dims> {
    let mut infer = None;
    let mut known = 1usize;
    for (i, &d) in requested.iter().enumerate() {
        match d {
            -1 if infer.is_none() => infer = Some(i),
            -1 => return Err(Error::argument(op, format!("only one dimension may be -1, got {requested:?}"))),
            d if d < 0 => return Err(Error::argument(op, format!("invalid dimension {d} in {requested:?}"))),
            d => known = known.checked_mul(d as usize).ok_or_else(|| Error::argument(op, format!("shape {requested:?} overflows")))?,
        }
    }
    let mut shape: Dims = requested.iter().map(|&d| d.max(0) as usize).collect();
    if let Some(i) = infer {
        if known == 0 || !numel.is_multiple_of(known) {
            return Err(Error::shape(op, &[from], format!("cannot infer the -1 in {requested:?} for {numel} elements")));
        }
        shape[i] = numel / known;
    }
    if om_core::layout::checked_numel(&shape) != Some(numel) {
        return Err(Error::shape(op, &[from], format!("shape {requested:?} does not hold {numel} elements")));
    }
    Ok(shape)
}

/// Strides that view a layout as `new_shape` without copying, if any exist (the rule
/// PyTorch's `view` uses: each run of mutually contiguous input axes maps to output axes).
fn view_strides(old_shape: &[usize], old_strides: &[usize], new_shape: &[usize]) -> Option<Dims> {
    if old_shape.iter().product::<usize>() <= 1 || old_shape.is_empty() {
        return Some(contiguous_strides(new_shape));
    }
    let mut new_strides = Dims::from_elem(0, new_shape.len());
    let mut view_d = new_shape.len() as isize - 1;
    let mut chunk_base = *old_strides.last()?;
    let mut tensor_numel = 1usize;
    let mut view_numel = 1usize;
    for td in (0..old_shape.len()).rev() {
        tensor_numel *= old_shape[td];
        let boundary = td == 0 || (old_shape[td - 1] != 1 && old_strides[td - 1] != tensor_numel * chunk_base);
        if boundary {
            while view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d as usize] == 1) {
                new_strides[view_d as usize] = view_numel * chunk_base;
                view_numel *= new_shape[view_d as usize];
                view_d -= 1;
            }
            if view_numel != tensor_numel {
                return None;
            }
            if td > 0 {
                chunk_base = old_strides[td - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    if view_d != -1 {
        return None;
    }
    Some(new_strides)
}

/// `x` with the same elements in row-major order as `shape` (`-1` infers one dimension):
/// a view when the strides allow, else a contiguous copy.
fn reshape_to(x: &Tensor, shape: Dims) -> Result<Tensor> {
    match view_strides(x.shape(), x.strides(), &shape) {
        Some(strides) => x.as_strided(shape, strides, x.offset()),
        None => {
            let c = x.try_to_contiguous()?;
            let strides = contiguous_strides(&shape);
            c.as_strided(shape, strides, 0)
        }
    }
}

/// The elements in row-major order as a new shape (PyTorch's `x.reshape(shape)`): an
/// array or slice with at most one `-1` (inferred from the element count), or a shape read
/// from another tensor (`y.shape()`). A view when the layout allows, else a copy.
/// Backward: `g` reshaped to the input's shape.
///
/// # Examples
///
/// ```
/// use om_ops::{reshape, transpose, Tensor};
/// let x = Tensor::zeros(&[8, 2, 4])?;
/// let r = reshape(&x, [8, -1])?;
/// assert_eq!(r.shape(), [8, 8]);
/// assert_eq!(reshape(&r, x.shape())?.shape(), x.shape());
/// // A transposed input is copied (the strides cannot express the new shape).
/// assert_eq!(reshape(&transpose(&r, 0, 1)?, [-1])?.shape(), [64]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [shape: Shape])]
pub mod reshape {
    use super::*;

    pub fn forward(x: &Tensor, shape: impl Into<Shape>) -> Result<Tensor> {
        let shape: Shape = shape.into();
        let s = resolve_shape(NAME, x.shape(), &shape, x.numel())?;
        reshape_to(x, s)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(reshape_to(g, r.input_shapes[0].clone())?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let mut c = cases_1(|x| super::reshape(x, [4, -1]), &[2, 3, 4]);
        c.push(Case::new("strided_copy", vec![Case::input(&[3, 8], -1.0, 1.0, 6)], |x| {
            super::reshape(&crate::slice(&x[0], 1, 0, None, 2)?, [-1])
        }));
        c.push(Case::new("shape_of_another", vec![Case::input(&[2, 6], -1.0, 1.0, 7)], |x| {
            super::reshape(&x[0], Tensor::zeros(&[3, 4])?.shape())
        }));
        c
    }
}

/// As [`reshape()`], but always a view of the input's storage (PyTorch's `x.view(shape)`):
/// an error, as in PyTorch, when the input's strides cannot express the new shape (a
/// transposed input, for one); [`reshape()`] copies then. Backward: `g` reshaped to the
/// input's shape.
///
/// # Examples
///
/// ```
/// use om_ops::{transpose, view, Tensor};
/// let x = Tensor::zeros(&[4, 6])?;
/// let v = view(&x, [2, -1, 3])?;
/// assert_eq!(v.shape(), [2, 4, 3]);
/// assert!(v.shares_storage(&x));
/// assert!(view(&transpose(&x, 0, 1)?, [-1]).is_err());
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [shape: Shape])]
pub mod view {
    use super::*;

    pub fn forward(x: &Tensor, shape: impl Into<Shape>) -> Result<Tensor> {
        let shape: Shape = shape.into();
        let s = resolve_shape(NAME, x.shape(), &shape, x.numel())?;
        let Some(strides) = view_strides(x.shape(), x.strides(), &s) else {
            return Err(Error::shape(
                NAME,
                &[x.shape()],
                format!(
                    "view size {:?} is not compatible with the input's size and stride {:?} (at least one dimension spans \
                     across two contiguous subspaces); use reshape instead",
                    &s[..],
                    x.strides()
                ),
            ));
        };
        x.as_strided(s, strides, x.offset())
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(reshape_to(g, r.input_shapes[0].clone())?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let mut c = vec![Case::new("contiguous", vec![Case::input(&[2, 3, 4], -1.0, 1.0, 1)], |x| super::view(&x[0], [4, -1]))];
        c.push(Case::new("strided_rows", vec![Case::input(&[6, 4], -1.0, 1.0, 2)], |x| {
            super::view(&crate::slice(&x[0], 0, 0, None, 2)?, [3, 2, 2])
        }));
        c.push(Case::new("transposed_split", vec![Case::input(&[4, 6], -1.0, 1.0, 3)], |x| {
            super::view(&crate::transpose(&x[0], 0, 1)?, [2, 3, 4])
        }));
        c
    }
}

/// The axes `squeeze` removes: every size-1 axis for `None`, else the named ones that have
/// size 1 (PyTorch leaves a named axis of another size in place).
fn squeezed(op: &'static str, shape: &[usize], axes: &Axes) -> Result<InlineVec<bool, { om_core::layout::INLINE_RANK }>> {
    let rank = shape.len();
    let mut drop = InlineVec::from_elem(false, rank);
    match axes.as_given() {
        None => (0..rank).for_each(|a| drop[a] = shape[a] == 1),
        Some(given) => {
            let mut seen = InlineVec::<bool, { om_core::layout::INLINE_RANK }>::from_elem(false, rank);
            for &a in given {
                let i = normalize_axis(op, a, rank, false)?;
                if std::mem::replace(&mut seen[i], true) {
                    return Err(Error::argument(op, format!("axis {a} appears more than once in {given:?}")));
                }
                drop[i] = shape[i] == 1;
            }
        }
    }
    Ok(drop)
}

/// Removes the size-1 axes among `axes` (PyTorch's `x.squeeze(dim)`): one axis (`0`,
/// `-1`), several (`[0, 2]`), or every size-1 axis for `None`; a named axis of another
/// size stays (a view). Backward: `g` reshaped to the input's shape.
///
/// # Examples
///
/// ```
/// use om_ops::{squeeze, Tensor};
/// let x = Tensor::zeros(&[1, 3, 1])?;
/// assert_eq!(squeeze(&x, 0)?.shape(), [3, 1]);
/// assert_eq!(squeeze(&x, None)?.shape(), [3]);
/// assert_eq!(squeeze(&x, [1, -1])?.shape(), [1, 3]); // axis 1 has size 3: kept
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [axes: Axes])]
pub mod squeeze {
    use super::*;

    pub fn forward(x: &Tensor, axes: impl Into<Axes>) -> Result<Tensor> {
        let drop = squeezed(NAME, x.shape(), &axes.into())?;
        let keep = || (0..x.rank()).filter(|&i| !drop[i]);
        x.as_strided(keep().map(|i| x.shape()[i]).collect::<Dims>(), keep().map(|i| x.strides()[i]).collect::<Dims>(), x.offset())
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(reshape_to(g, r.input_shapes[0].clone())?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let mut c = cases_1(|x| super::squeeze(x, None), &[3, 1, 4]);
        c.push(Case::new("one_axis", vec![Case::input(&[1, 3, 1], -1.0, 1.0, 7)], |x| super::squeeze(&x[0], -1)));
        c.push(Case::new("two_axes", vec![Case::input(&[1, 3, 1], -1.0, 1.0, 8)], |x| super::squeeze(&x[0], [0, 1])));
        c
    }
}

/// Inserts a size-1 axis at `axis` (`-rank-1..=rank`, PyTorch's `x.unsqueeze(dim)`; a
/// view). Backward: `g` reshaped to the input's shape.
///
/// # Examples
///
/// ```
/// use om_ops::{unsqueeze, Tensor};
/// let x = Tensor::zeros(&[3, 4])?;
/// assert_eq!(unsqueeze(&x, 0)?.shape(), [1, 3, 4]);
/// assert_eq!(unsqueeze(&x, -1)?.shape(), [3, 4, 1]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [axis: isize])]
pub mod unsqueeze {
    use super::*;

    pub fn forward(x: &Tensor, axis: isize) -> Result<Tensor> {
        let a = normalize_axis(NAME, axis, x.rank(), true)?;
        let mut shape = Dims::from_slice(x.shape());
        let mut strides = Dims::from_slice(x.strides());
        let s = if a < x.rank() { x.strides()[a] * x.shape()[a] } else { 1 };
        shape.insert(a, 1);
        strides.insert(a, s);
        x.as_strided(shape, strides, x.offset())
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(reshape_to(g, r.input_shapes[0].clone())?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let mut c = cases_1(|x| super::unsqueeze(x, 1), &[3, 4]);
        c.push(Case::new("last", vec![Case::input(&[3, 4], -1.0, 1.0, 8)], |x| super::unsqueeze(&x[0], -1)));
        c
    }
}

/// `flatten_range`'s target shape: the axes `start..=end` merged into one.
fn flattened(op: &'static str, shape: &[usize], start: isize, end: isize) -> Result<SignedDims> {
    // A scalar flattens to one element along one axis, as in PyTorch.
    let rank = shape.len().max(1);
    let (s, e) = (normalize_axis(op, start, rank, false)?, normalize_axis(op, end, rank, false)?);
    if s > e {
        return Err(Error::argument(op, format!("the start axis {start} comes after the end axis {end} (rank {})", shape.len())));
    }
    if shape.is_empty() {
        return Ok(SignedDims::from_elem(1, 1));
    }
    let merged: usize = shape[s..=e].iter().product();
    Ok(shape[..s].iter().map(|&d| d as isize).chain([merged as isize]).chain(shape[e + 1..].iter().map(|&d| d as isize)).collect())
}

/// The axes from `start` to the last merged into one (PyTorch's `x.flatten(start_dim)`;
/// `flatten(x, 0)` is every element in one axis): [`reshape()`] to the merged shape, so a
/// view when the layout allows. [`flatten_range()`] also names the last merged axis.
/// A scalar gives one element along one axis.
///
/// # Examples
///
/// ```
/// use om_ops::{flatten, Tensor};
/// let x = Tensor::zeros(&[8, 4, 3, 3])?;
/// assert_eq!(flatten(&x, 1)?.shape(), [8, 36]);
/// assert_eq!(flatten(&x, 0)?.shape(), [288]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(composition)]
pub mod flatten {
    use super::*;

    pub fn forward(x: &Tensor, start: isize) -> Result<Tensor> {
        crate::reshape(x, flattened(NAME, x.shape(), start, -1)?)
    }

    fn cases() -> Vec<Case> {
        let mut c = cases_1(|x| super::flatten(x, 1), &[2, 3, 4]);
        c.push(Case::new("all", vec![Case::input(&[3, 4], -1.0, 1.0, 3)], |x| super::flatten(&x[0], 0)));
        c
    }
}

/// The axes `start..=end` merged into one (PyTorch's `x.flatten(start_dim, end_dim)`;
/// negative axes count from the end): [`reshape()`] to the merged shape, a view when the
/// layout allows. An error when `start` comes after `end`.
///
/// # Examples
///
/// ```
/// use om_ops::{flatten_range, Tensor};
/// let x = Tensor::zeros(&[8, 4, 3, 3])?;
/// assert_eq!(flatten_range(&x, 1, 2)?.shape(), [8, 12, 3]);
/// assert_eq!(flatten_range(&x, 0, -2)?.shape(), [96, 3]);
/// assert!(flatten_range(&x, 2, 1).is_err());
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(composition)]
pub mod flatten_range {
    use super::*;

    pub fn forward(x: &Tensor, start: isize, end: isize) -> Result<Tensor> {
        crate::reshape(x, flattened(NAME, x.shape(), start, end)?)
    }

    fn cases() -> Vec<Case> {
        let mut c = cases_1(|x| super::flatten_range(x, 0, 1), &[2, 3, 4]);
        c.push(Case::new("middle", vec![Case::input(&[2, 3, 4, 2], -1.0, 1.0, 3)], |x| super::flatten_range(&x[0], 1, -2)));
        c
    }
}

/// The same values in row-major order: the input's storage if already contiguous, else
/// a copy. Backward: `g`.
///
/// # Examples
///
/// ```
/// use om_ops::{contiguous, transpose, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
/// let c = contiguous(&transpose(&x, 0, 1)?)?;
/// assert!(c.is_contiguous() && c.to_vec() == [1.0, 3.0, 2.0, 4.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op]
pub mod contiguous {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        x.try_to_contiguous()
    }

    fn backward(_r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(g.clone());
        Ok(())
    }

    fn cases() -> Vec<Case> {
        cases_1(super::contiguous, &[3, 4])
    }
}

/// Broadcasts size-1 axes (and new leading axes) to `shape` without copying (PyTorch's
/// `x.expand(shape)`; `-1` keeps a dimension; `shape` may be read from another tensor).
/// Backward: `g` summed back to the input's shape (by the engine).
///
/// # Examples
///
/// ```
/// use om_ops::{expand, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3, 1])?;
/// assert_eq!(expand(&x, [-1, 2])?.to_vec(), [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]);
/// assert_eq!(expand(&x, [2, 3, 4])?.shape(), [2, 3, 4]);
/// assert_eq!(expand(&x, Tensor::zeros(&[3, 5])?.shape())?.shape(), [3, 5]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [shape: Shape])]
pub mod expand {
    use super::*;

    pub fn forward(x: &Tensor, shape: impl Into<Shape>) -> Result<Tensor> {
        let shape: Shape = shape.into();
        let shape = &shape[..];
        let r = x.rank();
        if shape.len() < r {
            return Err(Error::argument(NAME, format!("target {shape:?} has fewer axes than the input shape {:?}", x.shape())));
        }
        let lead = shape.len() - r;
        let mut out_shape = Dims::new();
        let mut strides = Dims::new();
        for (i, &want) in shape.iter().enumerate() {
            if i < lead {
                if want < 0 {
                    return Err(Error::argument(NAME, format!("new leading axis {i} of {shape:?} needs an explicit size")));
                }
                out_shape.push(want as usize);
                strides.push(0);
                continue;
            }
            let have = x.shape()[i - lead];
            let st = x.strides()[i - lead];
            match want {
                -1 => {
                    out_shape.push(have);
                    strides.push(st);
                }
                w if w >= 0 && w as usize == have => {
                    out_shape.push(have);
                    strides.push(st);
                }
                w if w >= 0 && have == 1 => {
                    out_shape.push(w as usize);
                    strides.push(0);
                }
                w => {
                    return Err(Error::shape(
                        NAME,
                        &[x.shape()],
                        format!("axis {i} of size {have} cannot expand to {w} (target {shape:?})"),
                    ));
                }
            }
        }
        if om_core::layout::checked_numel(&out_shape).is_none() {
            return Err(Error::shape(NAME, &[x.shape()], format!("the element count of {out_shape:?} overflows")));
        }
        x.as_strided(out_shape, strides, x.offset())
    }

    fn backward(_r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(g.clone());
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let mut c = cases_1(|x| super::expand(x, [2, -1, 3]), &[1, 1]);
        c.push(Case::new("middle", vec![Case::input(&[2, 1, 3], -1.0, 1.0, 9)], |x| super::expand(&x[0], [2, 4, 3])));
        c
    }
}

/// Reverses the order along `axes` (a copy, as PyTorch's `x.flip(dims)`): one axis,
/// several (`[0, -1]`), or every axis for `None`. Backward: `g` flipped back.
///
/// # Examples
///
/// ```
/// use om_ops::{flip, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
/// assert_eq!(flip(&x, 1)?.to_vec(), [2.0, 1.0, 4.0, 3.0]);
/// assert_eq!(flip(&x, [0, 1])?.to_vec(), [4.0, 3.0, 2.0, 1.0]);
/// assert_eq!(flip(&x, None)?.to_vec(), [4.0, 3.0, 2.0, 1.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [axes: Axes])]
pub mod flip {
    use super::*;

    pub fn forward(x: &Tensor, axes: impl Into<Axes>) -> Result<Tensor> {
        let axes: Axes = axes.into();
        let r = x.rank();
        let mut flipped = InlineVec::<bool, { om_core::layout::INLINE_RANK }>::from_elem(axes.as_given().is_none(), r);
        for &a in axes.as_given().unwrap_or(&[]) {
            let i = normalize_axis(NAME, a, r, false)?;
            if std::mem::replace(&mut flipped[i], true) {
                return Err(Error::argument(NAME, format!("axis {a} appears twice in {:?}", axes.as_given().unwrap_or(&[]))));
            }
        }
        // Output element `lin` (row-major) reads the input at the mirrored index on each
        // flipped axis.
        let shape = x.shape().to_vec();
        let strides = contiguous_strides(&shape);
        x.try_with_f32(|src| {
            Tensor::build_f32(&shape, |out| {
                for (lin, o) in out.iter_mut().enumerate() {
                    let mut s = 0usize;
                    for i in 0..r {
                        let idx = lin / strides[i] % shape[i];
                        s += if flipped[i] { shape[i] - 1 - idx } else { idx } * strides[i];
                    }
                    *o = src[s];
                }
                Ok(())
            })
        })?
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(crate::flip(g, r.axes.clone())?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let mut c = cases_1(|x| super::flip(x, [0, -1]), &[3, 4]);
        c.push(Case::new("one_axis", vec![Case::input(&[2, 3, 4], -1.0, 1.0, 10)], |x| super::flip(&x[0], 1)));
        c.push(Case::new("every_axis", vec![Case::input(&[2, 3], -1.0, 1.0, 11)], |x| super::flip(&x[0], None)));
        c
    }
}

/// Converts the element type (`f32` → `i32` truncates toward zero and saturates, NaN
/// becomes 0; `i32` → `f32` rounds to nearest). Casting to the same type returns a view.
/// Backward: `g` cast back to the input's type (only `f32` inputs carry gradients).
///
/// # Examples
///
/// ```
/// use om_core::DType;
/// use om_ops::{cast, Tensor};
/// let x = Tensor::from_vec(vec![1.7, -2.5], &[2])?;
/// assert_eq!(cast(&x, DType::I32)?.to_vec_i32(), [1, -2]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [dtype: DType])]
pub mod cast {
    use super::*;

    pub fn forward(x: &Tensor, dtype: DType) -> Result<Tensor> {
        if x.dtype() == dtype {
            return Ok(x.detach());
        }
        match dtype {
            DType::F32 => x.try_with_f32(|s| {
                Tensor::build_f32(x.shape(), |o| {
                    o.copy_from_slice(s);
                    Ok(())
                })
            })?,
            DType::I32 => x.try_with_i32(|s| {
                Tensor::build_i32(x.shape(), |o| {
                    o.copy_from_slice(s);
                    Ok(())
                })
            })?,
        }
    }

    fn backward(_r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(g.clone());
        Ok(())
    }

    fn cases() -> Vec<Case> {
        cases_1(|x| super::cast(x, DType::F32), &[3, 4])
    }
}

// ===== joining =====

/// Joins tensors of equal shape except along `axis` (any number, at least one; a copy).
/// Backward: each input gets its slice of `g`.
///
/// # Examples
///
/// ```
/// use om_ops::{concat, Tensor};
/// let a = Tensor::ones(&[2, 1])?;
/// let b = Tensor::zeros(&[2, 2])?;
/// assert_eq!(concat(&[a, b], -1)?.to_vec(), [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [axis: isize])]
pub mod concat {
    use super::*;

    pub fn forward(xs: &[Tensor], axis: isize) -> Result<Tensor> {
        let Some(first) = xs.first() else {
            return Err(Error::argument(NAME, "needs at least one tensor"));
        };
        let rank = first.rank();
        let a = normalize_axis(NAME, axis, rank, false)?;
        for (j, t) in xs.iter().enumerate() {
            if t.dtype() != DType::F32 {
                return Err(Error::DType { op: NAME, arg: "xs", expected: DType::F32, got: t.dtype() });
            }
            let fits = t.rank() == rank && (0..rank).all(|d| d == a || t.shape()[d] == first.shape()[d]);
            if !fits {
                let shapes: Vec<&[usize]> = xs.iter().map(|t| t.shape()).collect();
                return Err(Error::shape(NAME, &shapes, format!("tensor {j} does not match tensor 0 outside axis {axis}")));
            }
        }
        let mut shape = Dims::from_slice(first.shape());
        shape[a] = xs.iter().map(|t| t.shape()[a]).sum();
        let out_strides = contiguous_strides(&shape);
        Tensor::build_f32(&shape, |out| {
            let mut start = 0;
            for t in xs {
                let len = t.shape()[a];
                let (s, st, o) =
                    slice_layout(NAME, (&shape, &out_strides, 0), a as isize, start as isize, Some((start + len) as isize), 1)?;
                t.try_with_f32(|src| {
                    let mut i = 0;
                    for_each_offset(&s, &st, o, |off| {
                        out[off] = src[i];
                        i += 1;
                    });
                })?;
                start += len;
            }
            Ok(())
        })
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let a = normalize_axis(NAME, r.axis, g.rank(), false)?;
        let mut start = 0;
        for (j, shape) in r.input_shapes.iter().enumerate() {
            let len = shape[a];
            if d.needs_xs(j) {
                d.xs(j, crate::slice(g, r.axis, start as isize, (start + len) as isize, 1)?);
            }
            start += len;
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        vec![
            Case::new(
                "three_on_axis1",
                vec![Case::input(&[2, 3], -1.0, 1.0, 1), Case::input(&[2, 1], -1.0, 1.0, 2), Case::input(&[2, 4], -1.0, 1.0, 3)],
                |x| super::concat(x, 1),
            ),
            Case::new("axis0_transposed", vec![Case::input(&[3, 2], -1.0, 1.0, 4), Case::input(&[1, 3], -1.0, 1.0, 5)], |x| {
                super::concat(&[crate::transpose(&x[0], 0, 1)?, x[1].clone()], 0)
            }),
            Case::new("constant_input", vec![Tensor::ones(&[2, 2]).unwrap(), Case::input(&[2, 2], -1.0, 1.0, 6)], |x| super::concat(x, -1)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use crate::oracle::{assert_close, both_modes, Oracle};

    #[test]
    fn slice_bounds_follow_python() {
        let o = Oracle::load_file("indexing", "tools/oracle_indexing.py");
        both_modes(|| {
            let x = o.get("slice_x");
            for (name, axis, start, end, step) in
                [("neg", 1, -5, Some(-1), 2), ("clamped", 0, -10, Some(100), 1), ("empty", 1, 5, Some(2), 1), ("open_end", 1, 2, None, 3)]
            {
                let y = crate::slice(&x, axis, start, end, step).unwrap();
                assert_close(&format!("slice_{name}_y"), &y, &o.get(&format!("slice_{name}_y")));
                if y.numel() > 0 {
                    o.check_grads(&format!("slice_{name}"), &y, &[("x", &x)]);
                }
            }
        });
        let x = o.get("slice_x");
        for step in [0, -1] {
            let e = crate::slice(&x, 1, 0, 3, step).unwrap_err().to_string();
            assert!(e.contains("slice") && e.contains(&step.to_string()), "{e}");
        }
    }

    #[test]
    fn shapes_and_axis_lists_read_naturally() {
        let x = om_core::Tensor::from_vec((0..24).map(|v| v as f32).collect(), &[2, 3, 4]).unwrap();
        let dims: Vec<isize> = vec![2, 0, 1];
        assert_eq!(crate::permute(&x, &dims[..]).unwrap().shape(), [4, 2, 3]);
        assert_eq!(crate::permute(&x, dims).unwrap().shape(), [4, 2, 3]);
        let r = crate::reshape(&x, [-1, 4]).unwrap();
        assert_eq!(crate::reshape(&r, x.shape()).unwrap().to_vec(), x.to_vec());
        let v = crate::view(&x, [6, -1]).unwrap();
        assert!(v.shares_storage(&x) && v.shape() == [6, 4]);
        assert_eq!(crate::flatten(&x, 1).unwrap().shape(), [2, 12]);
        assert_eq!(crate::flatten(&x, -1).unwrap().shape(), [2, 3, 4]);
        assert_eq!(crate::flatten_range(&x, 0, 1).unwrap().to_vec(), x.to_vec());
        assert_eq!(crate::flatten(&om_core::Tensor::scalar(2.0), 0).unwrap().shape(), [1]);
        let u = crate::unsqueeze(&crate::flatten(&x, 1).unwrap(), 0).unwrap();
        assert_eq!(crate::squeeze(&u, 0).unwrap().shape(), [2, 12]);
        assert_eq!(crate::squeeze(&u, Some(0)).unwrap().shape(), [2, 12]);
        assert_eq!(crate::squeeze(&u, 1).unwrap().shape(), [1, 2, 12], "a named axis of size 2 stays");
        let t = crate::transpose(&x, 0, 2).unwrap();
        assert_eq!(crate::flatten(&t, 0).unwrap().to_vec(), crate::contiguous(&t).unwrap().to_vec());
    }

    #[test]
    fn bad_shapes_and_axes_are_errors_naming_the_op() {
        let x = om_core::Tensor::zeros(&[2, 3, 4]).unwrap();
        let t = crate::transpose(&x, 0, 2).unwrap();
        let e = crate::view(&t, [-1]).unwrap_err();
        assert!(e.op() == "view" && e.to_string().contains("reshape"), "{e}");
        assert_eq!(crate::reshape(&x, [-1, -1]).unwrap_err().op(), "reshape");
        assert_eq!(crate::view(&x, [5, -1]).unwrap_err().op(), "view");
        assert_eq!(crate::expand(&x, [3, 3, 4]).unwrap_err().op(), "expand");
        assert_eq!(crate::permute(&x, [0, 1]).unwrap_err().op(), "permute");
        assert_eq!(crate::permute(&x, [0, 1, -2]).unwrap_err().op(), "permute");
        assert_eq!(crate::permute(&x, None).unwrap_err().op(), "permute");
        assert_eq!(crate::flip(&x, [1, -2]).unwrap_err().op(), "flip");
        assert_eq!(crate::squeeze(&x, [0, -3]).unwrap_err().op(), "squeeze");
        assert_eq!(crate::squeeze(&x, 3).unwrap_err().op(), "squeeze");
        assert_eq!(crate::flatten(&x, 3).unwrap_err().op(), "flatten");
        assert_eq!(crate::flatten_range(&x, 2, 1).unwrap_err().op(), "flatten_range");
        assert_eq!(crate::flatten_range(&x, 0, -4).unwrap_err().op(), "flatten_range");
    }
}
