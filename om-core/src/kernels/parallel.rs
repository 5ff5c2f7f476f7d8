//! Running a kernel's chunks on several threads: [`for_each_chunk`] (the calling thread
//! takes part, helpers join through shared chunk counters) and the one primitive for
//! writing disjoint parts of outputs from several threads, [`for_each_tile`]: each output
//! is a [`Tiled`] (a slice borrowed mutably, seen as a row-major [`Grid`] with a row stride
//! and cut into row bands × column bands), and each chunk gets its rectangle of every
//! output as a [`TileMut`] (safe rows, or a pointer and stride for micro-kernels). Tiles
//! never overlap by construction: the grid's rows cannot overlap (checked once, when the
//! output is cut) and the bands partition them, so no caller re-checks a safety argument.
//! [`for_each_chunk_mut`] (contiguous chunks of one slice) is its one-row case, and the
//! `_scratch` forms ([`for_each_tile_scratch`], [`for_each_chunk_scratch`],
//! [`for_each_chunk_mut_scratch`]) also hand each participating thread its own part of a
//! scratch slice the caller took up front. All use the one thread team of the process, so
//! there are never more runnable threads than the thread setting; a call made from inside
//! a chunk (or while another caller owns the team) runs on its own thread. Chunks are
//! always a function of the kernel and the shape; threads only decide who runs which.
//!
//! This is the one place outside the arithmetic kernels that needs `unsafe`: the lifetime
//! of a job is erased while helpers run it (see `Team::run`), and tiles and scratch parts
//! are handed out as disjoint pieces of one borrowed slice (one argument, on the `Sync`
//! impl of [`Tiled`]).
//!
//! **No pool memory inside a chunk.** How many chunks run at the same time depends on
//! when the helpers wake, so a pooled buffer taken inside a chunk would make the number of
//! buffers of its size class outstanding at once (and so the pool memory a step needs)
//! depend on thread timing: a warm step could then allocate once in a while (issue 22).
//! A kernel therefore takes the scratch of a parallel section on the calling thread, before
//! it, sized for [`workers`]`(threads, chunks)` threads (a function of the shape and the
//! thread setting only), and each thread uses its own part; a GEMM run inside a chunk of a
//! parallel section takes its packing and its padded copy of C from that part
//! ([`gemm_with_scratch`](crate::kernels::gemm::gemm_with_scratch), sized with
//! [`gemm_scratch_len`](crate::kernels::gemm::gemm_scratch_len)), never from the pool
//! ([`in_parallel_chunk`]). So a helper thread holds no pool buffer
//! at all, and the section's buffers are the caller's, given back when the caller drops
//! them. Debug builds assert this in [`Buffer::try_new`](crate::pool::Buffer::try_new).

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// The most threads that take part in a parallel section of `chunks` chunks at `threads`
/// threads: `min(threads, chunks)`, and 1 when either is at most 1 (the section then runs
/// on the calling thread). A kernel sizes the scratch of a `_scratch` section with it.
pub fn workers(threads: usize, chunks: usize) -> usize {
    if threads <= 1 || chunks <= 1 {
        1
    } else {
        threads.min(chunks)
    }
}

thread_local! {
    /// How many chunks of parallel sections (more than one worker by the thread setting)
    /// this thread is inside (a chunk may start a nested section).
    static IN_CHUNK: Cell<usize> = const { Cell::new(0) };
}

/// Whether this thread is running a chunk of a parallel section, i.e. one started with
/// more than one thread and more than one chunk (whether or not helpers joined it). Code
/// that may run there (a GEMM inside a convolution's chunk) must not take pool memory.
pub fn in_parallel_chunk() -> bool {
    IN_CHUNK.with(|c| c.get() > 0)
}

/// Marks this thread as inside a chunk of a parallel section until dropped.
struct InChunk;

impl InChunk {
    fn enter() -> InChunk {
        IN_CHUNK.with(|c| c.set(c.get() + 1));
        InChunk
    }
}

impl Drop for InChunk {
    fn drop(&mut self) {
        IN_CHUNK.with(|c| c.set(c.get() - 1));
    }
}

/// Runs `f(chunk)` for every chunk in `0..chunks`, on `threads` threads.
///
/// The chunks must be a function of the kernel and the shape only; which thread runs a
/// chunk is not specified, so `f` must write disjoint outputs per chunk, and it must not
/// take pool memory (see the module documentation; use [`for_each_chunk_scratch`]).
///
/// The calling thread takes part: it posts the job to `threads - 1` helper threads and
/// claims chunks itself from shared counters, as do the helpers once they wake up. The
/// caller then waits only for helpers still inside a chunk, never for one to wake, so a
/// late helper costs nothing but its share. A warm call allocates nothing. If another
/// caller is using the helpers, this call runs all its chunks on the calling thread.
pub fn for_each_chunk(threads: usize, chunks: usize, f: impl Fn(usize) + Sync + Send) {
    run_section(threads, chunks, |_| (), |_, chunk| f(chunk));
}

/// Runs `f(state, chunk)` for every chunk in `0..chunks`, on `threads` threads: the body
/// of every loop of this module. Each thread taking part draws its `worker` index once,
/// from a counter of its own call, so the indices are distinct and below
/// [`workers`]`(threads, chunks)`; before its first chunk it makes its `state` with
/// `start(worker)` (its part of a scratch) and passes it to each chunk it runs.
///
/// A thread first claims the right to run one more chunk from a shared count (`claimed`;
/// only `chunks` claims succeed), then takes the chunk from its end of the range: even
/// workers (the caller, usually worker 0) the lowest chunk not yet taken, odd workers the
/// highest. So each chunk is run exactly once (`f` front and `b` back takes with
/// `f + b = chunks` are chunks `0..f` and `chunks - b..`), and with two threads each keeps
/// the same chunks from call to call while they run equally fast (the caller the first
/// half, the helper the second), so their rows of the outputs stay in its own caches;
/// with one shared counter the later chunks went to whichever thread was free first.
fn run_section<W>(threads: usize, chunks: usize, start: impl Fn(usize) -> W + Sync + Send, f: impl Fn(&mut W, usize) + Sync + Send) {
    let claimed = AtomicUsize::new(0);
    let (front, back) = (AtomicUsize::new(0), AtomicUsize::new(chunks));
    let joined = AtomicUsize::new(0);
    let parallel = workers(threads, chunks) > 1;
    let work = || {
        let _inside = parallel.then(InChunk::enter);
        let worker = joined.fetch_add(1, Ordering::Relaxed);
        let mut state = None;
        while claimed.fetch_add(1, Ordering::Relaxed) < chunks {
            let chunk =
                if worker.is_multiple_of(2) { front.fetch_add(1, Ordering::Relaxed) } else { back.fetch_sub(1, Ordering::Relaxed) - 1 };
            f(state.get_or_insert_with(|| start(worker)), chunk);
        }
    };
    if !parallel {
        work();
        return;
    }
    // The caller and at most `threads.min(chunks) - 1` helpers run `work`, so at most
    // `workers(threads, chunks)` indices are drawn.
    Team::get().run(threads.min(chunks) - 1, &work);
}

/// Helper threads for [`for_each_chunk`], shared by all callers (one caller at a time).
struct Team {
    /// Held by the caller that owns the team during one call; holds the number of helper
    /// threads spawned so far (they are spawned on first need and never exit).
    owner: Mutex<usize>,
    slot: Mutex<Slot>,
    /// Signals a new job to sleeping helpers.
    wake: std::sync::Condvar,
    /// Signals the caller that the last running helper finished.
    done: std::sync::Condvar,
    /// Bumped (under the `slot` lock) for each posted job; spinning helpers watch it.
    generation: std::sync::atomic::AtomicU64,
    /// Helpers inside the current job: raised under the `slot` lock when one joins, lowered
    /// (without it) when one is done with the job, so the caller can poll it.
    running: std::sync::atomic::AtomicUsize,
    /// The caller stopped polling `running` and sleeps on `done` (set under the `slot`
    /// lock): only then does the last helper to leave take the lock and signal it.
    caller_asleep: std::sync::atomic::AtomicBool,
}

/// The posted job and the helpers' bookkeeping.
struct Slot {
    job: Option<TeamJob>,
    /// Helpers that may still join the current job.
    wanted: usize,
    /// Helpers waiting on `wake`.
    sleeping: usize,
    /// A helper's run of the job panicked.
    panicked: bool,
}

/// A job with its lifetime erased; see [`Team::run`] for why this is sound.
#[derive(Clone, Copy)]
struct TeamJob(*const (dyn Fn() + Sync + 'static));

// SAFETY: the pointee is `Sync`, and it is only called while the posting caller keeps it
// alive (see `Team::run`).
unsafe impl Send for TeamJob {}

/// How long an idle helper polls for the next job before it sleeps. Measured 2026-12-02 on
/// an Intel Xeon model 167 (2 shared cores): the convnet step at 2 threads took 1.007× (10 µs)
/// and 1.05× (200 µs) the time of 50 µs (medians of 7 interleaved `om bench step` runs;
/// docs/performance.md, "Tuning constants").
const HELPER_SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// Polls `busy` until it turns false or [`HELPER_SPIN`] has passed; true if still busy.
/// It checks after every pause instruction (a pause takes up to about 140 cycles on recent
/// Intel cores, so checking every 64 pauses, as before, answered up to a few µs late) and
/// reads the clock every 64 checks.
fn poll_while(busy: impl Fn() -> bool) -> bool {
    let start = std::time::Instant::now();
    let mut polls = 0u32;
    while busy() {
        std::hint::spin_loop();
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(64) && start.elapsed() > HELPER_SPIN {
            return true;
        }
    }
    false
}

impl Team {
    fn get() -> &'static Team {
        static TEAM: OnceLock<Team> = OnceLock::new();
        TEAM.get_or_init(|| Team {
            owner: Mutex::new(0),
            slot: Mutex::new(Slot { job: None, wanted: 0, sleeping: 0, panicked: false }),
            wake: std::sync::Condvar::new(),
            done: std::sync::Condvar::new(),
            generation: std::sync::atomic::AtomicU64::new(0),
            running: std::sync::atomic::AtomicUsize::new(0),
            caller_asleep: std::sync::atomic::AtomicBool::new(false),
        })
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `work` on the calling thread and on up to `helpers` helper threads, and returns
    /// once every helper that started it has finished.
    fn run(&'static self, helpers: usize, work: &(dyn Fn() + Sync)) {
        let mut spawned = match self.owner.try_lock() {
            Ok(guard) => guard,
            // A chunk panicked during an earlier call; the count is still right.
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                work();
                return;
            }
        };
        while *spawned < helpers {
            let name = format!("om-helper-{}", *spawned);
            if std::thread::Builder::new().name(name).spawn(move || self.helper()).is_err() {
                break;
            }
            *spawned += 1;
        }
        // SAFETY (lifetime erasure): helpers only call the job between this post and
        // `Finish::drop` below, which withdraws it and waits until no helper is running it,
        // also when `work` unwinds; so `work` outlives every call through the pointer.
        let job = TeamJob(unsafe { std::mem::transmute::<*const (dyn Fn() + Sync + '_), *const (dyn Fn() + Sync + 'static)>(work) });
        let sleeping = {
            let mut slot = self.slot();
            *slot = Slot { job: Some(job), wanted: helpers.min(*spawned), panicked: false, ..*slot };
            self.generation.fetch_add(1, std::sync::atomic::Ordering::Release);
            slot.sleeping
        };
        if sleeping > 0 {
            self.wake.notify_all();
        }
        /// Withdraws the job and waits for the helpers running it: polls for
        /// [`HELPER_SPIN`] (the last chunks usually end within it, and a sleeping caller
        /// would pay a wake-up), then sleeps; then reports whether a helper's run panicked.
        struct Finish<'a>(&'static Team, &'a std::cell::Cell<bool>);
        impl Drop for Finish<'_> {
            fn drop(&mut self) {
                use std::sync::atomic::Ordering::SeqCst;
                let team = self.0;
                team.slot().wanted = 0;
                poll_while(|| team.running.load(SeqCst) > 0);
                let mut slot = team.slot();
                // Announced before the check: a helper leaving after it sees the flag
                // (both sequentially consistent) and signals under the lock, which this
                // thread holds until it waits.
                team.caller_asleep.store(true, SeqCst);
                while team.running.load(SeqCst) > 0 {
                    slot = team.done.wait(slot).unwrap_or_else(|e| e.into_inner());
                }
                team.caller_asleep.store(false, SeqCst);
                slot.job = None;
                self.1.set(std::mem::take(&mut slot.panicked));
            }
        }
        let panicked = std::cell::Cell::new(false);
        let finish = Finish(self, &panicked);
        work();
        drop(finish);
        drop(spawned);
        assert!(!panicked.get(), "for_each_chunk: a chunk panicked on a helper thread");
    }

    /// A helper thread: polls for a job for [`HELPER_SPIN`], then sleeps until one is posted.
    fn helper(&self) {
        let mut seen = self.generation.load(Ordering::Acquire);
        loop {
            poll_while(|| self.generation.load(Ordering::Acquire) == seen);
            let mut slot = self.slot();
            while self.generation.load(Ordering::Relaxed) == seen {
                slot.sleeping += 1;
                slot = self.wake.wait(slot).unwrap_or_else(|e| e.into_inner());
                slot.sleeping -= 1;
            }
            seen = self.generation.load(Ordering::Relaxed);
            let Some(job) = slot.job.filter(|_| slot.wanted > 0) else { continue };
            slot.wanted -= 1;
            self.running.fetch_add(1, Ordering::SeqCst);
            drop(slot);
            // SAFETY: the job stays alive until `running` drops back to zero (`Team::run`).
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe { (*job.0)() })).is_ok();
            if !ok {
                self.slot().panicked = true;
            }
            // The last access to the job; the caller may return once `running` is zero. A
            // caller still polling sees that by itself; one that may sleep has said so first.
            if self.running.fetch_sub(1, Ordering::SeqCst) == 1 && self.caller_asleep.load(Ordering::SeqCst) {
                // Under the lock, so a caller between its check and its wait cannot miss it.
                let _slot = self.slot();
                self.done.notify_all();
            }
        }
    }
}

// ===== disjoint writes =====

/// How one output is laid out and cut into chunks: `rows × cols` values, element `(i, j)`
/// at `i · row_stride + j`, cut into bands of `band_rows` rows by bands of `band_cols`
/// columns (the last band of each kind may be shorter; a band size of 0 counts as 1).
/// The chunk of band `(r, c)` is the rectangle of rows `r·band_rows..` and columns
/// `c·band_cols..`; chunks are numbered row-major over the bands (`r · col_bands + c`).
///
/// A grid must be a function of the kernel and the shape only, never of the thread count:
/// then every chunk boundary, and so every bit, is the same at every thread count. (A
/// kernel whose chunk boundaries move no floating-point operation, as the GEMM's, may cut
/// more finely for more threads.)
///
/// # Examples
///
/// ```
/// use om_core::kernels::parallel::Grid;
///
/// // A 5 × 7 block of a matrix with 10 values per row, in bands of 2 rows by 4 columns.
/// let g = Grid { rows: 5, cols: 7, row_stride: 10, band_rows: 2, band_cols: 4 };
/// assert_eq!(g.bands(), (3, 2));
/// assert_eq!(Grid::contiguous(10, 4).bands(), (1, 3)); // chunks of 4, 4 and 2 values
/// assert_eq!(Grid::row_bands(7, 3, 2).bands(), (4, 1)); // 2, 2, 2 and 1 rows of 3
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    /// Rows of the output.
    pub rows: usize,
    /// Values per row.
    pub cols: usize,
    /// Distance between the starts of consecutive rows (at least `cols` when there are two
    /// rows or more, so rows never overlap).
    pub row_stride: usize,
    /// Rows per band.
    pub band_rows: usize,
    /// Columns per band.
    pub band_cols: usize,
}

impl Grid {
    /// `len` contiguous values in chunks of `chunk_len` (the last may be shorter): one row,
    /// cut into column bands, the chunks of [`for_each_chunk_mut`]. `len == 0` has no chunk.
    pub fn contiguous(len: usize, chunk_len: usize) -> Grid {
        Grid { rows: 1, cols: len, row_stride: len, band_rows: 1, band_cols: chunk_len }
    }

    /// `rows` dense rows of `width` values in chunks of `rows_per_chunk` whole rows (the
    /// last may be shorter): each chunk is one contiguous run of values. `rows == 0` has no
    /// chunk; `width == 0` gives empty chunks (or none, if no other output has a column).
    pub fn row_bands(rows: usize, width: usize, rows_per_chunk: usize) -> Grid {
        Grid { rows, cols: width, row_stride: width, band_rows: rows_per_chunk, band_cols: width }
    }

    /// The number of bands `(row bands, column bands)`: `rows / band_rows` and
    /// `cols / band_cols`, rounded up (0 for an empty dimension).
    pub fn bands(&self) -> (usize, usize) {
        (self.rows.div_ceil(self.band_rows.max(1)), self.cols.div_ceil(self.band_cols.max(1)))
    }

    /// The rectangle of band `(rb, cb)`: first row, rows, first column, columns; clipped
    /// to the grid (empty beyond it).
    fn rect(&self, rb: usize, cb: usize) -> (usize, usize, usize, usize) {
        let clip = |band: usize, size: usize, len: usize| {
            let start = band.saturating_mul(size.max(1)).min(len);
            (start, size.max(1).min(len - start))
        };
        let (row, rows) = clip(rb, self.band_rows, self.rows);
        let (col, cols) = clip(cb, self.band_cols, self.cols);
        (row, rows, col, cols)
    }

    /// One past the offset of the last element (0 for an empty grid), or `None` on overflow.
    fn extent(&self) -> Option<usize> {
        if self.rows == 0 || self.cols == 0 {
            return Some(0);
        }
        (self.rows - 1).checked_mul(self.row_stride)?.checked_add(self.cols)
    }
}

/// An output borrowed mutably and cut into chunks by its [`Grid`]: the argument of
/// [`for_each_tile`], which hands each chunk its rectangle as a [`TileMut`]. Several outputs
/// cut into the same number of bands go together as an array or a tuple (see [`Outputs`]).
///
/// # Examples
///
/// ```
/// use om_core::kernels::parallel::{for_each_tile, Grid, Tiled};
///
/// // Columns 1..5 of a 4 × 6 matrix, in bands of 2 rows by 2 columns, written on 2 threads.
/// let mut m = vec![0.0f32; 24];
/// let grid = Grid { rows: 4, cols: 4, row_stride: 6, band_rows: 2, band_cols: 2 };
/// for_each_tile(2, Tiled::new(&mut m[1..], grid), |chunk, mut tile| {
///     for i in 0..tile.rows() {
///         tile.row(i).fill(chunk as f32 + 1.0);
///     }
/// });
/// assert_eq!(&m[..6], &[0.0, 1.0, 1.0, 2.0, 2.0, 0.0]);
/// assert_eq!(&m[18..], &[0.0, 3.0, 3.0, 4.0, 4.0, 0.0]);
/// ```
pub struct Tiled<'a, T> {
    ptr: *mut T,
    grid: Grid,
    _borrow: PhantomData<&'a mut [T]>,
}

// SAFETY (the one argument for disjoint parallel writes): a shared `Tiled` lets a thread
// do nothing but read its grid and take tiles (`Outputs::take`, unsafe), and tiles of two
// different bands never share an element. Element `(i, j)` (`i < rows`, `j < cols`) lies at
// `i · row_stride + j`, and `new` checked that `row_stride ≥ cols` whenever there are two
// rows, so that offset determines `(i, j)`: different positions are different elements,
// all inside the slice (`new` checked the extent). The bands cut the positions into
// disjoint rectangles (`Grid::rect`). The loops take each band at most once (each chunk
// index is run once, each worker index drawn once), and the slice stays borrowed mutably
// for `'a` by this value, which the loops consume, so every `&mut` a tile gives out is the
// only access to its elements while it lives, whichever thread holds it; `T: Send` lets
// the elements be written from another thread.
unsafe impl<T: Send> Sync for Tiled<'_, T> {}

impl<'a, T> Tiled<'a, T> {
    /// `data` cut into chunks by `grid`.
    ///
    /// # Panics
    /// If the grid's rows overlap (`row_stride < cols` with two rows or more) or its last
    /// element lies beyond `data` (or its offset overflows).
    pub fn new(data: &'a mut [T], grid: Grid) -> Tiled<'a, T> {
        let Grid { rows, cols, row_stride, .. } = grid;
        assert!(rows <= 1 || cols == 0 || row_stride >= cols, "parallel::Tiled: rows of {cols} values {row_stride} apart overlap");
        assert!(
            grid.extent().is_some_and(|e| e <= data.len()),
            "parallel::Tiled: {rows}×{cols} with row stride {row_stride} does not fit in {} values",
            data.len()
        );
        Tiled { ptr: data.as_mut_ptr(), grid, _borrow: PhantomData }
    }

    /// `data` in contiguous chunks of `chunk_len` values ([`Grid::contiguous`]).
    pub fn contiguous(data: &'a mut [T], chunk_len: usize) -> Tiled<'a, T> {
        let len = data.len();
        Tiled::new(data, Grid::contiguous(len, chunk_len))
    }

    /// The first `rows · width` values of `data` as dense rows of `width`, in chunks of
    /// `rows_per_chunk` whole rows ([`Grid::row_bands`]).
    ///
    /// # Panics
    /// If `data` holds fewer than `rows · width` values.
    pub fn row_bands(data: &'a mut [T], rows: usize, width: usize, rows_per_chunk: usize) -> Tiled<'a, T> {
        Tiled::new(data, Grid::row_bands(rows, width, rows_per_chunk))
    }

    /// The grid.
    pub fn grid(&self) -> Grid {
        self.grid
    }

    /// The tile of band `(rb, cb)` (see the `Sync` impl for why tiles are disjoint).
    ///
    /// # Safety
    /// No band may be taken twice during `'a`.
    unsafe fn tile(&self, rb: usize, cb: usize) -> TileMut<'a, T> {
        let (row, rows, col, cols) = self.grid.rect(rb, cb);
        let ptr = if rows == 0 || cols == 0 {
            std::ptr::NonNull::dangling().as_ptr()
        } else {
            // In bounds: `(row, col)` is an element of the grid, which lies inside the slice.
            self.ptr.wrapping_add(row * self.grid.row_stride + col)
        };
        TileMut { ptr, rows, cols, row_stride: self.grid.row_stride, origin: (row, col), _borrow: PhantomData }
    }
}

/// One chunk's rectangle of an output: `rows × cols` values, row `i` starting
/// `i · row_stride` after the first, all of them this tile's alone for `'a` (no other tile
/// of the same loop shares an element). Rows are safe slices ([`TileMut::row`]); a
/// micro-kernel that stores through pointers takes [`TileMut::ptr_at`] and
/// [`TileMut::row_stride`].
///
/// # Examples
///
/// ```
/// use om_core::kernels::parallel::{for_each_tile, Grid, Tiled};
///
/// let mut m = vec![0u32; 3 * 4];
/// let grid = Grid { rows: 3, cols: 4, row_stride: 4, band_rows: 3, band_cols: 2 };
/// for_each_tile(2, Tiled::new(&mut m, grid), |_, mut tile| {
///     let (row0, col0) = tile.origin();
///     for i in 0..tile.rows() {
///         for (j, v) in tile.row(i).iter_mut().enumerate() {
///             *v = ((row0 + i) * 10 + col0 + j) as u32;
///         }
///     }
/// });
/// assert_eq!(m, [0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23]);
/// ```
pub struct TileMut<'a, T> {
    ptr: *mut T,
    rows: usize,
    cols: usize,
    row_stride: usize,
    origin: (usize, usize),
    _borrow: PhantomData<&'a mut [T]>,
}

// SAFETY: a tile is an exclusive borrow of its elements (as `&'a mut [T]` is; see the
// `Sync` impl of `Tiled`), so it may move to another thread when `T` may.
unsafe impl<T: Send> Send for TileMut<'_, T> {}

impl<'a, T> TileMut<'a, T> {
    /// Rows of the tile.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Values per row of the tile.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Distance between the starts of consecutive rows (the whole output's row stride).
    pub fn row_stride(&self) -> usize {
        self.row_stride
    }

    /// Position of the tile's first element in the whole output: `(row, column)`.
    pub fn origin(&self) -> (usize, usize) {
        self.origin
    }

    /// Row `i` of the tile (its `cols` values).
    ///
    /// # Panics
    /// If `i >= rows`.
    pub fn row(&mut self, i: usize) -> &mut [T] {
        assert!(i < self.rows, "TileMut::row: row {i} of {}", self.rows);
        if self.cols == 0 {
            return &mut []; // an empty tile's pointer is dangling: no offset from it
        }
        // SAFETY: row `i < rows` of the tile: `cols` elements from `i · row_stride`, inside
        // the output and this tile's alone (the `Sync` impl of `Tiled`); borrowed from
        // `&mut self`, so no other reference from this tile is live.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(i * self.row_stride), self.cols) }
    }

    /// The whole tile as one slice, when its rows are adjacent (one row, or
    /// `cols == row_stride`, as in [`Grid::contiguous`] and [`Grid::row_bands`]).
    ///
    /// # Panics
    /// If the rows have gaps between them.
    pub fn into_slice(self) -> &'a mut [T] {
        let contiguous = self.rows <= 1 || self.cols == self.row_stride;
        assert!(contiguous, "TileMut::into_slice: {} rows of {} values {} apart", self.rows, self.cols, self.row_stride);
        let len = if self.cols == 0 { 0 } else { self.rows * self.cols };
        // SAFETY: the rows are adjacent, so the tile is the `len` elements from its first,
        // inside the output and this tile's alone for `'a` (the `Sync` impl of `Tiled`),
        // which the tile, consumed here, gives up.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, len) }
    }

    /// A pointer to element `(i, j)` of the tile, for kernels that store through pointers:
    /// element `(i + r, j + c)` is at `r · row_stride + c` from it. Valid for reads and
    /// writes of exactly the tile's elements (`i + r < rows`, `j + c < cols`) while the
    /// tile lives and no slice from [`TileMut::row`] does; never beyond the tile.
    ///
    /// # Panics
    /// If `(i, j)` is not an element of the tile.
    pub fn ptr_at(&mut self, i: usize, j: usize) -> *mut T {
        assert!(i < self.rows && j < self.cols, "TileMut::ptr_at: ({i}, {j}) outside {}×{}", self.rows, self.cols);
        self.ptr.wrapping_add(i * self.row_stride + j)
    }
}

mod sealed {
    /// Only this module's types are [`Outputs`](super::Outputs).
    pub trait Sealed {}
}

/// What [`for_each_tile`] writes: one [`Tiled`] output, or several cut into the same
/// number of bands — an array `[O; N]` or a tuple of up to four (their element types may
/// differ) — or `Option<O>` (no output; `None` goes with any band count). Each chunk gets
/// the matching [`TileMut`] of every output, in the same shape (array, tuple, option).
///
/// Outputs go together when they have the same number of row bands and of column bands;
/// an output that is empty in a dimension (0 bands there) goes with any count, and hands
/// out empty tiles.
pub trait Outputs: Sync + sealed::Sealed {
    /// What one chunk gets.
    type Tile: Send;

    /// The number of bands `(row bands, column bands)` of all the outputs together.
    ///
    /// # Panics
    /// If two outputs are cut into different non-zero numbers of bands.
    fn bands(&self) -> (usize, usize);

    /// The tiles of band `(rb, cb)`.
    ///
    /// # Safety
    /// No band may be taken twice while the outputs are borrowed (the loops of this module
    /// take each once).
    #[doc(hidden)]
    unsafe fn take(&self, rb: usize, cb: usize) -> Self::Tile;
}

/// The band counts of two outputs taken together (see [`Outputs`]).
fn merge(a: (usize, usize), b: (usize, usize)) -> (usize, usize) {
    let one = |x: usize, y: usize| {
        assert!(x == y || x == 0 || y == 0, "parallel outputs cut into different bands: {a:?} and {b:?}");
        x.max(y)
    };
    (one(a.0, b.0), one(a.1, b.1))
}

impl<T> sealed::Sealed for Tiled<'_, T> {}

impl<'a, T: Send> Outputs for Tiled<'a, T> {
    type Tile = TileMut<'a, T>;

    fn bands(&self) -> (usize, usize) {
        self.grid.bands()
    }

    /// # Safety
    /// As [`Outputs::take`].
    unsafe fn take(&self, rb: usize, cb: usize) -> TileMut<'a, T> {
        // SAFETY: the caller takes each band once.
        unsafe { self.tile(rb, cb) }
    }
}

impl<O: Outputs> sealed::Sealed for Option<O> {}

impl<O: Outputs> Outputs for Option<O> {
    type Tile = Option<O::Tile>;

    fn bands(&self) -> (usize, usize) {
        self.as_ref().map_or((0, 0), O::bands)
    }

    /// # Safety
    /// As [`Outputs::take`].
    unsafe fn take(&self, rb: usize, cb: usize) -> Option<O::Tile> {
        // SAFETY: the caller's contract, forwarded.
        self.as_ref().map(|o| unsafe { o.take(rb, cb) })
    }
}

impl<O: Outputs, const N: usize> sealed::Sealed for [O; N] {}

impl<O: Outputs, const N: usize> Outputs for [O; N] {
    type Tile = [O::Tile; N];

    fn bands(&self) -> (usize, usize) {
        self.iter().map(O::bands).fold((0, 0), merge)
    }

    /// # Safety
    /// As [`Outputs::take`].
    unsafe fn take(&self, rb: usize, cb: usize) -> [O::Tile; N] {
        // SAFETY: the caller's contract, forwarded.
        std::array::from_fn(|i| unsafe { self[i].take(rb, cb) })
    }
}

/// `Outputs` for a tuple of outputs.
macro_rules! tuple_outputs {
    ($($o:ident $i:tt),+) => {
        impl<$($o: Outputs),+> sealed::Sealed for ($($o,)+) {}

        impl<$($o: Outputs),+> Outputs for ($($o,)+) {
            type Tile = ($($o::Tile,)+);

            fn bands(&self) -> (usize, usize) {
                [$(self.$i.bands()),+].into_iter().fold((0, 0), merge)
            }

            /// # Safety
            /// As [`Outputs::take`].
            unsafe fn take(&self, rb: usize, cb: usize) -> Self::Tile {
                // SAFETY: the caller's contract, forwarded.
                unsafe { ($(self.$i.take(rb, cb),)+) }
            }
        }
    };
}

tuple_outputs!(A 0, B 1);
tuple_outputs!(A 0, B 1, C 2);
tuple_outputs!(A 0, B 1, C 2, D 3);

/// Runs `f(chunk, tiles)` for every chunk of `outs` (band `(r, c)` is chunk
/// `r · col_bands + c`), on `threads` threads of the team as in [`for_each_chunk`]: the one
/// way kernels write disjoint parts of their outputs from several threads. `tiles` holds
/// each output's rectangle of the chunk; the rectangles of different chunks never share an
/// element, by construction ([`Tiled`]).
///
/// `f` must not take pool memory (see the module documentation; use
/// [`for_each_tile_scratch`]).
///
/// # Panics
/// If the outputs are cut into different numbers of bands ([`Outputs`]).
///
/// # Examples
///
/// Two outputs with the same row bands, of different widths and element types:
///
/// ```
/// use om_core::kernels::parallel::{for_each_tile, Tiled};
///
/// let x: Vec<f32> = (0..12).map(|v| v as f32).collect(); // 4 rows of 3
/// let (mut y, mut sums) = (vec![0.0f32; 12], vec![0.0f64; 4]);
/// let outs = (Tiled::row_bands(&mut y, 4, 3, 2), Tiled::row_bands(&mut sums, 4, 1, 2));
/// for_each_tile(2, outs, |_, (y, s)| {
///     let r0 = y.origin().0;
///     let (y, s) = (y.into_slice(), s.into_slice());
///     y.iter_mut().zip(&x[r0 * 3..]).for_each(|(y, &x)| *y = 2.0 * x);
///     s.iter_mut().zip(y.chunks(3)).for_each(|(s, row)| *s = row.iter().map(|&v| v as f64).sum());
/// });
/// assert_eq!(sums, [6.0, 24.0, 42.0, 60.0]);
/// ```
pub fn for_each_tile<O: Outputs>(threads: usize, outs: O, f: impl Fn(usize, O::Tile) + Sync + Send) {
    for_each_tile_scratch::<O, u8>(threads, outs, &mut [], 0, |chunk, tiles, _| f(chunk, tiles));
}

/// As [`for_each_tile`], and `f(chunk, tiles, part)` also gets the running thread's own
/// part of `scratch`, as in [`for_each_chunk_scratch`] with as many chunks as `outs` has.
///
/// # Panics
/// As [`for_each_tile`], and if `scratch` holds fewer than
/// [`workers`]`(threads, chunks) · per_worker` values.
pub fn for_each_tile_scratch<O: Outputs, S: Send>(
    threads: usize,
    outs: O,
    scratch: &mut [S],
    per_worker: usize,
    f: impl Fn(usize, O::Tile, &mut [S]) + Sync + Send,
) {
    for_each_tile_worker(threads, outs, scratch, per_worker, |part| part, |chunk, tiles, part| f(chunk, tiles, part));
}

/// As [`for_each_tile_scratch`], with a state per thread: each thread taking part makes
/// its `W` from its part of `scratch` with `start(part)` once, before its first chunk, and
/// `f(chunk, tiles, state)` gets it for every chunk the thread runs, so a chunk can reuse
/// what the thread's earlier chunks of this call left in its part (a state made fresh for
/// each call says what that is; the part's values themselves may be left from anything).
///
/// # Panics
/// As [`for_each_tile_scratch`].
///
/// # Examples
///
/// Each thread fills its scratch part with a row of weights once, for all its chunks:
///
/// ```
/// use om_core::kernels::parallel::{for_each_tile_worker, workers, Tiled};
///
/// let mut y = vec![0.0f32; 4 * 3]; // 4 rows of 3, one chunk per row
/// let mut scratch = vec![0.0f32; workers(2, 4) * 3];
/// let outs = Tiled::row_bands(&mut y, 4, 3, 1);
/// // A thread's state: its part, and whether it is filled yet.
/// for_each_tile_worker(2, outs, &mut scratch, 3, |part| (part, false), |_, y, (w, filled)| {
///     if !*filled {
///         w.copy_from_slice(&[1.0, 2.0, 3.0]);
///         *filled = true;
///     }
///     let r = y.origin().0 as f32;
///     y.into_slice().iter_mut().zip(w.iter()).for_each(|(y, &w)| *y = r * w);
/// });
/// assert_eq!(y[9..], [3.0, 6.0, 9.0]);
/// ```
pub fn for_each_tile_worker<'s, O: Outputs, S: Send, W>(
    threads: usize,
    outs: O,
    scratch: &'s mut [S],
    per_worker: usize,
    start: impl Fn(&'s mut [S]) -> W + Sync + Send,
    f: impl Fn(usize, O::Tile, &mut W) + Sync + Send,
) {
    let (row_bands, col_bands) = outs.bands();
    let chunks = row_bands * col_bands;
    let parts = worker_parts(scratch, workers(threads, chunks), per_worker);
    run_section(
        threads,
        chunks,
        // SAFETY: each worker index is drawn by one thread, once (`run_section`).
        |worker| start(unsafe { parts.take(worker, 0) }.into_slice()),
        |part, chunk| {
            // SAFETY: each chunk index is run once (`run_section`), so each band is taken once.
            let tiles = unsafe { outs.take(chunk / col_bands, chunk % col_bands) };
            f(chunk, tiles, part)
        },
    );
}

/// `scratch` as `workers` parts of `per_worker` values, one band each.
///
/// Panics unless `scratch` holds `workers` parts of `per_worker` values.
fn worker_parts<S>(scratch: &mut [S], workers: usize, per_worker: usize) -> Tiled<'_, S> {
    let len = workers.checked_mul(per_worker).filter(|&n| n <= scratch.len());
    let Some(len) = len else {
        panic!("parallel scratch: {} value(s) for {workers} part(s) of {per_worker}", scratch.len());
    };
    Tiled::new(&mut scratch[..len], Grid { rows: workers, cols: per_worker, row_stride: per_worker, band_rows: 1, band_cols: per_worker })
}

/// As [`for_each_chunk`], and `f(chunk, part)` also gets the running thread's own part of
/// `scratch`: `scratch` holds [`workers`]`(threads, chunks)` parts of `per_worker` values
/// (taken by the caller before the section, on its own thread), and each thread taking
/// part uses one of them for all the chunks it runs. The part keeps what the thread's
/// previous chunk left in it.
///
/// Panics if `scratch` holds fewer than `workers(threads, chunks) · per_worker` values.
pub fn for_each_chunk_scratch<S: Send>(
    threads: usize,
    chunks: usize,
    scratch: &mut [S],
    per_worker: usize,
    f: impl Fn(usize, &mut [S]) + Sync + Send,
) {
    let parts = worker_parts(scratch, workers(threads, chunks), per_worker);
    // SAFETY: each worker index is drawn by one thread, once (`run_section`).
    run_section(threads, chunks, |worker| unsafe { parts.take(worker, 0) }.into_slice(), |part, chunk| f(chunk, part));
}

/// Splits `data` into consecutive chunks of `chunk_len` elements (the last may be shorter)
/// and runs `f(chunk_index, chunk)` for each, on `threads` threads of the team: the one-row
/// case of [`for_each_tile`] ([`Grid::contiguous`]).
///
/// `chunk_len` must be a function of the kernel and the shape only, never of `threads`;
/// `f` must not take pool memory (use [`for_each_chunk_mut_scratch`]).
pub fn for_each_chunk_mut<T: Send>(threads: usize, data: &mut [T], chunk_len: usize, f: impl Fn(usize, &mut [T]) + Sync + Send) {
    for_each_tile(threads, Tiled::contiguous(data, chunk_len), |i, tile| f(i, tile.into_slice()));
}

/// The number of chunks of [`for_each_chunk_mut`] over `len` elements: `len / chunk_len`
/// rounded up (`chunk_len` 0 counts as 1). Size a [`for_each_chunk_mut_scratch`] with it.
pub fn chunk_count(len: usize, chunk_len: usize) -> usize {
    len.div_ceil(chunk_len.max(1))
}

/// As [`for_each_chunk_mut`], and `f(chunk_index, chunk, part)` also gets the running
/// thread's own part of `scratch`, as in [`for_each_chunk_scratch`] with
/// [`chunk_count`]`(data.len(), chunk_len)` chunks.
///
/// Panics if `scratch` holds fewer than `workers(threads, chunks) · per_worker` values.
pub fn for_each_chunk_mut_scratch<T: Send, S: Send>(
    threads: usize,
    data: &mut [T],
    chunk_len: usize,
    scratch: &mut [S],
    per_worker: usize,
    f: impl Fn(usize, &mut [T], &mut [S]) + Sync + Send,
) {
    for_each_tile_scratch(threads, Tiled::contiguous(data, chunk_len), scratch, per_worker, |i, tile, part| f(i, tile.into_slice(), part));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn chunks_of_a_slice_are_visited_once_each_on_at_most_the_thread_count() {
        for threads in [1, 2, 3] {
            let mut data = vec![0u32; 1000];
            let names = Mutex::new(HashSet::new());
            let calls = AtomicUsize::new(0);
            for_each_chunk_mut(threads, &mut data, 64, |i, chunk| {
                calls.fetch_add(1, Ordering::Relaxed);
                assert_eq!(chunk.len(), if i == 15 { 1000 - 15 * 64 } else { 64 });
                for (j, v) in chunk.iter_mut().enumerate() {
                    *v += (i * 64 + j) as u32 + 1;
                }
                names.lock().unwrap().insert(std::thread::current().id());
                std::thread::sleep(std::time::Duration::from_micros(200));
            });
            assert_eq!(calls.load(Ordering::Relaxed), 16);
            assert!(data.iter().enumerate().all(|(i, &v)| v == i as u32 + 1), "every element written exactly once");
            assert!(names.lock().unwrap().len() <= threads, "no more threads than asked for");
        }
    }

    /// Every grid up to 4 × 4 with every stride gap and band size: the tiles of a loop (at
    /// 1 and 2 threads) cover each element of the grid exactly once, nothing outside it,
    /// with the rectangle and chunk number `Grid` describes.
    #[test]
    fn tiles_of_every_small_grid_cover_each_element_once() {
        for (rows, cols, gap, band_rows, band_cols) in
            itertools5(0..5, 0..5, 0..3, 0..4, 0..4).filter(|&(rows, _, gap, ..)| rows > 1 || gap == 0)
        {
            let grid = Grid { rows, cols, row_stride: cols + gap, band_rows, band_cols };
            let (rb, cb) = grid.bands();
            let len = grid.extent().unwrap() + 2;
            for threads in [1, 2] {
                let mut data = vec![0u32; len];
                let calls = AtomicUsize::new(0);
                for_each_tile(threads, Tiled::new(&mut data[1..], grid), |chunk, mut tile| {
                    calls.fetch_add(1, Ordering::Relaxed);
                    let (r, c) = (chunk / cb, chunk % cb);
                    let (br, bc) = (band_rows.max(1), band_cols.max(1));
                    assert_eq!(tile.origin(), (r * br, c * bc), "{grid:?} chunk {chunk}");
                    assert_eq!((tile.rows(), tile.cols()), (br.min(rows - r * br), bc.min(cols - c * bc)), "{grid:?}");
                    for i in 0..tile.rows() {
                        tile.row(i).iter_mut().for_each(|v| *v += 1);
                    }
                });
                assert_eq!(calls.load(Ordering::Relaxed), rb * cb, "{grid:?}");
                let inside = |o: usize| o >= 1 && (o - 1) % grid.row_stride.max(1) < cols && (o - 1) / grid.row_stride.max(1) < rows;
                for (o, &v) in data.iter().enumerate() {
                    assert_eq!(v, inside(o) as u32, "{grid:?}, offset {o}");
                }
            }
        }
    }

    /// The 5-tuples of the ranges' values (a small `itertools::iproduct`).
    fn itertools5(
        a: std::ops::Range<usize>,
        b: std::ops::Range<usize>,
        c: std::ops::Range<usize>,
        d: std::ops::Range<usize>,
        e: std::ops::Range<usize>,
    ) -> impl Iterator<Item = (usize, usize, usize, usize, usize)> {
        a.flat_map(move |a| {
            let (c, d, e) = (c.clone(), d.clone(), e.clone());
            b.clone().flat_map(move |b| {
                let (d, e) = (d.clone(), e.clone());
                c.clone().flat_map(move |c| {
                    let e = e.clone();
                    d.clone().flat_map(move |d| e.clone().map(move |e| (a, b, c, d, e)))
                })
            })
        })
    }

    #[test]
    fn pointers_of_a_tile_address_its_own_elements() {
        let mut m = vec![0.0f32; 5 * 9];
        let grid = Grid { rows: 5, cols: 7, row_stride: 9, band_rows: 2, band_cols: 3 };
        for_each_tile(2, Tiled::new(&mut m, grid), |chunk, mut tile| {
            let ld = tile.row_stride();
            let p = tile.ptr_at(0, 0);
            for i in 0..tile.rows() {
                for j in 0..tile.cols() {
                    // SAFETY: (i, j) is an element of the tile (`TileMut::ptr_at`).
                    unsafe { *p.add(i * ld + j) = chunk as f32 };
                }
            }
        });
        for (o, &v) in m.iter().enumerate() {
            let (i, j) = (o / 9, o % 9);
            let want = if j < 7 { ((i / 2) * 3 + j / 3) as f32 } else { 0.0 };
            assert_eq!(v, want, "({i}, {j})");
        }
    }

    #[test]
    fn outputs_of_several_types_share_the_bands_and_an_empty_one_goes_with_any() {
        let (mut a, mut b, mut e) = (vec![0.0f32; 7 * 3], vec![0.0f64; 7], Vec::<u8>::new());
        let outs =
            (Tiled::row_bands(&mut a, 7, 3, 2), [Tiled::row_bands(&mut b, 7, 1, 2)], Tiled::row_bands(&mut e, 7, 0, 2), None::<Tiled<u8>>);
        assert_eq!(outs.bands(), (4, 1));
        let scratch_len = workers(2, 4) * 5;
        let mut scratch = vec![0u16; scratch_len];
        for_each_tile_scratch(2, outs, &mut scratch, 5, |chunk, (a, [b], e, none), part| {
            assert!(none.is_none() && e.cols() == 0 && part.len() == 5);
            let (a, b) = (a.into_slice(), b.into_slice());
            assert_eq!((a.len(), b.len()), if chunk == 3 { (3, 1) } else { (6, 2) });
            a.fill(chunk as f32);
            b.fill(chunk as f64);
        });
        assert!(a.chunks(3).enumerate().all(|(r, row)| row.iter().all(|&v| v == (r / 2) as f32)));
        assert!(b.iter().enumerate().all(|(r, &v)| v == (r / 2) as f64));
    }

    #[test]
    #[should_panic(expected = "overlap")]
    fn overlapping_rows_are_refused() {
        let mut m = vec![0.0f32; 16];
        Tiled::new(&mut m, Grid { rows: 2, cols: 4, row_stride: 3, band_rows: 1, band_cols: 4 });
    }

    #[test]
    #[should_panic(expected = "does not fit")]
    fn a_grid_beyond_its_slice_is_refused() {
        let mut m = vec![0.0f32; 15];
        Tiled::new(&mut m, Grid { rows: 2, cols: 8, row_stride: 8, band_rows: 1, band_cols: 4 });
    }

    #[test]
    #[should_panic(expected = "different bands")]
    fn outputs_cut_differently_are_refused() {
        let (mut a, mut b) = (vec![0.0f32; 8], vec![0.0f32; 8]);
        for_each_tile(1, [Tiled::contiguous(&mut a, 2), Tiled::contiguous(&mut b, 4)], |_, _| {});
    }

    #[test]
    fn a_parallel_call_inside_a_chunk_runs_on_its_own_thread() {
        let outer = AtomicUsize::new(0);
        for_each_chunk(2, 4, |_| {
            let me = std::thread::current().id();
            for_each_chunk(2, 8, |_| assert_eq!(std::thread::current().id(), me));
            outer.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(outer.load(Ordering::Relaxed), 4);
    }
}
