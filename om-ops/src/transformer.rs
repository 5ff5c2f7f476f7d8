//! Transformer operators. Scaled dot-product attention over `[B, H, T, D]` tensors with an optional additive
//! mask. Forward and backward run per (batch, head) block on the GEMM and the softmax row
//! kernel; blocks are independent, so threads over blocks cannot change any bit. The
//! backward recomputes the attention weights instead of saving a `[T, T]` matrix.

use om_core::compute::{for_each_chunk_mut, Compute, Settings};
use om_core::kernels::gemm::gemm;
use om_core::kernels::softmax::softmax_rows;
use om_core::layout::broadcast_shapes;
use om_core::pool::Buffer;
use om_core::{Case, DType, Error, Result, Tensor};
use om_macros::op;

/// Operators declared in this file.
pub const NAMES: &[&str] = &["attention"];

/// Sizes of one attention call.
#[derive(Clone, Copy)]
struct Dims {
    blocks: usize,
    heads: usize,
    tq: usize,
    tk: usize,
    d: usize,
    dv: usize,
}

fn check(op: &'static str, q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>, scale: f32) -> Result<Dims> {
    for (arg, t) in [("q", q), ("k", k), ("v", v)] {
        if t.dtype() != DType::F32 {
            return Err(Error::DType { op, arg, expected: DType::F32, got: t.dtype() });
        }
        if t.rank() != 4 {
            return Err(Error::shape(op, &[q.shape(), k.shape(), v.shape()], format!("`{arg}` must be [B, H, T, D]")));
        }
    }
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    if qs[0] != ks[0] || qs[0] != vs[0] || qs[1] != ks[1] || qs[1] != vs[1] || qs[3] != ks[3] || ks[2] != vs[2] {
        return Err(Error::shape(op, &[qs, ks, vs], "q, k, v must share B and H, q and k the feature size D, k and v the length Tk"));
    }
    if !scale.is_finite() {
        return Err(Error::argument(op, format!("scale must be finite, got {scale}")));
    }
    let dims = Dims { blocks: qs[0] * qs[1], heads: qs[1], tq: qs[2], tk: ks[2], d: qs[3], dv: vs[3] };
    if let Some(m) = mask {
        if m.dtype() != DType::F32 {
            return Err(Error::DType { op, arg: "mask", expected: DType::F32, got: m.dtype() });
        }
        let full = [qs[0], qs[1], qs[2], ks[2]];
        if m.rank() > 4 || broadcast_shapes(op, m.shape(), &full)? != full {
            return Err(Error::shape(op, &[m.shape(), &full], "the mask must broadcast to [B, H, Tq, Tk]"));
        }
        if m.needs_grad() {
            return Err(Error::argument(op, "the additive mask gets no gradient; pass a tensor that does not require one (detach it)"));
        }
    }
    Ok(dims)
}

/// Row-major copy of the `[rows, cols]` matrix `src` transposed (`[cols, rows]`).
fn transpose_into(src: &[f32], rows: usize, cols: usize, dst: &mut [f32]) {
    for i in 0..rows {
        for j in 0..cols {
            dst[j * rows + i] = src[i * cols + j];
        }
    }
}

/// The inputs of one call, made contiguous, and the mask expanded to `[B, H, Tq, Tk]`.
struct Operands {
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Option<Tensor>,
}

impl Operands {
    fn new(q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>, dims: Dims) -> Result<Operands> {
        let full = vec![(dims.blocks / dims.heads.max(1)) as isize, dims.heads as isize, dims.tq as isize, dims.tk as isize];
        let mask = match mask {
            Some(m) => Some(crate::expand(m, full)?.to_contiguous()),
            None => None,
        };
        Ok(Operands { q: q.to_contiguous(), k: k.to_contiguous(), v: v.to_contiguous(), mask })
    }
}

/// Attention weights `P = softmax(scale·Q·Kᵀ + mask)` of block `b` into `p` (`[Tq, Tk]`).
/// The `q`, `k` and expanded mask values of every block, contiguous.
type Sources<'a> = (&'a [f32], &'a [f32], Option<&'a [f32]>);

fn probs(settings: Settings, dims: Dims, scale: f32, (q, k, mask): Sources, b: usize, p: &mut [f32]) {
    let Dims { tq, tk, d, .. } = dims;
    let mut kt = Buffer::new(d * tk * 4);
    let kt = &mut kt.f32_mut()[..d * tk];
    transpose_into(&k[b * tk * d..(b + 1) * tk * d], tk, d, kt);
    let mut s = Buffer::new(tq * tk * 4);
    let s = &mut s.f32_mut()[..tq * tk];
    gemm(settings, tq, d, tk, &q[b * tq * d..], d, kt, tk, s, tk);
    match mask {
        Some(m) => {
            let m = &m[b * tq * tk..(b + 1) * tq * tk];
            s.iter_mut().zip(m).for_each(|(x, &a)| *x = *x * scale + a);
        }
        None => s.iter_mut().for_each(|x| *x *= scale),
    }
    if tk > 0 {
        softmax_rows(settings, s, p, tk);
    }
}

/// Runs `f(block, out_chunk)` for every (batch, head) block, in parallel over blocks.
fn per_block(settings: Settings, blocks: usize, chunk: usize, out: &mut [f32], f: impl Fn(Settings, usize, &mut [f32]) + Sync + Send) {
    let inner = Settings { threads: 1, ..settings };
    if chunk == 0 || blocks == 0 {
        return;
    }
    for_each_chunk_mut(settings.threads, &mut out[..blocks * chunk], chunk, |b, c| f(inner, b, c));
}

fn inputs(bq: usize, h: usize, tq: usize, tk: usize, d: usize, dv: usize, seed: u64) -> Vec<Tensor> {
    vec![
        Case::input(&[bq, h, tq, d], -1.0, 1.0, seed),
        Case::input(&[bq, h, tk, d], -1.0, 1.0, seed + 1),
        Case::input(&[bq, h, tk, dv], -1.0, 1.0, seed + 2),
    ]
}

/// Scaled dot-product attention: `softmax(scale·Q·Kᵀ + mask)·V` per batch and head, with
/// `q: [B, H, Tq, D]`, `k: [B, H, Tk, D]`, `v: [B, H, Tk, Dv]` and an optional additive mask
/// broadcastable to `[B, H, Tq, Tk]` (it gets no gradient).
/// Backward (weights recomputed): `dV = Pᵀ·g`, `dP = g·Vᵀ`, `dS = P∘(dP − rowsum(dP∘P))`,
/// `dQ = scale·dS·K`, `dK = scale·dSᵀ·Q`.
#[op(saved = [q, k, v, mask], attrs = [scale: f32])]
pub mod attention {
    use super::*;

    pub fn forward(q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>, scale: f32) -> Result<Tensor> {
        let dims = check(NAME, q, k, v, mask, scale)?;
        let ops = Operands::new(q, k, v, mask, dims)?;
        let Dims { blocks, tq, tk, dv, .. } = dims;
        let settings = Compute::settings();
        let mut shape = q.shape().to_vec();
        shape[3] = dv;
        ops.q.with_f32(|qv| {
            ops.k.with_f32(|kv| {
                ops.v.with_f32(|vv| {
                    let run = |mv: Option<&[f32]>| {
                        Tensor::build_f32(&shape, |out| {
                            per_block(settings, blocks, tq * dv, out, |s, b, o| {
                                let mut p = Buffer::new(tq * tk * 4);
                                let p = &mut p.f32_mut()[..tq * tk];
                                probs(s, dims, scale, (qv, kv, mv), b, p);
                                gemm(s, tq, tk, dv, p, tk, &vv[b * tk * dv..], dv, o, dv);
                            });
                            Ok(())
                        })
                    };
                    Tensor::with_f32_opt(ops.mask.as_ref(), run)
                })
            })
        })
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let (q, k, v) = (r.q(), r.k(), r.v());
        let mask = r.mask.as_ref().map(|s| s.tensor());
        let dims = check(NAME, q, k, v, mask, r.scale)?;
        let ops = Operands::new(q, k, v, mask, dims)?;
        let Dims { blocks, tq, tk, d: dk, dv, .. } = dims;
        let scale = r.scale;
        let settings = Compute::settings();
        let g = g.to_contiguous();
        // One chunk per block holding [dQ_b | dK_b | dV_b].
        let (nq, nk, nv) = (tq * dk, tk * dk, tk * dv);
        let chunk = nq + nk + nv;
        let mut all = Buffer::new(blocks * chunk * 4);
        let all = &mut all.f32_mut()[..blocks * chunk];
        ops.q.with_f32(|qv| {
            ops.k.with_f32(|kv| {
                ops.v.with_f32(|vv| {
                    g.with_f32(|gv| {
                        let run = |mv: Option<&[f32]>, all: &mut [f32]| {
                            per_block(settings, blocks, chunk, all, |s, b, out| {
                                let (dq, rest) = out.split_at_mut(nq);
                                let (dkb, dvb) = rest.split_at_mut(nk);
                                let mut buf = Buffer::new((3 * tq * tk + dv * tk) * 4);
                                let buf = &mut buf.f32_mut()[..3 * tq * tk + dv * tk];
                                let (p, rest) = buf.split_at_mut(tq * tk);
                                let (pt, rest) = rest.split_at_mut(tq * tk);
                                let (dp, vt) = rest.split_at_mut(tq * tk);
                                probs(s, dims, scale, (qv, kv, mv), b, p);
                                let gb = &gv[b * tq * dv..(b + 1) * tq * dv];
                                // dV = Pᵀ·g
                                transpose_into(p, tq, tk, pt);
                                gemm(s, tk, tq, dv, pt, tq, gb, dv, dvb, dv);
                                // dP = g·Vᵀ
                                transpose_into(&vv[b * tk * dv..(b + 1) * tk * dv], tk, dv, vt);
                                gemm(s, tq, dv, tk, gb, dv, vt, tk, dp, tk);
                                // dS = P∘(dP − rowsum(dP∘P)), in place of dP
                                for (dpr, pr) in dp.chunks_mut(tk.max(1)).zip(p.chunks(tk.max(1))) {
                                    let rs = dpr.iter().zip(pr.iter()).fold(0.0f64, |a, (&x, &y)| a + x as f64 * y as f64) as f32;
                                    dpr.iter_mut().zip(pr).for_each(|(x, &y)| *x = y * (*x - rs));
                                }
                                // dQ = scale·(dS·K)
                                gemm(s, tq, tk, dk, dp, tk, &kv[b * tk * dk..], dk, dq, dk);
                                dq.iter_mut().for_each(|x| *x *= scale);
                                // dK = scale·(dSᵀ·Q)
                                transpose_into(dp, tq, tk, pt);
                                gemm(s, tk, tq, dk, pt, tq, &qv[b * tq * dk..], dk, dkb, dk);
                                dkb.iter_mut().for_each(|x| *x *= scale);
                            });
                        };
                        Tensor::with_f32_opt(ops.mask.as_ref(), |mv| run(mv, all))
                    })
                })
            })
        });
        let gather = |shape: &[usize], off: usize, len: usize| {
            Tensor::build_f32(shape, |o| {
                for b in 0..blocks {
                    o[b * len..(b + 1) * len].copy_from_slice(&all[b * chunk + off..b * chunk + off + len]);
                }
                Ok(())
            })
        };
        if d.needs_q() {
            d.q(gather(q.shape(), 0, nq)?);
        }
        if d.needs_k() {
            d.k(gather(k.shape(), nq, nk)?);
        }
        if d.needs_v() {
            d.v(gather(v.shape(), nq + nk, nv)?);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let mask = |shape: &[usize], seed| Tensor::rand_uniform(shape, -1.0, 1.0, seed).unwrap();
        vec![
            Case::new("no_mask", inputs(2, 2, 3, 3, 4, 4, 1), |x| super::attention(&x[0], &x[1], &x[2], None, 0.5)),
            Case::new("tq_ne_tk_dv_ne_d", inputs(1, 2, 2, 5, 3, 4, 4), |x| super::attention(&x[0], &x[1], &x[2], None, 0.7)),
            Case::new("broadcast_mask", inputs(2, 1, 3, 4, 2, 2, 7), move |x| {
                let m = mask(&[3, 4], 10);
                super::attention(&x[0], &x[1], &x[2], Some(&m), 0.5)
            }),
            Case::new("full_mask_with_neg_inf", inputs(1, 2, 2, 3, 2, 2, 11), |x| {
                let m = Tensor::from_vec(vec![0.0, f32::NEG_INFINITY, 0.5, 0.0, 0.0, f32::NEG_INFINITY], &[1, 1, 2, 3]).unwrap();
                super::attention(&x[0], &x[1], &x[2], Some(&m), 1.0)
            }),
            Case::new(
                "transposed_q",
                vec![
                    Case::input(&[1, 3, 2, 4], -1.0, 1.0, 14),
                    Case::input(&[1, 2, 3, 4], -1.0, 1.0, 15),
                    Case::input(&[1, 2, 3, 4], -1.0, 1.0, 16),
                ],
                |x| super::attention(&crate::permute(&x[0], vec![0, 2, 1, 3])?, &x[1], &x[2], None, 0.5),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use crate::oracle::{assert_close, both_modes, Oracle};
    use om_core::compute::{Compute, KernelPath, Mode, Settings};
    use om_core::{Error, Tensor};

    #[test]
    fn attention_matches_pytorch() {
        let o = Oracle::load_file("misc", "tools/oracle_misc.py");
        both_modes(|| {
            let (q, k, v) = (o.get("att_q"), o.get("att_k"), o.get("att_v"));
            let mask = o.get("att_mask").detach();
            let y = crate::attention(&q, &k, &v, Some(&mask), 0.3).unwrap();
            assert_close("att_y", &y, &o.get("att_y"));
            o.check_grads("att", &y, &[("q", &q), ("k", &k), ("v", &v)]);
            let y = crate::attention(&q, &k, &v, None, 1.0 / 8f32.sqrt()).unwrap();
            assert_close("att_nomask_y", &y, &o.get("att_nomask_y"));
        });
    }

    #[test]
    fn exact_attention_is_identical_on_every_path_and_thread_count() {
        let o = Oracle::load_file("misc", "tools/oracle_misc.py");
        let run = |path, threads| {
            Compute::with(Settings { mode: Mode::Exact, threads, path }, || {
                let (q, k, v) = (o.get("att_q"), o.get("att_k"), o.get("att_v"));
                let y = crate::attention(&q, &k, &v, Some(&o.get("att_mask").detach()), 0.3).unwrap();
                crate::sum(&crate::mul(&y, &y).unwrap(), None, false).unwrap().backward().unwrap();
                let mut bits: Vec<u32> = y.to_vec().iter().map(|v| v.to_bits()).collect();
                for t in [&q, &k, &v] {
                    bits.extend(t.grad().unwrap().to_vec().iter().map(|v| v.to_bits()));
                }
                bits
            })
        };
        let reference = run(KernelPath::Scalar, 1);
        for path in KernelPath::supported() {
            for threads in [1, 2, 3, 8] {
                assert!(run(path, threads) == reference, "{path} with {threads} threads differs");
            }
        }
    }

    #[test]
    fn invalid_arguments() {
        let t = |s: &[usize]| Tensor::ones(s).unwrap();
        let q = t(&[2, 3, 4, 8]);
        let cases = [
            crate::attention(&q, &t(&[2, 3, 5, 7]), &t(&[2, 3, 5, 4]), None, 1.0),
            crate::attention(&q, &t(&[2, 3, 5, 8]), &t(&[2, 3, 6, 4]), None, 1.0),
            crate::attention(&q, &t(&[1, 3, 5, 8]), &t(&[1, 3, 5, 4]), None, 1.0),
            crate::attention(&t(&[3, 4, 8]), &t(&[3, 5, 8]), &t(&[3, 5, 4]), None, 1.0),
            crate::attention(&q, &t(&[2, 3, 5, 8]), &t(&[2, 3, 5, 4]), Some(&t(&[4, 6])), 1.0),
        ];
        for (i, r) in cases.into_iter().enumerate() {
            let e = r.unwrap_err();
            assert!(matches!(e, Error::Shape { op: "attention", .. }), "case {i}: {e}");
        }
        let e = crate::attention(&q, &t(&[2, 3, 5, 8]), &t(&[2, 3, 5, 4]), None, f32::NAN).unwrap_err();
        assert!(matches!(e, Error::Argument { op: "attention", .. }), "{e}");
        let m = t(&[4, 5]).requires_grad().unwrap();
        let e = crate::attention(&q, &t(&[2, 3, 5, 8]), &t(&[2, 3, 5, 4]), Some(&m), 1.0).unwrap_err();
        assert!(matches!(e, Error::Argument { op: "attention", .. }), "{e}");
    }
}
