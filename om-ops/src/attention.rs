//! Attention. Scaled dot-product attention over `[B, H, T, D]` tensors with an
//! optional additive mask. Forward and backward run per (batch, head) block on the GEMM and
//! the softmax row kernel, one block per chunk of the thread team; blocks are independent,
//! so threads over blocks cannot change any bit. `q`, `k`, `v` and the output gradient are
//! read in place through their strides (the heads of a permuted projection are GEMM
//! operands with a leading dimension; a block is gathered into pooled scratch only when its
//! rows are not unit-stride) and the mask through its broadcast strides, never expanded.
//! The forward keeps the attention weights for the backward when they are no larger than
//! `q` and `k` together (short sequences, as in the encoder); for longer ones the backward
//! recomputes them instead of holding a `[T, T]` matrix per block. Either way the same
//! operations make them, so the same bits.
//! Layout and figures: `docs/ops-attention.md`.

use om_core::compute::{Compute, Settings};
use om_core::kernels::chunks::row_tiles;
use om_core::kernels::gemm::prepacked::{gemm_prepacked_a, pack_a_once, packed_a_len};
use om_core::kernels::gemm::{direct_a_row_stride, gemm_scratch_len, gemm_with_scratch, MatMut, MatRef};
use om_core::kernels::parallel::for_each_tile_scratch;
use om_core::kernels::scratch::WorkerScratch;
use om_core::kernels::softmax::softmax_rows;
use om_core::kernels::transpose::transpose;
use om_core::layout::{broadcast_shapes, broadcast_strides};
use om_core::{Case, DType, Error, Result, Tensor};
use om_macros::op;

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

/// One `[B, H, rows, cols]` operand read in place from its storage: block `b`
/// (`= batch·H + head`) is the `[rows, cols]` matrix starting at
/// `offset + (b / H)·s0 + (b % H)·s1`, rows `s2` and elements `s3` apart (a broadcast
/// mask has zero strides).
#[derive(Clone, Copy)]
struct View<'a> {
    data: &'a [f32],
    offset: usize,
    strides: [usize; 4],
    heads: usize,
    rows: usize,
    cols: usize,
}

impl<'a> View<'a> {
    /// `t` (rank 4, its storage `data`) read with `strides` (its own, or broadcast ones).
    fn new(data: &'a [f32], t: &Tensor, strides: &[usize], heads: usize, rows: usize, cols: usize) -> View<'a> {
        View { data, offset: t.offset(), strides: [strides[0], strides[1], strides[2], strides[3]], heads, rows, cols }
    }

    /// Storage index of element `(0, 0)` of block `b`.
    fn start(&self, b: usize) -> usize {
        self.offset + (b / self.heads) * self.strides[0] + (b % self.heads) * self.strides[1]
    }

    /// Block `b` as a row-major GEMM operand `(values, leading dimension)`: the storage
    /// itself when the elements of a row are adjacent and rows do not overlap (the heads
    /// of a permuted projection), else a copy gathered into `scratch` (`rows·cols` values).
    fn matrix<'s>(&self, b: usize, scratch: &'s mut [f32]) -> (&'s [f32], usize)
    where
        'a: 's,
    {
        let (rows, cols) = (self.rows, self.cols);
        if rows == 0 || cols == 0 {
            return (&[], cols.max(1));
        }
        let [_, _, rs, cs] = self.strides;
        let start = self.start(b);
        if cs == 1 && (rs >= cols || rows == 1) {
            let ld = if rows == 1 { cols } else { rs };
            return (&self.data[start..start + (rows - 1) * ld + cols], ld);
        }
        let dst = &mut scratch[..rows * cols];
        for (r, row) in dst.chunks_exact_mut(cols).enumerate() {
            for (c, x) in row.iter_mut().enumerate() {
                *x = self.data[start + r * rs + c * cs];
            }
        }
        (dst, cols)
    }

    /// Values `scratch` needs to hold for [`View::matrix`].
    fn scratch_len(&self) -> usize {
        let [_, _, rs, cs] = self.strides;
        if cs == 1 && (rs >= self.cols || self.rows <= 1) {
            0
        } else {
            self.rows * self.cols
        }
    }

    /// Block `b` transposed into `dst` as a row-major `[cols, rows]` matrix.
    fn transposed_into(&self, b: usize, dst: &mut [f32]) {
        if self.rows > 0 && self.cols > 0 {
            transpose(&self.data[self.start(b)..], self.rows, self.cols, self.strides[2], self.strides[3], dst);
        }
    }
}

/// The operands of one call, read in place: `q`, `k`, `v` as `[B, H, T, ·]` views and the
/// additive mask through its broadcast strides (never expanded to `[B, H, Tq, Tk]`).
#[derive(Clone, Copy)]
struct Operands<'a> {
    q: View<'a>,
    k: View<'a>,
    v: View<'a>,
    mask: Option<View<'a>>,
}

/// Runs `f` on the operands of a call, read in place from the storages of `q`, `k`, `v`
/// and `mask`.
fn with_operands<R>(dims: Dims, q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>, f: impl FnOnce(Operands) -> R) -> R {
    let Dims { heads, tq, tk, d, dv, .. } = dims;
    q.with_storage_f32(|qs| {
        k.with_storage_f32(|ks| {
            v.with_storage_f32(|vs| {
                let mask_strides = mask.map(|m| broadcast_strides(m.shape(), m.strides(), &[q.shape()[0], heads, tq, tk]));
                let run = |ms: Option<&[f32]>| {
                    let mask = match (mask, ms, &mask_strides) {
                        (Some(m), Some(ms), Some(st)) => Some(View::new(ms, m, st, heads, tq, tk)),
                        _ => None,
                    };
                    f(Operands {
                        q: View::new(qs, q, q.strides(), heads, tq, d),
                        k: View::new(ks, k, k.strides(), heads, tk, d),
                        v: View::new(vs, v, v.strides(), heads, tk, dv),
                        mask,
                    })
                };
                match mask {
                    Some(m) => m.with_storage_f32(|ms| run(Some(ms))),
                    None => run(None),
                }
            })
        })
    })
}

/// Values of scratch [`probs`] needs at `settings` (saturating: a size that overflows is
/// refused): its own, then the GEMM scratch of the largest product of a block
/// ([`block_gemm_len`]), which the block reuses for its later products once `probs` is done.
fn probs_scratch_len(settings: Settings, dims: Dims, ops: &Operands) -> usize {
    let own = dims.d.saturating_mul(dims.tk).saturating_add(dims.tq.saturating_mul(dims.tk)).saturating_add(ops.q.scratch_len());
    own.saturating_add(block_gemm_len(settings, dims))
}

/// Floats of GEMM scratch ([`gemm_scratch_len`]) that cover every product of a block, forward
/// and backward, with C contiguous or token-major (row stride `H·n`): a GEMM inside a chunk
/// of a parallel section takes no pool memory.
fn block_gemm_len(settings: Settings, dims: Dims) -> usize {
    let Dims { tq, tk, d, dv, heads, .. } = dims;
    let shapes = [(tq, d, tk), (tq, tk, dv), (tk, tq, dv), (tq, tk, d), (tk, tq, d)];
    let len = |&(m, k, n): &(usize, usize, usize)| {
        gemm_scratch_len(settings, m, k, n, n).max(gemm_scratch_len(settings, m, k, n, heads.saturating_mul(n)))
    };
    // dPᵀ = V·gᵀ, written with rows `transposed_scores` apart.
    let dpt = gemm_scratch_len(settings, tk, dv, tq, transposed_scores(tq, tk).0);
    shapes.iter().map(len).fold(dpt, usize::max)
}

/// The bytes of the sum of `counts` floats, saturating (a size that overflows is refused).
fn f32_count(counts: &[usize]) -> usize {
    counts.iter().fold(0usize, |s, &c| s.saturating_add(c))
}

/// Attention weights `P = softmax(scale·Q·Kᵀ + mask)` of block `b` into `p` (`[Tq, Tk]`),
/// with `scratch` of [`probs_scratch_len`] values.
fn probs(settings: Settings, dims: Dims, scale: f32, ops: &Operands, b: usize, p: &mut [f32], scratch: &mut [f32]) {
    let Dims { tq, tk, d, .. } = dims;
    let (kt, rest) = scratch.split_at_mut(d * tk);
    let (s, rest) = rest.split_at_mut(tq * tk);
    let (q_scratch, gemm_scratch) = rest.split_at_mut(ops.q.scratch_len());
    ops.k.transposed_into(b, kt);
    let (qm, ldq) = ops.q.matrix(b, q_scratch);
    let (qm, kt) = (MatRef::with_stride(qm, tq, d, ldq), MatRef::with_stride(kt, d, tk, tk));
    gemm_with_scratch(settings, qm, kt, MatMut::with_stride(s, tq, tk, tk), gemm_scratch);
    match ops.mask {
        Some(m) => {
            let [_, _, rs, cs] = m.strides;
            let start = m.start(b);
            for (i, row) in s.chunks_exact_mut(tk.max(1)).enumerate() {
                let base = start + i * rs;
                if cs == 1 {
                    row.iter_mut().zip(&m.data[base..base + tk]).for_each(|(x, &a)| *x = *x * scale + a);
                } else {
                    row.iter_mut().enumerate().for_each(|(j, x)| *x = *x * scale + m.data[base + j * cs]);
                }
            }
        }
        None => s.iter_mut().for_each(|x| *x *= scale),
    }
    if tk > 0 {
        softmax_rows(settings, s, p, tk);
    }
}

/// Runs `f(settings, block, index, outs, scratch)` for every (batch, head) block, `group`
/// consecutive blocks per chunk (1, or the heads of one batch item when an output is
/// token-major: its blocks interleave within the item), in parallel over chunks;
/// `outs[i]` is the chunk's `widths[i]` values of output `i` (see [`Out::block`] for a
/// block's part, `index` being its place in the chunk), and `scratch` (at least `floats`
/// values) the running thread's own scratch, taken from the pool before the loop (one part
/// per thread, never per block: the pool memory a call needs must not depend on how many
/// blocks run at once). Fails if it is refused.
fn per_block<const N: usize>(
    settings: Settings,
    blocks: usize,
    group: usize,
    outs: [&mut [f32]; N],
    widths: [usize; N],
    floats: usize,
    f: impl Fn(Settings, usize, usize, &mut [&mut [f32]; N], &mut [f32]) + Sync + Send,
) -> Result<()> {
    let inner = Settings { threads: 1, ..settings };
    let group = group.max(1);
    let chunks = blocks / group;
    let mut scratch = WorkerScratch::f32(settings.threads, chunks, floats)?;
    let per = scratch.per_worker();
    let outs = row_tiles(outs, widths, chunks, 1);
    for_each_tile_scratch(settings.threads, outs, scratch.parts(), per, |c, tiles, s| {
        let mut parts = tiles.map(|t| t.into_slice());
        for i in 0..group {
            f(inner, c * group + i, i, &mut parts, s);
        }
    });
    Ok(())
}

/// Where a `[B, H, rows, cols]` output of a call keeps its values: contiguous (block after
/// block), or token-major (`[B, rows, H, cols]` in memory, the layout a head view of a
/// `[B, T, H·D]` projection has): then the heads are joined again by a view, with no copy.
#[derive(Clone, Copy)]
struct Out {
    token_major: bool,
    heads: usize,
    rows: usize,
    cols: usize,
}

impl Out {
    /// The layout of `t`'s gradient (`cols` its own D) or of an output of `cols` values per
    /// row of `t`: token-major if `t` (`[B, H, T, D]`) is itself the head view of a
    /// token-major tensor, with more than one head and a few batch items to share among
    /// threads (a chunk then holds all heads of a batch item).
    fn like(t: &Tensor, cols: usize) -> Out {
        let (s, st) = (t.shape(), t.strides());
        let (h, rows, d) = (s[1], s[2], s[3]);
        let token_major = h > 1 && s[0] >= MIN_TOKEN_MAJOR_BATCH && st == [rows * h * d, d, h * d, 1];
        Out { token_major, heads: h, rows, cols }
    }

    /// Strides of the `[B, H, rows, cols]` tensor.
    fn strides(&self) -> [usize; 4] {
        let (h, r, c) = (self.heads, self.rows, self.cols);
        if self.token_major {
            [r * h * c, c, h * c, 1]
        } else {
            [h * r * c, r * c, c, 1]
        }
    }

    /// Values of one chunk: a batch item's when token-major, else a block's.
    fn chunk_width(&self) -> usize {
        if self.token_major {
            self.heads * self.rows * self.cols
        } else {
            self.rows * self.cols
        }
    }

    /// Block `index` of a chunk's values `part`, with its row stride.
    fn block<'p>(&self, part: &'p mut [f32], index: usize) -> (&'p mut [f32], usize) {
        let (r, c) = (self.rows, self.cols);
        if r == 0 || c == 0 {
            return (&mut [], c);
        }
        if self.token_major {
            let ld = self.heads * c;
            (&mut part[index * c..index * c + (r - 1) * ld + c], ld)
        } else {
            (&mut part[index * r * c..(index + 1) * r * c], c)
        }
    }

    /// `t`, a new contiguous `[B, H, rows, cols]` tensor whose storage was written in this
    /// layout, viewed with this layout's strides.
    fn wrap(&self, t: Tensor) -> Result<Tensor> {
        if self.token_major {
            let shape = om_core::layout::Dims::from_slice(t.shape());
            t.as_strided(shape, om_core::layout::Dims::from_slice(&self.strides()), 0)
        } else {
            Ok(t)
        }
    }
}

/// Fewest batch items for which outputs are token-major (a chunk then holds a batch item's
/// heads, so fewer items would leave threads idle).
const MIN_TOKEN_MAJOR_BATCH: usize = 4;

/// `m *= s` for the `rows × cols` matrix `m` with row stride `ld`.
fn scale_rows(m: &mut [f32], rows: usize, cols: usize, ld: usize, s: f32) {
    for r in 0..rows {
        m[r * ld..r * ld + cols].iter_mut().for_each(|x| *x *= s);
    }
}

/// Whether the forward keeps the attention weights `P` (`[B, H, Tq, Tk]`) for the
/// backward instead of the backward recomputing them (`Q·Kᵀ`, scale and mask, softmax:
/// the same operations, so the same bits either way): when `P` holds no more values than
/// `q` and `k` together (`Tq·Tk ≤ (Tq + Tk)·D`), so keeping it at most doubles what the
/// record holds, whatever the length; long sequences recompute.
fn keeps_probs(dims: Dims) -> bool {
    #[cfg(test)]
    if RECOMPUTE.with(|r| r.get()) {
        return false;
    }
    dims.tq.saturating_mul(dims.tk) <= dims.tq.saturating_add(dims.tk).saturating_mul(dims.d)
}

#[cfg(test)]
thread_local! {
    /// Tests: the forward keeps no weights, so the backward recomputes them.
    static RECOMPUTE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Row stride and length of a block's `dPᵀ` / `dSᵀ` scratch (`[tk, tq]`): rows
/// [`DIRECT_A_STRIDE`](om_core::kernels::gemm::DIRECT_A_STRIDE) apart when `tq` fits, so the GEMM of `dK = dSᵀ·Q` reads it as a
/// packed A, in place (the same bits as packing it).
fn transposed_scores(tq: usize, tk: usize) -> (usize, usize) {
    let ld = direct_a_row_stride(tq);
    (ld, if tk == 0 || tq == 0 { 0 } else { (tk - 1).saturating_mul(ld).saturating_add(tq) })
}

/// Columns of `dPᵀ` whose sums [`softmax_backward_t`] carries at once (one f64
/// accumulator each, on the stack).
const SUM_COLS: usize = 64;

/// `dSᵀ = Pᵀ∘(dPᵀ − rowsum(dP∘P))` in place of `dPᵀ` (`[tk, tq]`, rows `ld` apart), with
/// `pt` = `Pᵀ` (`[tk, tq]`, contiguous): the softmax backward of each row of `dP` (a
/// column here), its sum in f64 in increasing element order (`j`, a row here), rounded
/// once: the same operations as on `dP` itself, so the same bits. Laid out so, the sums of
/// [`SUM_COLS`] rows of `dP` run side by side along contiguous values: independent
/// accumulators the compiler vectorises, where a row-major `dP` summed 8 rows in
/// lockstep through strided reads.
fn softmax_backward_t(dpt: &mut [f32], ld: usize, pt: &[f32], tq: usize) {
    if tq == 0 {
        return;
    }
    let tk = pt.len() / tq;
    for c0 in (0..tq).step_by(SUM_COLS) {
        let w = SUM_COLS.min(tq - c0);
        let mut acc = [0.0f64; SUM_COLS];
        let acc = &mut acc[..w];
        for j in 0..tk {
            let (dr, pr) = (&dpt[j * ld + c0..][..w], &pt[j * tq + c0..][..w]);
            for ((a, &x), &y) in acc.iter_mut().zip(dr).zip(pr) {
                *a += x as f64 * y as f64;
            }
        }
        let mut sums = [0.0f32; SUM_COLS];
        sums.iter_mut().zip(acc.iter()).for_each(|(r, &a)| *r = a as f32);
        let sums = &sums[..w];
        for j in 0..tk {
            let (dr, pr) = (&mut dpt[j * ld + c0..][..w], &pt[j * tq + c0..][..w]);
            for ((x, &y), &rs) in dr.iter_mut().zip(pr).zip(sums) {
                *x = y * (*x - rs);
            }
        }
    }
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
/// Backward (weights kept when small, else recomputed): `dV = Pᵀ·g`, `dP = g·Vᵀ`, `dS = P∘(dP − rowsum(dP∘P))`,
/// `dQ = scale·dS·K`, `dK = scale·dSᵀ·Q`.
///
/// # Examples
///
/// ```
/// use om_ops::{attention, Tensor};
/// // One batch, one head, two positions, width 1: equal scores average the values.
/// let q = Tensor::zeros(&[1, 1, 2, 1])?;
/// let k = Tensor::ones(&[1, 1, 2, 1])?;
/// let v = Tensor::from_vec(vec![1.0, 3.0], &[1, 1, 2, 1])?;
/// let y = attention(&q, &k, &v, None, 1.0)?;
/// assert_eq!(y.shape(), &[1, 1, 2, 1]);
/// assert!(y.to_vec().iter().all(|v| (v - 2.0).abs() < 1e-6));
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [q, k, v, mask, probs: owned], attrs = [scale: f32])]
pub mod attention {
    use super::*;

    pub fn forward(q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>, scale: f32) -> Result<(Tensor, Owned)> {
        let dims = check(NAME, q, k, v, mask, scale)?;
        let Dims { blocks, heads, tq, tk, dv, .. } = dims;
        let settings = Compute::settings();
        let mut shape = om_core::layout::Dims::from_slice(q.shape());
        shape[3] = dv;
        // The output follows q's layout: token-major for the heads of a projection, so
        // that joining the heads again is a view.
        let lay = Out::like(q, dv);
        let group = if lay.token_major { heads } else { 1 };
        // The weights are kept for the backward when it will run and they are small
        // (`keeps_probs`), written block after block; else they live in scratch.
        let keep = (q.needs_grad() || k.needs_grad() || v.needs_grad()) && keeps_probs(dims);
        let mut p_shape = om_core::layout::Dims::from_slice(q.shape());
        p_shape[3] = tk;
        let p_shape: &[usize] = if keep { &p_shape } else { &[0] };
        let p_width = if keep { group * tq * tk } else { 0 };
        let [y, probs_t] = with_operands(dims, q, k, v, mask, |ops| {
            Tensor::build_many_f32([&shape, p_shape], |[out, p_all]| {
                let (vn, pn) = (ops.v.scratch_len(), probs_scratch_len(Settings { threads: 1, ..settings }, dims, &ops));
                let floats = f32_count(&[if keep { 0 } else { tq.saturating_mul(tk) }, vn, pn]);
                per_block(settings, blocks, group, [out, p_all], [lay.chunk_width(), p_width], floats, |s, b, i, [o, pp], buf| {
                    let (p_own, rest) = buf.split_at_mut(if keep { 0 } else { tq * tk });
                    let p = if keep { &mut pp[i * tq * tk..(i + 1) * tq * tk] } else { p_own };
                    let (v_scratch, p_scratch) = rest.split_at_mut(vn);
                    probs(s, dims, scale, &ops, b, p, p_scratch);
                    let (vm, ldv) = ops.v.matrix(b, v_scratch);
                    let (o, ldo) = lay.block(o, i);
                    let (pm, vm) = (MatRef::with_stride(p, tq, tk, tk), MatRef::with_stride(vm, tk, dv, ldv));
                    gemm_with_scratch(s, pm, vm, MatMut::with_stride(o, tq, dv, ldo), p_scratch);
                })
            })
        })?;
        Ok((lay.wrap(y)?, Owned { probs: probs_t }))
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let (q, k, v) = (r.q(), r.k(), r.v());
        let mask = r.mask.as_ref().map(|s| s.tensor());
        let dims = check(NAME, q, k, v, mask, r.scale)?;
        let Dims { blocks, heads, tq, tk, d: dk, dv } = dims;
        let scale = r.scale;
        let settings = Compute::settings();
        // Each gradient in its input's layout (token-major for the heads of a projection,
        // so that the head split's backward is a view).
        let (lq, lk, lv) = (Out::like(q, dk), Out::like(k, dk), Out::like(v, dv));
        let group = if lq.token_major || lk.token_major || lv.token_major { heads } else { 1 };
        let width = |l: Out| if group > 1 { l.heads * l.rows * l.cols } else { l.rows * l.cols };
        // The weights kept by the forward (`keeps_probs`), block after block, else recomputed.
        let probs_t = r.probs();
        let kept = probs_t.numel() > 0 && probs_t.shape() == [q.shape()[0], heads, tq, tk];
        let run = |saved: Option<&[f32]>| {
            with_operands(dims, q, k, v, mask, |ops| {
                g.with_storage_f32(|gs| {
                    let gview = View::new(gs, g, g.strides(), heads, tq, dv);
                    Tensor::build_many_f32([q.shape(), k.shape(), v.shape()], |[dq_all, dk_all, dv_all]| {
                        let (gn, kn, qn) = (gview.scratch_len(), ops.k.scratch_len(), ops.q.scratch_len());
                        let vn = ops.v.scratch_len();
                        let pn = probs_scratch_len(Settings { threads: 1, ..settings }, dims, &ops);
                        let (ldt, dst_len) = transposed_scores(tq, tk);
                        let dsn = packed_a_len(Settings { threads: 1, ..settings }, tq, tk);
                        let own_p = if saved.is_some() { 0 } else { tq.saturating_mul(tk) };
                        let floats = f32_count(&[own_p, tq.saturating_mul(tk), dst_len, gn, kn, vn, dsn, qn, pn]);
                        let widths = [width(lq), width(lk), width(lv)];
                        per_block(settings, blocks, group, [dq_all, dk_all, dv_all], widths, floats, |s, b, i, [dq, dkb, dvb], buf| {
                            let (dq, ldq_out) = lq.block(dq, i);
                            let (dkb, ldk_out) = lk.block(dkb, i);
                            let (dvb, ldv_out) = lv.block(dvb, i);
                            let (p_own, rest) = buf.split_at_mut(if saved.is_some() { 0 } else { tq * tk });
                            let (pt, rest) = rest.split_at_mut(tq * tk);
                            let (dst, rest) = rest.split_at_mut(dst_len);
                            let (g_scratch, rest) = rest.split_at_mut(gn);
                            let (k_scratch, rest) = rest.split_at_mut(kn);
                            let (v_scratch, rest) = rest.split_at_mut(vn);
                            let (ds_packed, rest) = rest.split_at_mut(dsn);
                            let (q_scratch, p_scratch) = rest.split_at_mut(qn);
                            let p: &[f32] = match saved {
                                Some(ps) => &ps[b * tq * tk..(b + 1) * tq * tk],
                                None => {
                                    probs(s, dims, scale, &ops, b, p_own, p_scratch);
                                    p_own
                                }
                            };
                            let (gm, ldg) = gview.matrix(b, g_scratch);
                            let gm = MatRef::with_stride(gm, tq, dv, ldg);
                            // dV = Pᵀ·g
                            transpose(p, tq, tk, tk, 1, pt);
                            let ptm = MatRef::with_stride(pt, tk, tq, tq);
                            gemm_with_scratch(s, ptm, gm, MatMut::with_stride(dvb, tk, dv, ldv_out), p_scratch);
                            // dPᵀ = V·gᵀ (each value the sum of dP = g·Vᵀ, same terms in the same
                            // order), rows `ldt` apart, then dSᵀ in its place.
                            let (vm, ldv) = ops.v.matrix(b, v_scratch);
                            let vm = MatRef::with_stride(vm, tk, dv, ldv);
                            gemm_with_scratch(s, vm, gm.t(), MatMut::with_stride(dst, tk, tq, ldt), p_scratch);
                            softmax_backward_t(dst, ldt, pt, tq);
                            let dstm = MatRef::with_stride(dst, tk, tq, ldt);
                            // dQ = scale·(dS·K): dS packed once from dSᵀ, all its rows in one
                            // transposing pass (whole 8×8 blocks), then the same product.
                            let (km, ldk) = ops.k.matrix(b, k_scratch);
                            let ds = pack_a_once(s, dstm.t(), ds_packed);
                            gemm_prepacked_a(
                                s,
                                &ds,
                                MatRef::with_stride(km, tk, dk, ldk),
                                MatMut::with_stride(dq, tq, dk, ldq_out),
                                None,
                                p_scratch,
                            );
                            scale_rows(dq, tq, dk, ldq_out, scale);
                            // dK = scale·(dSᵀ·Q)
                            let (qm, ldq) = ops.q.matrix(b, q_scratch);
                            gemm_with_scratch(
                                s,
                                dstm,
                                MatRef::with_stride(qm, tq, dk, ldq),
                                MatMut::with_stride(dkb, tk, dk, ldk_out),
                                p_scratch,
                            );
                            scale_rows(dkb, tk, dk, ldk_out, scale);
                        })
                    })
                })
            })
        };
        let [dq_t, dk_t, dv_t] = if kept { probs_t.with_storage_f32(|ps| run(Some(&ps[probs_t.offset()..])))? } else { run(None)? };
        let (dq_t, dk_t, dv_t) = (lq.wrap(dq_t)?, lk.wrap(dk_t)?, lv.wrap(dv_t)?);
        if d.needs_q() {
            d.q(dq_t);
        }
        if d.needs_k() {
            d.k(dk_t);
        }
        if d.needs_v() {
            d.v(dv_t);
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
                |x| super::attention(&crate::permute(&x[0], [0, 2, 1, 3])?, &x[1], &x[2], None, 0.5),
            ),
            // Rows that are not unit-stride (k and v gathered per block) and a transposed mask.
            Case::new(
                "strided_k_v_mask",
                vec![
                    Case::input(&[1, 2, 3, 4], -1.0, 1.0, 17),
                    Case::input(&[1, 2, 4, 3], -1.0, 1.0, 18),
                    Case::input(&[2, 1, 5, 3], -1.0, 1.0, 19),
                ],
                move |x| {
                    let m = crate::transpose(&mask(&[3, 3], 20), 0, 1)?;
                    let v = crate::permute(&x[2], [1, 0, 2, 3])?;
                    super::attention(&x[0], &crate::transpose(&x[1], 2, 3)?, &crate::transpose(&v, 2, 3)?, Some(&m), 0.6)
                },
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

    /// Heads of token-major projections (`[B, T, H·D]` viewed as `[B, H, T, D]`) give
    /// token-major outputs and gradients, with the bits of contiguous operands, in both
    /// modes and at any thread count; mixed layouts (k contiguous, D ≠ Dv) too.
    #[test]
    fn token_major_heads_have_the_bits_of_contiguous_operands() {
        let (b, t, h, d, dv) = (5, 7, 3, 4, 6);
        let heads = |x: &Tensor, w: usize| {
            crate::permute(&crate::reshape(x, [b as isize, t as isize, h as isize, w as isize]).unwrap(), [0, 2, 1, 3]).unwrap()
        };
        let bits = |t: &Tensor| t.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let mask = Tensor::rand_uniform(&[t, t], -1.0, 1.0, 9).unwrap();
        let c = Tensor::rand_uniform(&[b, h, t, dv], -1.0, 1.0, 10).unwrap();
        // Returns the bits of y, dq, dk, dv and whether y and dq came out token-major.
        let run = |token_major_k: bool, contiguous: bool| {
            let q = Tensor::rand_uniform(&[b, t, h * d], -1.0, 1.0, 1).unwrap().requires_grad().unwrap();
            let k = Tensor::rand_uniform(&[b, t, h * d], -1.0, 1.0, 2).unwrap().requires_grad().unwrap();
            let v = Tensor::rand_uniform(&[b, t, h * dv], -1.0, 1.0, 3).unwrap().requires_grad().unwrap();
            let (mut qh, mut kh, mut vh) = (heads(&q, d), heads(&k, d), heads(&v, dv));
            if contiguous {
                (qh, vh) = (crate::contiguous(&qh).unwrap(), crate::contiguous(&vh).unwrap());
            }
            if contiguous || !token_major_k {
                kh = crate::contiguous(&kh).unwrap();
            }
            let y = crate::attention(&qh, &kh, &vh, Some(&mask), 0.4).unwrap();
            let strided = y.strides() != [h * t * dv, t * dv, dv, 1];
            crate::sum(&crate::mul(&y, &c).unwrap(), None, false).unwrap().backward().unwrap();
            let grads = [&q, &k, &v].map(|x| bits(&x.grad().unwrap()));
            (bits(&y), grads, strided)
        };
        both_modes(|| {
            Compute::set_threads(1).unwrap();
            let (want_y, want_g, strided) = run(false, true);
            assert!(!strided);
            for threads in [1, 2, 3] {
                Compute::set_threads(threads).unwrap();
                for token_major_k in [true, false] {
                    let (y, g, strided) = run(token_major_k, false);
                    assert!(strided, "the output of token-major heads is token-major");
                    assert!(y == want_y && g == want_g, "threads {threads}, token-major k {token_major_k}");
                }
            }
            Compute::set_threads(1).unwrap();
        });
    }

    /// The weights kept by the forward give the bits of the weights recomputed by the
    /// backward, in both modes, at any thread count, with token-major and contiguous
    /// operands, a broadcast mask, `Tq ≠ Tk` and `D ≠ Dv`; long sequences recompute.
    #[test]
    fn kept_weights_have_the_bits_of_recomputed_ones() {
        let (b, h, tq, tk, d, dv) = (4, 3, 5, 7, 4, 6);
        let bits = |t: &Tensor| t.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let mask = Tensor::rand_uniform(&[tq, tk], -1.0, 1.0, 9).unwrap();
        let c = Tensor::rand_uniform(&[b, h, tq, dv], -1.0, 1.0, 10).unwrap();
        let heads = |x: &Tensor, t: usize, w: usize| {
            crate::permute(&crate::reshape(x, [b as isize, t as isize, h as isize, w as isize]).unwrap(), [0, 2, 1, 3]).unwrap()
        };
        let run = |recompute: bool, token_major: bool| {
            super::RECOMPUTE.with(|r| r.set(recompute));
            let q = Tensor::rand_uniform(&[b, tq, h * d], -1.0, 1.0, 1).unwrap().requires_grad().unwrap();
            let k = Tensor::rand_uniform(&[b, tk, h * d], -1.0, 1.0, 2).unwrap().requires_grad().unwrap();
            let v = Tensor::rand_uniform(&[b, tk, h * dv], -1.0, 1.0, 3).unwrap().requires_grad().unwrap();
            let (mut qh, mut kh, mut vh) = (heads(&q, tq, d), heads(&k, tk, d), heads(&v, tk, dv));
            if !token_major {
                (qh, kh, vh) = (crate::contiguous(&qh).unwrap(), crate::contiguous(&kh).unwrap(), crate::contiguous(&vh).unwrap());
            }
            let y = crate::attention(&qh, &kh, &vh, Some(&mask), 0.4).unwrap();
            crate::sum(&crate::mul(&y, &c).unwrap(), None, false).unwrap().backward().unwrap();
            super::RECOMPUTE.with(|r| r.set(false));
            let mut all = bits(&y);
            [&q, &k, &v].iter().for_each(|x| all.extend(bits(&x.grad().unwrap())));
            all
        };
        assert!(super::keeps_probs(super::Dims { blocks: b * h, heads: h, tq, tk, d, dv }));
        assert!(!super::keeps_probs(super::Dims { blocks: 1, heads: 1, tq: 512, tk: 512, d: 64, dv: 64 }));
        both_modes(|| {
            for threads in [1, 2, 3] {
                Compute::set_threads(threads).unwrap();
                for token_major in [true, false] {
                    assert!(run(false, token_major) == run(true, token_major), "threads {threads}, token-major {token_major}");
                }
            }
            Compute::set_threads(1).unwrap();
        });
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
    /// More query positions than `DIRECT_A_STRIDE`: the backward's `dPᵀ`/`dSᵀ` scratch then
    /// has rows `Tq` apart instead; the output and gradients agree with the composition
    /// `softmax(scale·Q·Kᵀ + mask)·V` of separate operators (to rounding: the composition
    /// adds the mask after the scaling as its own op, and sums the softmax differently).
    #[test]
    fn long_queries_match_the_composition() {
        use om_core::kernels::gemm::DIRECT_A_STRIDE;
        let (tq, tk, d, dv) = (DIRECT_A_STRIDE + 5, 6, 4, 3);
        let mask = Tensor::rand_uniform(&[tq, tk], -1.0, 1.0, 9).unwrap();
        let c = Tensor::rand_uniform(&[1, 1, tq, dv], -1.0, 1.0, 10).unwrap();
        let grads = |composed: bool| {
            let q = Tensor::rand_uniform(&[1, 1, tq, d], -1.0, 1.0, 1).unwrap().requires_grad().unwrap();
            let k = Tensor::rand_uniform(&[1, 1, tk, d], -1.0, 1.0, 2).unwrap().requires_grad().unwrap();
            let v = Tensor::rand_uniform(&[1, 1, tk, dv], -1.0, 1.0, 3).unwrap().requires_grad().unwrap();
            let y = if composed {
                let s = crate::mul_scalar(&crate::matmul(&q, &crate::transpose(&k, -2, -1).unwrap()).unwrap(), 0.4).unwrap();
                crate::matmul(&crate::softmax(&crate::add(&s, &mask).unwrap(), -1).unwrap(), &v).unwrap()
            } else {
                crate::attention(&q, &k, &v, Some(&mask), 0.4).unwrap()
            };
            crate::sum(&crate::mul(&y, &c).unwrap(), None, false).unwrap().backward().unwrap();
            [y.to_vec(), q.grad().unwrap().to_vec(), k.grad().unwrap().to_vec(), v.grad().unwrap().to_vec()]
        };
        let (ours, composed) = (grads(false), grads(true));
        for (name, (a, b)) in ["y", "dq", "dk", "dv"].iter().zip(ours.iter().zip(&composed)) {
            let scale = b.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let err = a.iter().zip(b).fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
            assert!(err <= 1e-5 * scale, "{name}: max error {err} against max {scale}");
        }
    }
}
