//! Matrix products: `matmul` (batched, with broadcast batch dimensions and PyTorch's
//! 1-d promotion rules) and `linear`. Every product runs on the canonical-order GEMM,
//! which reads transposed and broadcast operands in place (spec section 4): gradient
//! products such as `g·bᵀ` copy nothing.

use om_core::compute::{Compute, Settings};
use om_core::kernels::gemm::{gemm, gemm_bias, gemm_scratch_len, gemm_with_scratch, Bias, MatMut, MatRef};
use om_core::kernels::parallel::{chunk_count, for_each_chunk_mut_scratch};
use om_core::kernels::scratch::WorkerScratch;
use om_core::layout::{broadcast_shapes, broadcast_strides, SignedDims};
use om_core::{Case, DType, Error, Result, Tensor};
use om_macros::op;

/// `t` itself if one of its last two dimensions is unit-strided (row-major, or a
/// transposed view: the GEMM reads either in place), else a contiguous copy (an error if
/// the pool refuses it).
fn gemm_readable(t: &Tensor) -> Result<Tensor> {
    let r = t.rank();
    let unit = |d: usize| t.shape()[d] <= 1 || t.strides()[d] == 1;
    if unit(r - 1) || unit(r - 2) {
        Ok(t.clone())
    } else {
        t.try_to_contiguous()
    }
}

/// The shape and strides of the last two dimensions of a tensor, with `rows` rows.
#[derive(Clone, Copy)]
struct Layout2 {
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

impl Layout2 {
    fn of(t: &Tensor, rows: usize) -> Layout2 {
        let r = t.rank();
        Layout2 { rows, cols: t.shape()[r - 1], row_stride: t.strides()[r - 2], col_stride: t.strides()[r - 1] }
    }

    /// The matrix starting at `offset` of `storage`.
    fn at<'a>(&self, storage: &'a [f32], offset: usize) -> MatRef<'a> {
        let data = storage.get(offset..).unwrap_or(&[]);
        MatRef::new(data, self.rows, self.cols, self.row_stride, self.col_stride).expect("a tensor's elements lie inside its storage")
    }
}

/// The matrix of batch `offset` in the last two dimensions of `t` (read from `storage`).
fn mat<'a>(storage: &'a [f32], t: &Tensor, offset: usize, rows: usize) -> MatRef<'a> {
    Layout2::of(t, rows).at(storage, offset)
}

/// Whether the batch dimensions (`batch`, with strides `strides`, 0 where broadcast) and
/// the `m` rows (stride `rs`) of an operand are one evenly spaced run of rows.
fn rows_merge(batch: &[usize], strides: &[usize], m: usize, rs: usize) -> bool {
    let mut expect = rs * m;
    for (&d, &s) in batch.iter().zip(strides).rev() {
        if d != 1 && s != expect {
            return false;
        }
        expect *= d;
    }
    true
}

/// Largest product (`m·n·k` multiply-adds) that runs on one thread while the batch
/// entries are shared among threads; larger products share their own chunks instead.
/// Set by reasoning, not yet measured: twice the size from which the GEMM splits one
/// product into two chunks (2 Mi multiply-adds, see `docs/kernels-gemm.md`).
const BATCH_PARALLEL_WORK: usize = 1 << 22;

/// Batched product of two tensors of rank ≥ 2 with equal inner dimensions. Operands are
/// read in place (transposed and broadcast ones too); when B is shared by every batch
/// entry and A's batches are evenly spaced rows, the whole batch is one product. Every
/// error names `op`.
fn batched(op: &'static str, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    batched_unnamed(op, a, b).map_err(|e| e.with_op(op))
}

/// [`batched`], whose refused buffers name no operator yet.
fn batched_unnamed(op: &'static str, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (ra, rb) = (a.rank(), b.rank());
    let (m, k) = (a.shape()[ra - 2], a.shape()[ra - 1]);
    let (k2, n) = (b.shape()[rb - 2], b.shape()[rb - 1]);
    if k != k2 {
        return Err(Error::shape(op, &[a.shape(), b.shape()], format!("inner dimensions differ ({k} vs {k2})")));
    }
    let batch = broadcast_shapes(op, &a.shape()[..ra - 2], &b.shape()[..rb - 2])?;
    let nb: usize = batch.iter().product();
    let (a, b) = (gemm_readable(a)?, gemm_readable(b)?);
    let sa = broadcast_strides(&a.shape()[..ra - 2], &a.strides()[..ra - 2], &batch);
    let sb = broadcast_strides(&b.shape()[..rb - 2], &b.strides()[..rb - 2], &batch);
    let mut out_shape = batch.clone();
    out_shape.extend([m, n]);
    let settings = Compute::settings();
    let merged = nb > 1 && sb.iter().all(|&s| s == 0) && rows_merge(&batch, &sa, m, a.strides()[ra - 2]);
    a.with_storage_f32(|av| {
        b.with_storage_f32(|bv| {
            Tensor::build_f32(&out_shape, |out| {
                if out.is_empty() {
                    return Ok(());
                }
                if merged {
                    let am = mat(av, &a, a.offset(), nb * m);
                    gemm(settings, am, mat(bv, &b, b.offset(), k), MatMut::row_major(out, nb * m, n));
                    return Ok(());
                }
                // Small products: one chunk per batch entry (a function of the shape only),
                // each product on one thread. Large ones: one after the other, each on all
                // threads. A product's bits never depend on its thread count.
                let small = m * n * k <= BATCH_PARALLEL_WORK;
                let (outer, inner) = if small { (settings.threads, 1) } else { (1, settings.threads) };
                let inner = Settings { threads: inner, ..settings };
                let (a_mat, b_mat) = (Layout2::of(&a, m), Layout2::of(&b, k));
                let (a_off, b_off) = (a.offset(), b.offset());
                let offset = |mut i: usize, base: usize, strides: &[usize]| {
                    let mut o = base;
                    for (&len, &s) in batch.iter().zip(strides).rev() {
                        o += (i % len) * s;
                        i /= len;
                    }
                    o
                };
                // Each thread's GEMM scratch, taken here: none may be taken inside a chunk.
                let mut scratch = WorkerScratch::f32(outer, chunk_count(out.len(), m * n), gemm_scratch_len(inner, m, k, n, n))?;
                let per = scratch.per_worker();
                for_each_chunk_mut_scratch(outer, out, m * n, scratch.parts(), per, |i, c, part| {
                    let am = a_mat.at(av, offset(i, a_off, &sa));
                    let bm = b_mat.at(bv, offset(i, b_off, &sb));
                    gemm_with_scratch(inner, am, bm, MatMut::row_major(c, m, n), part);
                });
                Ok(())
            })
        })
    })
}

/// Matrix product with PyTorch's rules: batch dimensions broadcast; a 1-d `a` is a row
/// vector and a 1-d `b` a column vector (the added axis is removed from the result).
/// Backward: `g·bᵀ` and `aᵀ·g` (the transposes read in place), summed back over
/// broadcast batch dimensions by the engine.
///
/// # Examples
///
/// ```
/// use om_ops::{matmul, Tensor};
/// let a = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
/// let b = Tensor::from_vec(vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0], &[3, 2])?;
/// let y = matmul(&a, &b)?;
/// assert_eq!(y.shape(), &[2, 2]);
/// assert_eq!(y.to_vec(), vec![4.0, 5.0, 10.0, 11.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [a if b, b if a])]
pub mod matmul {
    use super::*;

    pub fn forward(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        for (arg, t) in [("a", a), ("b", b)] {
            if t.dtype() != DType::F32 {
                return Err(Error::DType { op: NAME, arg, expected: DType::F32, got: t.dtype() });
            }
            if t.rank() == 0 {
                return Err(Error::shape(NAME, &[a.shape(), b.shape()], format!("`{arg}` must have at least one dimension")));
            }
        }
        let a2 = if a.rank() == 1 { crate::unsqueeze(a, 0)? } else { a.clone() };
        let b2 = if b.rank() == 1 { crate::unsqueeze(b, 1)? } else { b.clone() };
        let mut y = batched(NAME, &a2, &b2)?;
        if b.rank() == 1 {
            y = crate::squeeze(&y, Some(-1))?;
        }
        if a.rank() == 1 {
            y = crate::squeeze(&y, Some(-2))?;
        }
        Ok(y)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let (ra, rb) = (r.input_shapes[0].len(), r.input_shapes[1].len());
        // Undo the 1-d promotions on g.
        let mut g2 = g.clone();
        if ra == 1 {
            g2 = crate::unsqueeze(&g2, -2)?;
        }
        if rb == 1 {
            g2 = crate::unsqueeze(&g2, -1)?;
        }
        if d.needs_a() {
            let b = r.b()?;
            let b2 = if rb == 1 { crate::unsqueeze(b, 1)? } else { b.clone() };
            let mut da = batched(NAME, &g2, &crate::transpose(&b2, -1, -2)?)?;
            if ra == 1 {
                da = crate::squeeze(&da, Some(-2))?;
            }
            d.a(da);
        }
        if d.needs_b() {
            let a = r.a()?;
            let a2 = if ra == 1 { crate::unsqueeze(a, 0)? } else { a.clone() };
            let mut db = batched(NAME, &crate::transpose(&a2, -1, -2)?, &g2)?;
            if rb == 1 {
                db = crate::squeeze(&db, Some(-1))?;
            }
            d.b(db);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let mm = |x: &[Tensor]| super::matmul(&x[0], &x[1]);
        vec![
            Case::new("2d", vec![Case::input(&[3, 4], -1.0, 1.0, 1), Case::input(&[4, 2], -1.0, 1.0, 2)], mm),
            Case::new("batched", vec![Case::input(&[2, 3, 4], -1.0, 1.0, 3), Case::input(&[2, 4, 5], -1.0, 1.0, 4)], mm),
            Case::new("broadcast_batch", vec![Case::input(&[2, 1, 3, 4], -1.0, 1.0, 5), Case::input(&[3, 4, 2], -1.0, 1.0, 6)], mm),
            Case::new("vector_matrix", vec![Case::input(&[4], -1.0, 1.0, 7), Case::input(&[2, 4, 3], -1.0, 1.0, 8)], mm),
            Case::new("matrix_vector", vec![Case::input(&[3, 4], -1.0, 1.0, 9), Case::input(&[4], -1.0, 1.0, 10)], mm),
            Case::new("transposed", vec![Case::input(&[4, 3], -1.0, 1.0, 11), Case::input(&[2, 4], -1.0, 1.0, 12)], |x| {
                super::matmul(&crate::transpose(&x[0], 0, 1)?, &crate::transpose(&x[1], 0, 1)?)
            }),
            Case::new("strided", vec![Case::input(&[3, 8], -1.0, 1.0, 13), Case::input(&[4, 2], -1.0, 1.0, 14)], |x| {
                super::matmul(&crate::slice(&x[0], 1, 0, 8, 2)?, &x[1])
            }),
        ]
    }
}

/// `x2·Wᵀ + bias` as one GEMM reading W transposed in place, the bias added in its
/// epilogue: the bits of `add(matmul(x2, transpose(w)), bias)`.
fn linear_fused(x2: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let (rows, out_f) = (x2.shape()[0], w.shape()[0]);
    let (x2, w) = (gemm_readable(x2)?, gemm_readable(w)?);
    let settings = Compute::settings();
    x2.with_storage_f32(|xs| {
        w.with_storage_f32(|ws| {
            Tensor::try_with_f32_opt(bias, |bs| {
                Tensor::build_f32(&[rows, out_f], |y| {
                    let (xm, wt) = (mat(xs, &x2, x2.offset(), rows), mat(ws, &w, w.offset(), out_f).t());
                    let y = MatMut::row_major(y, rows, out_f);
                    match bs {
                        Some(b) => gemm_bias(settings, xm, wt, y, Bias::PerCol(b)),
                        None => gemm(settings, xm, wt, y),
                    }
                    Ok(())
                })
            })
        })
    })?
}

/// `a·b` for two 2-d operands read in place (transposed views too), as a new
/// `[rows of a, cols of b]` tensor: the GEMM `matmul` runs for the same operands, so the
/// same bits.
fn product_2d(a: MatRef, b: MatRef) -> Result<Tensor> {
    let (m, n) = (a.rows(), b.cols());
    let settings = Compute::settings();
    Tensor::build_f32(&[m, n], |c| {
        if !c.is_empty() {
            gemm(settings, a, b, MatMut::row_major(c, m, n));
        }
        Ok(())
    })
}

/// The column sums of the `[rows, cols]` row-major `g` as a `[cols]` tensor: each column
/// accumulated in f64 over the rows in increasing order from +0 and rounded once, which
/// is what the engine's sum-to does for a bias broadcast over the rows (the bits of the
/// composition's `add` backward; `kernels::reduce::column_sums`).
fn column_sums(g: &[f32], rows: usize, cols: usize) -> Result<Tensor> {
    let settings = Compute::settings();
    Tensor::build_f32(&[cols], |out| {
        om_core::kernels::reduce::column_sums(settings, g, rows, cols, out);
        Ok(())
    })
}

/// Affine map `x·Wᵀ + b` over the last axis of `x` (`[..., in]` → `[..., out]`, with
/// `w: [out, in]` and an optional `bias: [out]`), any number of leading dimensions. One
/// GEMM reading W transposed in place with the bias fused into its epilogue, recorded or
/// not; its values and gradients have the bits of the composition
/// `reshape(add(matmul(reshape(x, [rows, in]), transpose(w)), bias))` (the spec's
/// definition), without the composition's separate bias pass, transposed weight-gradient
/// copy and intermediate records.
/// Backward: `dx = g·W`, `dW = gᵀ·x` (both GEMMs reading their transposed operand in
/// place), `dbias = Σ g` over the rows, in f64 in increasing row order.
///
/// # Examples
///
/// ```
/// use om_ops::{linear, Tensor};
/// // y = x·wᵀ + b, as `torch.nn.functional.linear` (w is [out, in]).
/// let x = Tensor::from_vec(vec![1.0, 2.0], &[1, 2])?;
/// let w = Tensor::from_vec(vec![1.0, 1.0, 0.0, 1.0, 1.0, 0.0], &[3, 2])?;
/// let b = Tensor::from_vec(vec![0.5, 0.5, 0.5], &[3])?;
/// assert_eq!(linear(&x, &w, Some(&b))?.to_vec(), vec![3.5, 2.5, 1.5]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x if w, w if x])]
pub mod linear {
    use super::*;

    pub fn forward(x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        for (arg, t) in [("x", Some(x)), ("w", Some(w)), ("bias", bias)] {
            if let Some(t) = t {
                if t.dtype() != DType::F32 {
                    return Err(Error::DType { op: NAME, arg, expected: DType::F32, got: t.dtype() });
                }
            }
        }
        if w.rank() != 2 {
            return Err(Error::shape(NAME, &[x.shape(), w.shape()], "weight must be [out_features, in_features]"));
        }
        let (out_f, in_f) = (w.shape()[0], w.shape()[1]);
        if x.rank() == 0 || x.shape()[x.rank() - 1] != in_f {
            return Err(Error::shape(NAME, &[x.shape(), w.shape()], format!("the last axis of x must have {in_f} features")));
        }
        if let Some(b) = bias {
            if b.shape() != [out_f] {
                return Err(Error::shape(NAME, &[w.shape(), b.shape()], format!("bias must be [{out_f}]")));
            }
        }
        let lead = &x.shape()[..x.rank() - 1];
        let rows: usize = lead.iter().product(); // not -1: it is ambiguous for zero features
        let x2 = crate::reshape(x, [rows as isize, in_f as isize])?;
        let y = linear_fused(&x2, w, bias).map_err(|e| e.with_op(NAME))?;
        let mut shape: SignedDims = lead.iter().map(|&d| d as isize).collect();
        shape.push(out_f as isize);
        crate::reshape(&y, &shape)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let (out_f, in_f) = (r.input_shapes[1][0], r.input_shapes[1][1]);
        let rows = r.input_shapes[0][..r.input_shapes[0].len() - 1].iter().product::<usize>();
        // `g` as `[rows, out]`: a view of a contiguous gradient, else the copy the
        // composition's `reshape` backward makes.
        let g2 = crate::reshape(g, [rows as isize, out_f as isize])?.try_to_contiguous()?;
        g2.with_storage_f32(|gs| -> Result<()> {
            let gs = &gs[g2.offset()..g2.offset() + rows * out_f];
            let gm = MatRef::row_major(gs, rows, out_f);
            if d.needs_x() {
                // dx = g·W (the composition: g·transpose(Wᵀ)).
                let w = gemm_readable(r.w()?)?;
                let dx = w.with_storage_f32(|ws| product_2d(gm, mat(ws, &w, w.offset(), out_f)))?;
                let shape: SignedDims = r.input_shapes[0].iter().map(|&v| v as isize).collect();
                d.x(crate::reshape(&dx, &shape)?);
            }
            if d.needs_w() {
                // dW = gᵀ·x2: each element the sum over the rows in increasing order, as
                // in the composition's (x2ᵀ·g)ᵀ, without its transposed copy.
                let x2 = gemm_readable(&crate::reshape(r.x()?, [rows as isize, in_f as isize])?)?;
                d.w(x2.with_storage_f32(|xs| product_2d(gm.t(), mat(xs, &x2, x2.offset(), rows)))?);
            }
            if d.needs_bias() {
                d.bias(column_sums(gs, rows, out_f)?);
            }
            Ok(())
        })
    }

    fn cases() -> Vec<Case> {
        vec![
            Case::new(
                "bias",
                vec![Case::input(&[3, 4], -1.0, 1.0, 1), Case::input(&[2, 4], -1.0, 1.0, 2), Case::input(&[2], -1.0, 1.0, 3)],
                |x| super::linear(&x[0], &x[1], Some(&x[2])),
            ),
            Case::new("no_bias_leading_dims", vec![Case::input(&[2, 3, 4], -1.0, 1.0, 4), Case::input(&[5, 4], -1.0, 1.0, 5)], |x| {
                super::linear(&x[0], &x[1], None)
            }),
            Case::new(
                "transposed_input",
                vec![Case::input(&[4, 3], -1.0, 1.0, 6), Case::input(&[2, 4], -1.0, 1.0, 7), Case::input(&[2], -1.0, 1.0, 8)],
                |x| super::linear(&crate::transpose(&x[0], 0, 1)?, &x[1], Some(&x[2])),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use crate::oracle::{assert_close, both_modes, Oracle};
    use om_core::autograd::NoGradGuard;
    use om_core::Tensor;

    #[test]
    fn batched_products_match_each_entry_bit_for_bit_at_any_thread_count() {
        use om_core::compute::Compute;
        // `a` broadcast over the first batch dimension and read transposed; `b` batched.
        let a = crate::transpose(&Tensor::rand_uniform(&[1, 3, 20, 17], -1.0, 1.0, 5).unwrap(), -1, -2).unwrap();
        let b = Tensor::rand_uniform(&[2, 3, 20, 9], -1.0, 1.0, 6).unwrap();
        let bits = |t: &Tensor| t.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        both_modes(|| {
            let mut want = Vec::new();
            for i in 0..2 {
                for j in 0..3 {
                    let aij = crate::select(&crate::select(&a, 0, 0).unwrap(), 0, j as isize).unwrap();
                    let bij = crate::select(&crate::select(&b, 0, i as isize).unwrap(), 0, j as isize).unwrap();
                    want.extend(bits(&crate::matmul(&aij, &bij).unwrap()));
                }
            }
            for threads in [1, 2, 3] {
                Compute::set_threads(threads).unwrap();
                let y = crate::matmul(&a, &b).unwrap();
                assert_eq!(y.shape(), [2, 3, 17, 9]);
                assert_eq!(bits(&y), want, "threads {threads}");
            }
            Compute::set_threads(1).unwrap();
        });
    }

    #[test]
    fn linear_without_recording_has_the_bits_of_the_composition() {
        both_modes(|| {
            let x = Tensor::rand_uniform(&[2, 37, 29], -1.0, 1.0, 1).unwrap();
            let xt = crate::transpose(&Tensor::rand_uniform(&[29, 37], -1.0, 1.0, 2).unwrap(), 0, 1).unwrap();
            let w = Tensor::rand_uniform(&[45, 29], -1.0, 1.0, 3).unwrap();
            let b = Tensor::rand_uniform(&[45], -1.0, 1.0, 4).unwrap();
            for x in [&x, &xt] {
                for bias in [Some(&b), None] {
                    let wg = w.detach().requires_grad().unwrap();
                    let recorded = crate::linear(x, &wg, bias).unwrap();
                    assert!(recorded.needs_grad());
                    let fused = {
                        let _guard = NoGradGuard::new();
                        crate::linear(x, &w, bias).unwrap()
                    };
                    assert_eq!(fused.shape(), recorded.shape());
                    let bits = |t: &Tensor| t.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&fused), bits(&recorded), "x {:?} bias {}", x.shape(), bias.is_some());
                }
            }
        });
    }

    #[test]
    fn recorded_linear_has_the_bits_of_the_composition_in_values_and_gradients() {
        use om_core::compute::Compute;
        let bits = |t: &Tensor| t.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        // Run `f(x, w, b)`, back-propagate `Σ y·c` and return the bits of y and of every gradient.
        let run = |x: &Tensor, w: &Tensor, b: Option<&Tensor>, f: &dyn Fn(&Tensor, &Tensor, Option<&Tensor>) -> Tensor| {
            let (x, w) = (x.detach().requires_grad().unwrap(), w.detach().requires_grad().unwrap());
            let b = b.map(|b| b.detach().requires_grad().unwrap());
            let y = f(&x, &w, b.as_ref());
            let c = Tensor::rand_uniform(y.shape(), -1.0, 1.0, 9).unwrap();
            crate::sum(&crate::mul(&y, &c).unwrap(), None, false).unwrap().backward().unwrap();
            let mut out = vec![bits(&y), bits(&x.grad().unwrap()), bits(&w.grad().unwrap())];
            out.extend(b.map(|b| bits(&b.grad().unwrap())));
            out
        };
        let composition = |x: &Tensor, w: &Tensor, b: Option<&Tensor>| {
            let (in_f, out_f) = (w.shape()[1] as isize, w.shape()[0] as isize);
            let y = crate::matmul(&crate::reshape(x, [-1, in_f]).unwrap(), &crate::transpose(w, 0, 1).unwrap()).unwrap();
            let y = match b {
                Some(b) => crate::add(&y, b).unwrap(),
                None => y,
            };
            let mut shape: Vec<isize> = x.shape()[..x.rank() - 1].iter().map(|&d| d as isize).collect();
            shape.push(out_f);
            crate::reshape(&y, &shape[..]).unwrap()
        };
        let fused = |x: &Tensor, w: &Tensor, b: Option<&Tensor>| crate::linear(x, w, b).unwrap();
        both_modes(|| {
            // Large enough for the GEMM to split its work and for several bias chunks.
            let x = Tensor::rand_uniform(&[3, 70, 129], -1.0, 1.0, 1).unwrap();
            let xt = crate::transpose(&Tensor::rand_uniform(&[129, 37], -1.0, 1.0, 2).unwrap(), 0, 1).unwrap();
            let w = Tensor::rand_uniform(&[150, 129], -1.0, 1.0, 3).unwrap();
            let wt = crate::transpose(&Tensor::rand_uniform(&[129, 150], -1.0, 1.0, 4).unwrap(), 0, 1).unwrap();
            let b = Tensor::rand_uniform(&[150], -1.0, 1.0, 5).unwrap();
            for (x, w) in [(&x, &w), (&xt, &w), (&x, &wt)] {
                for bias in [Some(&b), None] {
                    Compute::set_threads(1).unwrap();
                    let want = run(x, w, bias, &composition);
                    for threads in [1, 2, 3] {
                        Compute::set_threads(threads).unwrap();
                        let got = run(x, w, bias, &fused);
                        assert!(got == want, "x {:?} w {:?} bias {} threads {threads}", x.strides(), w.strides(), bias.is_some());
                    }
                }
            }
            Compute::set_threads(1).unwrap();
        });
    }

    #[test]
    fn bias_gradient_over_several_column_chunks_is_the_f64_column_sum() {
        use om_core::compute::Compute;
        // 1100 columns: three chunks of the bias gradient, the last one partial.
        let x = Tensor::rand_uniform(&[37, 3], -1.0, 1.0, 1).unwrap();
        let w = Tensor::rand_uniform(&[1100, 3], -1.0, 1.0, 2).unwrap();
        let c = Tensor::rand_uniform(&[37, 1100], -1.0, 1.0, 3).unwrap();
        let bits = |t: &Tensor| t.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let want = bits(&crate::sum(&c, Some(0), false).unwrap());
        for threads in [1, 2, 3] {
            Compute::set_threads(threads).unwrap();
            let b = Tensor::zeros(&[1100]).unwrap().requires_grad().unwrap();
            let y = crate::linear(&x, &w, Some(&b)).unwrap();
            crate::sum(&crate::mul(&y, &c).unwrap(), None, false).unwrap().backward().unwrap();
            assert_eq!(bits(&b.grad().unwrap()), want, "threads {threads}");
        }
        Compute::set_threads(1).unwrap();
    }

    #[test]
    fn linear_and_concat_match_pytorch() {
        let o = Oracle::load_file("misc", "tools/oracle_misc.py");
        both_modes(|| {
            let (x, w, b) = (o.get("lin_x"), o.get("lin_w"), o.get("lin_b"));
            let y = crate::linear(&x, &w, Some(&b)).unwrap();
            assert_close("lin_y", &y, &o.get("lin_y"));
            o.check_grads("lin", &y, &[("x", &x), ("w", &w), ("b", &b)]);
            let (a, c) = (o.get("cat_a"), o.get("cat_c"));
            let y = crate::concat(&[a.clone(), c.clone()], 1).unwrap();
            assert_close("cat_y", &y, &o.get("cat_y"));
            o.check_grads("cat", &y, &[("a", &a), ("c", &c)]);
        });
    }
}
