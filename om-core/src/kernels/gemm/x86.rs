//! x86-64 register tiles with explicit intrinsics.
//!
//! | path   | tile (rows × cols) | accumulators     | step `p`                                  |
//! |--------|--------------------|------------------|-------------------------------------------|
//! | avx512 | 24 × 16            | 24 zmm, one/row  | 1 load of B, A broadcast from memory      |
//! | avx2   | 6 × 16             | 12 ymm, two/row  | 2 loads of B, 1 broadcast of A per row    |
//! | sse    | 6 × 8              | 12 xmm, two/row  | 2 loads of B, 1 broadcast of A per row    |
//!
//! Exact mode: `acc = add(acc, mul(a, b))`, two roundings like scalar `acc + a * b`.
//! Fast mode: `acc = fmadd(a, b, acc)`, one rounding like `a.mul_add(b, acc)`; baseline
//! SSE has no FMA, so the SSE path computes fast mode like exact mode.
//!
//! Each kernel is generic over the row count `R` (1 to MR, so edge tiles run the same
//! instruction sequence per row) and the mode, so the inner loop has no branches and the
//! accumulator array lives in registers.

use super::{Tile, TileFn, A_STRIDE};
use std::arch::x86_64::*;

/// Expands to a `match` from the run-time row count to the kernel instantiated for it.
macro_rules! by_rows {
    ($kernel:ident, $fast:tt, $rows:expr, $tile:expr; $($r:literal)+) => {
        match $rows {
            $($r => $kernel::<$r, $fast>($tile),)+
            _ => unreachable!("gemm tile rows out of range"),
        }
    };
}

/// The AVX-512 24 × 16 tile kernel for fast or exact mode.
pub(super) fn avx512_tile(fast: bool) -> TileFn {
    if fast {
        avx512_rows::<true>
    } else {
        avx512_rows::<false>
    }
}

/// # Safety
/// See [`TileFn`]; `rows` ≤ 24; the CPU supports AVX-512F/VL/DQ/BW and FMA.
unsafe fn avx512_rows<const FAST: bool>(rows: usize, t: &Tile) {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        by_rows!(avx512_kernel, FAST, rows, t;
            1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24)
    }
}

/// # Safety
/// See [`TileFn`]; the CPU supports AVX-512F/VL/DQ/BW and FMA.
#[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,fma")]
unsafe fn avx512_kernel<const R: usize, const FAST: bool>(t: &Tile) {
    // SAFETY: the caller guarantees `kc` steps of `R` A rows and 16 B values, and `R`
    // rows of 16 outputs at `c`; unaligned loads and stores have no alignment needs.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); R];
        if t.accumulate {
            for (r, v) in acc.iter_mut().enumerate() {
                *v = _mm512_loadu_ps(t.c.add(r * t.ldc));
            }
        }
        let (mut a, mut b) = (t.a, t.b);
        for _ in 0..t.kc {
            let bv = _mm512_loadu_ps(b);
            for (r, v) in acc.iter_mut().enumerate() {
                // Folds into an embedded-broadcast memory operand: `{1to16}`.
                let av = _mm512_set1_ps(*a.add(r * A_STRIDE));
                *v = if FAST { _mm512_fmadd_ps(av, bv, *v) } else { _mm512_add_ps(*v, _mm512_mul_ps(av, bv)) };
            }
            a = a.add(1);
            b = b.add(t.ldb);
        }
        for (r, v) in acc.iter().enumerate() {
            _mm512_storeu_ps(t.c.add(r * t.ldc), *v);
        }
    }
}

/// The AVX2 6 × 16 tile kernel for fast or exact mode.
pub(super) fn avx2_tile(fast: bool) -> TileFn {
    if fast {
        avx2_rows::<true>
    } else {
        avx2_rows::<false>
    }
}

/// # Safety
/// See [`TileFn`]; `rows` ≤ 6; the CPU supports AVX2 and FMA.
unsafe fn avx2_rows<const FAST: bool>(rows: usize, t: &Tile) {
    // SAFETY: forwarded from this function's contract.
    unsafe { by_rows!(avx2_kernel, FAST, rows, t; 1 2 3 4 5 6) }
}

/// # Safety
/// See [`TileFn`]; the CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_kernel<const R: usize, const FAST: bool>(t: &Tile) {
    // SAFETY: the caller guarantees `kc` steps of `R` A rows and 16 B values, and `R`
    // rows of 16 outputs at `c`; unaligned loads and stores have no alignment needs.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        if t.accumulate {
            for (r, v) in acc.iter_mut().enumerate() {
                let c = t.c.add(r * t.ldc);
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
pub(super) fn sse_tile(_fast: bool) -> TileFn {
    sse_rows
}

/// # Safety
/// See [`TileFn`]; `rows` ≤ 6.
unsafe fn sse_rows(rows: usize, t: &Tile) {
    // SAFETY: forwarded from this function's contract.
    unsafe { by_rows!(sse_kernel, false, rows, t; 1 2 3 4 5 6) }
}

/// # Safety
/// See [`TileFn`] (SSE is part of the x86-64 baseline). `_FAST` is unused: see the module
/// docs.
#[target_feature(enable = "sse2")]
unsafe fn sse_kernel<const R: usize, const _FAST: bool>(t: &Tile) {
    // SAFETY: the caller guarantees `kc` steps of `R` A rows and 8 B values, and `R`
    // rows of 8 outputs at `c`; unaligned loads and stores have no alignment needs.
    unsafe {
        let mut acc = [[_mm_setzero_ps(); 2]; R];
        if t.accumulate {
            for (r, v) in acc.iter_mut().enumerate() {
                let c = t.c.add(r * t.ldc);
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
