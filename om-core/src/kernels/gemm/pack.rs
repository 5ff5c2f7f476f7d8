//! Packing the GEMM operands into the layouts the register tiles read, straight from the
//! caller's strided views (a transposed operand is read in place, never copied first).
//!
//! * A: one panel of up to MR rows × `kb` steps, row `i` at `dst[i·A_STRIDE..][..kb]`.
//! * B: micro-panels of NR columns × `kb` steps, step `p` at `dst[p·NR..][..NR]`; a
//!   partial last panel is zero-padded.
//!
//! Each packer has a contiguous fast path for both orientations: rows contiguous
//! (`col_stride == 1`: A copied row by row, B in bands of [`B_BAND`] rows) and columns
//! contiguous (`row_stride == 1`, a transposed operand: transposed through 8×8 blocks by
//! `kernels/transpose.rs`'s [`transpose_runs`], in AVX registers where the CPU has AVX, so
//! reads and writes both stay sequential); any other strides go element by element. Packing copies values only,
//! so it cannot change a bit of the result, and has no instruction-set code of its own.

use super::operand::MatRef;
use super::A_STRIDE;
use crate::kernels::transpose::{transpose_runs, Runs};

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
        transpose_runs(Runs { src: data, start: pc * cs + row * rs, stride: cs, count: kb, len: rows }, dst, A_STRIDE);
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
        // A band of `B_BAND` rows at a time, panel by panel: each panel's writes are
        // `B_BAND` steps in a row, the band's rows read NR floats at a time.
        let panels = &mut dst[first * nr * kb..];
        let (start, width) = (pc * rs + (col + first * nr) * cs, (full - first) * nr);
        match nr {
            32 => pack_b_rows::<32>(data, start, rs, width, kb, panels),
            16 => pack_b_rows::<16>(data, start, rs, width, kb, panels),
            8 => pack_b_rows::<8>(data, start, rs, width, kb, panels),
            _ => unreachable!("gemm: tile width {nr}"),
        }
    } else if full > first && b.cols_contiguous() {
        // Column j of B is contiguous in k: data[j·cs + pc + p].
        for jp in first..full {
            let out = &mut dst[jp * nr * kb..][..nr * kb];
            transpose_runs(Runs { src: data, start: (col + jp * nr) * cs + pc * rs, stride: cs, count: nr, len: kb }, out, nr);
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
        if b.rows_contiguous() {
            // The edge panel's `cols - start` values of each row copied as one run, the
            // rest of the panel's width zero. Element by element through `b.at` (bounds
            // checks and a branch per value) this took 33% of the samples of a 64×288×272
            // product that reads its full panels in place (Intel Xeon model 167, 1 thread).
            let w = cols - start;
            for (p, step) in out.chunks_exact_mut(nr).enumerate() {
                let (vals, zeros) = step.split_at_mut(w);
                vals.copy_from_slice(&data[(pc + p) * rs + (col + start) * cs..][..w]);
                zeros.fill(0.0);
            }
            return;
        }
        if b.cols_contiguous() {
            // A transposed B (`x·Wᵀ`): the edge's `cols - start` columns are runs of `kb`
            // steps, written as the first values of each step, the rest zero.
            let w = cols - start;
            transpose_runs(Runs { src: data, start: (col + start) * cs + pc * rs, stride: cs, count: w, len: kb }, out, nr);
            out.chunks_exact_mut(nr).for_each(|step| step[w..].fill(0.0));
            return;
        }
        for (p, step) in out.chunks_exact_mut(nr).enumerate() {
            for (j, o) in step.iter_mut().enumerate() {
                *o = if start + j < cols { b.at(pc + p, col + start + j) } else { 0.0 };
            }
        }
    }
}

/// Rows of a row-major B copied per panel in one go by [`pack_b_rows`]. Row by row
/// (one row into every panel, the writes `kb·NR` floats apart: 32 KiB for the AVX-512
/// block, all in one L1 set) `pack_b` took 6.3% of the samples at 512³ on two threads
/// (Intel Xeon model 167; `perf` median of 3 runs); bands of 4, 8, 16 and 64 rows 5.3,
/// 5.5, 5.3 and 6.1%.
const B_BAND: usize = 8;

/// Packs `kb` rows of `width` floats (whole panels of `NR`; row `p` at
/// `data[start + p·rs..]`) into micro-panels, [`B_BAND`] rows at a time panel by panel.
fn pack_b_rows<const NR: usize>(data: &[f32], start: usize, rs: usize, width: usize, kb: usize, dst: &mut [f32]) {
    for p0 in (0..kb).step_by(B_BAND) {
        let band = p0..(p0 + B_BAND).min(kb);
        for jp in 0..width / NR {
            for p in band.clone() {
                dst[(jp * kb + p) * NR..][..NR].copy_from_slice(&data[start + p * rs + jp * NR..][..NR]);
            }
        }
    }
}
