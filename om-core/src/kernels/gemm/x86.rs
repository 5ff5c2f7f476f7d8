//! x86-64 register tiles with explicit intrinsics.
//!
//! | path   | tile (rows × cols) | accumulators     | step `p`                                  |
//! |--------|--------------------|------------------|-------------------------------------------|
//! | avx512 | 14 × 32            | 28 zmm, two/row  | 2 loads of B, 1 broadcast of A per row    |
//! | avx2   | 6 × 16             | 12 ymm, two/row  | 2 loads of B, 1 broadcast of A per row    |
//! | sse    | 6 × 8              | 12 xmm, two/row  | 2 loads of B, 1 broadcast of A per row    |
//!
//! Exact mode: `acc = add(acc, mul(a, b))`, two roundings like scalar `acc + a * b`.
//! Fast mode: `acc = fmadd(a, b, acc)`, one rounding like `a.mul_add(b, acc)`; baseline
//! SSE has no FMA, so the SSE path computes fast mode like exact mode.
//!
//! The AVX-512 kernel loads and stores C under column masks, so an edge tile narrower than
//! 32 columns runs in place (16 columns or fewer with one vector per row), and it
//! prefetches B a few steps ahead (B read in place from a large stride crosses a page
//! every step, which the hardware prefetchers do not follow).
//!
//! Each kernel is generic over the row count `R` (1 to MR, so edge tiles run the same
//! instruction sequence per row) and the mode, so the inner loop has no branches and the
//! accumulator array lives in registers.
//!
//! Every kernel takes the capability token of its instruction set (`simd::Sse2`,
//! `simd::Avx2`, `simd::Avx512`), which only run-time detection makes: the token is the
//! proof that the CPU runs the kernel's `#[target_feature]` code, so a kernel cannot be
//! called without it. The tokens are zero-sized, so they add no instruction.

use super::{Tile, TileBias, TileFn, A_STRIDE};
use crate::kernels::simd::{Avx2, Avx512, Sse2};
use std::arch::x86_64::*;

/// Expands to a `match` from the run-time row count to the kernel instantiated for it.
macro_rules! by_rows {
    ($kernel:ident, $fast:tt, $isa:expr, $rows:expr, $tile:expr; $($r:literal)+) => {
        match $rows {
            $($r => $kernel::<$r, $fast>($isa, $tile),)+
            _ => unreachable!("gemm tile rows out of range"),
        }
    };
}

/// The AVX-512 14 × 32 tile kernel for fast or exact mode.
pub(super) fn avx512_tile(fast: bool) -> TileFn<Avx512> {
    if fast {
        avx512_rows::<true>
    } else {
        avx512_rows::<false>
    }
}

/// Expands to a `match` from the run-time row count to the AVX-512 kernel with `V`
/// column vectors instantiated for it.
macro_rules! avx512_by_rows {
    ($v:literal, $fast:tt, $isa:expr, $rows:expr, $tile:expr) => {
        match $rows {
            1 => avx512_kernel::<1, $v, $fast>($isa, $tile),
            2 => avx512_kernel::<2, $v, $fast>($isa, $tile),
            3 => avx512_kernel::<3, $v, $fast>($isa, $tile),
            4 => avx512_kernel::<4, $v, $fast>($isa, $tile),
            5 => avx512_kernel::<5, $v, $fast>($isa, $tile),
            6 => avx512_kernel::<6, $v, $fast>($isa, $tile),
            7 => avx512_kernel::<7, $v, $fast>($isa, $tile),
            8 => avx512_kernel::<8, $v, $fast>($isa, $tile),
            9 => avx512_kernel::<9, $v, $fast>($isa, $tile),
            10 => avx512_kernel::<10, $v, $fast>($isa, $tile),
            11 => avx512_kernel::<11, $v, $fast>($isa, $tile),
            12 => avx512_kernel::<12, $v, $fast>($isa, $tile),
            13 => avx512_kernel::<13, $v, $fast>($isa, $tile),
            14 => avx512_kernel::<14, $v, $fast>($isa, $tile),
            _ => unreachable!("gemm tile rows out of range"),
        }
    };
}

/// # Safety
/// See [`TileFn`]; `rows` ≤ 14, `1 ≤ t.cols` ≤ 32.
unsafe fn avx512_rows<const FAST: bool>(isa: Avx512, rows: usize, t: &Tile) {
    // SAFETY: the pointers are forwarded from this function's contract; the token proves
    // that the CPU runs AVX-512F/VL/DQ/BW and FMA.
    unsafe {
        if t.cols > 16 {
            avx512_by_rows!(2, FAST, isa, rows, t)
        } else {
            avx512_by_rows!(1, FAST, isa, rows, t)
        }
    }
}

/// Steps of B prefetched ahead: a B read in place (rows `ldb` apart, each in its own page
/// for a large stride) defeats the hardware prefetchers, which stay within a page.
const B_AHEAD: usize = 8;

/// The store mask of column vector `h` (16 columns each) of a tile `cols` wide.
fn column_mask(cols: usize, h: usize) -> __mmask16 {
    let live = cols.saturating_sub(16 * h).min(16);
    ((1u32 << live) - 1) as __mmask16
}

/// `R` rows × `V` vectors of 16 columns; C is read and written under masks of
/// [`Tile::cols`] columns, so a narrow edge tile needs no buffer (masked-off lanes are
/// neither read nor written, and never fault). B is read `V · 16` wide: a packed panel is
/// zero-padded to the full tile width.
///
/// # Safety
/// See [`TileFn`] (the token proves that the CPU runs AVX-512F/VL/DQ/BW and FMA).
#[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,fma")]
unsafe fn avx512_kernel<const R: usize, const V: usize, const FAST: bool>(_isa: Avx512, t: &Tile) {
    // SAFETY: the caller guarantees `kc` steps of `R` A rows and `16·V` B values, `R`
    // rows of `t.cols` outputs at `c` (the masks cover exactly those), and `t.cols`
    // (`R`) values at a per-column (per-row) bias; unaligned and masked loads and stores
    // have no alignment needs.
    unsafe {
        let masks: [__mmask16; V] = std::array::from_fn(|h| column_mask(t.cols, h));
        let mut acc = [[_mm512_setzero_ps(); V]; R];
        if t.accumulate {
            for (r, v) in acc.iter_mut().enumerate() {
                for h in 0..V {
                    v[h] = _mm512_maskz_loadu_ps(masks[h], t.src.add(r * t.lds + 16 * h));
                }
            }
        }
        let (mut a, mut b) = (t.a, t.b);
        for _ in 0..t.kc {
            let bv: [__m512; V] = std::array::from_fn(|h| _mm512_loadu_ps(b.add(16 * h)));
            for h in 0..V {
                _mm_prefetch::<_MM_HINT_T0>(b.wrapping_add(B_AHEAD * t.ldb + 16 * h) as *const i8);
            }
            for (r, v) in acc.iter_mut().enumerate() {
                let av = _mm512_set1_ps(*a.add(r * A_STRIDE));
                for h in 0..V {
                    v[h] = if FAST { _mm512_fmadd_ps(av, bv[h], v[h]) } else { _mm512_add_ps(v[h], _mm512_mul_ps(av, bv[h])) };
                }
            }
            a = a.add(1);
            b = b.add(t.ldb);
        }
        // The bias: one addition per output after the whole accumulation, as `C += bias`
        // would (masked-off lanes add zeros and are not stored).
        match t.bias {
            TileBias::None => {}
            TileBias::Cols(bias) => {
                let bv: [__m512; V] = std::array::from_fn(|h| _mm512_maskz_loadu_ps(masks[h], bias.add(16 * h)));
                for v in acc.iter_mut() {
                    for h in 0..V {
                        v[h] = _mm512_add_ps(v[h], bv[h]);
                    }
                }
            }
            TileBias::Rows(bias) => {
                for (r, v) in acc.iter_mut().enumerate() {
                    let s = _mm512_set1_ps(*bias.add(r));
                    for x in v.iter_mut() {
                        *x = _mm512_add_ps(*x, s);
                    }
                }
            }
        }
        for (r, v) in acc.iter().enumerate() {
            for h in 0..V {
                _mm512_mask_storeu_ps(t.c.add(r * t.ldc + 16 * h), masks[h], v[h]);
            }
        }
    }
}

/// The AVX2 6 × 16 tile kernel for fast or exact mode.
pub(super) fn avx2_tile(fast: bool) -> TileFn<Avx2> {
    if fast {
        avx2_rows::<true>
    } else {
        avx2_rows::<false>
    }
}

/// # Safety
/// See [`TileFn`]; `rows` ≤ 6.
unsafe fn avx2_rows<const FAST: bool>(isa: Avx2, rows: usize, t: &Tile) {
    // SAFETY: the pointers are forwarded from this function's contract; the token proves
    // that the CPU runs AVX2 and FMA.
    unsafe { by_rows!(avx2_kernel, FAST, isa, rows, t; 1 2 3 4 5 6) }
}

/// # Safety
/// See [`TileFn`] (the token proves that the CPU runs AVX2 and FMA).
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_kernel<const R: usize, const FAST: bool>(_isa: Avx2, t: &Tile) {
    // SAFETY: the caller guarantees `kc` steps of `R` A rows and 16 B values, and `R`
    // rows of 16 outputs at `c`; unaligned loads and stores have no alignment needs.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        if t.accumulate {
            for (r, v) in acc.iter_mut().enumerate() {
                let c = t.src.add(r * t.lds);
                *v = [_mm256_loadu_ps(c), _mm256_loadu_ps(c.add(8))];
            }
        }
        let (mut a, mut b) = (t.a, t.b);
        for _ in 0..t.kc {
            let bv = [_mm256_loadu_ps(b), _mm256_loadu_ps(b.add(8))];
            for (r, v) in acc.iter_mut().enumerate() {
                let av = _mm256_broadcast_ss(&*a.add(r * A_STRIDE));
                for h in 0..2 {
                    v[h] = if FAST { _mm256_fmadd_ps(av, bv[h], v[h]) } else { _mm256_add_ps(v[h], _mm256_mul_ps(av, bv[h])) };
                }
            }
            a = a.add(1);
            b = b.add(t.ldb);
        }
        for (r, v) in acc.iter().enumerate() {
            let c = t.c.add(r * t.ldc);
            _mm256_storeu_ps(c, v[0]);
            _mm256_storeu_ps(c.add(8), v[1]);
        }
    }
}

/// The SSE 6 × 8 tile kernel; fast mode equals exact mode (no FMA in baseline SSE).
pub(super) fn sse_tile(_fast: bool) -> TileFn<Sse2> {
    sse_rows
}

/// # Safety
/// See [`TileFn`]; `rows` ≤ 6.
unsafe fn sse_rows(isa: Sse2, rows: usize, t: &Tile) {
    // SAFETY: the pointers are forwarded from this function's contract; the token proves
    // that the CPU runs SSE2.
    unsafe { by_rows!(sse_kernel, false, isa, rows, t; 1 2 3 4 5 6) }
}

/// # Safety
/// See [`TileFn`] (the token proves that the CPU runs SSE2, part of the x86-64 baseline).
/// `_FAST` is unused: see the module docs.
#[target_feature(enable = "sse2")]
unsafe fn sse_kernel<const R: usize, const _FAST: bool>(_isa: Sse2, t: &Tile) {
    // SAFETY: the caller guarantees `kc` steps of `R` A rows and 8 B values, and `R`
    // rows of 8 outputs at `c`; unaligned loads and stores have no alignment needs.
    unsafe {
        let mut acc = [[_mm_setzero_ps(); 2]; R];
        if t.accumulate {
            for (r, v) in acc.iter_mut().enumerate() {
                let c = t.src.add(r * t.lds);
                *v = [_mm_loadu_ps(c), _mm_loadu_ps(c.add(4))];
            }
        }
        let (mut a, mut b) = (t.a, t.b);
        for _ in 0..t.kc {
            let bv = [_mm_loadu_ps(b), _mm_loadu_ps(b.add(4))];
            for (r, v) in acc.iter_mut().enumerate() {
                let av = _mm_set1_ps(*a.add(r * A_STRIDE));
                for h in 0..2 {
                    v[h] = _mm_add_ps(v[h], _mm_mul_ps(av, bv[h]));
                }
            }
            a = a.add(1);
            b = b.add(t.ldb);
        }
        for (r, v) in acc.iter().enumerate() {
            let c = t.c.add(r * t.ldc);
            _mm_storeu_ps(c, v[0]);
            _mm_storeu_ps(c.add(4), v[1]);
        }
    }
}
