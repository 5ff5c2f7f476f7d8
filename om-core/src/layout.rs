//! Shapes, strides and the walks over strided memory that every kernel shares:
//! broadcasting, axis normalisation, and [`for_each_row`], which visits a (possibly
//! broadcast, strided or transposed) N-d layout one innermost row at a time in row-major
//! order, after merging the dimensions that can be merged. A shape or strides is a [`Dims`],
//! held inline up to [`INLINE_RANK`] dimensions (so a tensor handle, a view or a broadcast
//! allocates no vector for them) and on the heap beyond.

use crate::error::{Error, Result};
use crate::inline_vec::InlineVec;

/// The rank up to which a [`Dims`] or a tensor handle's layout needs no heap allocation
/// (the benchmark models' tensors have at most 4 dimensions: NCHW images, attention's
/// batch × heads × positions × features).
pub const INLINE_RANK: usize = 4;

/// A shape or strides: dereferences to `&[usize]`; inline up to [`INLINE_RANK`] entries.
pub type Dims = InlineVec<usize, INLINE_RANK>;

/// Signed sizes or axes (a `reshape` target with `-1`, a permutation, negative axes):
/// dereferences to `&[isize]`; inline up to [`INLINE_RANK`] entries. What an operator
/// records for a `&[isize]` attribute, and what code that computes such an argument can
/// build without a heap allocation.
pub type SignedDims = InlineVec<isize, INLINE_RANK>;

/// A tensor handle's shape and strides packed together: one inline array up to
/// [`INLINE_RANK`] dimensions, one heap slice beyond (shape first, then strides).
#[derive(Clone)]
pub(crate) enum ShapeStrides {
    Inline { rank: u8, dims: [usize; 2 * INLINE_RANK] },
    Heap(Box<[usize]>),
}

impl ShapeStrides {
    /// Packs `shape` and `strides` (of equal length).
    pub(crate) fn new(shape: &[usize], strides: &[usize]) -> ShapeStrides {
        debug_assert_eq!(shape.len(), strides.len());
        let rank = shape.len();
        if rank <= INLINE_RANK {
            let mut dims = [0; 2 * INLINE_RANK];
            dims[..rank].copy_from_slice(shape);
            dims[INLINE_RANK..INLINE_RANK + rank].copy_from_slice(strides);
            ShapeStrides::Inline { rank: rank as u8, dims }
        } else {
            ShapeStrides::Heap(shape.iter().chain(strides).copied().collect())
        }
    }

    pub(crate) fn shape(&self) -> &[usize] {
        match self {
            ShapeStrides::Inline { rank, dims } => &dims[..usize::from(*rank)],
            ShapeStrides::Heap(d) => &d[..d.len() / 2],
        }
    }

    pub(crate) fn strides(&self) -> &[usize] {
        match self {
            ShapeStrides::Inline { rank, dims } => &dims[INLINE_RANK..INLINE_RANK + usize::from(*rank)],
            ShapeStrides::Heap(d) => &d[d.len() / 2..],
        }
    }
}

/// Row-major (C-order) strides of `shape`.
pub fn contiguous_strides(shape: &[usize]) -> Dims {
    let mut strides = Dims::from_elem(0, shape.len());
    let mut s = 1usize;
    for (i, &d) in shape.iter().enumerate().rev() {
        strides[i] = s;
        s = s.saturating_mul(d.max(1));
    }
    strides
}

/// Number of elements of `shape` (1 for a scalar), or `None` when the product of its
/// sizes overflows, zero sizes aside (so the contiguous strides of a zero-size shape are
/// representable too: `[0, 2^40, 2^40]` is refused whichever order its sizes come in).
pub fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d.max(1)))?;
    Some(shape.iter().product())
}

/// Number of elements of `shape` (1 for a scalar). Shapes inside tensors never overflow.
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// The broadcast of two shapes (NumPy rules), or a shape error naming `op`.
pub fn broadcast_shapes(op: &'static str, a: &[usize], b: &[usize]) -> Result<Dims> {
    let rank = a.len().max(b.len());
    let mut out = Dims::from_elem(0, rank);
    for i in 0..rank {
        let da = if i + a.len() >= rank { a[i + a.len() - rank] } else { 1 };
        let db = if i + b.len() >= rank { b[i + b.len() - rank] } else { 1 };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return Err(Error::shape(op, &[a, b], format!("dimension {i} of the broadcast does not match ({da} vs {db})"))),
        };
    }
    Ok(out)
}

/// Strides that read a tensor of `shape`/`strides` as if broadcast to `out_shape`
/// (0 on broadcast dimensions). The caller has checked that the shapes broadcast.
pub fn broadcast_strides(shape: &[usize], strides: &[usize], out_shape: &[usize]) -> Dims {
    let lead = out_shape.len() - shape.len();
    (0..out_shape.len()).map(|i| if i < lead || shape[i - lead] == 1 && out_shape[i] != 1 { 0 } else { strides[i - lead] }).collect()
}

/// Normalises `axis` in `-rank..rank` (or `-(rank+1)..=rank` when `inclusive`, for insertion).
pub fn normalize_axis(op: &'static str, axis: isize, rank: usize, inclusive: bool) -> Result<usize> {
    let n = rank as isize + isize::from(inclusive);
    let a = if axis < 0 { axis + n } else { axis };
    if a < 0 || a >= n {
        return Err(Error::Axis { op, axis, rank });
    }
    Ok(a as usize)
}

/// Visits every innermost row of a layout of `shape` read through `K` operands, each with
/// its own strides (0 where broadcast) and offset, in row-major order.
///
/// `f(starts, len, steps)` receives each operand's offset of the row's first element, the
/// row length and each operand's step along the row. Dimensions are merged where every
/// operand allows it, so a contiguous walk is a single row.
pub fn for_each_row<const K: usize>(
    shape: &[usize],
    strides: [&[usize]; K],
    offsets: [usize; K],
    f: impl FnMut([usize; K], usize, [usize; K]),
) {
    if shape.contains(&0) {
        return;
    }
    // The merged dims, their steps and the odometer live on the stack up to this rank, so
    // the walk allocates nothing on the heap.
    const INLINE: usize = 8;
    if shape.len() <= INLINE {
        let (mut dims, mut steps, mut idx) = ([0usize; INLINE], [[0usize; K]; INLINE], [0usize; INLINE]);
        walk_rows(shape, strides, offsets, &mut dims, &mut steps, &mut idx, f);
    } else {
        let r = shape.len();
        walk_rows(shape, strides, offsets, &mut vec![0; r], &mut vec![[0; K]; r], &mut vec![0; r], f);
    }
}

/// [`for_each_row`] with scratch of at least `shape.len()` entries for the merged dims,
/// their steps and the odometer.
fn walk_rows<const K: usize>(
    shape: &[usize],
    strides: [&[usize]; K],
    offsets: [usize; K],
    dims: &mut [usize],
    st: &mut [[usize; K]],
    idx: &mut [usize],
    mut f: impl FnMut([usize; K], usize, [usize; K]),
) {
    // Merge dimensions (drop size-1 dims, fuse i with i+1 when stride[i] == stride[i+1]*dim[i+1]).
    let mut r = 0;
    for (i, &d) in shape.iter().enumerate() {
        if d == 1 {
            continue;
        }
        let s: [usize; K] = std::array::from_fn(|k| strides[k][i]);
        if r > 0 && (0..K).all(|k| st[r - 1][k] == s[k] * d) {
            dims[r - 1] *= d;
            st[r - 1] = s;
            continue;
        }
        dims[r] = d;
        st[r] = s;
        r += 1;
    }
    if r == 0 {
        f(offsets, 1, [0; K]);
        return;
    }
    let inner = dims[r - 1];
    let inner_steps = st[r - 1];
    let outer = &dims[..r - 1];
    let idx = &mut idx[..r - 1];
    idx.fill(0);
    let mut starts = offsets;
    loop {
        f(starts, inner, inner_steps);
        // Advance the odometer over the outer dimensions.
        let mut d = outer.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            for k in 0..K {
                starts[k] += st[d][k];
            }
            if idx[d] < outer[d] {
                break;
            }
            for k in 0..K {
                starts[k] -= st[d][k] * outer[d];
            }
            idx[d] = 0;
        }
    }
}

/// Visits the storage offset of every element of a strided layout in row-major order.
pub fn for_each_offset(shape: &[usize], strides: &[usize], offset: usize, mut f: impl FnMut(usize)) {
    for_each_row(shape, [strides], [offset], |[start], len, [step]| {
        for i in 0..len {
            f(start + i * step);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_visit_transposed_layout_in_row_major_order() {
        // A 2x3 row-major buffer read as its 3x2 transpose.
        let mut seen = vec![];
        for_each_offset(&[3, 2], &[1, 3], 0, |o| seen.push(o));
        assert_eq!(seen, vec![0, 3, 1, 4, 2, 5]);
    }

    #[test]
    fn layouts_above_the_inline_rank_walk_the_same() {
        // Rank 9 (heap scratch): a contiguous layout is one row; reversing the axes visits
        // the elements of the transpose in row-major order.
        let shape = [2usize; 9];
        let strides = contiguous_strides(&shape);
        let mut rows = vec![];
        for_each_row(&shape, [&strides], [0], |[s], len, [step]| rows.push((s, len, step)));
        assert_eq!(rows, vec![(0, 512, 1)]);
        let rev: Vec<usize> = strides.iter().rev().copied().collect();
        let mut seen = vec![];
        for_each_offset(&shape, &rev, 0, |o| seen.push(o));
        let expected: Vec<usize> = (0..512usize).map(|i| (0..9).map(|b| ((i >> b) & 1) << (8 - b)).sum()).collect();
        assert_eq!(seen, expected);
    }

    #[test]
    fn packed_layouts_give_back_their_shape_and_strides() {
        for rank in [0, 1, INLINE_RANK, INLINE_RANK + 3] {
            let shape: Vec<usize> = (2..2 + rank).collect();
            let strides = contiguous_strides(&shape);
            let p = ShapeStrides::new(&shape, &strides);
            assert_eq!((p.shape(), p.strides()), (&shape[..], &strides[..]));
            assert_eq!(matches!(p, ShapeStrides::Inline { .. }), rank <= INLINE_RANK);
        }
    }

    #[test]
    fn contiguous_layout_is_one_row() {
        let mut rows = 0;
        for_each_row(&[2, 3, 4], [&[12, 4, 1]], [5], |[s], len, [step]| {
            rows += 1;
            assert_eq!((s, len, step), (5, 24, 1));
        });
        assert_eq!(rows, 1);
    }

    #[test]
    fn broadcast_rules() {
        assert_eq!(broadcast_shapes("t", &[2, 1, 3], &[4, 1]).unwrap(), vec![2, 4, 3]);
        assert!(broadcast_shapes("t", &[2, 3], &[4]).is_err());
        assert_eq!(broadcast_strides(&[1, 3], &[3, 1], &[2, 2, 3]), vec![0, 0, 1]);
    }

    #[test]
    fn axes_normalise() {
        assert_eq!(normalize_axis("t", -1, 3, false).unwrap(), 2);
        assert!(normalize_axis("t", 3, 3, false).is_err());
        assert_eq!(normalize_axis("t", 3, 3, true).unwrap(), 3);
        assert_eq!(normalize_axis("t", -4, 3, true).unwrap(), 0);
        assert!(normalize_axis("t", 0, 0, false).is_err());
        assert_eq!(normalize_axis("t", 0, 0, true).unwrap(), 0);
    }
}
