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
//! is cut into a few large, equal chunks by `Plan::new`, from the shape, the path's tile
//! and the cache sizes read at run time (`cache.rs`), never the thread count. Each chunk
//! is computed independently by one thread: for each k-block it packs its B columns once
//! into a thread-local scratch buffer, then for each row panel of up to MR rows packs
//! those A rows (an L1-sized panel) and runs the path's register-tile kernel across the
//! packed B; an optional [`Bias`] is added to each row panel after its last k-block.
//!
//! Every caller passes typed views ([`MatRef`], [`MatMut`]); there is no positional form
//! with leading dimensions, so a swapped dimension or stride cannot compile into a
//! silent wrong read.

use crate::compute::{KernelPath, Mode, Settings};
use crate::kernels::parallel::{for_each_chunk, in_parallel_chunk};
use std::cell::Cell;

mod cache;
#[cfg(target_arch = "aarch64")]
mod neon;
mod operand;
mod pack;
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
    product(settings, a, b, c, None, None);
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

/// As [`gemm`], with the caller's `scratch` for the padded copy of C (at least
/// [`padded_c_len`] floats; a shorter one is not used) instead of a pooled one, so that a
/// GEMM inside a chunk of a parallel section keeps its padded copy without taking pool
/// memory there (`kernels::parallel`). The same bits as [`gemm`].
///
/// # Panics
/// As [`gemm`].
pub fn gemm_with_scratch(settings: Settings, a: MatRef, b: MatRef, c: MatMut, scratch: &mut [f32]) {
    product(settings, a, b, c, None, Some(scratch));
}

/// [`gemm`] followed by `C += bias` (per column or per row), fused into the store of
/// each tile after its whole k accumulation: the bits equal the product followed by a
/// separate broadcast add.
///
/// # Panics
/// As [`gemm`], and if the bias length is not C's column (row) count.
pub fn gemm_bias(settings: Settings, a: MatRef, b: MatRef, c: MatMut, bias: Bias) {
    product(settings, a, b, c, Some(bias), None);
}

/// The common body of [`gemm`], [`gemm_bias`] and [`gemm_with_scratch`] (`scratch`: the
/// caller's room for a padded copy of C).
fn product(settings: Settings, a: MatRef, b: MatRef, mut c: MatMut, bias: Option<Bias>, scratch: Option<&mut [f32]>) {
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
    let padded_len = padded_c_len(m, n, c.row_stride());
    if padded_len > 0 {
        // Rows of C a multiple of 1 KiB apart map to few cache sets; keep the accumulators
        // between k-blocks in a padded scratch, and store the last k-block's tiles
        // straight to C (the arithmetic, and so every bit, is the same).
        // The scratch only saves time: the caller's if it is long enough, else a pooled one,
        // except inside a chunk of a parallel section, where no pool memory may be taken
        // (`kernels::parallel`: how many chunks run at once depends on timing); if the pool
        // refuses it, or none may be taken, C is computed in place.
        let mut pooled: Option<crate::pool::Buffer>;
        let tmp = match scratch {
            Some(s) if s.len() >= padded_len => Some(&mut s[..padded_len]),
            _ if in_parallel_chunk() => None,
            _ => {
                pooled = crate::pool::Buffer::try_new(padded_len.saturating_mul(4)).ok();
                pooled.as_mut().map(|buf| &mut buf.f32_mut()[..padded_len])
            }
        };
        if let Some(tmp) = tmp {
            unaliased(settings, a, b, c, bias, Some(tmp));
            return;
        }
    }
    unaliased(settings, a, b, c, bias, None);
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

/// Floats of padding per row of the scratch used for aliasing strides.
const ALIAS_PAD: usize = 16;

/// [`product`] once the shape is known not to be empty. `stage`, if given, holds
/// `m × (n + ALIAS_PAD)` floats: the tiles of every k-block but the last are stored there
/// (rows `n + ALIAS_PAD` apart, so they do not collide in L1 when reloaded) and the last
/// k-block's straight to C.
fn unaliased(settings: Settings, a: MatRef, b: MatRef, mut c: MatMut, bias: Option<Bias>, stage: Option<&mut [f32]>) {
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    let kernel = Kernel::select(settings.path, settings.mode);
    let plan = Plan::new(&kernel, m, k, n, &b);
    let threads = if m.saturating_mul(n).saturating_mul(k) <= SERIAL_WORK { 1 } else { settings.threads };
    let ldc = c.row_stride();
    let out = SharedOut(c.span().as_mut_ptr());
    let stage = stage.map(|s| {
        assert!(s.len() >= m * (n + ALIAS_PAD), "gemm: staging scratch too short");
        (SharedOut(s.as_mut_ptr()), n + ALIAS_PAD)
    });
    let job = Job { kernel: &kernel, plan: &plan, m, k, n, a, b, ldc, bias, stage };
    for_each_chunk(threads, plan.chunks(), |chunk| {
        // SAFETY: chunks cover disjoint rectangles of C (and of the stage), all inside the
        // `c` view checked at its construction (and the stage's length checked above), so
        // no two threads write the same element and every write is in bounds.
        unsafe { job.run_chunk(chunk, out.ptr()) }
    });
}

/// Below this many multiply-adds (`m·n·k`) the call stays on the calling thread: at 64³
/// two threads were slower than one.
const SERIAL_WORK: usize = 1 << 18;

/// Target multiply-adds per chunk: large enough to amortise packing and scheduling.
const CHUNK_WORK: usize = 1 << 20;

/// Below this many chunks, chunks are halved (while they stay large enough), so that two
/// threads have equal work to share. Each chunk packs its own operands, so splitting finer
/// costs packing time: at 512³ four chunks ran 5% slower than two on two threads.
const MIN_CHUNKS: usize = 2;

/// As [`MIN_CHUNKS`] when B is read in place: row splits then repack nothing, and finer
/// chunks let a late thread cost less.
const MIN_CHUNKS_DIRECT: usize = 4;

/// Largest k-block of every path (it fixes [`A_STRIDE`]); a path's own k-block may be
/// smaller if its A panel would not fit the L1 cache (see [`Kernel::new`]).
const KC: usize = 256;

/// Row stride of a packed A micro-panel: a compile-time constant, so the kernels address
/// every row with an immediate displacement; the 16-float pad keeps consecutive rows out of
/// the same L1 set.
pub(crate) const A_STRIDE: usize = KC + 16;

/// Granularity of row splits when chunks are made smaller.
const ROW_UNIT: usize = 8;

/// The widest register tile of any path (rows × columns), for the edge buffer.
const MAX_TILE: usize = 14 * 32;

/// Arguments of one register-tile kernel call.
///
/// The kernel computes a `rows × NR` tile: `acc = accumulate ? C : +0.0`, then for each of
/// the `kc` steps `p`, `acc[r][j] = acc[r][j] + a[r·A_STRIDE + p] · b[p·ldb + j]`, then
/// stores `acc` to `C` (row stride `ldc`).
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
}

/// A register-tile kernel for `rows` (1 to MR) rows.
///
/// # Safety
/// The pointers of the [`Tile`] must be valid for the reads and writes it describes, and
/// the CPU must support the kernel's instruction set.
pub(crate) type TileFn = unsafe fn(rows: usize, tile: &Tile);

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
    /// Most row panels for which B is read in place rather than packed when all of B fits
    /// in half of L2: 1 (B is then read once whichever way), or 4 for a kernel that
    /// prefetches B ahead (AVX-512). Packing reads B and writes a copy; reading it in place
    /// from L2 up to four times cost less on the Intel Xeon: `[48,512]·[512,512]` 1.2×
    /// faster. A B larger than that (`[32,512]·[512,1024]`) ran at 0.6× in place: each
    /// panel then re-reads it from beyond L2.
    direct_panels: usize,
    tile: TileFn,
}

impl Kernel {
    /// The kernel for `path` and `mode`; the scalar one if the CPU lacks `path`.
    fn select(path: KernelPath, mode: Mode) -> Kernel {
        let fast = mode == Mode::Fast;
        let path = if path.is_supported() { path } else { KernelPath::Scalar };
        match path {
            #[cfg(target_arch = "x86_64")]
            KernelPath::Avx512 => Kernel { masked: true, direct_panels: 4, ..Kernel::new(14, 32, x86::avx512_tile(fast)) },
            #[cfg(target_arch = "x86_64")]
            KernelPath::Avx2 => Kernel::new(6, 16, x86::avx2_tile(fast)),
            #[cfg(target_arch = "x86_64")]
            KernelPath::Sse => Kernel::new(6, 8, x86::sse_tile(fast)),
            #[cfg(target_arch = "aarch64")]
            KernelPath::Neon => Kernel::new(8, 8, neon::tile(fast)),
            _ => Kernel::new(4, 8, scalar::tile(fast)),
        }
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
    fn new(mr: usize, nr: usize, tile: TileFn) -> Kernel {
        debug_assert!(mr * nr <= MAX_TILE);
        let caches = cache::caches();
        let kc = (caches.l1.size * 4 / 5 / (mr * 4)).min(KC) / 16 * 16;
        Kernel { mr, nr, kc: kc.max(16), nc: Kernel::block_columns(nr), masked: false, direct_panels: 1, tile }
    }

    /// `nc` of [`Kernel::new`] for a tile `nr` columns wide.
    fn block_columns(nr: usize) -> usize {
        (cache::caches().l2.size / 2 / (KC * 4) / nr).clamp(4, 64) * nr
    }
}

/// How the output is cut into chunks and k into blocks; a function of the shape, the
/// leading dimension of B and the kernel's constants only (never of the thread count).
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
}

impl Plan {
    fn new(kernel: &Kernel, m: usize, k: usize, n: usize, b: &MatRef) -> Plan {
        let kc = k.div_ceil(k.div_ceil(kernel.kc));
        // All rows (A is packed one register-tile panel at a time, so a chunk's row count
        // costs no cache), and the columns in equal whole tiles of at most `kernel.nc`.
        let tiles = n.div_ceil(kernel.nr);
        let mut nc = tiles.div_ceil(tiles.div_ceil(kernel.nc / kernel.nr)) * kernel.nr;
        let mut mc = m;
        // Read in place, B costs nothing per chunk, so splitting rows is free. With a single
        // row panel B is read once whichever way, so packing it would only add a pass; a
        // kernel that prefetches B reads it in place for up to `direct_panels` panels if
        // the whole of B fits in half of L2 (each panel then reads it from L2).
        let ldb = b.row_stride();
        let direct_b = b.col_stride() == 1
            && (m <= kernel.mr
                || (m <= kernel.direct_panels * kernel.mr && k * n * 4 <= cache::caches().l2.size / 2)
                || direct_b_pays(k, n, ldb)
                || direct_b_fits_l2(kc, nc, ldb));
        let chunks = |mc: usize, nc: usize| m.div_ceil(mc) * n.div_ceil(nc);
        // Row splits repack nothing when B is read in place: split finer then (up to twice
        // as fine while the halves keep full-height tiles).
        let wanted = |mc: usize, nc: usize| {
            let chunks = chunks(mc, nc);
            if direct_b {
                chunks < MIN_CHUNKS_DIRECT || (chunks < 2 * MIN_CHUNKS_DIRECT && mc >= 2 * kernel.mr)
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
            let row_key = (rows > 1, rows % 2 == 0, if direct_b { usize::MAX } else { mc });
            let col_key = (cols > 1, cols % 2 == 0, nc);
            if rows > 1 && row_key >= col_key {
                mc = rows.div_ceil(2) * ROW_UNIT;
            } else if cols > 1 {
                nc = cols.div_ceil(2) * kernel.nr;
            } else {
                break;
            }
        }
        Plan { mc, nc, kc, row_chunks: m.div_ceil(mc), col_chunks: n.div_ceil(nc), direct_b }
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
    let sets_used = sets / gcd(stride_lines.max(1), sets);
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

/// The output pointer, shared by the threads that write disjoint chunks of it.
#[derive(Clone, Copy)]
struct SharedOut(*mut f32);

// SAFETY: the pointer is only used to write disjoint chunks of C (see `gemm`), and the
// borrow of C outlives the parallel loop.
unsafe impl Send for SharedOut {}
// SAFETY: as above.
unsafe impl Sync for SharedOut {}

impl SharedOut {
    fn ptr(self) -> *mut f32 {
        self.0
    }
}

/// Everything one chunk needs besides its index and the output.
struct Job<'a> {
    kernel: &'a Kernel,
    plan: &'a Plan,
    m: usize,
    k: usize,
    n: usize,
    a: MatRef<'a>,
    b: MatRef<'a>,
    ldc: usize,
    bias: Option<Bias<'a>>,
    /// A staging copy of C for the k-blocks before the last, with its row stride.
    stage: Option<(SharedOut, usize)>,
}

/// One rectangle of C: rows `row..row + rows`, columns `col..col + cols`.
#[derive(Clone, Copy)]
struct Rect {
    row: usize,
    rows: usize,
    col: usize,
    cols: usize,
}

impl Job<'_> {
    /// The rectangle of chunk `chunk` (row-major over the chunk grid).
    fn rect(&self, chunk: usize) -> Rect {
        let (p, m, n) = (self.plan, self.m, self.n);
        let (ri, ci) = (chunk / p.col_chunks, chunk % p.col_chunks);
        let (row, col) = (ri * p.mc, ci * p.nc);
        Rect { row, rows: p.mc.min(m - row), col, cols: p.nc.min(n - col) }
    }

    /// Computes chunk `chunk` of C, all k-blocks, on the calling thread. The chunk's rows
    /// are cut into `ceil(rows / MR)` panels of equal height (±1), so a chunk never ends in
    /// a short, inefficient tile.
    ///
    /// # Safety
    /// `c` must point to the (checked) output of `gemm`, and no other thread may access
    /// this chunk's rectangle meanwhile.
    unsafe fn run_chunk(&self, chunk: usize, c: *mut f32) {
        let rect = self.rect(chunk);
        let (mr, nr, kc) = (self.kernel.mr, self.kernel.nr, self.plan.kc);
        let a_len = mr * A_STRIDE;
        let b_len = rect.cols.div_ceil(nr) * nr * kc;
        let panels = rect.rows.div_ceil(mr);
        with_scratch(a_len, b_len, |apack, bpack| {
            for pc in (0..self.k).step_by(kc) {
                let kb = kc.min(self.k - pc);
                let first = if self.plan.direct_b { rect.cols / nr } else { 0 };
                pack::pack_b(&self.b, nr, rect.col, rect.cols, first, pc, kb, bpack);
                for q in 0..panels {
                    let (row, end) = (q * rect.rows / panels, (q + 1) * rect.rows / panels);
                    pack::pack_a(&self.a, rect.row + row, end - row, pc, kb, apack);
                    // SAFETY: forwarded from this function's contract.
                    unsafe { self.run_panel(rect, row, end - row, pc, kb, apack, bpack, c) };
                }
            }
        });
    }

    /// Runs the register tiles of one row panel (`rows` ≤ MR rows from `row` of `rect`)
    /// for one k-block over the packed operands; after the last k-block, adds the bias
    /// to the panel while it is still in cache.
    ///
    /// # Safety
    /// As [`Job::run_chunk`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn run_panel(&self, rect: Rect, row: usize, rows: usize, pc: usize, kb: usize, apack: &[f32], bpack: &[f32], c: *mut f32) {
        let nr = self.kernel.nr;
        let a = apack.as_ptr();
        let bias = self.bias.filter(|_| pc + kb == self.k);
        for (jp, col) in (0..rect.cols).step_by(nr).enumerate() {
            let cols = nr.min(rect.cols - col);
            let (b, ldb) = if self.plan.direct_b && cols == nr {
                let ldb = self.b.row_stride();
                (self.b.data()[pc * ldb + rect.col + col..].as_ptr(), ldb)
            } else {
                (bpack[jp * nr * kb..].as_ptr(), nr)
            };
            let (i, j) = (rect.row + row, rect.col + col);
            // SAFETY: the tile's top-left element lies inside the checked C slice.
            let top_left = unsafe { c.add(i * self.ldc + j) };
            // SAFETY: the stage has an element for every output (checked in `unaliased`).
            let staged = self.stage.map(|(s, ld)| (unsafe { s.ptr().add(i * ld + j) }, ld));
            let (out, ldo) = match staged {
                Some(st) if pc + kb < self.k => st,
                _ => (top_left, self.ldc),
            };
            let (src, lds) = match staged {
                Some((s, ld)) if pc > 0 => (s as *const f32, ld),
                _ => (top_left as *const f32, self.ldc),
            };
            let tile = Tile { kc: kb, a, b, ldb, c: out, ldc: ldo, src, lds, cols, accumulate: pc > 0 };
            // SAFETY: the packed panels hold `kb` steps of `rows` (A) and NR (B)
            // values; a full tile lies inside C; the kernel was selected for a
            // supported path.
            unsafe { run_tile(self.kernel, rows, &tile) };
        }
        // The bias once the panel's tiles are stored (not right after each tile's store:
        // reloading a tile just written by masked stores waited for them, 1.3% of the
        // encoder step on the Intel Xeon); the panel is still in cache.
        if let Some(bias) = &bias {
            for r in 0..rows {
                // SAFETY: row `r` of the panel has `rect.cols` outputs inside C, written by
                // this thread only (its chunk).
                let out = unsafe { std::slice::from_raw_parts_mut(c.add((rect.row + row + r) * self.ldc + rect.col), rect.cols) };
                bias.add_to_row(rect.row + row + r, rect.col, out);
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
        unsafe { (kernel.tile)(rows, tile) };
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
    unsafe { (kernel.tile)(rows, &local) };
    for r in 0..rows {
        // SAFETY: row `r` of the tile has `cols` valid outputs.
        let dst = unsafe { std::slice::from_raw_parts_mut(tile.c.add(r * tile.ldc), cols) };
        dst.copy_from_slice(&buf[r * nr..r * nr + cols]);
    }
}

thread_local! {
    /// Packing scratch of this thread; sized at once to the largest any GEMM needs
    /// ([`packing_bound`]), so warm calls never allocate, whichever chunks ran on it.
    static SCRATCH: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
}

/// Floats of packing scratch that cover every GEMM chunk on any path: the widest A panel
/// (at most 14 rows, [`A_STRIDE`] apart), the largest packed B block of the paths' blocking (`KC` ×
/// their `nc`, from the L2 size) and the alignment slack. A few hundred KiB (544 KiB on a
/// 1 MiB L2).
fn packing_bound() -> usize {
    const ALIGN: usize = 16;
    let nc = [8, 16, 32].map(Kernel::block_columns).into_iter().max().unwrap_or(0);
    (14 * A_STRIDE).div_ceil(ALIGN) * ALIGN + nc * KC + ALIGN
}

/// Grows this thread's packing scratch to [`packing_bound`] now. The thread team's helpers
/// call it when they start, so that a warm step's heap use does not depend on which GEMM
/// chunks a helper happened to join.
pub(crate) fn reserve_packing_scratch() {
    let mut buf = SCRATCH.with(|s| s.take());
    let bound = packing_bound();
    if buf.len() < bound {
        buf.resize(bound, 0.0);
    }
    SCRATCH.with(|s| s.set(buf));
}

/// Runs `f` with two 64-byte aligned scratch slices of `a_len` and `b_len` floats.
/// Both are bounded by the blocking (an A panel and a `KC × nc` B block, at most a few
/// MiB whatever the shape), so this allocation is infallible by design. The first call
/// on a thread grows its scratch to [`packing_bound`] at once (a longer request, beyond
/// the bound, would grow it further).
///
/// The buffer is taken out of the thread-local while in use, so a nested call (a GEMM run
/// from inside another kernel's chunk) gets a fresh buffer instead of a conflict.
fn with_scratch<R>(a_len: usize, b_len: usize, f: impl FnOnce(&mut [f32], &mut [f32]) -> R) -> R {
    const ALIGN: usize = 16; // floats per 64 bytes
    let a_room = a_len.div_ceil(ALIGN) * ALIGN;
    let mut buf = SCRATCH.with(|s| s.take());
    if buf.len() < a_room + b_len + ALIGN {
        buf.resize((a_room + b_len + ALIGN).max(packing_bound()), 0.0);
    }
    let skew = buf.as_ptr().align_offset(ALIGN * 4).min(ALIGN - 1);
    let (a, b) = buf[skew..].split_at_mut(a_room);
    let result = f(&mut a[..a_len], &mut b[..b_len]);
    SCRATCH.with(|s| s.set(buf));
    result
}
