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
//! Structure: the output is cut into a few large, equal chunks by `Plan::new`, from the
//! shape and the path's tile only. Each chunk is computed independently by one thread: for
//! each k-block it packs its B columns once into a thread-local scratch buffer, then for
//! each row panel of MR rows packs those A rows (an L1-sized panel) and runs the path's
//! register-tile kernel across the packed B.

use crate::compute::{for_each_chunk, KernelPath, Mode, Settings};
use std::cell::Cell;

#[cfg(target_arch = "aarch64")]
mod neon;
mod scalar;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
mod x86;

/// C[m×n] = A[m×k] · B[k×n], all row-major with leading dimensions (lda ≥ k, ldb ≥ n, ldc ≥ n).
/// C is overwritten (not accumulated into). Panics are not allowed on valid-length slices; the caller guarantees lengths
/// (debug_assert them).
///
/// `k == 0` gives `C = +0.0`; `m == 0` or `n == 0` does nothing. A path the CPU does not
/// support runs on the scalar path instead.
#[allow(clippy::too_many_arguments)]
pub fn gemm(settings: Settings, m: usize, k: usize, n: usize, a: &[f32], lda: usize, b: &[f32], ldb: usize, c: &mut [f32], ldc: usize) {
    if m == 0 || n == 0 {
        return;
    }
    debug_assert!(lda >= k && ldb >= n && ldc >= n, "gemm: leading dimension too small");
    // The kernels use raw pointers, so the bounds are checked once here (O(1), and never
    // failing on valid lengths) to keep this safe function sound.
    assert!(ldc >= n && c.len() > (m - 1) * ldc + n - 1, "gemm: C too short");
    let c = &mut c[..(m - 1) * ldc + n];
    if k == 0 {
        c.chunks_mut(ldc).for_each(|row| row[..n].fill(0.0));
        return;
    }
    assert!(lda >= k && a.len() > (m - 1) * lda + k - 1, "gemm: A too short");
    assert!(ldb >= n && b.len() > (k - 1) * ldb + n - 1, "gemm: B too short");

    if aliasing_stride(ldc) && m >= ALIAS_MIN_ROWS {
        // Rows of C a multiple of 1 KiB apart map to few cache sets; compute into a padded
        // pooled scratch and copy the rows out (the arithmetic, and so every bit, is the same).
        let padded = n + ALIAS_PAD;
        let mut scratch = crate::pool::Buffer::new(m * padded * 4);
        let tmp = &mut scratch.f32_mut()[..m * padded];
        gemm_unaliased(settings, m, k, n, a, lda, b, ldb, tmp, padded);
        for (dst, src) in c.chunks_mut(ldc).zip(tmp.chunks(padded)) {
            dst[..n].copy_from_slice(&src[..n]);
        }
        return;
    }
    gemm_unaliased(settings, m, k, n, a, lda, b, ldb, c, ldc);
}

/// Whether a row stride of C makes its rows collide in the cache (a multiple of 1 KiB).
fn aliasing_stride(ldc: usize) -> bool {
    ldc >= 512 && ldc.is_multiple_of(256)
}

/// Fewest rows for which the padded copy of C pays for itself.
const ALIAS_MIN_ROWS: usize = 256;

/// Floats of padding per row of the scratch used for aliasing strides.
const ALIAS_PAD: usize = 16;

/// [`gemm`] once C's stride is known not to alias; same contract.
#[allow(clippy::too_many_arguments)]
fn gemm_unaliased(
    settings: Settings,
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    lda: usize,
    b: &[f32],
    ldb: usize,
    c: &mut [f32],
    ldc: usize,
) {
    let kernel = Kernel::select(settings.path, settings.mode);
    let plan = Plan::new(&kernel, m, k, n, ldb);
    let threads = if m.saturating_mul(n).saturating_mul(k) <= SERIAL_WORK { 1 } else { settings.threads };
    let out = SharedOut(c.as_mut_ptr());
    let job = Job { kernel: &kernel, plan: &plan, m, k, n, a, lda, b, ldb, ldc };
    for_each_chunk(threads, plan.chunks(), |chunk| {
        // SAFETY: chunks cover disjoint rectangles of C, all inside the `c` slice checked
        // above, so no two threads write the same element and every write is in bounds.
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

/// Largest k-block of every path.
const KC: usize = 256;

/// Row stride of a packed A micro-panel: a compile-time constant, so the kernels address
/// every row with an immediate displacement; the 16-float pad keeps consecutive rows out of
/// the same L1 set.
pub(crate) const A_STRIDE: usize = KC + 16;

/// Granularity of row splits when chunks are made smaller.
const ROW_UNIT: usize = 8;

/// The widest register tile of any path (rows × columns), for the edge buffer.
const MAX_TILE: usize = 24 * 16;

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
    /// Continue from the values in `c` (a later k-block) instead of +0.0.
    pub accumulate: bool,
}

/// A register-tile kernel for `rows` (1 to MR) rows.
///
/// # Safety
/// The pointers of the [`Tile`] must be valid for the reads and writes it describes, and
/// the CPU must support the kernel's instruction set.
pub(crate) type TileFn = unsafe fn(rows: usize, tile: &Tile);

/// A path's register tile and blocking constants.
struct Kernel {
    /// Rows of the register tile.
    mr: usize,
    /// Columns of the register tile.
    nr: usize,
    /// Most columns of a chunk: its packed B block (`KC × nc`) stays in L2.
    nc: usize,
    tile: TileFn,
}

impl Kernel {
    /// The kernel for `path` and `mode`; the scalar one if the CPU lacks `path`.
    fn select(path: KernelPath, mode: Mode) -> Kernel {
        let fast = mode == Mode::Fast;
        let path = if path.is_supported() { path } else { KernelPath::Scalar };
        match path {
            #[cfg(target_arch = "x86_64")]
            KernelPath::Avx512 => Kernel::new(24, 16, x86::avx512_tile(fast)),
            #[cfg(target_arch = "x86_64")]
            KernelPath::Avx2 => Kernel::new(6, 16, x86::avx2_tile(fast)),
            #[cfg(target_arch = "x86_64")]
            KernelPath::Sse => Kernel::new(6, 8, x86::sse_tile(fast)),
            #[cfg(target_arch = "aarch64")]
            KernelPath::Neon => Kernel::new(8, 8, neon::tile(fast)),
            _ => Kernel::new(4, 8, scalar::tile(fast)),
        }
    }

    fn new(mr: usize, nr: usize, tile: TileFn) -> Kernel {
        debug_assert!(mr * nr <= MAX_TILE);
        Kernel { mr, nr, nc: 32 * nr, tile }
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
    fn new(kernel: &Kernel, m: usize, k: usize, n: usize, ldb: usize) -> Plan {
        let kc = k.div_ceil(k.div_ceil(KC));
        // All rows (A is packed one register-tile panel at a time, so a chunk's row count
        // costs no cache), and the columns in equal whole tiles of at most `kernel.nc`.
        let tiles = n.div_ceil(kernel.nr);
        let mut nc = tiles.div_ceil(tiles.div_ceil(kernel.nc / kernel.nr)) * kernel.nr;
        let mut mc = m;
        // Read in place, B costs nothing per chunk, so splitting rows is free.
        let direct_b = direct_b_pays(k, n, ldb) || direct_b_fits_l2(kc, nc, ldb);
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
    const L1_SETS: usize = 64;
    const L1_WAYS: usize = 8;
    const LINE_FLOATS: usize = 16;
    if k * n > 64 * 1024 {
        return false;
    }
    if !ldb.is_multiple_of(LINE_FLOATS) {
        return true;
    }
    let stride_lines = (ldb / LINE_FLOATS) % L1_SETS;
    let sets_used = L1_SETS / gcd(stride_lines.max(1), L1_SETS);
    sets_used * L1_WAYS >= 2 * k.min(256)
}

/// Whether a chunk's B k-block (`kc` rows of `cols` floats, `ldb` apart) read in place
/// stays well inside L2 (1 MiB, 8-way, 2048 sets of 64 bytes), counting only the L2 sets
/// its stride reaches: then the kernels stream it from L2 as fast as a packed copy, and
/// packing (a pass over B per chunk, a large share of skinny products with long k) is saved.
fn direct_b_fits_l2(kc: usize, cols: usize, ldb: usize) -> bool {
    const L2_SETS: usize = 2048;
    const L2_WAYS: usize = 8;
    const LINE_FLOATS: usize = 16;
    let row_lines = cols.div_ceil(LINE_FLOATS) + 1;
    let sets = if ldb.is_multiple_of(LINE_FLOATS) {
        let stride_lines = ldb / LINE_FLOATS;
        (L2_SETS / gcd(stride_lines % L2_SETS, L2_SETS).max(1) * row_lines.min(stride_lines)).min(L2_SETS)
    } else {
        L2_SETS
    };
    kc * row_lines * 8 <= sets * L2_WAYS
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
    a: &'a [f32],
    lda: usize,
    b: &'a [f32],
    ldb: usize,
    ldc: usize,
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

    /// Computes chunk `chunk` of C, all k-blocks, on the calling thread.
    ///
    /// # Safety
    /// `c` must point to the (checked) output of `gemm`, and no other thread may access
    /// this chunk's rectangle meanwhile.
    unsafe fn run_chunk(&self, chunk: usize, c: *mut f32) {
        let rect = self.rect(chunk);
        let (mr, nr, kc) = (self.kernel.mr, self.kernel.nr, self.plan.kc);
        let a_len = mr * A_STRIDE;
        let b_len = rect.cols.div_ceil(nr) * nr * kc;
        with_scratch(a_len, b_len, |apack, bpack| {
            for pc in (0..self.k).step_by(kc) {
                let kb = kc.min(self.k - pc);
                self.pack_b(rect, pc, kb, bpack);
                for row in (0..rect.rows).step_by(mr) {
                    let rows = mr.min(rect.rows - row);
                    pack_a(self.a, self.lda, rect.row + row, rows, pc, kb, apack);
                    // SAFETY: forwarded from this function's contract.
                    unsafe { self.run_panel(rect, row, rows, pc, kb, apack, bpack, c) };
                }
            }
        });
    }

    /// Packs the B micro-panels of `rect` for k-block `pc..pc + kb` that are not read in
    /// place: all of them, or with `direct_b` only a partial last one. B is read row by
    /// row (each row of the block once, contiguously), which keeps TLB and cache misses
    /// low for a large leading dimension.
    fn pack_b(&self, rect: Rect, pc: usize, kb: usize, bpack: &mut [f32]) {
        let nr = self.kernel.nr;
        let full = if self.plan.direct_b { 0 } else { rect.cols / nr };
        let (panels, tail) = bpack.split_at_mut(full * nr * kb);
        for p in (0..kb).filter(|_| full > 0) {
            let src = &self.b[(pc + p) * self.ldb + rect.col..][..rect.cols];
            match nr {
                16 => pack_b_row::<16>(src, p, kb, full, panels),
                8 => pack_b_row::<8>(src, p, kb, full, panels),
                _ => unreachable!("gemm: tile width {nr}"),
            }
        }
        let cols = rect.cols % nr;
        if cols > 0 {
            let col = rect.col + rect.cols - cols;
            let tail = &mut tail[(rect.cols / nr - full) * nr * kb..][..nr * kb];
            pack_b_panel(self.b, self.ldb, pc, kb, col, cols, nr, tail);
        }
    }

    /// Runs the register tiles of one row panel (`rows` ≤ MR rows from `row` of `rect`)
    /// for one k-block over the packed operands.
    ///
    /// # Safety
    /// As [`Job::run_chunk`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn run_panel(&self, rect: Rect, row: usize, rows: usize, pc: usize, kb: usize, apack: &[f32], bpack: &[f32], c: *mut f32) {
        let nr = self.kernel.nr;
        let a = apack.as_ptr();
        for (jp, col) in (0..rect.cols).step_by(nr).enumerate() {
            let cols = nr.min(rect.cols - col);
            let (b, ldb) = if self.plan.direct_b && cols == nr {
                (self.b[pc * self.ldb + rect.col + col..].as_ptr(), self.ldb)
            } else {
                (bpack[jp * nr * kb..].as_ptr(), nr)
            };
            let tile = Tile {
                kc: kb,
                a,
                b,
                ldb,
                // SAFETY: the tile's top-left element lies inside the checked C slice.
                c: unsafe { c.add((rect.row + row) * self.ldc + rect.col + col) },
                ldc: self.ldc,
                accumulate: pc > 0,
            };
            // SAFETY: the packed panels hold `kb` steps of `rows` (A) and NR (B)
            // values; a full tile lies inside C; the kernel was selected for a
            // supported path.
            unsafe { run_tile(self.kernel.tile, rows, cols, nr, &tile) };
        }
    }
}

/// Runs one register tile of `rows × cols` outputs; a tile narrower than NR goes through
/// a local buffer so the kernel can always store full rows.
///
/// # Safety
/// `tile` must be valid for `rows × nr` outputs if `cols == nr`, or `rows × cols`
/// otherwise; the kernel must be supported by the CPU.
unsafe fn run_tile(kernel: TileFn, rows: usize, cols: usize, nr: usize, tile: &Tile) {
    if cols == nr {
        // SAFETY: forwarded from this function's contract.
        unsafe { kernel(rows, tile) };
        return;
    }
    let mut buf = [0.0f32; MAX_TILE];
    for r in 0..rows {
        if tile.accumulate {
            // SAFETY: row `r` of the tile has `cols` valid outputs.
            let src = unsafe { std::slice::from_raw_parts(tile.c.add(r * tile.ldc), cols) };
            buf[r * nr..r * nr + cols].copy_from_slice(src);
        }
    }
    let local = Tile { c: buf.as_mut_ptr(), ldc: nr, ..*tile };
    // SAFETY: `buf` holds `rows × nr` outputs (rows ≤ MR, MR·NR ≤ MAX_TILE).
    unsafe { kernel(rows, &local) };
    for r in 0..rows {
        // SAFETY: row `r` of the tile has `cols` valid outputs.
        let dst = unsafe { std::slice::from_raw_parts_mut(tile.c.add(r * tile.ldc), cols) };
        dst.copy_from_slice(&buf[r * nr..r * nr + cols]);
    }
}

/// Packs `rows` rows of A from row `row`, k-block `pc..pc + kb`: row `row + i` goes to
/// `dst[i·A_STRIDE..][..kb]`, forming one micro-panel.
fn pack_a(a: &[f32], lda: usize, row: usize, rows: usize, pc: usize, kb: usize, dst: &mut [f32]) {
    for (i, out) in dst.chunks_exact_mut(A_STRIDE).take(rows).enumerate() {
        out[..kb].copy_from_slice(&a[(row + i) * lda + pc..][..kb]);
    }
}

/// Copies the first `panels · NR` values of `src` (row `p` of a k-block of `kb` rows) into
/// step `p` of each full B micro-panel.
fn pack_b_row<const NR: usize>(src: &[f32], p: usize, kb: usize, panels: usize, dst: &mut [f32]) {
    for (jp, chunk) in src.chunks_exact(NR).take(panels).enumerate() {
        dst[(jp * kb + p) * NR..][..NR].copy_from_slice(chunk);
    }
}

/// Packs `cols` (< NR) columns of B from column `col`, k-block `pc..pc + kb`, as `kb`
/// rows of NR values, zero-padded.
#[allow(clippy::too_many_arguments)]
fn pack_b_panel(b: &[f32], ldb: usize, pc: usize, kb: usize, col: usize, cols: usize, nr: usize, dst: &mut [f32]) {
    for (p, out) in dst.chunks_exact_mut(nr).take(kb).enumerate() {
        out[..cols].copy_from_slice(&b[(pc + p) * ldb + col..][..cols]);
        out[cols..].fill(0.0);
    }
}

thread_local! {
    /// Packing scratch of this thread; it only grows, so warm calls do not allocate.
    static SCRATCH: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
}

/// Runs `f` with two 64-byte aligned scratch slices of `a_len` and `b_len` floats.
///
/// The buffer is taken out of the thread-local while in use, so a nested call (a rayon
/// worker running another gemm while waiting) gets a fresh buffer instead of a conflict.
fn with_scratch<R>(a_len: usize, b_len: usize, f: impl FnOnce(&mut [f32], &mut [f32]) -> R) -> R {
    const ALIGN: usize = 16; // floats per 64 bytes
    let a_room = a_len.div_ceil(ALIGN) * ALIGN;
    let mut buf = SCRATCH.with(|s| s.take());
    if buf.len() < a_room + b_len + ALIGN {
        buf.resize(a_room + b_len + ALIGN, 0.0);
    }
    let skew = buf.as_ptr().align_offset(ALIGN * 4).min(ALIGN - 1);
    let (a, b) = buf[skew..].split_at_mut(a_room);
    let result = f(&mut a[..a_len], &mut b[..b_len]);
    SCRATCH.with(|s| s.set(buf));
    result
}
