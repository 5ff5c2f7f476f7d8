//! Scalar register tile (4 × 8), plain Rust: the reference every other path matches in
//! exact mode. Exact mode writes `acc + a * b` (Rust never contracts it to a fused
//! multiply-add); fast mode writes `a.mul_add(b, acc)` (one rounding). It takes the
//! `simd::Scalar` token like every path's kernel takes its own (plain Rust runs anywhere).

use super::{Tile, TileFn, A_STRIDE};
use crate::kernels::simd::Scalar;

/// Columns of the scalar tile.
const NR: usize = 8;

/// The scalar tile kernel for fast (fused) or exact mode.
pub(super) fn tile(fast: bool) -> TileFn<Scalar> {
    if fast {
        tile_rows::<true>
    } else {
        tile_rows::<false>
    }
}

/// # Safety
/// See [`TileFn`]; `rows` ≤ 4.
unsafe fn tile_rows<const FAST: bool>(_isa: Scalar, rows: usize, t: &Tile) {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        match rows {
            1 => tile_kernel::<1, FAST>(t),
            2 => tile_kernel::<2, FAST>(t),
            3 => tile_kernel::<3, FAST>(t),
            _ => tile_kernel::<4, FAST>(t),
        }
    }
}

/// # Safety
/// See [`TileFn`].
unsafe fn tile_kernel<const R: usize, const FAST: bool>(t: &Tile) {
    // SAFETY: the caller guarantees `kc` steps of `R` A rows and NR B values, and
    // `R` rows of NR outputs at `c`.
    unsafe {
        let mut acc = [[0.0f32; NR]; R];
        if t.accumulate {
            for (r, row) in acc.iter_mut().enumerate() {
                row.copy_from_slice(std::slice::from_raw_parts(t.src.add(r * t.lds), NR));
            }
        }
        for p in 0..t.kc {
            let b = std::slice::from_raw_parts(t.b.add(p * t.ldb), NR);
            for (r, row) in acc.iter_mut().enumerate() {
                let av = *t.a.add(r * A_STRIDE + p);
                for (o, &bv) in row.iter_mut().zip(b) {
                    *o = if FAST { av.mul_add(bv, *o) } else { *o + av * bv };
                }
            }
        }
        for (r, row) in acc.iter().enumerate() {
            std::slice::from_raw_parts_mut(t.c.add(r * t.ldc), NR).copy_from_slice(row);
        }
    }
}
