//! Indexing operators with PyTorch's semantics: `gather` (`torch.gather`: pick along one
//! axis at Int32 positions, the index may be smaller than the input in the other axes),
//! `index_select` (whole slices at a list of positions) and `masked_fill` (a value where a
//! mask is nonzero). Gradients flow to the values only; the backward of `gather` and
//! `index_select` scatter-adds `g` into zeros of the input's shape, summing repeated
//! positions in f64 in the order of the output's elements and rounding once, so both modes
//! and every thread count give the same bits.
//!
//! Table lookups: `embedding` gathers rows of a `[V, D]` weight by `i32` ids of any shape.
//! Backward adds each gradient row to its table row in id order (the rows of one id summed
//! in f64 in the order the ids appear, rounded once), skipping the padding id.

use om_core::layout::{broadcast_shapes, contiguous_strides, normalize_axis, numel, Dims};
use om_core::pool::F64Scratch;
use om_core::{Case, DType, Error, Result, Tensor};
use om_macros::op;

/// Fails unless `index` (the argument named `arg`) is an Int32 tensor.
pub(crate) fn expect_i32(op: &'static str, arg: &'static str, index: &Tensor) -> Result<()> {
    if index.dtype() != DType::I32 {
        return Err(Error::DType { op, arg, expected: DType::I32, got: index.dtype() });
    }
    Ok(())
}

/// `i` as a position on an axis of length `len`, or an error naming `op` (PyTorch raises
/// for negative positions too).
fn position(op: &'static str, i: i32, len: usize) -> Result<usize> {
    usize::try_from(i)
        .ok()
        .filter(|&p| p < len)
        .ok_or_else(|| Error::argument(op, format!("index {i} is out of range for an axis of length {len}")))
}

/// Visits every element of a tensor of shape `shape` in row-major order, giving its flat
/// position and `Σ_{d ≠ skip} coord[d]·strides[d]` (its offset in a tensor with `strides`,
/// without the `skip` axis's term).
fn for_each_position(shape: &[usize], skip: usize, strides: &[usize], mut f: impl FnMut(usize, usize) -> Result<()>) -> Result<()> {
    let n: usize = shape.iter().product();
    let mut coord = Dims::from_elem(0, shape.len());
    let mut base = 0usize;
    for p in 0..n {
        f(p, base)?;
        for d in (0..shape.len()).rev() {
            coord[d] += 1;
            if d != skip {
                base += strides[d];
            }
            if coord[d] < shape[d] {
                break;
            }
            if d != skip {
                base -= shape[d] * strides[d];
            }
            coord[d] = 0;
        }
    }
    Ok(())
}

/// The shapes `gather` works on: a scalar is seen as one element on one axis.
fn as_rank1(shape: &[usize]) -> &[usize] {
    if shape.is_empty() {
        &[1]
    } else {
        shape
    }
}

/// The gradient of an indexing operator for its input of shape `x_shape`: `scatter` adds
/// `g`'s values into zeros of that shape held in f64 (repeated positions summing in the
/// order it adds them), and each sum is rounded once to f32. Errors name `op`.
pub(crate) fn scatter_add_grad(op: &'static str, x_shape: &[usize], scatter: impl FnOnce(&mut [f64]) -> Result<()>) -> Result<Tensor> {
    let mut acc = F64Scratch::try_zeroed(numel(x_shape)).map_err(|e| e.with_op(op))?;
    let acc = acc.values();
    scatter(acc).map_err(|e| e.with_op(op))?;
    Tensor::build_f32(x_shape, |dx| {
        dx.iter_mut().zip(acc.iter()).for_each(|(d, &s)| *d = s as f32);
        Ok(())
    })
    .map_err(|e| e.with_op(op))
}

/// The gather loop shared by `gather` and `take_along_axis` (their checks done):
/// `out[p] = x[p with p[a] replaced by index[p]]` for every position `p` of `index` (a
/// scalar seen as one element on one axis), each position checked against `x`'s axis `a`.
/// The output has `index`'s shape.
pub(crate) fn gather_along(op: &'static str, x: &Tensor, index: &Tensor, a: usize) -> Result<Tensor> {
    let (xs, is) = (as_rank1(x.shape()), as_rank1(index.shape()));
    let strides = contiguous_strides(xs);
    x.try_with_f32(|xv| {
        index.try_with_i32(|iv| {
            Tensor::build_f32(index.shape(), |out| {
                for_each_position(is, a, &strides, |p, base| {
                    out[p] = xv[base + position(op, iv[p], xs[a])? * strides[a]];
                    Ok(())
                })
            })
        })
    })??
}

/// The gradient of [`gather_along`] for an `x` of shape `x_shape`: `g` scatter-added into
/// zeros of that shape at the same positions (repeats summed in f64 in output order).
pub(crate) fn scatter_along(op: &'static str, g: &Tensor, index: &Tensor, x_shape: &[usize], a: usize) -> Result<Tensor> {
    let (xs, is) = (as_rank1(x_shape), as_rank1(index.shape()));
    let strides = contiguous_strides(xs);
    scatter_add_grad(op, x_shape, |acc| {
        g.try_with_f32(|gv| {
            index.try_with_i32(|iv| {
                for_each_position(is, a, &strides, |p, base| {
                    acc[base + position(op, iv[p], xs[a])? * strides[a]] += gv[p] as f64;
                    Ok(())
                })
            })
        })??
    })
}

/// `out[p] = x[p with p[dim] replaced by index[p]]` for every position `p` of `index`
/// (PyTorch's `torch.gather(x, dim, index)`): `index` is Int32 with `x`'s rank, at most `x`'s
/// size in every axis but `dim`, and holds positions in `0..x.shape[dim]`; the output has
/// `index`'s shape. Backward: `g` scatter-added into zeros of `x`'s shape at the same
/// positions (repeats summed in f64 in output order).
///
/// ```
/// use om_ops::{gather, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
/// let i = Tensor::from_vec_i32(vec![1, 1, 0, 1], &[2, 2])?;
/// assert_eq!(gather(&x, 1, &i)?.to_vec(), vec![2.0, 2.0, 3.0, 4.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [index], attrs = [dim: isize])]
pub mod gather {
    use super::*;

    pub fn forward(x: &Tensor, dim: isize, index: &Tensor) -> Result<Tensor> {
        x.expect_f32(NAME, "x")?;
        expect_i32(NAME, "index", index)?;
        if x.rank() != index.rank() {
            return Err(Error::shape(NAME, &[x.shape(), index.shape()], "`index` must have as many dimensions as `x`"));
        }
        let (xs, is) = (as_rank1(x.shape()), as_rank1(index.shape()));
        let a = normalize_axis(NAME, dim, xs.len(), false)?;
        if xs.iter().zip(is).enumerate().any(|(d, (&p, &q))| d != a && q > p) {
            return Err(Error::shape(
                NAME,
                &[x.shape(), index.shape()],
                format!("`index` may not be larger than `x` in any dimension but {a}"),
            ));
        }
        gather_along(NAME, x, index, a)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let a = normalize_axis(NAME, r.dim, as_rank1(&r.input_shapes[0]).len(), false)?;
        d.x(scatter_along(NAME, g, r.index(), &r.input_shapes[0], a)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let idx = |v: Vec<i32>, shape: &[usize]| Tensor::from_vec_i32(v, shape).unwrap_or_else(|e| panic!("{e}"));
        let i1 = idx(vec![2, 0, 2, 3, 3, 1], &[2, 3]);
        let i2 = idx(vec![1, 0, 2, 2, 0, 1], &[2, 3]);
        let i3 = idx(vec![0, 1, 1, 0, 1, 1, 0, 0], &[2, 2, 2]);
        vec![
            Case::new("dim1_smaller_and_repeated", vec![Case::input(&[3, 4], -1.0, 1.0, 1)], move |x| super::gather(&x[0], 1, &i1)),
            Case::new("transposed_dim0", vec![Case::input(&[4, 3], -1.0, 1.0, 2)], move |x| {
                super::gather(&crate::transpose(&x[0], 0, 1)?, 0, &i2)
            }),
            Case::new("rank3_last_dim", vec![Case::input(&[2, 3, 2], -1.0, 1.0, 3)], move |x| super::gather(&x[0], -1, &i3)),
        ]
    }
}

/// The slices of `x` at positions `index` along `dim` (PyTorch's `torch.index_select`):
/// `index` is a 1-D (or one-element 0-D) Int32 tensor of positions in `0..x.shape[dim]`,
/// repeats allowed; the output is `x`'s shape with `index.numel()` along `dim`. Backward:
/// `g`'s slices added into zeros of `x`'s shape at their positions (repeats summed in f64 in
/// output order).
///
/// ```
/// use om_ops::{index_select, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2])?;
/// let rows = Tensor::from_vec_i32(vec![2, 0], &[2])?;
/// assert_eq!(index_select(&x, 0, &rows)?.to_vec(), vec![5.0, 6.0, 1.0, 2.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [index], attrs = [dim: isize])]
pub mod index_select {
    use super::*;

    pub fn forward(x: &Tensor, dim: isize, index: &Tensor) -> Result<Tensor> {
        x.expect_f32(NAME, "x")?;
        expect_i32(NAME, "index", index)?;
        if index.rank() > 1 {
            return Err(Error::shape(NAME, &[index.shape()], "`index` must be a 1-D (or 0-D) tensor of positions"));
        }
        if x.rank() == 0 {
            return Err(Error::shape(NAME, &[x.shape()], "`x` needs at least one dimension to select along"));
        }
        let xs = x.shape();
        let a = normalize_axis(NAME, dim, xs.len(), false)?;
        let (outer, len, inner) = split(xs, a);
        let k = index.numel();
        let mut shape = xs.to_vec();
        shape[a] = k;
        x.try_with_f32(|xv| {
            index.try_with_i32(|iv| {
                Tensor::build_f32(&shape, |out| {
                    for o in 0..outer {
                        for (j, &i) in iv.iter().enumerate() {
                            let src = (o * len + position(NAME, i, len)?) * inner;
                            let dst = (o * k + j) * inner;
                            out[dst..dst + inner].copy_from_slice(&xv[src..src + inner]);
                        }
                    }
                    Ok(())
                })
            })
        })??
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let xs = &r.input_shapes[0];
        let a = normalize_axis(NAME, r.dim, xs.len(), false)?;
        let (outer, len, inner) = split(xs, a);
        let k = r.index().numel();
        d.x(scatter_add_grad(NAME, xs, |acc| {
            g.try_with_f32(|gv| {
                r.index().try_with_i32(|iv| -> Result<()> {
                    for o in 0..outer {
                        for (j, &i) in iv.iter().enumerate() {
                            let dst = (o * len + position(NAME, i, len)?) * inner;
                            let src = (o * k + j) * inner;
                            for (s, &v) in acc[dst..dst + inner].iter_mut().zip(&gv[src..src + inner]) {
                                *s += v as f64;
                            }
                        }
                    }
                    Ok(())
                })
            })??
        })?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let idx = |v: Vec<i32>, shape: &[usize]| Tensor::from_vec_i32(v, shape).unwrap_or_else(|e| panic!("{e}"));
        let (i1, i2, i3) = (idx(vec![2, 0, 2, 1], &[4]), idx(vec![1, 1, 0], &[3]), idx(vec![1], &[]));
        vec![
            Case::new("dim0_repeated", vec![Case::input(&[3, 4], -1.0, 1.0, 1)], move |x| super::index_select(&x[0], 0, &i1)),
            Case::new("transposed_dim1", vec![Case::input(&[2, 3], -1.0, 1.0, 2)], move |x| {
                super::index_select(&crate::transpose(&x[0], 0, 1)?, 1, &i2)
            }),
            Case::new("rank3_middle_scalar_index", vec![Case::input(&[2, 3, 2], -1.0, 1.0, 3)], move |x| {
                super::index_select(&x[0], -2, &i3)
            }),
        ]
    }
}

/// `(outer, len, inner)` of `shape` around axis `a`.
fn split(shape: &[usize], a: usize) -> (usize, usize, usize) {
    (shape[..a].iter().product(), shape[a], shape[a + 1..].iter().product())
}

/// `x` with `value` wherever `mask` is nonzero (PyTorch's `masked_fill`): `mask` is an Int32
/// or Float32 tensor that broadcasts to `x`'s shape (any nonzero value, NaN included,
/// counts as set); the output has `x`'s shape. `where_(mask, value, x)`, so backward passes
/// `g` to `x` where the mask is not set and zero where it is.
///
/// ```
/// use om_ops::{masked_fill, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
/// let upper = Tensor::from_vec_i32(vec![0, 1, 0, 0], &[2, 2])?;
/// assert_eq!(masked_fill(&x, &upper, f32::NEG_INFINITY)?.to_vec(), vec![1.0, f32::NEG_INFINITY, 3.0, 4.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
///
/// Backward: through `where_`: `g` to `x` where the mask is not set.
#[op(composition)]
pub mod masked_fill {
    use super::*;

    pub fn forward(x: &Tensor, mask: &Tensor, value: f32) -> Result<Tensor> {
        x.expect_f32(NAME, "x")?;
        if broadcast_shapes(NAME, mask.shape(), x.shape())? != x.shape() {
            return Err(Error::shape(NAME, &[x.shape(), mask.shape()], "`mask` must broadcast to the shape of `x`"));
        }
        crate::where_(mask, &Tensor::scalar(value), x)
    }

    fn cases() -> Vec<Case> {
        let rows = || Tensor::from_vec_i32(vec![1, 0, 0, 1], &[4]).unwrap_or_else(|e| panic!("{e}"));
        let mask = || Tensor::from_vec(vec![0.0, 1.0, 0.0, 0.0, 2.0, 0.0], &[2, 3]).unwrap_or_else(|e| panic!("{e}"));
        vec![
            Case::new("broadcast_i32_mask", vec![Case::input(&[3, 4], -1.0, 1.0, 1)], move |x| super::masked_fill(&x[0], &rows(), -2.5)),
            Case::new("transposed_f32_mask", vec![Case::input(&[3, 2], -1.0, 1.0, 2)], move |x| {
                super::masked_fill(&crate::transpose(&x[0], 0, 1)?, &mask(), 0.0)
            }),
        ]
    }
}

// ===== table lookups =====

/// `padding_idx` as a row index: `-V..V` is accepted (negative counts from the end, as in
/// PyTorch).
fn padding_row(op: &'static str, padding_idx: Option<i64>, rows: usize) -> Result<Option<usize>> {
    let Some(p) = padding_idx else { return Ok(None) };
    let v = rows as i64;
    if p < -v || p >= v {
        return Err(Error::argument(op, format!("padding_idx {p} is out of range for a table of {rows} rows")));
    }
    Ok(Some(if p < 0 { (p + v) as usize } else { p as usize }))
}

/// Rows `weight[ids]`: the output has shape `ids.shape + [D]`. `ids` must be `i32` in
/// `0..V`; `padding_idx` (in `-V..V`) only affects the gradient: its row gets none.
/// Backward: each `g` row added to its table row in id order, skipping the padding id.
///
/// # Examples
///
/// ```
/// use om_ops::{embedding, Tensor};
/// let table = Tensor::from_vec(vec![0.0, 0.0, 1.0, 1.0, 2.0, 2.0], &[3, 2])?; // 3 rows of 2
/// let ids = Tensor::from_vec_i32(vec![2, 0, 2], &[3])?;
/// let y = embedding(&table, &ids, None)?;
/// assert_eq!(y.shape(), &[3, 2]);
/// assert_eq!(y.to_vec(), vec![2.0, 2.0, 0.0, 0.0, 2.0, 2.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [ids], attrs = [padding_idx: Option<i64>])]
pub mod embedding {
    use super::*;

    pub fn forward(weight: &Tensor, ids: &Tensor, padding_idx: Option<i64>) -> Result<Tensor> {
        weight.expect_f32(NAME, "weight")?;
        if ids.dtype() != DType::I32 {
            return Err(Error::DType { op: NAME, arg: "ids", expected: DType::I32, got: ids.dtype() });
        }
        if weight.rank() != 2 {
            return Err(Error::shape(NAME, &[weight.shape(), ids.shape()], format!("weight must be [V, D], got rank {}", weight.rank())));
        }
        let (v, d) = (weight.shape()[0], weight.shape()[1]);
        padding_row(NAME, padding_idx, v)?;
        let mut shape = om_core::layout::Dims::from_slice(ids.shape());
        shape.push(d);
        ids.try_with_i32(|idv| {
            if let Some((pos, &bad)) = idv.iter().enumerate().find(|(_, &i)| i < 0 || i as usize >= v) {
                return Err(Error::argument(NAME, format!("id {bad} at position {pos} is out of range for a table of {v} rows")));
            }
            weight.try_with_f32(|w| {
                Tensor::build_f32(&shape, |out| {
                    for (row, &i) in out.chunks_exact_mut(d.max(1)).zip(idv) {
                        let i = i as usize;
                        row.copy_from_slice(&w[i * d..(i + 1) * d]);
                    }
                    Ok(())
                })
            })?
        })?
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        if !d.needs_weight() {
            return Ok(());
        }
        let (v, dim) = (r.input_shapes[0][0], r.input_shapes[0][1]);
        let pad = padding_row(NAME, r.padding_idx, v)?;
        let dw = r.ids().try_with_i32(|idv| {
            // Positions grouped by id (ascending), each group in the order the ids appear:
            // a counting sort in pooled scratch (`v + 1` group starts, then the positions).
            let n = idv.len();
            let words = v.checked_add(1).and_then(|s| s.checked_add(n));
            let bytes = words.and_then(|w| w.checked_mul(std::mem::size_of::<usize>())).unwrap_or(usize::MAX);
            let mut scratch = om_core::pool::Buffer::try_new(bytes)?;
            let (start, order) = scratch.usize_mut().split_at_mut(v + 1);
            let order = &mut order[..n];
            start.fill(0);
            for (p, &id) in idv.iter().enumerate() {
                if id < 0 || id as usize >= v {
                    return Err(Error::argument(NAME, format!("id {id} at position {p} is out of range for a table of {v} rows")));
                }
                start[id as usize + 1] += 1;
            }
            for k in 1..=v {
                start[k] += start[k - 1];
            }
            for (p, &id) in idv.iter().enumerate() {
                let slot = &mut start[id as usize];
                order[*slot] = p;
                *slot += 1;
            }
            g.try_with_f32(|gs| {
                Tensor::build_f32(&[v, dim], |dw| {
                    dw.fill(0.0);
                    let mut acc = om_core::pool::F64Scratch::try_zeroed(dim)?;
                    let acc = acc.values();
                    let mut k = 0;
                    while k < order.len() {
                        let id = idv[order[k]] as usize;
                        let end = k + order[k..].iter().take_while(|&&p| idv[p] as usize == id).count();
                        if Some(id) != pad {
                            acc.fill(0.0);
                            for &p in &order[k..end] {
                                for (a, &gv) in acc.iter_mut().zip(&gs[p * dim..(p + 1) * dim]) {
                                    *a += gv as f64;
                                }
                            }
                            for (o, &a) in dw[id * dim..(id + 1) * dim].iter_mut().zip(acc.iter()) {
                                *o = a as f32;
                            }
                        }
                        k = end;
                    }
                    Ok(())
                })
            })?
        })??;
        d.weight(dw);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let ids = |v: Vec<i32>, s: &[usize]| Tensor::from_vec_i32(v, s).unwrap();
        // The padding row is read by the forward but gets no gradient by definition, which
        // finite differences cannot see; the padding cases therefore zero that row of the
        // table first (`mask`), so the function truly does not depend on it. The skip itself
        // is checked against PyTorch in the tests below.
        let mask = |rows: usize, pad: usize| {
            let v = (0..rows).map(|r| if r == pad { 0.0 } else { 1.0 }).collect();
            Tensor::from_vec(v, &[rows, 1]).unwrap()
        };
        vec![
            Case::new(
                "padding_repeated_ids",
                vec![Case::input(&[6, 3], -1.0, 1.0, 1), ids(vec![1, 4, 4, 0, 2, 4, 5, 1], &[2, 4]), mask(6, 4)],
                |x| super::embedding(&crate::mul(&x[0], &x[2])?, &x[1], Some(4)),
            ),
            Case::new("no_padding_1d", vec![Case::input(&[5, 4], -1.0, 1.0, 2), ids(vec![3, 0, 3, 3, 1], &[5])], |x| {
                super::embedding(&x[0], &x[1], None)
            }),
            Case::new(
                "negative_padding_transposed",
                vec![Case::input(&[3, 5], -1.0, 1.0, 3), ids(vec![0, 4, 2, 2, 4, 1], &[3, 2]), mask(5, 2)],
                |x| super::embedding(&crate::mul(&crate::transpose(&x[0], 0, 1)?, &x[2])?, &crate::transpose(&x[1], 0, 1)?, Some(-3)),
            ),
        ]
    }
}

#[cfg(test)]
mod oracle_tests {
    use super::{gather, index_select, masked_fill};
    use crate::oracle::{assert_close, both_modes, Oracle};

    fn oracle() -> Oracle {
        Oracle::load_file("indexing", "tools/oracle_indexing.py")
    }

    #[test]
    fn gather_matches_pytorch() {
        let o = oracle();
        both_modes(|| {
            for (name, dim) in [("gather_dim1", 1), ("gather_dim0", 0), ("gather_rank3", -1)] {
                let (x, i) = (o.get(&format!("{name}_x")), o.get(&format!("{name}_index")));
                let y = gather(&x, dim, &i).unwrap();
                assert_close(&format!("{name}_y"), &y, &o.get(&format!("{name}_y")));
                o.check_grads(name, &y, &[("x", &x)]);
            }
        });
    }

    #[test]
    fn index_select_matches_pytorch() {
        let o = oracle();
        both_modes(|| {
            for (name, dim) in [("index_select_dim0", 0), ("index_select_dim1", 1)] {
                let (x, i) = (o.get(&format!("{name}_x")), o.get(&format!("{name}_index")));
                let y = index_select(&x, dim, &i).unwrap();
                assert_close(&format!("{name}_y"), &y, &o.get(&format!("{name}_y")));
                o.check_grads(name, &y, &[("x", &x)]);
            }
        });
    }

    #[test]
    fn masked_fill_matches_pytorch() {
        let o = oracle();
        both_modes(|| {
            let (x, mask) = (o.get("masked_fill_x"), o.get("masked_fill_mask"));
            let y = masked_fill(&x, &mask, -1.5).unwrap();
            assert_close("masked_fill_y", &y, &o.get("masked_fill_y"));
            o.check_grads("masked_fill", &y, &[("x", &x)]);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::{gather, index_select, masked_fill};
    use om_core::{Error, Tensor};

    fn x() -> Tensor {
        Tensor::from_vec((0..6).map(|v| v as f32).collect(), &[2, 3]).unwrap()
    }

    fn i32s(v: Vec<i32>, shape: &[usize]) -> Tensor {
        Tensor::from_vec_i32(v, shape).unwrap()
    }

    #[test]
    fn bad_indices_are_errors_naming_the_op() {
        let e = gather(&x(), 1, &i32s(vec![3, 0], &[1, 2])).unwrap_err();
        assert!(e.to_string().starts_with("gather: index 3 is out of range for an axis of length 3"), "{e}");
        let e = gather(&x(), 1, &i32s(vec![-1], &[1, 1])).unwrap_err();
        assert!(e.to_string().contains("index -1 is out of range"), "{e}");
        assert!(matches!(gather(&x(), 0, &i32s(vec![0; 4], &[1, 4])).unwrap_err(), Error::Shape { op: "gather", .. }));
        assert!(matches!(gather(&x(), 0, &i32s(vec![0; 2], &[2])).unwrap_err(), Error::Shape { op: "gather", .. }));
        assert!(matches!(gather(&x(), 2, &i32s(vec![0; 2], &[1, 2])).unwrap_err(), Error::Axis { op: "gather", .. }));
        assert!(matches!(gather(&x(), 0, &x()).unwrap_err(), Error::DType { op: "gather", .. }));
        let e = index_select(&x(), 0, &i32s(vec![2], &[1])).unwrap_err();
        assert!(e.to_string().contains("index 2 is out of range for an axis of length 2"), "{e}");
        assert!(matches!(index_select(&x(), 0, &i32s(vec![0; 4], &[2, 2])).unwrap_err(), Error::Shape { op: "index_select", .. }));
        assert!(matches!(index_select(&Tensor::scalar(1.0), 0, &i32s(vec![0], &[1])).unwrap_err(), Error::Shape { .. }));
        assert!(matches!(masked_fill(&x(), &i32s(vec![1; 12], &[2, 2, 3]), 0.0).unwrap_err(), Error::Shape { op: "masked_fill", .. }));
    }

    #[test]
    fn scalars_and_empty_indices() {
        let s = Tensor::scalar(7.0);
        assert_eq!(gather(&s, 0, &i32s(vec![0], &[])).unwrap().to_vec(), vec![7.0]);
        let y = gather(&x(), 1, &i32s(vec![], &[2, 0])).unwrap();
        assert_eq!(y.shape(), &[2, 0]);
        let y = index_select(&x(), 1, &i32s(vec![], &[0])).unwrap();
        assert_eq!(y.shape(), &[2, 0]);
    }

    /// Int64 ids enter through `Tensor::from_vec_i64` and give what the same `i32` ids
    /// give, in every index-taking operator; values beyond `i32` are refused.
    #[test]
    fn int64_ids_through_the_checked_cast() {
        let w = Tensor::from_vec((0..12).map(|v| v as f32).collect(), &[4, 3]).unwrap();
        let (ids64, ids32) = (Tensor::from_vec_i64(vec![3, 0, 2], &[3]).unwrap(), i32s(vec![3, 0, 2], &[3]));
        let same = |a: Tensor, b: Tensor| assert_eq!(a.to_vec(), b.to_vec());
        same(crate::embedding(&w, &ids64, None).unwrap(), crate::embedding(&w, &ids32, None).unwrap());
        same(crate::index_select(&w, 0, &ids64).unwrap(), crate::index_select(&w, 0, &ids32).unwrap());
        let g64 = Tensor::from_vec_i64(vec![2, 0, 1, 1], &[4, 1]).unwrap();
        same(crate::gather(&w, 1, &g64).unwrap(), crate::gather(&w, 1, &i32s(vec![2, 0, 1, 1], &[4, 1])).unwrap());
        let t64 = Tensor::from_vec_i64(vec![1, -100, 2, 0], &[4]).unwrap();
        let lp = crate::log_softmax(&w, -1).unwrap();
        same(
            crate::nll_loss(&lp, &t64, None, Default::default()).unwrap(),
            crate::nll_loss(&lp, &i32s(vec![1, -100, 2, 0], &[4]), None, Default::default()).unwrap(),
        );
        let e = Tensor::from_vec_i64(vec![0, 1 << 33], &[2]).unwrap_err().to_string();
        assert!(e.contains("8589934592"), "{e}");
        // In range for i32 but not for the table: the operator's own check.
        let e = crate::embedding(&w, &Tensor::from_vec_i64(vec![4], &[1]).unwrap(), None).unwrap_err().to_string();
        assert!(e.contains("embedding"), "{e}");
    }
}

#[cfg(test)]
mod embedding_tests {
    use crate::oracle::{assert_close, both_modes, Oracle};

    #[test]
    fn embedding_matches_pytorch() {
        let o = Oracle::load();
        both_modes(|| {
            let (w, ids) = (o.get("emb_w"), o.get("emb_ids"));
            let y = crate::embedding(&w, &ids, Some(2)).unwrap();
            assert_close("emb_pad_y", &y, &o.get("emb_pad_y"));
            o.check_grads("emb_pad", &y, &[("w", &w)]);
            let y = crate::embedding(&w, &ids, None).unwrap();
            assert_close("emb_nopad_y", &y, &o.get("emb_nopad_y"));
            o.check_grads("emb_nopad", &y, &[("w", &w)]);
        });
    }
}
