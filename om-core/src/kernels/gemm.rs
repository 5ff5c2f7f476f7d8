//! Blocked single-precision matrix multiplication `C = A · B` with a canonical
//! accumulation order.
//!
//! Every output is computed as `acc = +0.0; for p in 0..k { acc = acc + A[i][p] * B[p][j] }`
//! with one accumulator per output, `p` strictly increasing. Exact mode rounds the product
//! and the sum separately; fast mode uses a fused multiply-add. Blocking only decides
//! *where* that single accumulator lives (a register tile, or C itself between k-blocks,
//! stored and reloaded unchanged), never the order of the additions, so exact mode is
//! bit-identical on every [`KernelPath`] and thread count, and fast mode is bit-identical
//! across thread counts. See `docs/kernels-gemm.md` for the layout and the figures.
//!
//! Structure: the operands are typed views ([`MatRef`], [`MatMut`], `operand.rs`), so a
//! transposed or strided operand is read in place by the packers (`pack.rs`). The output
//! is cut into column blocks by `Plan::new`, from the shape, the path's tile and the cache
//! sizes read at run time (`cache.rs`), and, for several threads, into a few large, equal
//! chunks (a chunk boundary moves no addition, so the bits do not depend on it). Each chunk
//! is computed independently by one thread, as a rectangle of C handed out by
//! [`for_each_tile_worker`] (disjoint by construction): for each k-block it packs its B
//! columns once into its thread's part of the packing scratch (or, when the row chunks
//! span all of a small B, `Plan::keep_b`, the thread's first chunk packs every k-block and
//! its later chunks reuse them), then for each row panel of
//! up to MR rows packs those A rows (an L1-sized panel; a column-major A `A_GROUP`
//! panels at a time) and runs the path's register-tile kernel across the packed B; an
//! optional [`Bias`] is added to each tile after its last k-block (by the AVX-512 kernel
//! itself, before its store). An A whose rows are
//! already [`DIRECT_A_STRIDE`] apart is read in place (the same bits). The packing
//! scratch comes from the pool, taken on the calling thread before the chunks run, or,
//! inside another kernel's chunk, from the caller ([`gemm_with_scratch`],
//! [`gemm_scratch_len`]).
//!
//! Every caller passes typed views ([`MatRef`], [`MatMut`]); there is no positional form
//! with leading dimensions, so a swapped dimension or stride cannot compile into a
//! silent wrong read.

use crate::compute::{KernelPath, Mode, Settings};
use crate::kernels::parallel::{for_each_tile_worker, in_parallel_chunk, workers, Grid, TileMut, Tiled};
#[cfg(target_arch = "aarch64")]
use crate::kernels::simd::Neon;
use crate::kernels::simd::Scalar;
#[cfg(target_arch = "x86_64")]
use crate::kernels::simd::{Avx2, Avx512, Sse2};
use crate::pool::Buffer;

mod cache;
#[cfg(target_arch = "aarch64")]
mod neon;
mod operand;
mod pack;
pub mod prepacked;
mod scalar;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use operand::{Bias, MatMut, MatRef};

/// `C = A · B` for the typed views `a` (`m × k`), `b` (`k × n`) and `c` (`m × n`),
/// overwriting C. Either operand may be strided or transposed ([`MatRef::t`]): it is read
/// in place while packing, so the result has the same bits as for a row-major copy.
///
/// `k == 0` gives `C = +0.0`; `m == 0` or `n == 0` does nothing. A path the CPU does not
/// support runs on the scalar path instead.
///
/// # Panics
/// If the shapes do not chain (`a.cols() != b.rows()`, or C is not `a.rows() × b.cols()`).
pub fn gemm(settings: Settings, a: MatRef, b: MatRef, c: MatMut) {
    product(settings, AOperand::View(a), b, c, None, None);
}

/// Floats of scratch [`gemm_with_scratch`] uses for an `m × n` C with row stride `ldc`: a
/// padded copy of C when that stride makes C's rows collide in the L1 cache (the copy is
/// then faster), else 0.
pub fn padded_c_len(m: usize, n: usize, ldc: usize) -> usize {
    if aliasing_stride(ldc) && m >= ALIAS_MIN_ROWS {
        m.saturating_mul(n.saturating_add(ALIAS_PAD))
    } else {
        0
    }
}

/// Floats of scratch [`gemm_with_scratch`] uses for `C (m × n, row stride ldc) = A (m × k)
/// · B (k × n)` at `settings`: the packing scratch of every thread that may take part
/// (an A panel and a packed B block each, a few hundred KiB at most per thread whatever
/// the shape), then room for the padded copy of C ([`padded_c_len`]). A function of the
/// shape and the settings only.
///
/// # Examples
///
/// A GEMM inside a chunk of a parallel section takes its scratch from the section's:
///
/// ```
/// use om_core::compute::Compute;
/// use om_core::kernels::gemm::{gemm_scratch_len, gemm_with_scratch, MatMut, MatRef};
/// use om_core::kernels::parallel::for_each_chunk_mut_scratch;
///
/// let one = om_core::compute::Settings { threads: 1, ..Compute::settings() };
/// let (a, b) = (vec![1.0f32; 4 * 3], vec![2.0f32; 3 * 5]); // 4 × 3 and 3 × 5
/// let per = gemm_scratch_len(one, 4, 3, 5, 5);
/// let mut scratch = vec![0.0f32; 2 * per]; // taken before the section, one part per thread
/// let mut c = vec![0.0f32; 2 * 4 * 5]; // two products, one per chunk
/// for_each_chunk_mut_scratch(2, &mut c, 4 * 5, &mut scratch, per, |_, c, part| {
///     gemm_with_scratch(one, MatRef::row_major(&a, 4, 3), MatRef::row_major(&b, 3, 5), MatMut::row_major(c, 4, 5), part);
/// });
/// assert!(c.iter().all(|&v| v == 6.0));
/// ```
pub fn gemm_scratch_len(settings: Settings, m: usize, k: usize, n: usize, ldc: usize) -> usize {
    if m == 0 || n == 0 || k == 0 {
        return 0;
    }
    let kernel = Kernel::select(settings.path, settings.mode);
    let parts = workers(threads_for(settings, m, k, n), usize::MAX);
    parts.saturating_mul(kernel.packing_floats(k, n, 1)).saturating_add(padded_c_len(m, n, ldc))
}

/// As [`gemm`], with the caller's `scratch` (at least [`gemm_scratch_len`] floats) for the
/// packed operands and the padded copy of C instead of a pooled one, so that a GEMM
/// inside a chunk of a parallel section needs no pool memory there
/// (`kernels::parallel`). A shorter scratch still holds the padded copy if it has
/// [`padded_c_len`] floats; the packing then comes from the pool (inside a chunk, from the
/// heap). The same bits as [`gemm`] in every case.
///
/// # Panics
/// As [`gemm`].
pub fn gemm_with_scratch(settings: Settings, a: MatRef, b: MatRef, c: MatMut, scratch: &mut [f32]) {
    product(settings, AOperand::View(a), b, c, None, Some(scratch));
}

/// [`gemm`] followed by `C += bias` (per column or per row), fused into the store of
/// each tile after its whole k accumulation: the bits equal the product followed by a
/// separate broadcast add.
///
/// # Panics
/// As [`gemm`], and if the bias length is not C's column (row) count.
pub fn gemm_bias(settings: Settings, a: MatRef, b: MatRef, c: MatMut, bias: Bias) {
    product(settings, AOperand::View(a), b, c, Some(bias), None);
}

/// The common body of [`gemm`], [`gemm_bias`] and [`gemm_with_scratch`] (`scratch`: the
/// caller's room for the packing and a padded copy of C).
fn product(settings: Settings, a: AOperand, b: MatRef, mut c: MatMut, bias: Option<Bias>, scratch: Option<&mut [f32]>) {
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    assert!(b.rows() == k, "gemm: A is {m}×{k} but B has {} rows", b.rows());
    assert!(c.rows() == m && c.cols() == n, "gemm: C is {}×{}, the product {m}×{n}", c.rows(), c.cols());
    if let Some(bias) = &bias {
        bias.check(m, n);
    }
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for i in 0..m {
            let row = c.row_mut(i);
            row.fill(0.0);
            if let Some(bias) = &bias {
                bias.add_to_row(i, 0, row);
            }
        }
        return;
    }
    let kernel = Kernel::select(settings.path, settings.mode);
    // Inside another section's chunk the team is taken, so this section runs on this
    // thread alone whatever the setting (`kernels::parallel`): plan for one thread.
    let threads = if in_parallel_chunk() { 1 } else { threads_for(settings, m, k, n) };
    let plan = Plan::new(&kernel, m, k, n, &b, threads);
    if let AOperand::Packed(p) = &a {
        p.check_blocks(plan.kc);
    }
    // The packing scratch: one part per thread that may take part, each for the largest
    // chunk of the plan; or, with B kept (`Plan::keep_b`, several threads), a part holds
    // an A panel and all of B's k-blocks.
    let caller = scratch.unwrap_or(&mut []);
    let block_len = n.div_ceil(kernel.nr) * kernel.nr * plan.kc;
    let kept_len = if plan.keep_b { k.div_ceil(plan.kc) * block_len } else { 0 };
    let packing_for = |panels, keep: bool| {
        let per = if keep { kernel.a_floats(panels) + kept_len } else { kernel.packing_floats(plan.kc, plan.nc, panels) };
        (per, workers(threads, plan.chunks()) * per)
    };
    // A column-major A is packed several row panels at a time (`a_panels`), and B kept —
    // unless the caller's scratch, sized by `gemm_scratch_len` for one panel and one
    // k-block, is what there is and cannot hold them.
    let mut a_panels = a_group(&kernel, &a, m);
    let mut keep = kept_len > 0;
    let from_caller = !caller.is_empty() || in_parallel_chunk();
    if from_caller && caller.len() < packing_for(1, keep).1 {
        keep = false;
    }
    if from_caller && caller.len() < packing_for(a_panels, keep).1 {
        a_panels = 1;
    }
    let (per, packing) = packing_for(a_panels, keep);
    // Rows of C a multiple of 1 KiB apart map to few cache sets: then keep the accumulators
    // between k-blocks in a padded copy of C, and store the last k-block's tiles straight
    // to C (the arithmetic, and so every bit, is the same).
    let padded_len = padded_c_len(m, n, c.row_stride());
    // The packing: from the caller's scratch if it covers it, else from a pooled buffer
    // taken here, on the calling thread, before the section — except inside a chunk of a
    // parallel section, where no pool memory may be taken (`kernels::parallel`: how many
    // chunks run at once depends on timing; a caller there sizes its scratch with
    // `gemm_scratch_len`): there, or if the pool refuses, from a heap buffer. The padded
    // copy only saves time: it comes from what the caller's scratch has left, else with
    // the pooled packing, else C is computed in place.
    let (mut pooled, mut heap): (Option<Buffer>, Vec<f32>);
    let (packs, rest): (&mut [f32], &mut [f32]) = if caller.len() >= packing {
        caller.split_at_mut(packing)
    } else {
        let padded_from_caller = caller.len() >= padded_len;
        let want = packing.saturating_add(if padded_from_caller { 0 } else { padded_len });
        pooled = (!in_parallel_chunk()).then(|| Buffer::try_new(want.saturating_mul(4)).ok()).flatten();
        match pooled.as_mut() {
            Some(buf) => {
                let (packs, own) = buf.f32_mut()[..want].split_at_mut(packing);
                (packs, if padded_from_caller { caller } else { own })
            }
            None => {
                heap = vec![0.0; packing];
                (&mut heap, caller)
            }
        }
    };
    let stage = (padded_len > 0 && rest.len() >= padded_len).then(|| &mut rest[..padded_len]);
    let job = Job { kernel: &kernel, plan: &plan, k, a, a_panels, b, bias, keep };
    // C and its staging copy cut into the plan's chunks (bands of `mc` rows by `nc` columns).
    let grid = |row_stride| Grid { rows: m, cols: n, row_stride, band_rows: plan.mc, band_cols: plan.nc };
    let ldc = c.row_stride();
    let out = Tiled::new(c.span(), grid(ldc));
    let stage = stage.map(|s| Tiled::new(s, grid(n + ALIAS_PAD)));
    let start = |part| Worker { part, b_packed: false };
    for_each_tile_worker(threads, (out, stage), packs, per, start, |_, (c, stage), w| job.run_chunk(ChunkOut { c, stage }, w));
}

/// Row panels of A packed at once: [`A_GROUP`] for a column-major A (a transposed
/// operand, at most as many as its rows fill), else 1.
fn a_group(kernel: &Kernel, a: &AOperand, m: usize) -> usize {
    if matches!(a, AOperand::View(v) if v.cols_contiguous() && !v.rows_contiguous()) {
        A_GROUP.min(m.div_ceil(kernel.mr))
    } else {
        1
    }
}

/// Row panels of a column-major A packed in one pass (`pack_a`): each of its contiguous
/// runs along a k step then gives `A_GROUP · MR` values (448 bytes for the 14-row
/// AVX-512 panel) instead of one panel's 56 bytes from a line, and a page, of its own;
/// the panels (122 KiB) wait in L2 next to the packed B block.
const A_GROUP: usize = 8;

/// The threads a product runs on: one below [`SERIAL_WORK`] multiply-adds, else the
/// setting's.
fn threads_for(settings: Settings, m: usize, k: usize, n: usize) -> usize {
    if m.saturating_mul(n).saturating_mul(k) <= SERIAL_WORK {
        1
    } else {
        settings.threads
    }
}

/// Whether a row stride of C makes its rows collide in the L1 cache: a multiple of a
/// quarter of the L1 set span (`sets · line`; 4 KiB on Zen 4 and Zen 5, so 1 KiB = 256
/// floats, where the padded copy was measured to pay from 512 floats on).
fn aliasing_stride(ldc: usize) -> bool {
    let l1 = cache::caches().l1;
    let quarter_span = (l1.sets() * l1.line / 16).max(1);
    ldc >= 2 * quarter_span && ldc.is_multiple_of(quarter_span)
}

/// Fewest rows for which the padded copy of C pays for itself.
const ALIAS_MIN_ROWS: usize = 256;

/// Floats of padding per row of the scratch used for aliasing strides. Measured 2026-12-02
/// on an Intel Xeon model 167 (`om bench gemm`, 512³, 1 thread): 8 and 32 ran 1.007× and
/// 1.012× the GFLOP/s of 16 (medians of 21 interleaved runs; noise ±5%), and cachegrind
/// counted 0.13% more L1 misses at 8, the same at 32 (docs/performance.md, "Tuning constants").
const ALIAS_PAD: usize = 16;

/// Below this many multiply-adds (`m·n·k`) the call stays on the calling thread: at 64³
/// two threads were slower than one.
const SERIAL_WORK: usize = 1 << 18;

/// Target multiply-adds per chunk: large enough to amortise packing and scheduling. Measured
/// 2026-12-02 on an Intel Xeon model 167 (`om bench gemm`, 2 threads): 2¹⁸ ran 0.83× the
/// GFLOP/s of 2²⁰ at 128³ and at 64×256×128, 2²² 1.05× and 1.01× (within the noise; medians
/// of 15 interleaved runs; docs/performance.md, "Tuning constants").
const CHUNK_WORK: usize = 1 << 20;

/// Below this many chunks, chunks are halved (while they stay large enough), so that two
/// threads have equal work to share. Each chunk packs its own operands, so splitting finer
/// costs packing time: at 512³ four chunks ran 5% slower than two on two threads.
const MIN_CHUNKS: usize = 2;

/// As [`MIN_CHUNKS`] when B is read in place: row splits then repack nothing, and finer
/// chunks let a late thread cost less.
const MIN_CHUNKS_DIRECT: usize = 4;

/// As [`MIN_CHUNKS`] when each thread keeps B packed for all its row chunks
/// ([`Plan::keep_b`]): row splits then repack nothing, and finer chunks let a late or
/// preempted thread cost less. Measured 2026-12-03 on an Intel Xeon model 167 (2 threads,
/// idle spells, 74 rotating rounds of `om bench gemm`, medians): 4 against 2 ran 0.993× at
/// 256³ and 1.025× at 512³ (2 kept chunks gain no reuse and hold both k-blocks in L2);
/// at load 2.6, 8 ran as 4 (docs/kernels-gemm.md, "Seventh session").
const MIN_CHUNKS_KEPT: usize = 4;

/// The largest packed B (all k-blocks) a thread keeps for its row chunks ([`Plan::keep_b`]):
/// half of the Intel Xeon's 2 MiB L2, so 512³ (two k-blocks of 512 KiB) is kept and 1024³
/// (4 MiB) is not (not tuned).
const KEEP_B_BYTES: usize = 1 << 20;

/// Largest k-block of every path (it fixes [`A_STRIDE`]); a path's own k-block may be
/// smaller if its A panel would not fit the L1 cache (see [`Kernel::new`]).
const KC: usize = 256;

/// Row stride of a packed A micro-panel: a compile-time constant, so the kernels address
/// every row with an immediate displacement. No pad: rows 1 KiB apart already spread over
/// the L1 sets (a row's 256 floats cover 16 of 64 sets, four rows all of them), and a
/// row-major A of 256 columns (a transformer's `[tokens, 256]` activations and their
/// gradients) then has this stride itself and is read in place ([`DIRECT_A_STRIDE`]).
pub(crate) const A_STRIDE: usize = KC;

/// The row stride at which a row-major A operand (`col_stride == 1`) is read in place,
/// without packing: its rows are then already laid out as the register tiles read a
/// packed A panel. A caller that writes A itself (a convolution's unfolded band) and has
/// at most this many columns can lay it out so and save the packing pass; the bits are
/// the same.
pub const DIRECT_A_STRIDE: usize = A_STRIDE;

/// The row stride a caller should give an A of `cols` columns that it writes itself:
/// [`DIRECT_A_STRIDE`] when the rows fit in it (the GEMM then reads A in place), else
/// `cols` (rows packed tight; the GEMM packs them).
///
/// # Examples
///
/// ```
/// use om_core::kernels::gemm::{direct_a_row_stride, DIRECT_A_STRIDE};
/// assert_eq!(direct_a_row_stride(64), DIRECT_A_STRIDE);
/// assert_eq!(direct_a_row_stride(DIRECT_A_STRIDE + 1), DIRECT_A_STRIDE + 1);
/// ```
pub fn direct_a_row_stride(cols: usize) -> usize {
    if cols <= DIRECT_A_STRIDE {
        DIRECT_A_STRIDE
    } else {
        cols
    }
}

/// Granularity of row splits when chunks are made smaller. Measured 2026-12-02 on an Intel
/// Xeon model 167 (`om bench gemm`, 2 threads): 4 and 16 ran 1.17× and 0.96× the GFLOP/s of
/// 8 at 256³, 0.995× and 1.02× at 2048×128×128 (medians of 21 interleaved runs on a machine
/// whose noise exceeds ±15%: no value clearly better; docs/performance.md, "Tuning constants").
const ROW_UNIT: usize = 8;

/// The widest register tile of any path (rows × columns), for the edge buffer.
const MAX_TILE: usize = 14 * 32;

/// Arguments of one register-tile kernel call.
///
/// The kernel computes a `rows × NR` tile: `acc = accumulate ? C : +0.0`, then for each of
/// the `kc` steps `p`, `acc[r][j] = acc[r][j] + a[r·A_STRIDE + p] · b[p·ldb + j]`, then
/// adds the [`TileBias`] if there is one, then stores `acc` to `C` (row stride `ldc`).
pub(crate) struct Tile {
    /// Number of k steps.
    pub kc: usize,
    /// Packed A micro-panel: `rows` rows of `kc` values, [`A_STRIDE`] apart.
    pub a: *const f32,
    /// B micro-panel: `NR` values per step, steps `ldb` apart.
    pub b: *const f32,
    /// Distance between consecutive steps of `b`.
    pub ldb: usize,
    /// Top-left output.
    pub c: *mut f32,
    /// Row stride of `c`.
    pub ldc: usize,
    /// Where the accumulators are loaded from when `accumulate` is set: `c` itself, or a
    /// staging copy of C that the previous k-block stored to.
    pub src: *const f32,
    /// Row stride of `src`.
    pub lds: usize,
    /// Columns of C to read and write (1 to NR): a kernel with [`Kernel::masked`] stores
    /// only these; the others are always given full tiles (`cols == NR`).
    pub cols: usize,
    /// Continue from the values in `c` (a later k-block) instead of +0.0.
    pub accumulate: bool,
    /// A bias the kernel adds to the accumulators before its store (only a kernel with
    /// [`Kernel::fused_bias`] is given one; the others get [`TileBias::None`]).
    pub bias: TileBias,
}

/// The bias a register-tile kernel adds to its accumulators before the store, after the
/// last k-block: one addition per output, `acc + bias`, the same as a separate
/// `C += bias` afterwards (and so the same bits).
#[derive(Clone, Copy)]
pub(crate) enum TileBias {
    None,
    /// `acc[r][j] + bias[j]`: the tile's `cols` values of a per-column bias.
    Cols(*const f32),
    /// `acc[r][j] + bias[r]`: the tile's `rows` values of a per-row bias.
    Rows(*const f32),
}

/// A register-tile kernel for `rows` (1 to MR) rows, taking the capability token `T` of its
/// instruction set (`kernels/simd.rs`): holding the token is the proof that the CPU runs
/// the kernel, so no kernel can be called without it.
///
/// # Safety
/// The pointers of the [`Tile`] must be valid for the reads and writes it describes.
pub(crate) type TileFn<T> = unsafe fn(isa: T, rows: usize, tile: &Tile);

/// A path's register-tile kernel together with its token (tokens are zero-sized).
#[derive(Clone, Copy)]
enum Tiles {
    Scalar(Scalar, TileFn<Scalar>),
    #[cfg(target_arch = "x86_64")]
    Sse(Sse2, TileFn<Sse2>),
    #[cfg(target_arch = "x86_64")]
    Avx2(Avx2, TileFn<Avx2>),
    #[cfg(target_arch = "x86_64")]
    Avx512(Avx512, TileFn<Avx512>),
    #[cfg(target_arch = "aarch64")]
    Neon(Neon, TileFn<Neon>),
}

impl Tiles {
    /// Runs the kernel on `rows` rows of `tile`, handing it its token.
    ///
    /// # Safety
    /// As [`TileFn`].
    #[inline(always)]
    unsafe fn run(self, rows: usize, tile: &Tile) {
        // SAFETY: forwarded from this function's contract; each kernel gets the token of
        // its own instruction set.
        unsafe {
            match self {
                Tiles::Scalar(isa, f) => f(isa, rows, tile),
                #[cfg(target_arch = "x86_64")]
                Tiles::Sse(isa, f) => f(isa, rows, tile),
                #[cfg(target_arch = "x86_64")]
                Tiles::Avx2(isa, f) => f(isa, rows, tile),
                #[cfg(target_arch = "x86_64")]
                Tiles::Avx512(isa, f) => f(isa, rows, tile),
                #[cfg(target_arch = "aarch64")]
                Tiles::Neon(isa, f) => f(isa, rows, tile),
            }
        }
    }
}

/// A path's register tile and its blocking, derived from the cache sizes.
struct Kernel {
    /// Rows of the register tile.
    mr: usize,
    /// Columns of the register tile.
    nr: usize,
    /// Longest k-block: the A panel (`mr × kc`) stays in L1.
    kc: usize,
    /// Most columns of a chunk: its packed B block (`kc × nc`) stays in L2.
    nc: usize,
    /// The kernel stores only [`Tile::cols`] columns (masked), so an edge tile narrower
    /// than NR needs no buffer.
    masked: bool,
    /// The kernel adds a [`TileBias`] before its store (AVX-512), so the bias costs no
    /// pass of its own over the tile; the others get the bias added after the kernel.
    /// Only with [`Kernel::masked`]: a narrow edge tile has only `cols` bias values.
    fused_bias: bool,
    /// Most row panels for which B is read in place rather than packed when all of B fits
    /// in half of L2: 1 (B is then read once whichever way), or 4 for a kernel that
    /// prefetches B ahead (AVX-512). Packing reads B and writes a copy; reading it in place
    /// from L2 up to four times cost less on the Intel Xeon: `[48,512]·[512,512]` 1.2×
    /// faster. A B larger than that (`[32,512]·[512,1024]`) ran at 0.6× in place: each
    /// panel then re-reads it from beyond L2.
    direct_panels: usize,
    tile: Tiles,
}

impl Kernel {
    /// The kernel for `path` and `mode`, with the token of its instruction set; the scalar
    /// one if the CPU lacks `path` (its token's detection fails).
    fn select(path: KernelPath, mode: Mode) -> Kernel {
        let fast = mode == Mode::Fast;
        match path {
            #[cfg(target_arch = "x86_64")]
            KernelPath::Avx512 => {
                if let Some(isa) = Avx512::detect() {
                    let tiles = Tiles::Avx512(isa, x86::avx512_tile(fast));
                    return Kernel { masked: true, fused_bias: true, direct_panels: 4, ..Kernel::new(14, 32, tiles) };
                }
            }
            #[cfg(target_arch = "x86_64")]
            KernelPath::Avx2 => {
                if let Some(isa) = Avx2::detect() {
                    return Kernel::new(6, 16, Tiles::Avx2(isa, x86::avx2_tile(fast)));
                }
            }
            #[cfg(target_arch = "x86_64")]
            KernelPath::Sse => {
                if let Some(isa) = Sse2::detect() {
                    return Kernel::new(6, 8, Tiles::Sse(isa, x86::sse_tile(fast)));
                }
            }
            #[cfg(target_arch = "aarch64")]
            KernelPath::Neon => {
                if let Some(isa) = Neon::detect() {
                    return Kernel::new(8, 8, Tiles::Neon(isa, neon::tile(fast)));
                }
            }
            _ => {}
        }
        Kernel::new(4, 8, Tiles::Scalar(Scalar, scalar::tile(fast)))
    }

    /// Blocking from the caches the CPU reports (see `docs/kernels-gemm.md`):
    /// * `kc`: the A panel (`mr` rows of `kc` floats, [`A_STRIDE`] apart) may fill up to
    ///   4/5 of L1 (the rest holds the B micro-panel streaming through), at most [`KC`], in
    ///   multiples of 16. 256 on a 32 KiB L1 (Zen 4, where 256 measured fastest of
    ///   128/192/256) and a 48 KiB one (Zen 5, Sapphire Rapids): the 14-row AVX-512
    ///   panel takes 15 KiB.
    /// * `nc`: the packed B block (`KC × nc` floats) takes half of L2 (the other half
    ///   streams A and C), in whole tiles, between 4 and 64 tiles. 1 MiB L2 (Zen 4/5,
    ///   Skylake-SP): 512 columns for AVX-512, the value measured best on Zen 4; 2 MiB
    ///   (Sapphire Rapids): 1024; 256 KiB (older clients): 128.
    fn new(mr: usize, nr: usize, tile: Tiles) -> Kernel {
        debug_assert!(mr * nr <= MAX_TILE);
        let caches = cache::caches();
        let kc = (caches.l1.size * 4 / 5 / (mr * 4)).min(KC) / 16 * 16;
        Kernel { mr, nr, kc: kc.max(16), nc: Kernel::block_columns(nr), masked: false, fused_bias: false, direct_panels: 1, tile }
    }

    /// Floats of packing scratch one thread needs for chunks of at most `cols` columns and
    /// k-blocks of at most `kc` steps: an A panel (MR rows, [`A_STRIDE`] apart, rounded up
    /// to 64 bytes), a packed B block of whole micro-panels, and the slack that aligns the
    /// A panel to 64 bytes.
    fn packing_floats(&self, kc: usize, cols: usize, a_panels: usize) -> usize {
        let kc = kc.min(self.kc);
        let cols = cols.min(self.nc).div_ceil(self.nr) * self.nr;
        self.a_floats(a_panels) + cols * kc
    }

    /// The plan's k-block length for `k` steps: `k` cut into the fewest blocks of at most
    /// `kc` steps, all of equal length but the last (`kc` for `k = 0`).
    fn k_block(&self, k: usize) -> usize {
        if k == 0 {
            return self.kc;
        }
        k.div_ceil(k.div_ceil(self.kc))
    }

    /// Floats of packing scratch for `a_panels` A panels packed at once (MR rows each,
    /// [`A_STRIDE`] apart, rounded up to 64 bytes) and the slack that aligns them to 64 bytes.
    fn a_floats(&self, a_panels: usize) -> usize {
        (a_panels * self.mr * A_STRIDE).next_multiple_of(ALIGN) + ALIGN
    }

    /// A thread's part of the packing scratch as its A panels (`a_panels` of them, starting
    /// on a 64-byte boundary: the part has room for the shift) and the rest (a B block,
    /// 64-byte aligned).
    fn split_part<'p>(&self, part: &'p mut [f32], a_panels: usize) -> (&'p mut [f32], &'p mut [f32]) {
        let a_len = a_panels * self.mr * A_STRIDE;
        let skew = part.as_ptr().align_offset(ALIGN * 4).min(ALIGN - 1);
        let (apack, rest) = part[skew..].split_at_mut(a_len.next_multiple_of(ALIGN));
        (&mut apack[..a_len], rest)
    }

    /// `nc` of [`Kernel::new`] for a tile `nr` columns wide.
    fn block_columns(nr: usize) -> usize {
        (cache::caches().l2.size / 2 / (KC * 4) / nr).clamp(4, 64) * nr
    }
}

/// How the output is cut into chunks and k into blocks; a function of the shape, the
/// leading dimension of B, the kernel's constants and whether more than one thread runs
/// (one thread: one chunk per column block). The k-blocks never depend on the threads.
struct Plan {
    /// Rows per chunk (a multiple of [`ROW_UNIT`], except the last chunk).
    mc: usize,
    /// Columns per chunk (a multiple of NR, except the last chunk).
    nc: usize,
    /// Steps per k-block (the last may be shorter).
    kc: usize,
    /// Chunks per column of chunks (`ceil(m / mc)`).
    row_chunks: usize,
    /// Chunks per row of chunks (`ceil(n / nc)`).
    col_chunks: usize,
    /// Read full B micro-panels in place instead of packing them.
    direct_b: bool,
    /// The row chunks (one column of chunks, B packed) span the same columns, and all of
    /// B packed, every k-block, takes at most [`KEEP_B_BYTES`]: a thread then packs B
    /// once for all the chunks it runs (if its scratch holds it), so a row split repacks
    /// nothing, and rows are split as finely as for a B read in place.
    keep_b: bool,
}

impl Plan {
    fn new(kernel: &Kernel, m: usize, k: usize, n: usize, b: &MatRef, threads: usize) -> Plan {
        let kc = kernel.k_block(k);
        // All rows (A is packed one register-tile panel at a time, so a chunk's row count
        // costs no cache), and the columns in equal whole tiles of at most `kernel.nc`.
        let tiles = n.div_ceil(kernel.nr);
        let mut nc = tiles.div_ceil(tiles.div_ceil(kernel.nc / kernel.nr)) * kernel.nr;
        let mut mc = m;
        // Read in place, B costs nothing per chunk, so splitting rows is free. With a single
        // row panel B is read once whichever way, so packing it would only add a pass; a
        // kernel that prefetches B reads it in place for up to `direct_panels` panels if
        // the whole of B fits in half of L2 (each panel then reads it from L2), or, on one
        // thread (one chunk of all rows, below), in three quarters of it: 32×288×1024
        // 158 → 173–180 GFLOP/s, 32×576×512 159 → 194–197, 48×384×1024 147–167 → 154–173
        // (1.5 MB of B), Intel Xeon model 167, 2 MiB L2, `om bench gemm --threads 1`;
        // 2 MB of B (32×512×1024, 48×1024×512) and 5–7 panels (64–96 rows) gained nothing.
        let ldb = b.row_stride();
        let l2 = cache::caches().l2.size;
        let direct_limit = if threads == 1 { l2 / 4 * 3 } else { l2 / 2 };
        let direct_b = b.col_stride() == 1
            && (m <= kernel.mr
                || (m <= kernel.direct_panels * kernel.mr && k * n * 4 <= direct_limit)
                || direct_b_pays(k, n, ldb)
                || direct_b_fits_l2(kc, nc, ldb));
        let keepable = !direct_b && nc >= n && k.div_ceil(kc) * kc * tiles * kernel.nr * 4 <= KEEP_B_BYTES;
        let chunks = |mc: usize, nc: usize| m.div_ceil(mc) * n.div_ceil(nc);
        // One thread splits nothing: chunks only share work between threads, and a row
        // split cuts a chunk's rows into shorter panels (64 rows in 4 chunks ran as 8-row
        // tiles: 64×288×256 with B in place 180 against 209 GFLOP/s unsplit, Intel Xeon
        // model 167, `om bench gemm --threads 1`). Row splits repack nothing when B is
        // read in place: split finer then (up to twice as fine while the halves keep
        // full-height tiles).
        let wanted = |mc: usize, nc: usize| {
            let chunks = chunks(mc, nc);
            if threads == 1 {
                false
            } else if direct_b {
                chunks < MIN_CHUNKS_DIRECT || (chunks < 2 * MIN_CHUNKS_DIRECT && mc >= 2 * kernel.mr)
            } else if keepable {
                chunks < MIN_CHUNKS_KEPT
            } else {
                chunks < MIN_CHUNKS
            }
        };
        while wanted(mc, nc) && mc * nc * k >= 2 * CHUNK_WORK {
            // Halve a side that splits into equal halves (balancing two threads), else the
            // longer side (splitting one side repacks the other: A for a column split, B
            // for a row split unless read in place). Rows split in units of 8 (a chunk may
            // end in a shorter tile), columns in whole tiles (a narrow tile goes through
            // the edge buffer).
            let (rows, cols) = (mc.div_ceil(ROW_UNIT), nc.div_ceil(kernel.nr));
            let row_key = (rows > 1, rows % 2 == 0, if direct_b || keepable { usize::MAX } else { mc });
            let col_key = (cols > 1, cols % 2 == 0, nc);
            if rows > 1 && row_key >= col_key {
                mc = rows.div_ceil(2) * ROW_UNIT;
            } else if cols > 1 {
                nc = cols.div_ceil(2) * kernel.nr;
            } else {
                break;
            }
        }
        let (row_chunks, col_chunks) = (m.div_ceil(mc), n.div_ceil(nc));
        Plan { mc, nc, kc, row_chunks, col_chunks, direct_b, keep_b: keepable && col_chunks == 1 && row_chunks > 1 }
    }

    fn chunks(&self) -> usize {
        self.row_chunks * self.col_chunks
    }
}

/// Whether B is small enough to read in place and its row stride spreads over enough L1
/// sets: a large power-of-two stride maps every row of a micro-panel to the same few sets.
fn direct_b_pays(k: usize, n: usize, ldb: usize) -> bool {
    let l1 = cache::caches().l1;
    let line_floats = l1.line / 4;
    if k * n > 64 * 1024 {
        return false;
    }
    if !ldb.is_multiple_of(line_floats) {
        return true;
    }
    let sets = l1.sets();
    let stride_lines = (ldb / line_floats) % sets;
    // A stride a multiple of the sets' span (`stride_lines == 0`) reaches one set (`gcd(0, sets) = sets`).
    let sets_used = sets / gcd(stride_lines, sets);
    sets_used * l1.ways >= 2 * k.min(KC)
}

/// Whether a chunk's B k-block (`kc` rows of `cols` floats, `ldb` apart) read in place
/// stays well inside L2, counting only the L2 sets its stride reaches: then the kernels
/// stream it from L2 as fast as a packed copy, and packing (a pass over B per chunk, a
/// large share of skinny products with long k) is saved. "Well inside" is an eighth of
/// the ways of the sets reached (measured on Zen 4: 1 MiB, 8-way L2).
fn direct_b_fits_l2(kc: usize, cols: usize, ldb: usize) -> bool {
    let l2 = cache::caches().l2;
    let line_floats = l2.line / 4;
    let l2_sets = l2.sets();
    let row_lines = cols.div_ceil(line_floats) + 1;
    let sets = if ldb.is_multiple_of(line_floats) {
        let stride_lines = ldb / line_floats;
        (l2_sets / gcd(stride_lines % l2_sets, l2_sets).max(1) * row_lines.min(stride_lines)).min(l2_sets)
    } else {
        l2_sets
    };
    kc * row_lines * 8 <= sets * l2.ways
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// A product's A: a view, packed panel by panel as the tiles need it (or read in place
/// when its rows are [`A_STRIDE`] apart), or packed once by the caller
/// ([`prepacked::pack_a_once`]), whose k-block slabs are read in place.
#[derive(Clone, Copy)]
enum AOperand<'a> {
    View(MatRef<'a>),
    Packed(prepacked::PackedA<'a>),
}

impl AOperand<'_> {
    fn rows(&self) -> usize {
        match self {
            AOperand::View(v) => v.rows(),
            AOperand::Packed(p) => p.rows(),
        }
    }

    fn cols(&self) -> usize {
        match self {
            AOperand::View(v) => v.cols(),
            AOperand::Packed(p) => p.cols(),
        }
    }

    /// What the tiles of k-block `pc..pc + kb` read: the view itself, or the packed slab
    /// of that block as a view with rows `A_STRIDE` apart (read in place).
    fn block(&self, pc: usize, kb: usize) -> MatRef<'_> {
        match self {
            AOperand::View(v) => *v,
            AOperand::Packed(p) => p.block(pc, kb),
        }
    }
}

/// Everything one chunk needs besides its tiles.
struct Job<'a> {
    kernel: &'a Kernel,
    plan: &'a Plan,
    k: usize,
    a: AOperand<'a>,
    /// Row panels of A packed at once ([`a_group`]).
    a_panels: usize,
    b: MatRef<'a>,
    bias: Option<Bias<'a>>,
    /// Each thread packs all of B once, into its part, for all its chunks ([`Plan::keep_b`]).
    keep: bool,
}

/// A thread's state in a product's section: its part of the packing scratch, and whether
/// the part already holds all of B packed, by an earlier chunk of this call.
struct Worker<'p> {
    part: &'p mut [f32],
    b_packed: bool,
}

/// One chunk's rectangle of C, and of the staging copy of C (for the k-blocks before the
/// last) when there is one.
struct ChunkOut<'c> {
    c: TileMut<'c, f32>,
    stage: Option<TileMut<'c, f32>>,
}

/// One row panel of a chunk for one k-block: `rows` (≤ MR) rows from row `row` of the
/// chunk, steps `pc..pc + kb`, over the packed A panel `a` and packed B block `b`.
struct Panel<'p> {
    row: usize,
    rows: usize,
    pc: usize,
    kb: usize,
    a: &'p [f32],
    b: &'p [f32],
}

impl Job<'_> {
    /// Computes one chunk of C, all k-blocks, on the calling thread. The chunk's rows
    /// are cut into `ceil(rows / MR)` panels of equal height (±1), so a chunk never ends in
    /// a short, inefficient tile.
    fn run_chunk(&self, mut out: ChunkOut, w: &mut Worker) {
        let (col0, cols) = (out.c.origin().1, out.c.cols());
        let (nr, kc) = (self.kernel.nr, self.plan.kc);
        let (apack, bpack) = self.kernel.split_part(w.part, self.a_panels);
        let block_len = cols.div_ceil(nr) * nr * kc;
        // Kept B: every chunk spans all columns, so the blocks packed for the thread's
        // first chunk serve the others.
        debug_assert!(!self.keep || (col0 == 0 && cols == self.b.cols()));
        for (q, pc) in (0..self.k).step_by(kc).enumerate() {
            let kb = kc.min(self.k - pc);
            let block = &mut bpack[if self.keep { q * block_len } else { 0 }..][..block_len];
            if !w.b_packed {
                let first = if self.plan.direct_b { cols / nr } else { 0 };
                pack::pack_b(&self.b, pack::BPanels { nr, col: col0, cols, first, pc, kb }, block);
            }
            self.run_block(&mut out, apack, pc, kb, block);
        }
        w.b_packed = self.keep;
    }

    /// Runs k-block `pc..pc + kb` of one chunk over its packed B block `bpack`, one row
    /// panel at a time (A packed into `apack` `a_panels` panels at a time, unless read in
    /// place).
    fn run_block(&self, out: &mut ChunkOut, apack: &mut [f32], pc: usize, kb: usize, bpack: &[f32]) {
        let (row0, rows) = (out.c.origin().0, out.c.rows());
        let panels = rows.div_ceil(self.kernel.mr);
        // A with rows `A_STRIDE` apart is read in place (`DIRECT_A_STRIDE`).
        let a_view = self.a.block(pc, kb);
        let direct_a = a_view.rows_contiguous() && a_view.row_stride() == A_STRIDE;
        // The first row of the panels packed last.
        let mut packed = 0;
        for q in 0..panels {
            let (row, end) = (q * rows / panels, (q + 1) * rows / panels);
            let a: &[f32] = if direct_a {
                &a_view.data()[(row0 + row) * A_STRIDE + pc..]
            } else {
                if q % self.a_panels == 0 {
                    let last = (q + self.a_panels).min(panels) * rows / panels;
                    pack::pack_a(&a_view, row0 + row, last - row, pc, kb, apack);
                    packed = row;
                }
                &apack[(row - packed) * A_STRIDE..]
            };
            self.run_panel(out, Panel { row, rows: end - row, pc, kb, a, b: bpack });
        }
    }

    /// Runs the register tiles of one row panel for one k-block over the packed operands;
    /// after the last k-block, adds the bias to each tile while it is still in L1.
    fn run_panel(&self, out: &mut ChunkOut, p: Panel) {
        let nr = self.kernel.nr;
        let ((row0, col0), chunk_cols) = (out.c.origin(), out.c.cols());
        let (pc, kb, rows) = (p.pc, p.kb, p.rows);
        let bias = self.bias.filter(|_| pc + kb == self.k);
        // The panel's first row of C (and of the stage): column `col` of it is `col` further.
        let (c_row, ldc) = (out.c.ptr_at(p.row, 0), out.c.row_stride());
        let stage_row = out.stage.as_mut().map(|s| (s.ptr_at(p.row, 0), s.row_stride()));
        for (jp, col) in (0..chunk_cols).step_by(nr).enumerate() {
            let cols = nr.min(chunk_cols - col);
            let (b, ldb) = if self.plan.direct_b && cols == nr {
                let ldb = self.b.row_stride();
                (self.b.data()[pc * ldb + col0 + col..].as_ptr(), ldb)
            } else {
                (p.b[jp * nr * kb..].as_ptr(), nr)
            };
            // The register tile: rows `p.row..p.row + rows`, columns `col..col + cols` of
            // the chunk (of C, and of the stage).
            let top_left = c_row.wrapping_add(col);
            let staged = stage_row.map(|(s, ld)| (s.wrapping_add(col), ld));
            let (dst, ldd) = match staged {
                Some(st) if pc + kb < self.k => st,
                _ => (top_left, ldc),
            };
            let (src, lds) = match staged {
                Some((s, ld)) if pc > 0 => (s as *const f32, ld),
                _ => (top_left as *const f32, ldc),
            };
            let fused = bias.filter(|_| self.kernel.fused_bias);
            let add = fused.map_or(TileBias::None, |v| v.for_tile(row0 + p.row, rows, col0 + col, cols));
            let tile = Tile { kc: kb, a: p.a.as_ptr(), b, ldb, c: dst, ldc: ldd, src, lds, cols, accumulate: pc > 0, bias: add };
            // SAFETY: the packed panels hold `kb` steps of `rows` (A) and NR (B) values (A
            // read in place: `rows` rows of `kb` steps, `A_STRIDE` apart, of the checked
            // view; B read in place: `kb` rows of a full tile of the checked view); the `rows × cols`
            // outputs lie inside this chunk's tiles of C and the stage (rows `p.row..` and
            // columns `col..col + cols` of them), which `ptr_at` of their first row
            // addresses (`TileMut::ptr_at`); the bias pointer is `Bias::for_tile`'s (its
            // `rows` or `cols` values checked there); the kernel was selected for a
            // supported path.
            unsafe { run_tile(self.kernel, rows, &tile) };
            if let Some(bias) = bias.filter(|_| !self.kernel.fused_bias) {
                for r in 0..rows {
                    bias.add_to_row(row0 + p.row + r, col0 + col, &mut out.c.row(p.row + r)[col..col + cols]);
                }
            }
        }
    }
}

/// Runs one register tile of `rows × tile.cols` outputs; a tile narrower than NR goes
/// through a local buffer (so the kernel can always store full rows) unless the kernel
/// masks its stores.
///
/// # Safety
/// `tile` must be valid for `rows × tile.cols` outputs; the kernel must be supported by
/// the CPU.
unsafe fn run_tile(kernel: &Kernel, rows: usize, tile: &Tile) {
    let (cols, nr) = (tile.cols, kernel.nr);
    if cols == nr || kernel.masked {
        // SAFETY: forwarded from this function's contract (a masked kernel touches only
        // `tile.cols` columns).
        unsafe { kernel.tile.run(rows, tile) };
        return;
    }
    let mut buf = [0.0f32; MAX_TILE];
    for r in 0..rows {
        if tile.accumulate {
            // SAFETY: row `r` of the tile has `cols` valid accumulators.
            let src = unsafe { std::slice::from_raw_parts(tile.src.add(r * tile.lds), cols) };
            buf[r * nr..r * nr + cols].copy_from_slice(src);
        }
    }
    let out = buf.as_mut_ptr();
    let local = Tile { c: out, ldc: nr, src: out, lds: nr, cols: nr, ..*tile };
    // SAFETY: `buf` holds `rows × nr` outputs (rows ≤ MR, MR·NR ≤ MAX_TILE).
    unsafe { kernel.tile.run(rows, &local) };
    for r in 0..rows {
        // SAFETY: row `r` of the tile has `cols` valid outputs.
        let dst = unsafe { std::slice::from_raw_parts_mut(tile.c.add(r * tile.ldc), cols) };
        dst.copy_from_slice(&buf[r * nr..r * nr + cols]);
    }
}

/// Floats per 64 bytes: the packed A panel starts on a 64-byte boundary.
const ALIGN: usize = 16;
