//! Table lookups: `embedding` gathers rows of a `[V, D]` weight by `i32` ids of any shape.
//! (The family file is not called `embedding.rs`: that module would clash with the
//! `embedding` operator re-exported from the crate root.)
//! Backward adds each gradient row to its table row in id order (the rows of one id summed
//! in f64 in the order the ids appear, rounded once), skipping the padding id.

use om_core::{Case, DType, Error, Result, Tensor};
use om_macros::op;

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
mod tests {
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
