//! Matrix product in the canonical order: each output starts from +0 and adds
//! `a[i][p] * b[p][j]` for increasing `p` (exact: separate multiply and add; fast: fused).
//! A plain reference kernel; the blocked GEMM replaces its body with the same contract.

use crate::compute::{Mode, Settings};

/// `C[m×n] = A[m×k] · B[k×n]`, row-major with leading dimensions; C is overwritten.
#[allow(clippy::too_many_arguments)]
pub fn gemm(settings: Settings, m: usize, k: usize, n: usize, a: &[f32], lda: usize, b: &[f32], ldb: usize, c: &mut [f32], ldc: usize) {
    for i in 0..m {
        let row = &mut c[i * ldc..i * ldc + n];
        row.fill(0.0);
        for p in 0..k {
            let av = a[i * lda + p];
            let brow = &b[p * ldb..p * ldb + n];
            match settings.mode {
                Mode::Exact => row.iter_mut().zip(brow).for_each(|(c, &bv)| *c += av * bv),
                Mode::Fast => row.iter_mut().zip(brow).for_each(|(c, &bv)| *c = av.mul_add(bv, *c)),
            }
        }
    }
}
