//! aarch64 NEON register tile (8 × 8: 16 q-register accumulators, two per row).
//!
//! Exact mode: `vaddq(acc, vmulq(a, b))` (two roundings); fast mode: `vfmaq(acc, a, b)`
//! (fused, one rounding), matching the x86 paths bit for bit in each mode. The kernel takes
//! the `simd::Neon` capability token, which only run-time detection makes.

use super::{Tile, TileFn, A_STRIDE};
use crate::kernels::simd::Neon;
use std::arch::aarch64::*;

/// The NEON 8 × 8 tile kernel for fast or exact mode.
pub(super) fn tile(fast: bool) -> TileFn<Neon> {
    if fast {
        neon_rows::<true>
    } else {
        neon_rows::<false>
    }
}

/// # Safety
/// See [`TileFn`]; `rows` ≤ 8.
unsafe fn neon_rows<const FAST: bool>(isa: Neon, rows: usize, t: &Tile) {
    // SAFETY: the pointers are forwarded from this function's contract; the token proves
    // that the CPU runs NEON.
    unsafe {
        match rows {
            1 => neon_kernel::<1, FAST>(isa, t),
            2 => neon_kernel::<2, FAST>(isa, t),
            3 => neon_kernel::<3, FAST>(isa, t),
            4 => neon_kernel::<4, FAST>(isa, t),
            5 => neon_kernel::<5, FAST>(isa, t),
            6 => neon_kernel::<6, FAST>(isa, t),
            7 => neon_kernel::<7, FAST>(isa, t),
            _ => neon_kernel::<8, FAST>(isa, t),
        }
    }
}

/// # Safety
/// See [`TileFn`] (the token proves that the CPU runs NEON).
#[target_feature(enable = "neon")]
unsafe fn neon_kernel<const R: usize, const FAST: bool>(_isa: Neon, t: &Tile) {
    // SAFETY: the caller guarantees `kc` steps of `R` A rows and 8 B values, and `R`
    // rows of 8 outputs at `c`; NEON loads and stores have no alignment needs.
    unsafe {
        let mut acc = [[vdupq_n_f32(0.0); 2]; R];
        if t.accumulate {
            for (r, v) in acc.iter_mut().enumerate() {
                let c = t.src.add(r * t.lds);
                *v = [vld1q_f32(c), vld1q_f32(c.add(4))];
            }
        }
        let (mut a, mut b) = (t.a, t.b);
        for _ in 0..t.kc {
            let bv = [vld1q_f32(b), vld1q_f32(b.add(4))];
            for (r, v) in acc.iter_mut().enumerate() {
                let av = vdupq_n_f32(*a.add(r * A_STRIDE));
                for h in 0..2 {
                    v[h] = if FAST { vfmaq_f32(v[h], av, bv[h]) } else { vaddq_f32(v[h], vmulq_f32(av, bv[h])) };
                }
            }
            a = a.add(1);
            b = b.add(t.ldb);
        }
        for (r, v) in acc.iter().enumerate() {
            let c = t.c.add(r * t.ldc);
            vst1q_f32(c, v[0]);
            vst1q_f32(c.add(4), v[1]);
        }
    }
}
