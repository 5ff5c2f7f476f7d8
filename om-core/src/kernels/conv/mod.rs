//! 2-d convolution on the canonical-order GEMM (layout and order: `docs/ops-conv.md`).
//!
//! Per image and group, `cols` is the patch-major unfolding of the input: row `p` (an output
//! position, `p = oh·OW + ow`) holds the `K = (C/g)·kH·kW` input values its kernel window
//! reads (`k = (c·kH + kh)·kW + kw`, zero where the window lies in the padding).
//!
//! - forward: `y[og, P] = W_g[og, K] · colsᵀ[K, P]`; `colsᵀ` is unfolded directly in
//!   row-major `[K, P]` order (the transposed operand copied to row-major, spec section 4),
//!   and the GEMM writes straight into the output image. `w` is packed once per call
//!   (`gemm::prepacked`), not by every image's GEMM, and the bias is added in the GEMM's
//!   tile stores (the bits of a separate add).
//! - weight gradient: computed transposed, `dWᵀ_g[K, og] += colsᵀ[K, P] · gᵀ[P, og]` per
//!   image in item order (each image's product rounded into a scratch, then added): every
//!   element is the same `Σ_p g·cols` as `S = g·cols; dW += S`, and only the `[K, P]`
//!   unfolding is needed (`g` is transposed instead, `og·P` per image instead of `K·P`,
//!   read transposed in place by the GEMM's packer, once per image by each band). The
//!   band's rows are unfolded [`DIRECT_A_STRIDE`](crate::kernels::gemm::DIRECT_A_STRIDE) apart when `P` fits, so the GEMM reads
//!   its A operand in place instead of packing it. A band of more than `SUB_ROWS` rows
//!   transposes each image's `g` once into a row-major `gᵀ` and runs as sub-bands of at
//!   most `SUB_ROWS` rows whose GEMMs read both operands in place, each sub-band's
//!   product added to the sum while it is in L1 (the same bits: each row of `dWᵀ` is its
//!   own sums, whichever GEMM computes it).
//! - input gradient: `dcols[K, P] = W_gᵀ[K, og] · g[og, P]` (`W_gᵀ` copied to row-major once,
//!   rows [`DIRECT_A_STRIDE`](crate::kernels::gemm::DIRECT_A_STRIDE) apart when `og` fits, so no image's GEMM packs it again),
//!   then col2im adds each tap into `dx`, `k` outer and `p` inner.
//! - bias gradient: `Σ g` over images and positions in f64, increasing element order;
//!   with the weight gradient ([`conv2d_backward_weight_bias`]) each band sums its share of
//!   the channels image by image right after that image's product, while its `g` is in
//!   cache, instead of a separate pass.
//!
//! The unfolding and col2im work row-wise (`unfold`): one run of an input row per kernel tap
//! and output row, not one closure call per element. They, the weight gradient's per-image
//! sum and its bias sums run inside the path's `#[target_feature]` function
//! (`norm::on_path!`), so their loops are vectorised for it (plain copies and IEEE additions:
//! the same bits at every width).
//!
//! Threads: images are independent in the forward pass and the input gradient, so those
//! are chunked by image (a function of the shape only) and each image's GEMMs run on one
//! thread; with one image the GEMM itself uses the threads. The GEMM is bit-identical at
//! every thread count, so the result does not depend on that choice. The weight gradient
//! is chunked by bands of `K` rows of `dWᵀ` (`weight_bands`, a function of `K` and of
//! the thread count; never of the bits): each chunk
//! runs over all images in item order, so no addition is reordered. The bias gradient is
//! chunked by channels, each channel summed over all images in order (alone, or by the
//! weight gradient's bands: each band a share of its group's channels).
//!
//! Every scratch buffer comes from the pool through the fallible path: a refused request
//! makes the kernel return [`Error::OutOfMemory`](crate::Error::OutOfMemory) (naming no
//! operator; the caller's output is then incomplete and is discarded). The scratch of a
//! chunked loop (an unfolding and a GEMM scratch per thread) is taken before the loop, one part per thread
//! that may take part ([`WorkerScratch`]), never inside a chunk, so the pool memory a call
//! needs does not depend on how many chunks happen to run at once.

use crate::compute::Settings;
use crate::error::Result;
use crate::kernels::gemm::prepacked::{gemm_prepacked_a, pack_a_once, packed_a_len};
use crate::kernels::gemm::{direct_a_row_stride, gemm_scratch_len, gemm_with_scratch, Bias, MatMut, MatRef};
use crate::kernels::norm::{on_path, sum};
use crate::kernels::parallel::{chunk_count, for_each_chunk_mut_scratch, for_each_tile_scratch, Tiled};
use crate::kernels::scratch::WorkerScratch;
use crate::kernels::simd::Lanes;
use crate::pool::{Buffer, F64Scratch};

mod unfold;
use crate::kernels::transpose::{transpose_runs, Runs};
pub use unfold::{col2im_kp_add, im2col_kp, im2col_kp_rows, im2col_kp_rows_strided};

/// The geometry of one convolution (all sizes validated by the caller: every divisor
/// non-zero, `C` and `O` divisible by `groups`, output at least 1×1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvGeom {
    /// Images.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output channels.
    pub o: usize,
    /// Channel groups.
    pub groups: usize,
    /// Kernel height.
    pub kh: usize,
    /// Kernel width.
    pub kw: usize,
    /// Vertical stride.
    pub sh: usize,
    /// Horizontal stride.
    pub sw: usize,
    /// Zero rows above the input.
    pub pt: usize,
    /// Zero columns left of the input.
    pub pl: usize,
    /// Vertical dilation.
    pub dh: usize,
    /// Horizontal dilation.
    pub dw: usize,
    /// Output height.
    pub oh: usize,
    /// Output width.
    pub ow: usize,
}

impl ConvGeom {
    /// Input channels per group.
    pub fn cg(&self) -> usize {
        self.c / self.groups
    }
    /// Output channels per group.
    pub fn og(&self) -> usize {
        self.o / self.groups
    }
    /// Length of one unfolded patch, `(C/g)·kH·kW`.
    pub fn k(&self) -> usize {
        self.cg() * self.kh * self.kw
    }
    /// Output positions per image, `OH·OW`.
    pub fn p(&self) -> usize {
        self.oh * self.ow
    }
}

/// Settings for the GEMMs inside one chunk of a chunked loop over `chunks` images: one
/// thread when the images themselves are spread over threads.
fn inner_settings(settings: Settings, chunks: usize) -> Settings {
    if chunks > 1 && settings.threads > 1 {
        Settings { threads: 1, ..settings }
    } else {
        settings
    }
}

/// Forward: `y` (`[N, O, OH, OW]`) from `x` (`[N, C, H, W]`), `w` (`[O, C/g, kH, kW]`) and
/// an optional `bias` (`[O]`). All contiguous. Fails if a scratch buffer is refused.
pub fn conv2d_forward(settings: Settings, geo: &ConvGeom, x: &[f32], w: &[f32], bias: Option<&[f32]>, y: &mut [f32]) -> Result<()> {
    let (k, p, og, cg) = (geo.k(), geo.p(), geo.og(), geo.cg());
    let image_in = geo.c * geo.h * geo.w;
    let image_out = geo.o * p;
    let inner = inner_settings(settings, geo.n);
    // `w` (`[O, K]`, every group's `W_g` one after the other) packed once for every image's
    // GEMM (the same bits as packing it in each).
    let packed_len = packed_a_len(inner, geo.o, k);
    let mut packed_buf = Buffer::try_new(packed_len * 4)?;
    let packed = pack_a_once(inner, MatRef::row_major(w, geo.o, k), &mut packed_buf.f32_mut()[..packed_len]);
    // Per thread: the unfolding, and the GEMM's scratch (packing B, padded copy of C).
    let padded = gemm_scratch_len(inner, og, k, p, p);
    let ldb = unfold_stride(p);
    let mut scratch = WorkerScratch::f32(settings.threads, chunk_count(y.len(), image_out), k.saturating_mul(ldb).saturating_add(padded))?;
    let per = scratch.per_worker();
    for_each_chunk_mut_scratch(settings.threads, y, image_out, scratch.parts(), per, |n, yn, scratch| {
        let (cols, tmp) = scratch.split_at_mut(k * ldb);
        for gi in 0..geo.groups {
            let xg = &x[n * image_in + gi * cg * geo.h * geo.w..][..cg * geo.h * geo.w];
            let cols = &mut *cols;
            on_path!(settings.path, _isa, (geo: &'a ConvGeom, xg: &'a [f32], cols: &'a mut [f32], ldb: usize) { im2col_kp_rows_strided(geo, xg, 0..geo.k(), cols, ldb) });
            let wg = packed.row_range(gi * og..(gi + 1) * og);
            let yg = MatMut::row_major(&mut yn[gi * og * p..][..og * p], og, p);
            // The bias added in the GEMM's tile stores (the bits of a separate add).
            let bg = bias.map(|b| Bias::PerRow(&b[gi * og..][..og]));
            gemm_prepacked_a(inner, &wg, MatRef::with_stride(cols, k, p, ldb), yg, bg, tmp);
        }
    });
    Ok(())
}

/// Row stride of the forward's unfolding `colsᵀ` (`[K, P]`, the B operand its GEMM reads in
/// place): `P + 16` when `P` is a multiple of [`ALIASING_ROW`], else `P`. Rows a multiple of
/// 1 KiB apart map a B micro-panel's `K` rows to a quarter or fewer of the L1 sets (all to
/// one set at 4 KiB); 16 floats more spread them over all. Measured on the Intel Xeon model
/// 167 (`om bench conv --threads 1 --stat min --reps 21 --layer L`, 5 alternating rounds,
/// load 1.6–1.9): `fwd_ms` of the convnet's layer 1 (`P = 1024`) 0.405–0.420 → 0.392–0.395,
/// of layer 2 (`P = 256`) 1.659–1.682 → 1.643–1.656. (An earlier trial of `P + 16` for
/// every multiple of 16, on a loaded machine, had shown nothing on layer 2.)
fn unfold_stride(p: usize) -> usize {
    if p >= ALIASING_ROW && p.is_multiple_of(ALIASING_ROW) {
        p + 16
    } else {
        p
    }
}

/// Floats in 1 KiB: see [`unfold_stride`].
const ALIASING_ROW: usize = 256;

/// Input gradient: `dx` (`[N, C, H, W]`, overwritten) from `g` (`[N, O, OH, OW]`) and `w`.
/// Fails if a scratch buffer is refused.
pub fn conv2d_backward_input(settings: Settings, geo: &ConvGeom, g: &[f32], w: &[f32], dx: &mut [f32]) -> Result<()> {
    let (k, p, og, cg) = (geo.k(), geo.p(), geo.og(), geo.cg());
    let image_in = geo.c * geo.h * geo.w;
    let image_out = geo.o * p;
    // W_gᵀ for every group, `[K, og]` with rows `lda` apart: `DIRECT_A_STRIDE` when `og`
    // fits, so that every image's GEMM reads its A operand in place instead of packing
    // it again (the same bits).
    let lda = direct_a_row_stride(og);
    let group_len = k * lda;
    let mut wt_buf = Buffer::try_new(geo.groups * group_len * 4)?;
    let wt = &mut wt_buf.f32_mut()[..geo.groups * group_len];
    for gi in 0..geo.groups {
        // The `og` rows of W_g (runs of `k`) written as the columns of rows `lda` apart.
        let runs = Runs { src: &w[gi * og * k..][..og * k], start: 0, stride: k, count: og, len: k };
        transpose_runs(runs, &mut wt[gi * group_len..][..group_len], lda);
    }
    let wt = &*wt;
    let inner = inner_settings(settings, geo.n);
    // Per thread: the unfolding's gradient, and the GEMM's scratch.
    let padded = gemm_scratch_len(inner, k, og, p, p);
    let mut scratch = WorkerScratch::f32(settings.threads, chunk_count(dx.len(), image_in), k.saturating_mul(p).saturating_add(padded))?;
    let per = scratch.per_worker();
    for_each_chunk_mut_scratch(settings.threads, dx, image_in, scratch.parts(), per, |n, dxn, scratch| {
        dxn.fill(0.0);
        let (dcols, tmp) = scratch.split_at_mut(k * p);
        for gi in 0..geo.groups {
            let wgt = MatRef::with_stride(&wt[gi * group_len..][..group_len], k, og, lda);
            let gg = MatRef::row_major(&g[n * image_out + gi * og * p..][..og * p], og, p);
            gemm_with_scratch(inner, wgt, gg, MatMut::row_major(&mut *dcols, k, p), tmp);
            let (dcols, dxg) = (&mut *dcols, &mut dxn[gi * cg * geo.h * geo.w..][..cg * geo.h * geo.w]);
            on_path!(settings.path, _isa, (geo: &'a ConvGeom, dcols: &'a mut [f32], dxg: &'a mut [f32]) { col2im_kp_add(geo, dcols, dxg) });
        }
    });
    Ok(())
}

/// Weight gradient: `dw` (`[O, C/g, kH, kW]`, overwritten) from `x` and `g`.
///
/// Computed transposed, `dWᵀ_g[K, Og] = Σ_n colsᵀ[K, P]·gᵀ[P, Og]`: each product is the
/// same `Σ_p g[o, p]·cols[p, k]` (one accumulator, `p` increasing; a product is the same
/// bits in either operand order), each image's product is rounded on its own and added to
/// the running sum in item order, exactly as `S = g·cols; dW += S`. Only the `[K, P]`
/// unfolding is needed (row-wise), and `g` is read transposed in place by the GEMM's
/// packer (the same bits as a row-major copy of `gᵀ`), once per image by each band.
///
/// Threads: the chunks are bands of `K` rows of one group (`weight_bands`, a function of
/// the shape and of the thread count); a chunk unfolds only its
/// rows, runs over every image in item order and accumulates into its own band of `dWᵀ`,
/// so each element's additions keep their order.
///
/// Fails if a scratch buffer is refused.
pub fn conv2d_backward_weight(settings: Settings, geo: &ConvGeom, x: &[f32], g: &[f32], dw: &mut [f32]) -> Result<()> {
    weight_gradient(settings, geo, x, g, dw, None)
}

/// [`conv2d_backward_weight`] and [`conv2d_backward_bias`] in one pass over `g`: each
/// chunk of the weight gradient also sums its share of the channels (`db`, `[O]`,
/// overwritten), image by image right after that image's product, while its `g` is in
/// cache, with the same f64 chains as [`channel_sums`] (from `0.0`, images in order, each
/// plane in order, rounded once), so the same bits as the separate pass, which it saves.
/// Fails if a scratch buffer is refused.
pub fn conv2d_backward_weight_bias(settings: Settings, geo: &ConvGeom, x: &[f32], g: &[f32], dw: &mut [f32], db: &mut [f32]) -> Result<()> {
    weight_gradient(settings, geo, x, g, dw, Some(db))
}

/// The weight gradient, and the bias gradient with it when `db` is given.
fn weight_gradient(settings: Settings, geo: &ConvGeom, x: &[f32], g: &[f32], dw: &mut [f32], db: Option<&mut [f32]>) -> Result<()> {
    let (k, p, og, cg) = (geo.k(), geo.p(), geo.og(), geo.cg());
    if k == 0 || og == 0 {
        // No weights (zero channels): `dw` is empty and there is no band of rows.
        return match db {
            Some(db) => conv2d_backward_bias(settings, geo, g, db),
            None => Ok(()),
        };
    }
    let (image_in, plane) = (geo.c * geo.h * geo.w, geo.h * geo.w);
    let image_out = geo.o * p;
    let (band, bands) = weight_bands(k, settings.threads);
    let chunks = geo.groups * bands;
    let mut acc_buf = Buffer::try_new(chunks * band * og * 4)?;
    let acc = &mut acc_buf.f32_mut()[..chunks * band * og];
    // The bias sums: each chunk sums `per` channels of its group (the band's share).
    let per = og.div_ceil(bands);
    let mut sums_buf = match db {
        Some(_) => Some(F64Scratch::try_zeroed(chunks * per)?),
        None => None,
    };
    let sums = sums_buf.as_mut().map(|s| Tiled::contiguous(&mut s.values()[..chunks * per], per));
    let inner = inner_settings(settings, chunks);
    // The band's rows `DIRECT_A_STRIDE` apart when they fit: the GEMM then reads its A
    // operand in place instead of packing it (the same bits).
    let lda = direct_a_row_stride(p);
    // A band of more than `SUB_ROWS` rows runs as sub-bands over `gᵀ` transposed once per
    // image, rows `ldg` apart (`sub_bands`).
    let subs = sub_bands(band);
    let ldg = og.next_multiple_of(16) + 16;
    let gt_len = if subs > 1 { p.saturating_mul(ldg) } else { 0 };
    // Per thread: the unfolding of a band, its product, `gᵀ`, and the GEMM's scratch.
    let floats =
        band.saturating_mul(lda.saturating_add(og)).saturating_add(gt_len).saturating_add(gemm_scratch_len(inner, band, p, og, og));
    let mut scratch = WorkerScratch::f32(settings.threads, chunk_count(acc.len(), band * og), floats)?;
    let per_worker = scratch.per_worker();
    let outs = (Tiled::contiguous(&mut *acc, band * og), sums);
    for_each_tile_scratch(settings.threads, outs, scratch.parts(), per_worker, |i, (acc, sums), scratch| {
        let (gi, b) = (i / bands, i % bands);
        let rows = b * band..(b * band + band).min(k);
        let m = rows.len();
        let acc = &mut acc.into_slice()[..m * og];
        acc.fill(0.0);
        // This chunk's channels of the bias sums (absolute), and their running sums.
        let channels = gi * og + (b * per).min(og)..gi * og + (b * per + per).min(og);
        let mut sums = sums.map(|s| &mut s.into_slice()[..channels.len()]);
        let (cols, rest) = scratch.split_at_mut(band * lda);
        let (part, rest) = rest.split_at_mut(band * og);
        let (gt, tmp) = rest.split_at_mut(gt_len);
        let (cols, part) = (&mut cols[..m * lda], &mut part[..m * og]);
        let subs = sub_bands(m);
        for n in 0..geo.n {
            let xg = &x[n * image_in + gi * cg * plane..][..cg * plane];
            let (rows, band_cols) = (rows.clone(), &mut *cols);
            on_path!(settings.path, _isa, (geo: &'a ConvGeom, xg: &'a [f32], rows: std::ops::Range<usize>, band_cols: &'a mut [f32], lda: usize) {
                im2col_kp_rows_strided(geo, xg, rows, band_cols, lda)
            });
            let at = n * image_out + gi * og * p;
            let gg = &g[at..][..og * p];
            let ggt = if subs == 1 {
                // gᵀ read in place: the packer transposes it block-wise.
                MatRef::row_major(gg, og, p).t()
            } else {
                // gᵀ row-major once for every sub-band (the same values the packer's
                // transposition gives each GEMM): the sub-bands' GEMMs read both operands
                // in place, and each sub-band's product is added while it is in L1.
                transpose_runs(Runs { src: gg, start: 0, stride: p, count: og, len: p }, &mut gt[..p * ldg], ldg);
                MatRef::with_stride(&gt[..p * ldg], p, og, ldg)
            };
            for s in 0..subs {
                let r = s * m / subs..(s + 1) * m / subs;
                let a = MatRef::with_stride(&cols[r.start * lda..], r.len(), p, lda);
                let part = &mut part[..r.len() * og];
                gemm_with_scratch(inner, a, ggt, MatMut::row_major(&mut *part, r.len(), og), tmp);
                let (acc, part) = (&mut acc[r.start * og..r.end * og], &*part);
                on_path!(settings.path, _isa, (acc: &'a mut [f32], part: &'a [f32]) { acc.iter_mut().zip(part).for_each(|(d, &s)| *d += s) });
            }
            if let Some(sums) = sums.as_deref_mut() {
                let planes = &g[n * image_out + channels.start * p..][..channels.len() * p];
                on_path!(settings.path, isa, (planes: &'a [f32], p: usize, sums: &'a mut [f64]) { add_plane_sums::<L>(isa, planes, p, sums) });
            }
        }
    });
    // dw[g·Og + o, k] = dWᵀ_g[k, o]: the `K` rows of `og` (a group's bands, in order)
    // written as columns (a block transpose, where an element loop with stride `K` took
    // 3% of layer 3's `dw_ms`).
    for gi in 0..geo.groups {
        let runs = Runs { src: &acc[gi * bands * band * og..][..k * og], start: 0, stride: og, count: k, len: og };
        transpose_runs(runs, &mut dw[gi * og * k..][..og * k], k);
    }
    if let (Some(db), Some(sums)) = (db, sums_buf.as_mut()) {
        // Chunk `gi·bands + b` holds channels `gi·og + b·per ..` of its group, in order.
        let sums = sums.values();
        for gi in 0..geo.groups {
            for b in 0..bands {
                let channels = (b * per).min(og)..(b * per + per).min(og);
                let from = &sums[(gi * bands + b) * per..][..channels.len()];
                db[gi * og..][channels].iter_mut().zip(from).for_each(|(d, &s)| *d = s as f32);
            }
        }
    }
    Ok(())
}

/// `sums[c] + Σ planes[c·p..][..p]` (f64, increasing element order) for each channel `c`
/// of `sums`, eight channels side by side then one by one: the calls `norm::channel_sums`
/// makes per image (`norm::sum`), so each channel's chain is the same.
#[inline(always)]
fn add_plane_sums<L: Lanes>(isa: L::Isa, planes: &[f32], p: usize, sums: &mut [f64]) {
    for (j, s) in sums.chunks_mut(8).enumerate() {
        let plane = |c: usize| &planes[(j * 8 + c) * p..][..p];
        if let Ok(s8) = <&mut [f64; 8]>::try_from(&mut *s) {
            *s8 = sum::<L, 8>(isa, std::array::from_fn(plane), *s8);
        } else {
            for (c, v) in s.iter_mut().enumerate() {
                *v = sum::<L, 1>(isa, [plane(c)], [*v])[0];
            }
        }
    }
}

/// The weight gradient's chunks: `bands` bands of `band` rows of `K` (the last may be
/// shorter). One band per thread, but no more than `K` has 24-row panels and never fewer
/// than two (`K = 9` at two threads: 5 and 4 rows), each
/// a multiple of 24 rows (whole row panels of the 6-, 8- and 4-row GEMM tiles; the AVX-512
/// path cuts a band into panels of equal height, at most 14 rows each) when `K` spans at
/// least two 24-row panels per band: every band packs (transposes) the whole `gᵀ` of every
/// image again, so more bands than threads only add packing. Measured on the Intel Xeon
/// model 167 (quiet, 2 threads, 5 alternating rounds of `om bench conv --threads 2`, medians): a
/// pair of bands against the former one band per 64 rows (6 for `K = 288`, 10 for
/// `K = 576`): `dw_ms` of the convnet's layer 2 1.394 → 1.255, layer 3 1.455 → 1.346; the
/// step (`om bench step --model convnet --threads 2`, 7 rounds) 12.31 → 11.93 ms. (On an
/// AMD EPYC at 1 thread, one band per 32 rows had been 7% slower than per 64, and per 64,
/// per 128 and a single pair within 2% of each other.)
///
/// One thread takes a single band, whatever `K`: each band reads `g` transposed in place,
/// once per image, so one band transposes it once. For `K`
/// below two 24-row panels (the first layer of an image model: `K = 9` or `27`) a pair
/// would also be two GEMMs of at most 24 rows (panels of 5 and 4 rows for `K = 9`, where
/// the 14-row AVX-512 tile runs a third full). Measured (Intel Xeon model 167, `om bench
/// conv --threads 1 --stat min --reps 21`, 5 interleaved rounds, a loaded machine): the
/// convnet's `dw_ms` of layer 2 (`K = 288`, 6 bands before) 2.69–2.95 → 2.46–2.56, of
/// layer 3 (`K = 576`, 8 bands) 2.88–3.11 → 2.80–3.04. The bands never change a bit (each
/// element is one `dWᵀ` row's own sum, whichever band computes it), so they may depend on
/// the thread count.
///
/// Every band reads `g` transposed in place (its GEMM's packer transposes each image's
/// `gᵀ`), so each thread transposes it once per image, as one thread does alone. Against
/// the former transposed copy `[N, P, og]` that several bands read (a pass writing `N·O·P`
/// values first, then a plain-copy packing per band and image), measured on the Intel
/// Xeon model 167, 2 threads, quiet, `om bench conv --threads 2 --stat min --reps 21`, 3
/// alternating rounds: `dw_ms` layer 1 0.451–0.466 → 0.382–0.405, layer 2 1.093–1.197 →
/// 1.051–1.162, layer 3 1.167–1.215 → 1.158–1.268.
fn weight_bands(k: usize, threads: usize) -> (usize, usize) {
    if threads <= 1 {
        return (k.max(1), 1);
    }
    let panels = k.div_ceil(24);
    let target = threads.min(panels).max(2);
    let band = if panels >= 2 * target { 24 * panels.div_ceil(target) } else { k.div_ceil(target) };
    (band, k.div_ceil(band))
}

/// Sub-bands of a weight-gradient band of `rows` rows: one up to [`SUB_ROWS`] rows, else
/// `ceil(rows / SUB_ROWS)` of equal height (±1). The bits do not depend on them: each row
/// of the product is its own sums, whichever GEMM computes it.
fn sub_bands(rows: usize) -> usize {
    rows.div_ceil(SUB_ROWS).max(1)
}

/// Most rows of one sub-band's GEMM ([`sub_bands`]): four 14-row AVX-512 panels, for
/// which the GEMM reads B (`gᵀ`, row-major) in place when it fits in half of L2.
const SUB_ROWS: usize = 56;

/// Bias gradient: `db[o] = Σ g[n, o, :]` in f64, `n` outer and positions inner, threaded
/// over channels ([`channel_sums`]). Fails if the f64 scratch is refused.
pub fn conv2d_backward_bias(settings: Settings, geo: &ConvGeom, g: &[f32], db: &mut [f32]) -> Result<()> {
    channel_sums(settings, geo.n, geo.o, geo.p(), g, db)
}

/// `out[c] = Σ g[n, c, :]` over `g` (`[N, C, P]`, contiguous), accumulated in f64 with `n`
/// outer and positions inner (increasing element order per channel), rounded once:
/// `norm::channel_sums`, which sums eight channels side by side (eight independent chains
/// instead of one latency-bound chain, AVX-512's transposing sums where it runs) and
/// shares chunks of channels among the threads; each channel's own order is unchanged, so
/// the bits do not depend on the path or the thread count. Fails if the `c` doubles of
/// scratch are refused.
pub fn channel_sums(settings: Settings, n: usize, c: usize, p: usize, g: &[f32], out: &mut [f32]) -> Result<()> {
    // Taken before the parallel section: the chunks write their channels' sums into it.
    let mut acc = F64Scratch::try_zeroed(c)?;
    let a = acc.values();
    super::norm::channel_sums(settings, super::norm::BatchShape { n, c, hw: p }, g, a);
    for (d, &s) in out.iter_mut().zip(a.iter()) {
        *d = s as f32;
    }
    Ok(())
}

/// Transposed convolution (PyTorch's `conv_transpose2d`), the adjoint of the convolution
/// `geo` with the same weight: `x` is that convolution's output shape
/// (`[N, O, OH, OW]`), `w` its weight (`[O, C/g, kH, kW]`, which is PyTorch's transposed
/// layout `[Cin, Cout/g, kH, kW]`), and `y` (`[N, C, H, W]`, overwritten) its input shape.
/// Per image and group `dcols = W_gᵀ·x` on the GEMM, then col2im (exactly the
/// convolution's input gradient), then `+ bias[c]` (one f32 addition per element). Fails
/// if a scratch buffer is refused.
pub fn conv_transpose2d_forward(
    settings: Settings,
    geo: &ConvGeom,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
) -> Result<()> {
    conv2d_backward_input(settings, geo, x, w, y)?;
    if let Some(b) = bias {
        let plane = geo.h * geo.w;
        if plane > 0 {
            for (i, row) in y.chunks_mut(plane).enumerate() {
                let bv = b[i % geo.c];
                row.iter_mut().for_each(|v| *v += bv);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each channel's f64 sum keeps its order (images, then positions) on every path at 1
    /// and 2 threads: shapes with one chunk, several chunks (lockstep groups and a
    /// remainder), planes shorter than a vector, and empty ones. Magnitudes run from 1e-4
    /// to 1e4, and each channel holds `2^40` in its first image and `−2^40` in its last: the
    /// values added between them are rounded to the f64 grid of `2^40` and the rest are
    /// not, so summing in any other order (images reversed, a plane split) changes the bits.
    #[test]
    fn channel_sums_keep_each_channels_order() {
        for (n, c, p) in [(3, 11, 37), (3, 19, 1400), (2, 9, 5), (1, 8, 8), (2, 3, 0), (0, 4, 6)] {
            let mut g: Vec<f32> = (0..n * c * p).map(|i| ((i * 7919 % 1013) as f32 - 500.0) * 10f32.powi((i % 9) as i32 - 4)).collect();
            if n > 0 && p >= 3 {
                for ch in 0..c {
                    g[ch * p + p / 3] = 2f32.powi(40);
                    g[((n - 1) * c + ch) * p + 2 * p / 3] = -(2f32.powi(40));
                }
            }
            let want: Vec<u32> = (0..c)
                .map(|ch| {
                    let mut s = 0.0f64;
                    for img in 0..n {
                        s = g[(img * c + ch) * p..][..p].iter().fold(s, |t, &v| t + v as f64);
                    }
                    (s as f32).to_bits()
                })
                .collect();
            for st in crate::kernels::norm::tests::every_setting() {
                let mut got = vec![f32::NAN; c];
                channel_sums(st, n, c, p, &g, &mut got).unwrap();
                assert_eq!(got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want, "[{n}, {c}, {p}] {st:?}");
            }
        }
    }

    /// The weight and bias gradients in one pass have the bits of the separate passes, on
    /// every path at 1, 2 and 3 threads (one band, or bands that split a group's channels
    /// unevenly), with groups, channel counts off the eight-channel lockstep, a stride, and
    /// values whose f64 sums change bits in any other order.
    #[test]
    fn weight_and_bias_gradients_together_match_the_separate_passes() {
        let shapes = [(3, 6, 10, 2, 5, 1), (2, 3, 32, 1, 8, 1), (2, 4, 22, 2, 7, 2), (4, 16, 13, 1, 6, 1)];
        for (n, c, o, groups, hw, stride) in shapes {
            let (oh, ow) = ((hw + 2 - 3) / stride + 1, (hw + 2 - 3) / stride + 1);
            let geo = ConvGeom { n, c, h: hw, w: hw, o, groups, kh: 3, kw: 3, sh: stride, sw: stride, pt: 1, pl: 1, dh: 1, dw: 1, oh, ow };
            let wave = |len: usize, seed: usize| -> Vec<f32> {
                (0..len).map(|i| (((i + seed) * 7919 % 1013) as f32 - 500.0) * 10f32.powi(((i + seed) % 9) as i32 - 4)).collect()
            };
            let x = wave(n * c * hw * hw, 3);
            let mut g = wave(n * o * geo.p(), 11);
            for ch in 0..o {
                g[ch * geo.p()] = 2f32.powi(40);
                g[((n - 1) * o + ch) * geo.p() + geo.p() - 1] = -(2f32.powi(40));
            }
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            let mut settings = crate::kernels::norm::tests::every_setting();
            settings.extend(settings.clone().into_iter().map(|st| Settings { threads: 3, ..st }));
            for st in settings {
                let (mut dw, mut db) = (vec![f32::NAN; o * geo.k()], vec![f32::NAN; o]);
                conv2d_backward_weight(st, &geo, &x, &g, &mut dw).unwrap();
                conv2d_backward_bias(st, &geo, &g, &mut db).unwrap();
                let (mut dw2, mut db2) = (vec![f32::NAN; o * geo.k()], vec![f32::NAN; o]);
                conv2d_backward_weight_bias(st, &geo, &x, &g, &mut dw2, &mut db2).unwrap();
                assert_eq!(bits(&dw2), bits(&dw), "dw {geo:?} {st:?}");
                assert_eq!(bits(&db2), bits(&db), "db {geo:?} {st:?}");
            }
        }
    }

    /// The weight gradient in exact mode is, bit for bit, the element-wise definition
    /// (per image `s = +0`, `s = s + g·x` over positions in increasing order with the
    /// product rounded, then `dw = dw + s` in image order, from `+0`), and the bias
    /// gradient that of `conv2d_backward_bias`, on every path at 1, 2 and 3 threads: for a
    /// band of one GEMM (`K ≤ SUB_ROWS`) and of several sub-bands over `gᵀ` transposed
    /// once (`K` = 72, 100, 144, with 2 and 3 bands at 2 and 3 threads), with groups, a
    /// stride, a dilation and uneven padding.
    #[test]
    fn exact_weight_gradient_is_the_element_wise_definition() {
        use crate::compute::Mode;
        // (n, c, o, groups, h, w, kh, kw, stride, dilation, pad)
        let shapes = [
            (2, 3, 5, 1, 9, 7, 3, 3, 1, 1, 1),
            (3, 8, 11, 1, 6, 5, 3, 3, 1, 1, 1),
            (2, 8, 6, 2, 7, 9, 3, 3, 2, 1, 1),
            (2, 4, 7, 1, 9, 8, 5, 5, 1, 1, 2),
            (2, 16, 20, 1, 5, 6, 3, 3, 1, 2, 2),
        ];
        for (n, c, o, groups, h, w, kh, kw, s, d, pad) in shapes {
            let (oh, ow) = ((h + 2 * pad - (kh - 1) * d - 1) / s + 1, (w + 2 * pad - (kw - 1) * d - 1) / s + 1);
            let geo = ConvGeom { n, c, h, w, o, groups, kh, kw, sh: s, sw: s, pt: pad, pl: pad, dh: d, dw: d, oh, ow };
            let wave = |len: usize, seed: usize| -> Vec<f32> {
                (0..len).map(|i| (((i + seed) * 7919 % 1013) as f32 - 500.0) * 10f32.powi(((i + seed) % 7) as i32 - 3)).collect()
            };
            let (x, g) = (wave(n * c * h * w, 5), wave(n * o * geo.p(), 17));
            let (k, p, og, cg) = (geo.k(), geo.p(), geo.og(), geo.cg());
            let mut want = vec![0.0f32; o * k];
            for oc in 0..o {
                let gi = oc / og;
                for ci in 0..cg {
                    for ky in 0..kh {
                        for kx in 0..kw {
                            let kk = (ci * kh + ky) * kw + kx;
                            let mut total = 0.0f32;
                            for img in 0..n {
                                let mut acc = 0.0f32;
                                for oy in 0..oh {
                                    for ox in 0..ow {
                                        let (r, col) = ((oy * s + ky * d).wrapping_sub(pad), (ox * s + kx * d).wrapping_sub(pad));
                                        let xv = if r < h && col < w { x[((img * c + gi * cg + ci) * h + r) * w + col] } else { 0.0 };
                                        acc += g[(img * o + oc) * p + oy * ow + ox] * xv;
                                    }
                                }
                                total += acc;
                            }
                            want[oc * k + kk] = total;
                        }
                    }
                }
            }
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            let mut settings = crate::kernels::norm::tests::every_setting();
            settings.extend(settings.clone().into_iter().map(|st| Settings { threads: 3, ..st }));
            for st in settings {
                let st = Settings { mode: Mode::Exact, ..st };
                let mut db_want = vec![f32::NAN; o];
                conv2d_backward_bias(st, &geo, &g, &mut db_want).unwrap();
                let mut dw = vec![f32::NAN; o * k];
                conv2d_backward_weight(st, &geo, &x, &g, &mut dw).unwrap();
                assert_eq!(bits(&dw), bits(&want), "{geo:?} {st:?}");
                let (mut dw2, mut db) = (vec![f32::NAN; o * k], vec![f32::NAN; o]);
                conv2d_backward_weight_bias(st, &geo, &x, &g, &mut dw2, &mut db).unwrap();
                assert_eq!(bits(&dw2), bits(&want), "{geo:?} {st:?}");
                assert_eq!(bits(&db), bits(&db_want), "{geo:?} {st:?}");
            }
        }
    }

    /// The forward in exact mode is, bit for bit, the element-wise definition (`acc = +0`,
    /// `acc = acc + w·x` over `k` increasing with the product rounded, then `+ bias`), on
    /// every path at 1 and 2 threads: with `W` packed once for all images, the bias in the
    /// GEMM's stores, and the unfolding's padded row stride (`P = 256`), and with groups.
    #[test]
    fn exact_forward_is_the_element_wise_definition() {
        use crate::compute::Mode;
        for (n, c, o, groups, h, w) in [(2, 3, 5, 1, 16, 16), (3, 4, 6, 2, 5, 7), (1, 2, 3, 1, 32, 8)] {
            let geo = ConvGeom { n, c, h, w, o, groups, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, dh: 1, dw: 1, oh: h, ow: w };
            let val = |i: usize, m: usize| ((i * 7919 + m) % 1013) as f32 / 97.0 - 5.0;
            let x: Vec<f32> = (0..n * c * h * w).map(|i| val(i, 1)).collect();
            let wt: Vec<f32> = (0..o * geo.k()).map(|i| val(i, 2)).collect();
            let bias: Vec<f32> = (0..o).map(|i| val(i, 3)).collect();
            let (cg, og) = (geo.cg(), geo.og());
            let mut want = vec![0.0f32; n * o * h * w];
            for img in 0..n {
                for oc in 0..o {
                    let gi = oc / og;
                    for oy in 0..h {
                        for ox in 0..w {
                            let mut acc = 0.0f32;
                            for ci in 0..cg {
                                for ky in 0..3 {
                                    for kx in 0..3 {
                                        let (r, col) = ((oy + ky).wrapping_sub(1), (ox + kx).wrapping_sub(1));
                                        let xv = if r < h && col < w { x[((img * c + gi * cg + ci) * h + r) * w + col] } else { 0.0 };
                                        acc += wt[oc * geo.k() + (ci * 3 + ky) * 3 + kx] * xv;
                                    }
                                }
                            }
                            want[((img * o + oc) * h + oy) * w + ox] = acc + bias[oc];
                        }
                    }
                }
            }
            for st in crate::kernels::norm::tests::every_setting() {
                let st = Settings { mode: Mode::Exact, ..st };
                let mut got = vec![f32::NAN; want.len()];
                conv2d_forward(st, &geo, &x, &wt, Some(&bias), &mut got).unwrap();
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{geo:?} {st:?}");
            }
        }
    }
}
