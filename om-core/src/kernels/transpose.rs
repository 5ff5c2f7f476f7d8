//! Transposed copies: [`transpose`] writes the row-major transpose of a (possibly strided)
//! matrix, in square tiles so that both the reads and the writes stay within a few cache
//! lines per tile. It moves values only (no arithmetic), so it cannot change a bit. Used
//! by attention for a block's `Kᵀ`, `Vᵀ`, `Pᵀ`, `dSᵀ` (64×64 at the encoder's shape): there a
//! copy plus row-major packing measured ~3% faster over the whole attention step than
//! `MatRef::t()` views packed by the GEMM (AMD EPYC, 1 thread, `om bench attention`); the
//! recurrent layers read their transposed operands in place instead.
//!
//! On x86-64 with AVX, unit-stride rows go through an 8×8 register transpose (unpack,
//! shuffle, lane permute); the edges that do not fill an 8×8 block, other CPUs and strided
//! rows use the scalar tile loop.

use std::ops::Range;

/// Side of the outer square tiles: 64×64 floats is 16 KiB read and 16 KiB written, half of
/// a 32 KiB L1 data cache each way at most, so a tile's 64 destination rows stay cached
/// while it is filled (the smallest L1 among the CPUs we target is 32 KiB).
const TILE: usize = 64;

/// `dst[c·rows + r] = src[r·row_stride + c·col_stride]` for `r < rows`, `c < cols`: the
/// `[rows, cols]` matrix read with the given strides, written transposed as a row-major
/// `[cols, rows]` matrix.
///
/// Panics if `dst` holds fewer than `rows · cols` values or `src` is too short.
pub fn transpose(src: &[f32], rows: usize, cols: usize, row_stride: usize, col_stride: usize, dst: &mut [f32]) {
    if rows == 0 || cols == 0 {
        return;
    }
    assert!(dst.len() >= rows * cols, "transpose: destination too short");
    assert!(src.len() > (rows - 1) * row_stride + (cols - 1) * col_stride, "transpose: source too short");
    #[cfg(target_arch = "x86_64")]
    if col_stride == 1 && rows >= 8 && cols >= 8 && std::arch::is_x86_feature_detected!("avx") {
        let (r8, c8) = (rows / 8 * 8, cols / 8 * 8);
        // SAFETY: AVX was detected on this CPU just above; the blocks the kernel touches lie
        // in `0..r8 × 0..c8`, inside the bounds asserted above.
        unsafe { x86::transpose_blocks(src, rows, row_stride, r8, c8, dst) };
        scalar(src, rows, row_stride, col_stride, dst, r8..rows, 0..cols);
        scalar(src, rows, row_stride, col_stride, dst, 0..r8, c8..cols);
        return;
    }
    scalar(src, rows, row_stride, col_stride, dst, 0..rows, 0..cols);
}

/// The tile loop over rows `rs` and columns `cs` of the source.
fn scalar(src: &[f32], rows: usize, row_stride: usize, col_stride: usize, dst: &mut [f32], rs: Range<usize>, cs: Range<usize>) {
    for r0 in rs.clone().step_by(TILE) {
        let r1 = (r0 + TILE).min(rs.end);
        for c0 in cs.clone().step_by(TILE) {
            let c1 = (c0 + TILE).min(cs.end);
            for c in c0..c1 {
                let out = &mut dst[c * rows + r0..c * rows + r1];
                for (o, r) in out.iter_mut().zip(r0..r1) {
                    *o = src[r * row_stride + c * col_stride];
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::TILE;
    use std::arch::x86_64::*;

    /// Transposes the 8×8 blocks of source rows `0..r8` and columns `0..c8` (multiples
    /// of 8) of the unit-stride `src` into `dst` (`[cols, rows]` row-major).
    ///
    /// # Safety
    /// AVX must be available; `src` must hold rows `0..r8` of `c8` values `row_stride`
    /// apart and `dst` at least `c8 · rows` values.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn transpose_blocks(src: &[f32], rows: usize, row_stride: usize, r8: usize, c8: usize, dst: &mut [f32]) {
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        for r0 in (0..r8).step_by(TILE) {
            for c0 in (0..c8).step_by(TILE) {
                for r in (r0..(r0 + TILE).min(r8)).step_by(8) {
                    for c in (c0..(c0 + TILE).min(c8)).step_by(8) {
                        // SAFETY: rows r..r+8 and columns c..c+8 are inside the source and
                        // rows c..c+8, columns r..r+8 inside the destination (caller's
                        // contract); AVX is enabled in this function.
                        unsafe { block(s.add(r * row_stride + c), row_stride, d.add(c * rows + r), rows) };
                    }
                }
            }
        }
    }

    /// The 8×8 block at `s` (rows `ls` apart) written transposed at `d` (rows `ld` apart).
    /// Also used by the GEMM's packers (`gemm/pack.rs`).
    ///
    /// # Safety
    /// AVX must be available; `s` must be valid for 8 reads of 8 values `ls` apart and
    /// `d` for 8 writes of 8 values `ld` apart.
    #[inline]
    #[target_feature(enable = "avx")]
    pub(crate) unsafe fn block(s: *const f32, ls: usize, d: *mut f32, ld: usize) {
        // SAFETY: the caller guarantees 8 rows of 8 readable values at `s` and 8 rows of
        // 8 writable values at `d`, and that AVX is enabled.
        unsafe {
            let r: [__m256; 8] = std::array::from_fn(|i| _mm256_loadu_ps(s.add(i * ls)));
            let t0 = _mm256_unpacklo_ps(r[0], r[1]);
            let t1 = _mm256_unpackhi_ps(r[0], r[1]);
            let t2 = _mm256_unpacklo_ps(r[2], r[3]);
            let t3 = _mm256_unpackhi_ps(r[2], r[3]);
            let t4 = _mm256_unpacklo_ps(r[4], r[5]);
            let t5 = _mm256_unpackhi_ps(r[4], r[5]);
            let t6 = _mm256_unpacklo_ps(r[6], r[7]);
            let t7 = _mm256_unpackhi_ps(r[6], r[7]);
            let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
            let u1 = _mm256_shuffle_ps::<0xee>(t0, t2);
            let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
            let u3 = _mm256_shuffle_ps::<0xee>(t1, t3);
            let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
            let u5 = _mm256_shuffle_ps::<0xee>(t4, t6);
            let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
            let u7 = _mm256_shuffle_ps::<0xee>(t5, t7);
            let o = [
                _mm256_permute2f128_ps::<0x20>(u0, u4),
                _mm256_permute2f128_ps::<0x20>(u1, u5),
                _mm256_permute2f128_ps::<0x20>(u2, u6),
                _mm256_permute2f128_ps::<0x20>(u3, u7),
                _mm256_permute2f128_ps::<0x31>(u0, u4),
                _mm256_permute2f128_ps::<0x31>(u1, u5),
                _mm256_permute2f128_ps::<0x31>(u2, u6),
                _mm256_permute2f128_ps::<0x31>(u3, u7),
            ];
            for (i, v) in o.into_iter().enumerate() {
                _mm256_storeu_ps(d.add(i * ld), v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_definition() {
        let shapes = [
            (1, 1, 1, 1),
            (3, 5, 5, 1),
            (17, 33, 40, 1),
            (20, 7, 1, 20),
            (33, 18, 70, 3),
            (8, 8, 8, 1),
            (130, 77, 80, 1),
            (64, 64, 256, 1),
        ];
        for (rows, cols, rs, cs) in shapes {
            let src: Vec<f32> = (0..(rows - 1) * rs + (cols - 1) * cs + 1).map(|i| i as f32).collect();
            let mut dst = vec![-1.0f32; rows * cols];
            transpose(&src, rows, cols, rs, cs, &mut dst);
            for r in 0..rows {
                for c in 0..cols {
                    assert_eq!(dst[c * rows + r], src[r * rs + c * cs], "{rows}x{cols} at ({r}, {c})");
                }
            }
        }
    }
}
