//! Transposed copies, and the one 8×8 block transpose behind them.
//!
//! [`transpose`] writes the row-major transpose of a (possibly strided) matrix, in square
//! tiles so that both the reads and the writes stay within a few cache lines per tile. Used
//! by attention for a block's `Kᵀ` and `Pᵀ` (64×64 at the encoder's shape): there a
//! copy plus row-major packing measured ~3% faster over the whole attention step than
//! `MatRef::t()` views packed by the GEMM (AMD EPYC, 1 thread, `om bench attention`); the
//! recurrent layers read their transposed operands in place instead. The GEMM's packers
//! (`gemm/pack.rs`) transpose a column-major operand with `transpose_runs`, the same code.
//!
//! Both go through whole 8×8 blocks where the source rows are contiguous: in AVX registers
//! (unpack, shuffle, 128-bit lane permute; `x86::regs`) when the CPU has AVX — the
//! block kernel takes the `simd::Avx` token, so it cannot be called without proof — else
//! through a local 8×8 array. The edges that do not fill a block, and strided rows, use
//! the scalar tile loop — except, with AVX, the short tails (fewer than 8 values) of
//! whole groups of 8 runs, which go through the block transpose under a load mask. Values
//! move, no arithmetic, so no path can change a bit.

use crate::kernels::simd::Scalar;
use std::ops::Range;

/// Side of the outer square tiles: 64×64 floats is 16 KiB read and 16 KiB written, half of
/// a 32 KiB L1 data cache each way at most, so a tile's 64 destination rows stay cached
/// while it is filled (the smallest L1 among the CPUs we target is 32 KiB).
const TILE: usize = 64;

/// `dst[c·rows + r] = src[r·row_stride + c·col_stride]` for `r < rows`, `c < cols`: the
/// `[rows, cols]` matrix read with the given strides, written transposed as a row-major
/// `[cols, rows]` matrix.
///
/// # Panics
/// If `dst` holds fewer than `rows · cols` values or `src` is too short.
///
/// # Examples
/// ```
/// use om_core::kernels::transpose::transpose;
/// let src = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]; // [[1, 2, 3], [4, 5, 6]]
/// let mut dst = [0.0; 6];
/// transpose(&src, 2, 3, 3, 1, &mut dst);
/// assert_eq!(dst, [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]); // [[1, 4], [2, 5], [3, 6]]
/// ```
pub fn transpose(src: &[f32], rows: usize, cols: usize, row_stride: usize, col_stride: usize, dst: &mut [f32]) {
    if rows == 0 || cols == 0 {
        return;
    }
    assert!(dst.len() >= rows * cols, "transpose: destination too short");
    assert!(src.len() > (rows - 1) * row_stride + (cols - 1) * col_stride, "transpose: source too short");
    if col_stride == 1 {
        transpose_runs(Runs { src, start: 0, stride: row_stride, count: rows, len: cols }, dst, rows);
    } else {
        let from = Strided { src, start: 0, stride: row_stride, step: col_stride };
        scalar(from, dst, rows, 0..rows, 0..cols);
    }
}

/// `count` runs of `len` contiguous values in `src`, run `l` at `src[start + l·stride..]`
/// (the rows of a row-major block, or the columns of a column-major one).
#[derive(Clone, Copy)]
pub(crate) struct Runs<'a> {
    pub src: &'a [f32],
    /// Index of the first value of run 0.
    pub start: usize,
    /// Distance between the starts of consecutive runs.
    pub stride: usize,
    /// Number of runs.
    pub count: usize,
    /// Values per run.
    pub len: usize,
}

/// Writes the runs as columns: `dst[i·dst_stride + l] = src[start + l·stride + i]` for run
/// `l < count`, `i < len`. Whole 8×8 blocks go through the block transpose (AVX registers
/// where the CPU has AVX, the short tails of whole groups of 8 runs too), the other edges
/// through the scalar tile loop.
///
/// # Panics
/// If a run or a destination row lies outside its slice.
pub(crate) fn transpose_runs(runs: Runs, dst: &mut [f32], dst_stride: usize) {
    let Runs { src, start, stride, count, len } = runs;
    if count == 0 || len == 0 {
        return;
    }
    // Every read below stays inside the last run; every write inside the last row.
    assert!(
        start + (count - 1) * stride + len <= src.len() && (len - 1) * dst_stride + count <= dst.len(),
        "transpose: a run or a destination row out of bounds"
    );
    let (c8, l8) = (count / 8 * 8, len / 8 * 8);
    let from = Strided { src, start, stride, step: 1 };
    #[cfg(target_arch = "x86_64")]
    if let Some(avx) = crate::kernels::simd::Avx::detect() {
        // SAFETY: the token proves that this CPU runs AVX, which `blocks_avx` and
        // `tails_avx` are compiled for.
        unsafe {
            x86::blocks_avx(avx, runs, c8, l8, dst, dst_stride);
            x86::tails_avx(avx, runs, c8, l8, dst, dst_stride);
        }
    } else {
        blocks(Scalar, runs, c8, l8, dst, dst_stride);
        scalar(from, dst, dst_stride, 0..c8, l8..len);
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        blocks(Scalar, runs, c8, l8, dst, dst_stride);
        scalar(from, dst, dst_stride, 0..c8, l8..len);
    }
    scalar(from, dst, dst_stride, c8..count, 0..len);
}

/// One 8×8 block transposed: `d[i·ld + l] = s[l·ls + i]` for `l, i < 8`.
trait Block8: Copy {
    /// # Panics
    /// If `s` is shorter than `7·ls + 8` or `d` than `7·ld + 8`.
    fn block(self, s: &[f32], ls: usize, d: &mut [f32], ld: usize);
}

/// The portable block: through a local array, so both sides move in runs of 8.
impl Block8 for Scalar {
    #[inline(always)]
    fn block(self, s: &[f32], ls: usize, d: &mut [f32], ld: usize) {
        let mut block = [[0.0f32; 8]; 8];
        for (l, row) in block.iter_mut().enumerate() {
            row.copy_from_slice(&s[l * ls..][..8]);
        }
        for i in 0..8 {
            for (l, o) in d[i * ld..][..8].iter_mut().enumerate() {
                *o = block[l][i];
            }
        }
    }
}

/// The whole 8×8 blocks of runs `0..c8` × values `0..l8` (multiples of 8), in [`TILE`]
/// squares. Always inlined, so that it is compiled for the block's instruction set.
#[inline(always)]
fn blocks<B: Block8>(b: B, runs: Runs, c8: usize, l8: usize, dst: &mut [f32], ds: usize) {
    let Runs { src, start, stride, .. } = runs;
    for l0 in (0..c8).step_by(TILE) {
        for i0 in (0..l8).step_by(TILE) {
            for l in (l0..(l0 + TILE).min(c8)).step_by(8) {
                for i in (i0..(i0 + TILE).min(l8)).step_by(8) {
                    b.block(&src[start + l * stride + i..], stride, &mut dst[i * ds + l..], ds);
                }
            }
        }
    }
}

/// A strided source: element `(l, i)` at `src[start + l·stride + i·step]`.
#[derive(Clone, Copy)]
struct Strided<'a> {
    src: &'a [f32],
    start: usize,
    stride: usize,
    step: usize,
}

/// The tile loop: `dst[i·ds + l] = (l, i)` of `from` for `l` in `ls`, `i` in `is`.
fn scalar(from: Strided, dst: &mut [f32], ds: usize, ls: Range<usize>, is: Range<usize>) {
    let Strided { src, start, stride, step } = from;
    for l0 in ls.clone().step_by(TILE) {
        let l1 = (l0 + TILE).min(ls.end);
        for i0 in is.clone().step_by(TILE) {
            let i1 = (i0 + TILE).min(is.end);
            for i in i0..i1 {
                let out = &mut dst[i * ds + l0..i * ds + l1];
                for (o, l) in out.iter_mut().zip(l0..l1) {
                    *o = src[start + l * stride + i * step];
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::{blocks, Block8, Runs};
    use crate::kernels::simd::Avx;
    use std::arch::x86_64::*;

    /// [`blocks`] compiled with AVX enabled, so that the block kernel inlines into it.
    #[target_feature(enable = "avx")]
    pub(super) fn blocks_avx(avx: Avx, runs: Runs, c8: usize, l8: usize, dst: &mut [f32], ds: usize) {
        blocks(avx, runs, c8, l8, dst, ds);
    }

    /// The values `l8..len` (fewer than 8) of runs `0..c8`, eight runs at a time: each
    /// run's short tail loaded under a lane mask (masked-off lanes are neither read nor
    /// able to fault), the block transposed in registers ([`regs`]) and only its
    /// `len − l8` live rows stored. Before, these went through the scalar tile loop, one
    /// strided read per value: a 14-row GEMM panel of a transposed A (`xᵀ` in
    /// `dW = xᵀ·g`) packs 6 of its 14 rows here (3.5% of the encoder step at 2 threads in
    /// the scalar loop, `perf`, AMD EPYC Zen 5).
    #[target_feature(enable = "avx")]
    pub(super) fn tails_avx(avx: Avx, runs: Runs, c8: usize, l8: usize, dst: &mut [f32], ds: usize) {
        let Runs { src, start, stride, len, .. } = runs;
        let rem = len - l8;
        if rem == 0 {
            return;
        }
        let lanes: [i32; 8] = std::array::from_fn(|i| if i < rem { -1 } else { 0 });
        for l in (0..c8).step_by(8) {
            let s = &src[start + l * stride + l8..][..7 * stride + rem];
            let d = &mut dst[l8 * ds + l..][..(rem - 1) * ds + 8];
            // SAFETY: the token proves that this CPU runs AVX; masked load `i` reads only
            // `s[i·stride..i·stride + rem]` and store `i < rem` writes `d[i·ds..i·ds + 8]`,
            // inside the slices (their lengths were checked just above); unaligned accesses.
            unsafe {
                let mask = _mm256_loadu_si256(lanes.as_ptr().cast());
                let mut r = [_mm256_setzero_ps(); 8];
                for (i, v) in r.iter_mut().enumerate() {
                    *v = _mm256_maskload_ps(s.as_ptr().add(i * stride), mask);
                }
                for (i, v) in regs(avx, r).into_iter().take(rem).enumerate() {
                    _mm256_storeu_ps(d.as_mut_ptr().add(i * ds), v);
                }
            }
        }
    }

    /// The AVX block: eight loads, [`regs`], eight stores.
    impl Block8 for Avx {
        #[inline(always)]
        fn block(self, s: &[f32], ls: usize, d: &mut [f32], ld: usize) {
            let (s, d) = (&s[..7 * ls + 8], &mut d[..7 * ld + 8]);
            // SAFETY: the token proves that this CPU runs AVX; load `i` reads
            // `s[i·ls..i·ls + 8]` and store `i` writes `d[i·ld..i·ld + 8]`, inside the
            // slices (their lengths were checked just above); unaligned accesses. (Loops,
            // not closures: a closure's body would not be compiled with AVX.)
            unsafe {
                let mut r = [_mm256_setzero_ps(); 8];
                for (i, v) in r.iter_mut().enumerate() {
                    *v = _mm256_loadu_ps(s.as_ptr().add(i * ls));
                }
                for (i, v) in regs(self, r).into_iter().enumerate() {
                    _mm256_storeu_ps(d.as_mut_ptr().add(i * ld), v);
                }
            }
        }
    }

    /// Transposes an 8×8 block held in registers: output `j` holds element `j` of every
    /// input row, row `k` in lane `k` (unpack, shuffle, 128-bit lane permute; values move,
    /// no arithmetic). The one 8×8 transpose: [`transpose`](super::transpose), the GEMM's
    /// packers and the norms' lockstep sums (`norm/avx512.rs`, with `Avx512::avx`) use it.
    /// Always inlined, so that it compiles to eight unpacks, eight shuffles and eight
    /// permutes inside a caller compiled with AVX.
    #[inline(always)]
    pub(crate) fn regs(avx: Avx, r: [__m256; 8]) -> [__m256; 8] {
        let _ = avx;
        // SAFETY: the token proves that this CPU runs AVX; shuffles only.
        unsafe {
            let t0 = _mm256_unpacklo_ps(r[0], r[1]);
            let t1 = _mm256_unpackhi_ps(r[0], r[1]);
            let t2 = _mm256_unpacklo_ps(r[2], r[3]);
            let t3 = _mm256_unpackhi_ps(r[2], r[3]);
            let t4 = _mm256_unpacklo_ps(r[4], r[5]);
            let t5 = _mm256_unpackhi_ps(r[4], r[5]);
            let t6 = _mm256_unpacklo_ps(r[6], r[7]);
            let t7 = _mm256_unpackhi_ps(r[6], r[7]);
            let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
            let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
            let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
            let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
            let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
            let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
            let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
            let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
            [
                _mm256_permute2f128_ps::<0x20>(u0, u4),
                _mm256_permute2f128_ps::<0x20>(u1, u5),
                _mm256_permute2f128_ps::<0x20>(u2, u6),
                _mm256_permute2f128_ps::<0x20>(u3, u7),
                _mm256_permute2f128_ps::<0x31>(u0, u4),
                _mm256_permute2f128_ps::<0x31>(u1, u5),
                _mm256_permute2f128_ps::<0x31>(u2, u6),
                _mm256_permute2f128_ps::<0x31>(u3, u7),
            ]
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

    /// Every block path (portable, and AVX where this CPU has it) against the definition,
    /// from an offset start into a wider destination, across tile edges.
    #[test]
    fn runs_on_every_block_path() {
        for (count, len, stride, ds) in
            [(8, 8, 8, 8), (21, 70, 75, 30), (70, 9, 12, 80), (16, 256, 300, 272), (256, 14, 512, 272), (24, 5, 5, 24), (9, 7, 7, 9)]
        {
            let start = 3;
            let src: Vec<f32> = (0..start + (count - 1) * stride + len).map(|i| i as f32).collect();
            let runs = Runs { src: &src, start, stride, count, len };
            let check = |dst: &[f32], what: &str| {
                for l in 0..count {
                    for i in 0..len {
                        assert_eq!(dst[i * ds + l], src[start + l * stride + i], "{what} {count}x{len} at ({l}, {i})");
                    }
                }
            };
            let mut dst = vec![-1.0f32; (len - 1) * ds + count];
            transpose_runs(runs, &mut dst, ds);
            check(&dst, "best");
            let (c8, l8) = (count / 8 * 8, len / 8 * 8);
            let from = Strided { src: &src, start, stride, step: 1 };
            let mut dst = vec![-1.0f32; (len - 1) * ds + count];
            blocks(Scalar, runs, c8, l8, &mut dst, ds);
            scalar(from, &mut dst, ds, c8..count, 0..len);
            scalar(from, &mut dst, ds, 0..c8, l8..len);
            check(&dst, "portable");
            #[cfg(target_arch = "x86_64")]
            if let Some(avx) = crate::kernels::simd::Avx::detect() {
                let mut dst = vec![-1.0f32; (len - 1) * ds + count];
                // SAFETY: the token proves that this CPU runs AVX.
                unsafe {
                    x86::blocks_avx(avx, runs, c8, l8, &mut dst, ds);
                    x86::tails_avx(avx, runs, c8, l8, &mut dst, ds);
                }
                scalar(from, &mut dst, ds, c8..count, 0..len);
                check(&dst, "avx");
            }
        }
    }
}
