//! A GEMM whose A operand the caller packs once and reuses for many products (a
//! convolution's `W_g`, the same for every image): [`pack_a_once`] lays A out as the
//! register tiles read a packed A panel, and [`gemm_prepacked_a`] runs `C = A·B (+ bias)` on
//! it through the same product as [`gemm_with_scratch`](super::gemm_with_scratch) /
//! [`gemm_bias`](super::gemm_bias) (plan, chunks, B packing, tiles, bias epilogue), so the
//! bits are the same; only A's packing pass, once per product there, is gone.
//!
//! Layout ([`PackedA`]): one slab per k-block, `m` rows of the block's `kb` steps,
//! `A_STRIDE` (256) apart (`[m, A_STRIDE]`), slab `i` at `i·m·A_STRIDE`. A slab is what the
//! register tiles read of an A that is read in place (`DIRECT_A_STRIDE`), so the product's
//! `Job::run_block` reads each k-block's slab through a view whose rows are `A_STRIDE`
//! apart and whose step `pc` is the slab's first value; row panels may then be cut
//! anywhere.

use super::{gemm_scratch_len, pack, padded_c_len, product, AOperand, Bias, Kernel, MatMut, MatRef, A_STRIDE};
use crate::compute::Settings;

/// An `m × k` A operand packed by [`pack_a_once`]: k-blocks of `kc` steps (the last may be
/// shorter), each an `[m, A_STRIDE]` slab.
#[derive(Clone, Copy, Debug)]
pub struct PackedA<'a> {
    /// From the first row's first slab on.
    data: &'a [f32],
    m: usize,
    k: usize,
    kc: usize,
    /// Floats per slab (the packed A's rows times `A_STRIDE`; more than `m` rows for a
    /// [`PackedA::row_range`]).
    slab: usize,
}

impl PackedA<'_> {
    /// Rows of A.
    pub fn rows(&self) -> usize {
        self.m
    }

    /// Columns of A (steps of the product).
    pub fn cols(&self) -> usize {
        self.k
    }

    /// Rows `rows` of A, packed (a view: nothing is copied).
    ///
    /// # Panics
    /// If the range is not inside `0..rows()`.
    pub fn row_range(&self, rows: std::ops::Range<usize>) -> PackedA<'_> {
        assert!(rows.start <= rows.end && rows.end <= self.m, "PackedA: rows {rows:?} of {}", self.m);
        // (Nothing is packed when A has no columns.)
        let data = if rows.is_empty() { &[][..] } else { self.data.get(rows.start * A_STRIDE..).unwrap_or(&[]) };
        PackedA { data, m: rows.len(), ..*self }
    }

    /// The slab of k-block `pc..pc + kb` as a view the GEMM reads in place: rows
    /// `A_STRIDE` apart, whose element `(i, pc + p)` is the slab's row `i`, step `p` (the
    /// view starts `pc` values before the slab: slab `b` starts `b·slab ≥ b·A_STRIDE` values
    /// in, more than its `pc = b·kc`, as `kc ≤ KC < A_STRIDE`).
    pub(super) fn block(&self, pc: usize, kb: usize) -> MatRef<'_> {
        let slab = pc / self.kc * self.slab;
        MatRef::with_stride(&self.data[slab - pc..], self.m, pc + kb, A_STRIDE)
    }

    /// Panics unless the product's plan has the k-blocks `a` was packed for (`kc`).
    pub(super) fn check_blocks(&self, kc: usize) {
        assert_eq!(kc, self.kc, "gemm_prepacked_a: A packed for k-blocks of {}, the plan has {kc}", self.kc);
    }
}

/// Floats [`pack_a_once`] writes for an `m × k` A at `settings` (its path's k-blocks).
pub fn packed_a_len(settings: Settings, m: usize, k: usize) -> usize {
    let kernel = Kernel::select(settings.path, settings.mode);
    k.div_ceil(kernel.k_block(k)).saturating_mul(m).saturating_mul(A_STRIDE)
}

/// Packs `a` into `dst` (at least [`packed_a_len`] floats) for [`gemm_prepacked_a`] at the
/// same settings' path and mode. Copies values only.
///
/// # Panics
/// If `dst` is too short.
pub fn pack_a_once<'d>(settings: Settings, a: MatRef, dst: &'d mut [f32]) -> PackedA<'d> {
    let (m, k) = (a.rows(), a.cols());
    let kernel = Kernel::select(settings.path, settings.mode);
    let kc = kernel.k_block(k);
    let len = packed_a_len(settings, m, k);
    assert!(dst.len() >= len, "pack_a_once: {len} floats needed, {} given", dst.len());
    if m > 0 {
        for (pc, slab) in (0..k).step_by(kc).zip(dst.chunks_exact_mut(m * A_STRIDE)) {
            pack::pack_a(&a, 0, m, pc, kc.min(k - pc), slab);
        }
    }
    PackedA { data: &dst[..len], m, k, kc, slab: m * A_STRIDE }
}

/// `C = A·B`, then `+ bias` if given (fused into the tile stores as in `gemm_bias`), for a
/// packed A, with the caller's `scratch` of at least [`gemm_scratch_len`] floats for the
/// B packing (and, if it has room, the padded copy of C). The same bits as
/// [`gemm_with_scratch`](super::gemm_with_scratch) on the unpacked A followed by the bias add.
///
/// # Panics
/// If the shapes do not chain, the bias length is wrong, `a` was packed for another
/// path's k-blocks, or `scratch` is too short.
pub fn gemm_prepacked_a(settings: Settings, a: &PackedA, b: MatRef, c: MatMut, bias: Option<Bias>, scratch: &mut [f32]) {
    let (m, k, n) = (a.m, a.k, b.cols());
    if m > 0 && n > 0 && k > 0 {
        let packing = gemm_scratch_len(settings, m, k, n, c.row_stride()) - padded_c_len(m, n, c.row_stride());
        assert!(scratch.len() >= packing, "gemm_prepacked_a: {packing} floats of scratch needed, {} given", scratch.len());
    }
    product(settings, AOperand::Packed(*a), b, c, bias, Some(scratch));
}

#[cfg(test)]
mod tests {
    use super::super::{gemm_bias, gemm_with_scratch};
    use super::*;
    use crate::compute::{KernelPath, Mode};
    use crate::rng::Rng;

    /// The same bits as `gemm_with_scratch` (and `gemm_bias`) on every supported path, in
    /// both modes, at 1 and 2 threads, for shapes of one and several k-blocks, row panels
    /// cut unevenly, B read in place or packed, shared by row chunks or not.
    #[test]
    fn prepacked_a_matches_the_general_product() {
        let mut rng = Rng::new(7);
        for path in KernelPath::supported() {
            for mode in [Mode::Fast, Mode::Exact] {
                for threads in [1, 2] {
                    let st = Settings { mode, threads, path };
                    for &(m, k, n) in &[(1, 1, 1), (13, 27, 1024), (64, 288, 256), (128, 576, 64), (37, 600, 45), (300, 530, 70), (5, 0, 9)]
                    {
                        let a: Vec<f32> = (0..m * k).map(|_| rng.uniform(-1.0, 1.0)).collect();
                        let bv: Vec<f32> = (0..k * n).map(|_| rng.uniform(-1.0, 1.0)).collect();
                        let bias: Vec<f32> = (0..m).map(|_| rng.uniform(-1.0, 1.0)).collect();
                        let (av, bm) = (MatRef::row_major(&a, m, k), MatRef::row_major(&bv, k, n));
                        let mut scratch = vec![0.0; gemm_scratch_len(st, m, k, n, n)];
                        let mut want = vec![0.0; m * n];
                        gemm_with_scratch(st, av, bm, MatMut::row_major(&mut want, m, n), &mut scratch);
                        let mut packed = vec![f32::NAN; packed_a_len(st, m, k)];
                        let pa = pack_a_once(st, av, &mut packed);
                        let mut got = vec![f32::NAN; m * n];
                        gemm_prepacked_a(st, &pa, bm, MatMut::row_major(&mut got, m, n), None, &mut scratch);
                        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&got), bits(&want), "{st:?} {m}×{k}×{n}");
                        gemm_bias(st, av, bm, MatMut::row_major(&mut want, m, n), Bias::PerRow(&bias));
                        gemm_prepacked_a(st, &pa, bm, MatMut::row_major(&mut got, m, n), Some(Bias::PerRow(&bias)), &mut scratch);
                        assert_eq!(bits(&got), bits(&want), "bias {st:?} {m}×{k}×{n}");
                        // A band of rows of the packed A, as a convolution's group reads it.
                        let rows = m / 3..m - m / 4;
                        let mut band = vec![f32::NAN; rows.len() * n];
                        let sub = pa.row_range(rows.clone());
                        gemm_prepacked_a(st, &sub, bm, MatMut::row_major(&mut band, rows.len(), n), None, &mut scratch);
                        let mut whole = vec![0.0; m * n];
                        gemm_with_scratch(st, av, bm, MatMut::row_major(&mut whole, m, n), &mut scratch);
                        assert_eq!(bits(&band), bits(&whole[rows.start * n..rows.end * n]), "rows {st:?} {m}×{k}×{n}");
                    }
                }
            }
        }
    }
}
