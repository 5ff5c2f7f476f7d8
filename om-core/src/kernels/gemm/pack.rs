//! Packing the GEMM operands into the layouts the register tiles read, straight from the
//! caller's strided views (a transposed operand is read in place, never copied first).
//!
//! * A: one panel of up to MR rows × `kb` steps, row `i` at `dst[i·A_STRIDE..][..kb]`.
//! * B: micro-panels of NR columns × `kb` steps, step `p` at `dst[p·NR..][..NR]`; a
//!   partial last panel is zero-padded.
//!
//! Each packer has a contiguous fast path for both orientations: rows contiguous
//! (`col_stride == 1`, copied row by row) and columns contiguous (`row_stride == 1`, a
//! transposed operand: transposed through 8×8 blocks so reads and writes both stay
//! sequential); any other strides go element by element. Packing copies values only, so
//! it cannot change a bit of the result.

use super::operand::MatRef;
use super::A_STRIDE;
#[cfg(target_arch = "x86_64")]
use crate::kernels::transpose::x86::block;

/// Packs rows `row..row + rows` of A, steps `pc..pc + kb`: `A[row + i][pc + p]` goes to
/// `dst[i·A_STRIDE + p]`.
pub(super) fn pack_a(a: &MatRef, row: usize, rows: usize, pc: usize, kb: usize, dst: &mut [f32]) {
    let (data, rs, cs) = (a.data(), a.row_stride(), a.col_stride());
    if a.rows_contiguous() {
        for (i, out) in dst.chunks_exact_mut(A_STRIDE).take(rows).enumerate() {
            out[..kb].copy_from_slice(&data[(row + i) * rs + pc * cs..][..kb]);
        }
    } else if a.cols_contiguous() {
        // Step p of rows row.. is contiguous: data[(pc + p)·cs + row + i].
        transpose(data, (pc * cs) + row * rs, cs, kb, rows, dst, A_STRIDE);
    } else {
        for (i, out) in dst.chunks_exact_mut(A_STRIDE).take(rows).enumerate() {
            for (p, o) in out[..kb].iter_mut().enumerate() {
                *o = a.at(row + i, pc + p);
            }
        }
    }
}

/// Which B micro-panels [`pack_b`] packs: panels `first..` of `nr` columns each from
/// column `col` (`cols` columns exist from `col`, so the last panel may be partial), steps
/// `pc..pc + kb`.
pub(super) struct BPanels {
    pub nr: usize,
    pub col: usize,
    pub cols: usize,
    pub first: usize,
    pub pc: usize,
    pub kb: usize,
}

/// Packs the B micro-panels of `part`, panel `jp` at `dst[jp·NR·kb..]`; a partial last
/// panel is zero-padded.
pub(super) fn pack_b(b: &MatRef, part: BPanels, dst: &mut [f32]) {
    let BPanels { nr, col, cols, first, pc, kb } = part;
    let (data, rs, cs) = (b.data(), b.row_stride(), b.col_stride());
    let full = (cols / nr).max(first);
    if full > first && b.rows_contiguous() {
        // Row by row: each row of the block read once, contiguously (few TLB misses for a
        // large row stride).
        let panels = &mut dst[first * nr * kb..];
        for p in 0..kb {
            let src = &data[(pc + p) * rs + (col + first * nr) * cs..][..(full - first) * nr];
            match nr {
                32 => pack_b_row::<32>(src, p, kb, panels),
                16 => pack_b_row::<16>(src, p, kb, panels),
                8 => pack_b_row::<8>(src, p, kb, panels),
                _ => unreachable!("gemm: tile width {nr}"),
            }
        }
    } else if full > first && b.cols_contiguous() {
        // Column j of B is contiguous in k: data[j·cs + pc + p].
        for jp in first..full {
            let out = &mut dst[jp * nr * kb..][..nr * kb];
            transpose(data, (col + jp * nr) * cs + pc * rs, cs, nr, kb, out, nr);
        }
    } else {
        for jp in first..full {
            let out = &mut dst[jp * nr * kb..][..nr * kb];
            for (p, step) in out.chunks_exact_mut(nr).enumerate() {
                for (j, o) in step.iter_mut().enumerate() {
                    *o = b.at(pc + p, col + jp * nr + j);
                }
            }
        }
    }
    if cols > full * nr {
        let start = full * nr;
        let out = &mut dst[full * nr * kb..][..nr * kb];
        for (p, step) in out.chunks_exact_mut(nr).enumerate() {
            for (j, o) in step.iter_mut().enumerate() {
                *o = if start + j < cols { b.at(pc + p, col + start + j) } else { 0.0 };
            }
        }
    }
}

/// Copies `src` (row `p` of a k-block of `kb` rows, whole panels) into step `p` of each
/// micro-panel.
fn pack_b_row<const NR: usize>(src: &[f32], p: usize, kb: usize, dst: &mut [f32]) {
    for (jp, chunk) in src.chunks_exact(NR).enumerate() {
        dst[(jp * kb + p) * NR..][..NR].copy_from_slice(chunk);
    }
}

/// Writes the transpose of a `lines × len` block: `dst[i·dst_stride + l] =
/// src[start + l·stride + i]` for `l < lines`, `i < len` — line `l` of the source is a
/// contiguous run of `len` values, `stride` apart. Goes through 8×8 blocks (in AVX
/// registers where the CPU has AVX, with the block kernel of `kernels/transpose.rs`), so
/// both sides are read and written in runs of 8.
fn transpose(src: &[f32], start: usize, stride: usize, lines: usize, len: usize, dst: &mut [f32], dst_stride: usize) {
    const B: usize = 8;
    if lines == 0 || len == 0 {
        return;
    }
    // Every read below stays inside the last line; every write inside the last row.
    assert!(start + (lines - 1) * stride + len <= src.len() && (len - 1) * dst_stride + lines <= dst.len());
    let at = |l: usize, i: usize| start + l * stride + i;
    #[cfg(target_arch = "x86_64")]
    let avx = std::arch::is_x86_feature_detected!("avx");
    let mut l0 = 0;
    while l0 + B <= lines {
        let mut i0 = 0;
        while i0 + B <= len {
            #[cfg(target_arch = "x86_64")]
            if avx {
                // SAFETY: the CPU has AVX; the block's 8 lines of 8 values and 8 rows of 8
                // outputs lie inside `src` and `dst` (checked above).
                unsafe { block(src.as_ptr().add(at(l0, i0)), stride, dst.as_mut_ptr().add(i0 * dst_stride + l0), dst_stride) };
                i0 += B;
                continue;
            }
            let mut block = [[0.0f32; B]; B];
            for (l, row) in block.iter_mut().enumerate() {
                row.copy_from_slice(&src[at(l0 + l, i0)..][..B]);
            }
            for i in 0..B {
                let out = &mut dst[(i0 + i) * dst_stride + l0..][..B];
                for (l, o) in out.iter_mut().enumerate() {
                    *o = block[l][i];
                }
            }
            i0 += B;
        }
        for i in i0..len {
            for l in 0..B {
                dst[i * dst_stride + l0 + l] = src[at(l0 + l, i)];
            }
        }
        l0 += B;
    }
    for l in l0..lines {
        let line = &src[at(l, 0)..][..len];
        for (i, &v) in line.iter().enumerate() {
            dst[i * dst_stride + l] = v;
        }
    }
}
