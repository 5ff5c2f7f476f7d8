//! The buffer pool: every tensor buffer and every kernel scratch comes from here.
//!
//! Buffers are 64-byte aligned (they are made of blocks of 64 bytes) and rounded up
//! to a size class (exact below 8 blocks, then four classes per doubling), so a warm
//! training step finds every request already pooled and allocates nothing:
//! [`stats`]`().native_allocations` stays put. Dropping a buffer returns it to its class.
//! The pool never hands out uninitialised memory (recycled buffers hold old values; the
//! callers that need zeros ask for them).
//!
//! Allocation failure is an [`Error::OutOfMemory`], never an abort: the pool
//! refuses a request above [`max_buffer_bytes`] (by default the machine's physical memory,
//! read from `/proc/meminfo` at first use; a program sets another limit explicitly with
//! [`set_max_buffer_bytes`] — the library reads no environment variable, only the `om`
//! binary maps `ONEMODEL_MAX_TENSOR_BYTES` to that call) and reserves the memory fallibly, so a request
//! the allocator cannot serve is an error too. Every tensor a constructor or an operator
//! builds goes through this path.
//!
//! Besides its process-wide [`stats`], the pool counts each thread's requests in counters
//! of that thread, which the activation scope reads (as it reads the counting allocator's
//! thread counters); the pool itself knows nothing of scopes.

use crate::error::{Error, Result};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// 64 bytes, 64-byte aligned: the unit of every pooled buffer.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
#[doc(hidden)]
pub struct Block([u32; 16]);

/// Bytes in one [`Block`].
#[doc(hidden)]
pub const BLOCK_BYTES: usize = 64;

/// Pool counters (see [`stats`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PoolStats {
    /// Buffers ever obtained from the system allocator.
    pub native_allocations: u64,
    /// Bytes currently handed out (in live buffers).
    pub outstanding_bytes: u64,
    /// Bytes kept in the pool, ready for reuse.
    pub pooled_bytes: u64,
    /// Bytes ever handed out (size classes), cached or new.
    pub requested_bytes: u64,
    /// The most bytes ever outstanding at once.
    pub peak_outstanding_bytes: u64,
    /// Buffers given back to the system allocator (beyond the cache limit, or trimmed).
    pub native_frees: u64,
}

static NATIVE: AtomicU64 = AtomicU64::new(0);
static OUTSTANDING: AtomicU64 = AtomicU64::new(0);
static POOLED: AtomicU64 = AtomicU64::new(0);

/// The cached buffers of one size class and when the class was last used (requested or
/// returned), on the pool's clock: eviction takes the least recently used class first.
#[derive(Default)]
struct ClassList {
    last_used: u64,
    buffers: Vec<Vec<Block>>,
}

/// The cached buffers of every size class, at the class's [`class_index`]: a request finds
/// its list by arithmetic, not by hashing (SipHash in a `HashMap` took 3% of the
/// instructions of `om bench sweep`'s chain of small operators, callgrind, Intel Xeon
/// model 167).
#[derive(Default)]
struct Classes(Vec<ClassList>);

impl Classes {
    /// The list of `class` (in blocks), if it was ever used.
    fn get_mut(&mut self, class: usize) -> Option<&mut ClassList> {
        self.0.get_mut(class_index(class))
    }

    /// The list of `class`, made if new.
    fn entry(&mut self, class: usize) -> &mut ClassList {
        let i = class_index(class);
        if i >= self.0.len() {
            self.0.resize_with(i + 1, ClassList::default);
        }
        &mut self.0[i]
    }

    /// Every list with its class (in blocks).
    fn iter(&self) -> impl Iterator<Item = (usize, &ClassList)> {
        self.0.iter().enumerate().map(|(i, l)| (class_at(i), l))
    }
}

/// The position of size class `class` (a value of [`size_class`]) among all classes in
/// increasing order, from 1 for one block: the classes below 8 blocks, then four per
/// doubling.
fn class_index(class: usize) -> usize {
    if class < 8 {
        return class;
    }
    let top = (usize::BITS - 1 - class.leading_zeros()) as usize; // 2^top <= class
    8 + 4 * (top - 3) + (class >> (top - 2)) - 4
}

/// The size class at position `i` (the inverse of [`class_index`]).
fn class_at(i: usize) -> usize {
    if i < 8 {
        return i;
    }
    let (top, quarters) = (3 + (i - 8) / 4, 4 + (i - 8) % 4);
    quarters << (top - 2)
}

type FreeLists = Mutex<Classes>;

/// The pool's clock: one tick per request or return of a buffer.
static CLOCK: AtomicU64 = AtomicU64::new(0);

fn tick() -> u64 {
    CLOCK.fetch_add(1, Ordering::Relaxed) + 1
}

fn free_lists() -> &'static FreeLists {
    static LISTS: OnceLock<FreeLists> = OnceLock::new();
    LISTS.get_or_init(|| Mutex::new(Classes::default()))
}

/// The pool's counters now.
pub fn stats() -> PoolStats {
    PoolStats {
        native_allocations: NATIVE.load(Ordering::Relaxed),
        outstanding_bytes: OUTSTANDING.load(Ordering::Relaxed),
        pooled_bytes: POOLED.load(Ordering::Relaxed),
        requested_bytes: REQUESTED.load(Ordering::Relaxed),
        peak_outstanding_bytes: PEAK.load(Ordering::Relaxed),
        native_frees: NATIVE_FREES.load(Ordering::Relaxed),
    }
}

/// Returns every pooled buffer to the system allocator.
pub fn trim() {
    trim_to(0);
}

/// The limit when `/proc/meminfo` gives none: 64 GiB.
const FALLBACK_MAX_BUFFER_BYTES: usize = 64 << 30;

/// The buffer size limit; 0 until first read.
static MAX_BUFFER_BYTES: AtomicUsize = AtomicUsize::new(0);

/// The default limit: the `MemTotal` line of `/proc/meminfo`, else 64 GiB. Settings are
/// explicit (STYLE.md): no environment variable changes it; see [`set_max_buffer_bytes`].
fn default_max_buffer_bytes() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
            kib.checked_mul(1024)
        })
        .filter(|&n| n > 0)
        .unwrap_or(FALLBACK_MAX_BUFFER_BYTES)
}

/// The largest buffer (in bytes) the pool hands out; a larger request is an
/// [`Error::OutOfMemory`]. Process-wide, like the allocator it guards.
pub fn max_buffer_bytes() -> usize {
    match MAX_BUFFER_BYTES.load(Ordering::Relaxed) {
        0 => {
            let n = default_max_buffer_bytes();
            // Another thread may have set a limit meanwhile: keep it.
            match MAX_BUFFER_BYTES.compare_exchange(0, n, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => n,
                Err(set) => set,
            }
        }
        n => n,
    }
}

/// Sets the limit of [`max_buffer_bytes`] for the whole process (at least 1 byte) and
/// returns the previous one. Lower it to make runaway shapes fail early; raise it where
/// the system overcommits memory on purpose. (The `om` binary calls it with the value of
/// `ONEMODEL_MAX_TENSOR_BYTES` when that is set; the library reads no environment.)
///
/// # Examples
///
/// ```
/// use om_core::{pool, Error, Tensor};
/// let old = pool::set_max_buffer_bytes(1 << 20);
/// let refused = Tensor::zeros(&[1 << 20]); // 4 MiB
/// pool::set_max_buffer_bytes(old);
/// assert!(matches!(refused, Err(Error::OutOfMemory { limit: 1048576, .. })));
/// ```
pub fn set_max_buffer_bytes(bytes: usize) -> usize {
    let old = max_buffer_bytes();
    MAX_BUFFER_BYTES.store(bytes.max(1), Ordering::Relaxed);
    old
}

/// The size class (in blocks) serving a request of `blocks` blocks.
#[doc(hidden)]
pub fn size_class(blocks: usize) -> usize {
    if blocks < 8 {
        return blocks.max(1);
    }
    let top = usize::BITS - 1 - blocks.leading_zeros(); // 2^top <= blocks
    let quarter = 1usize << (top - 2);
    blocks.div_ceil(quarter) * quarter
}

/// A pooled, 64-byte aligned buffer. Returned to the pool on drop.
#[doc(hidden)]
pub struct Buffer {
    blocks: Vec<Block>,
}

impl Buffer {
    /// A buffer of at least `bytes` bytes; its contents are unspecified (but initialised).
    /// Fails with [`Error::OutOfMemory`] (naming no operator yet) when `bytes` exceeds
    /// [`max_buffer_bytes`] or the system allocator cannot serve the request.
    pub fn try_new(bytes: usize) -> Result<Buffer> {
        // How many chunks run at once depends on timing, so a buffer taken inside one would
        // make the memory a step needs depend on it (`kernels::parallel`, issue 22).
        debug_assert!(!crate::kernels::parallel::in_parallel_chunk(), "pool request inside a chunk of a parallel section");
        let oom = || Error::OutOfMemory { op: "", bytes: bytes as u64, limit: max_buffer_bytes() as u64 };
        if bytes > max_buffer_bytes() {
            return Err(oom());
        }
        let class = size_class(bytes.div_ceil(BLOCK_BYTES));
        let class_bytes = (class * BLOCK_BYTES) as u64;
        let reused = {
            let mut lists = free_lists().lock().unwrap_or_else(|e| e.into_inner());
            lists.get_mut(class).and_then(|l| {
                l.last_used = tick();
                l.buffers.pop()
            })
        };
        let native = reused.is_none();
        let blocks = match reused {
            Some(b) => {
                POOLED.fetch_sub(class_bytes, Ordering::Relaxed);
                b
            }
            None => {
                let mut blocks: Vec<Block> = Vec::new();
                blocks.try_reserve_exact(class).map_err(|_| oom())?;
                blocks.resize(class, Block([0; 16]));
                NATIVE.fetch_add(1, Ordering::Relaxed);
                blocks
            }
        };
        let now = OUTSTANDING.fetch_add(class_bytes, Ordering::Relaxed) + class_bytes;
        note_request(class_bytes, native, now);
        Ok(Buffer { blocks })
    }

    /// A buffer of no bytes, holding nothing from the pool (a placeholder).
    pub(crate) fn empty() -> Buffer {
        Buffer { blocks: Vec::new() }
    }

    /// [`Buffer::try_new`] filled with zero bytes.
    pub fn try_zeroed(bytes: usize) -> Result<Buffer> {
        let mut b = Buffer::try_new(bytes)?;
        b.blocks.fill(Block([0; 16]));
        Ok(b)
    }

    /// Capacity in bytes (the size class).
    pub fn capacity_bytes(&self) -> usize {
        self.blocks.len() * BLOCK_BYTES
    }

    /// The buffer as `f32` values.
    pub fn f32(&self) -> &[f32] {
        bytemuck::cast_slice(&self.blocks)
    }

    /// The buffer as mutable `f32` values.
    pub fn f32_mut(&mut self) -> &mut [f32] {
        bytemuck::cast_slice_mut(&mut self.blocks)
    }

    /// The buffer as `i32` values.
    pub fn i32(&self) -> &[i32] {
        bytemuck::cast_slice(&self.blocks)
    }

    /// The buffer as mutable `i32` values.
    pub fn i32_mut(&mut self) -> &mut [i32] {
        bytemuck::cast_slice_mut(&mut self.blocks)
    }

    /// The buffer as mutable `f64` values (scratch for double-precision sums).
    pub fn f64_mut(&mut self) -> &mut [f64] {
        bytemuck::cast_slice_mut(&mut self.blocks)
    }

    /// The buffer as mutable `usize` values (scratch for positions and counts).
    pub fn usize_mut(&mut self) -> &mut [usize] {
        bytemuck::cast_slice_mut(&mut self.blocks)
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        let blocks = std::mem::take(&mut self.blocks);
        let class = blocks.len();
        let bytes = (class * BLOCK_BYTES) as u64;
        OUTSTANDING.fetch_sub(bytes, Ordering::Relaxed);
        if class == 0 {
            return;
        }
        let mut lists = free_lists().lock().unwrap_or_else(|e| e.into_inner());
        let now = tick();
        // A full cache first lets go of the buffers of classes used less recently than
        // this one (another model's, after a switch), so the classes in use stay cached.
        let cached = reserve_cache(bytes) || (evict_lru(&mut lists, bytes, now) && reserve_cache(bytes));
        if !cached {
            NATIVE_FREES.fetch_add(1, Ordering::Relaxed);
            return; // beyond the cache limit: `blocks` goes back to the system
        }
        let list = lists.entry(class);
        list.last_used = now;
        list.buffers.push(blocks);
    }
}

/// A pooled scratch of `len` doubles, zeroed, for sums that accumulate in f64.
#[doc(hidden)]
pub struct F64Scratch {
    buf: Buffer,
    len: usize,
}

impl F64Scratch {
    /// `len` zeros, or an [`Error::OutOfMemory`] (naming no operator yet).
    pub fn try_zeroed(len: usize) -> Result<F64Scratch> {
        let bytes = len.checked_mul(8).ok_or(Error::OutOfMemory { op: "", bytes: u64::MAX, limit: max_buffer_bytes() as u64 })?;
        Ok(F64Scratch { buf: Buffer::try_zeroed(bytes)?, len })
    }

    /// The values.
    pub fn values(&mut self) -> &mut [f64] {
        &mut self.buf.f64_mut()[..self.len]
    }
}

// ===== accounting and the cache limit (docs/memory.md) =====

static REQUESTED: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);
static NATIVE_FREES: AtomicU64 = AtomicU64::new(0);
/// The limit set by [`set_cache_limit`], or [`AUTO`].
static LIMIT: AtomicU64 = AtomicU64::new(AUTO);
const AUTO: u64 = u64::MAX;
/// The largest peak of the last [`RECENT_STEPS`] outermost scopes (0 until one ended).
static RECENT_PEAK: AtomicU64 = AtomicU64::new(0);

/// The automatic cache limit never goes below this (16 MiB), so small programs that
/// request many sizes in turn do not churn the system allocator.
pub const CACHE_FLOOR_BYTES: u64 = 16 << 20;

/// How many outermost `ActivationScope`s (steps) the
/// automatic cache limit remembers.
pub const RECENT_STEPS: usize = 8;

/// The requests the calling thread made so far (see [`thread_counts`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ThreadCounts {
    /// Buffers requested.
    pub(crate) requests: u64,
    /// Bytes requested (size classes).
    pub(crate) bytes: u64,
    /// Requests served by a new system allocation.
    pub(crate) native: u64,
}

impl ThreadCounts {
    /// The counts since `earlier`.
    pub(crate) fn since(self, earlier: ThreadCounts) -> ThreadCounts {
        ThreadCounts { requests: self.requests - earlier.requests, bytes: self.bytes - earlier.bytes, native: self.native - earlier.native }
    }
}

thread_local! {
    /// This thread's requests so far (destructor-free, so counting never fails).
    static THREAD_COUNTS: Cell<ThreadCounts> = const { Cell::new(ThreadCounts { requests: 0, bytes: 0, native: 0 }) };
    /// The highest process-wide outstanding bytes seen at this thread's requests since the
    /// last [`take_thread_peak`] (0 if none).
    static THREAD_PEAK: Cell<u64> = const { Cell::new(0) };
}

/// The calling thread's requests so far. A kernel's helper threads take no pool memory
/// (`kernels::parallel`), so a thread's counters hold every request of the work it runs.
pub(crate) fn thread_counts() -> ThreadCounts {
    THREAD_COUNTS.try_with(Cell::get).unwrap_or_default()
}

/// The highest process-wide outstanding bytes seen at the calling thread's requests since
/// the last [`take_thread_peak`] (0 if none).
pub(crate) fn thread_peak() -> u64 {
    THREAD_PEAK.try_with(Cell::get).unwrap_or(0)
}

/// [`thread_peak`], starting a new window (at 0).
pub(crate) fn take_thread_peak() -> u64 {
    THREAD_PEAK.try_with(|p| p.replace(0)).unwrap_or(0)
}

fn note_request(bytes: u64, native: bool, outstanding_now: u64) {
    REQUESTED.fetch_add(bytes, Ordering::Relaxed);
    PEAK.fetch_max(outstanding_now, Ordering::Relaxed);
    let _ = THREAD_COUNTS.try_with(|c| {
        let t = c.get();
        c.set(ThreadCounts { requests: t.requests + 1, bytes: t.bytes + bytes, native: t.native + u64::from(native) });
    });
    let _ = THREAD_PEAK.try_with(|p| p.set(p.get().max(outstanding_now)));
}

/// Reserves room for `bytes` more cached bytes; false if that would pass the limit.
fn reserve_cache(bytes: u64) -> bool {
    let limit = cache_limit();
    POOLED.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |p| (p + bytes <= limit).then_some(p + bytes)).is_ok()
}

/// Sets how many bytes the pool may keep cached: `Some(bytes)` fixes the limit, `None`
/// restores the automatic one (see [`cache_limit`]). Buffers returned beyond the limit
/// are freed; lowering it frees cached buffers now (least recently used size classes first).
pub fn set_cache_limit(limit: Option<u64>) {
    LIMIT.store(limit.map_or(AUTO, |l| l.min(AUTO - 1)), Ordering::Relaxed);
    enforce_limit();
}

/// The cache limit in force: the fixed one, or automatically twice the largest peak of
/// outstanding bytes of the last [`RECENT_STEPS`] outermost activation scopes (of the
/// whole process while no scope has ended), and at least [`CACHE_FLOOR_BYTES`]. Twice the
/// peak leaves room for buffers of every size class a step uses (a warm step still
/// allocates nothing), and lets go of a larger model's buffers a few steps after moving on.
pub fn cache_limit() -> u64 {
    match LIMIT.load(Ordering::Relaxed) {
        AUTO => {
            let recent = RECENT_PEAK.load(Ordering::Relaxed);
            let peak = if recent > 0 { recent } else { PEAK.load(Ordering::Relaxed) };
            peak.saturating_mul(2).max(CACHE_FLOOR_BYTES)
        }
        fixed => fixed,
    }
}

/// Frees cached buffers, of the least recently used size class first (the larger class of
/// two used at the same tick), until at most `bytes` stay cached.
pub fn trim_to(bytes: u64) {
    let mut lists = free_lists().lock().unwrap_or_else(|e| e.into_inner());
    while POOLED.load(Ordering::Relaxed) > bytes {
        let Some(class) = least_recently_used(&lists, u64::MAX) else { break };
        free_one(&mut lists, class);
    }
}

/// The cached class used least recently before `before` (ties: the larger class), if any
/// holds a buffer. Scans the classes in place: no allocation while a step returns buffers.
fn least_recently_used(lists: &Classes, before: u64) -> Option<usize> {
    lists
        .iter()
        .filter(|(_, l)| !l.buffers.is_empty() && l.last_used < before)
        .min_by(|(ca, a), (cb, b)| a.last_used.cmp(&b.last_used).then(cb.cmp(ca)))
        .map(|(c, _)| c)
}

/// Returns one cached buffer of `class` to the system allocator.
fn free_one(lists: &mut Classes, class: usize) {
    if let Some(blocks) = lists.get_mut(class).and_then(|l| l.buffers.pop()) {
        POOLED.fetch_sub((class * BLOCK_BYTES) as u64, Ordering::Relaxed);
        NATIVE_FREES.fetch_add(1, Ordering::Relaxed);
        drop(blocks);
    }
}

/// Frees cached buffers of classes used before `now`, least recently used first, until
/// `bytes` more fit under the cache limit; whether they now fit.
fn evict_lru(lists: &mut Classes, bytes: u64, now: u64) -> bool {
    let limit = cache_limit();
    if bytes > limit {
        return false;
    }
    while POOLED.load(Ordering::Relaxed) + bytes > limit {
        let Some(class) = least_recently_used(lists, now) else { return false };
        free_one(lists, class);
    }
    true
}

fn enforce_limit() {
    let limit = cache_limit();
    if POOLED.load(Ordering::Relaxed) > limit {
        trim_to(limit);
    }
}

/// Records the peak outstanding bytes of a step (the end of an outermost scope) for the
/// automatic cache limit, and frees what the new limit no longer allows.
pub(crate) fn note_step_peak(peak: u64) {
    static PEAKS: Mutex<([u64; RECENT_STEPS], usize)> = Mutex::new(([0; RECENT_STEPS], 0));
    {
        let mut ring = PEAKS.lock().unwrap_or_else(|e| e.into_inner());
        let (values, next) = &mut *ring;
        values[*next % RECENT_STEPS] = peak.max(1);
        *next += 1;
        RECENT_PEAK.store(values.iter().copied().max().unwrap_or(1), Ordering::Relaxed);
    }
    enforce_limit();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_cover_requests_with_bounded_waste() {
        for blocks in 1..5000 {
            let c = size_class(blocks);
            assert!(c >= blocks, "{blocks} -> {c}");
            assert!(c * 4 <= blocks * 5 + 4 * 4, "{blocks} -> {c} wastes too much");
            assert_eq!(size_class(c), c, "classes are fixed points");
        }
    }

    #[test]
    fn class_positions_count_the_classes_in_order() {
        let mut classes: Vec<usize> = (1..100_000).map(size_class).collect();
        classes.dedup();
        for (i, &c) in classes.iter().enumerate() {
            assert_eq!(class_index(c), i + 1, "class {c}");
            assert_eq!(class_at(i + 1), c);
        }
        let top = size_class(usize::MAX >> 6);
        assert!(class_index(top) < 260 && class_at(class_index(top)) == top);
    }

    #[test]
    fn buffers_are_aligned_and_reused() {
        let a = Buffer::try_new(1000).unwrap();
        assert_eq!(a.f32().as_ptr() as usize % 64, 0);
        let cap = a.capacity_bytes();
        drop(a);
        let b = Buffer::try_new(1000).unwrap();
        assert_eq!(b.capacity_bytes(), cap);
        assert_eq!(b.f32().as_ptr() as usize % 64, 0);
        drop(b);
        // Reuse, counted on this thread only (the thread's counters, so other tests allocating
        // at the same time do not blur it): the request after a return of
        // its class is served from the cache, not by a new system allocation. Another test's
        // thread could take the returned buffer in between (or a full cache could have
        // freed it), so the pair is tried a few times; without reuse every try allocates.
        let reused = (0..20).any(|_| {
            drop(Buffer::try_new(1000).unwrap());
            let before = thread_counts();
            let again = Buffer::try_new(1000).unwrap();
            let s = thread_counts().since(before);
            drop(again);
            assert_eq!(s.requests, 1);
            s.native == 0
        });
        assert!(reused, "a returned buffer is never handed out again");
    }

    #[test]
    fn requests_above_the_limit_or_the_address_space_are_errors() {
        let e = Buffer::try_new(usize::MAX).err().expect("an error");
        assert!(matches!(e, Error::OutOfMemory { bytes, .. } if bytes == usize::MAX as u64), "{e}");
        assert!(e.to_string().contains(&usize::MAX.to_string()), "{e}");
        let limit = max_buffer_bytes();
        assert!(limit > 0);
        assert!(Buffer::try_new(limit + 1).is_err());
        assert!(Buffer::try_zeroed(4096).is_ok());
    }
}
