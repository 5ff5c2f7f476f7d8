//! [`ActivationScope`] (spec section 3 in Rust terms): a guard opened around a training step
//! that accounts for the step's memory.
//!
//! While a scope is open on a thread, every buffer that thread requests from the [`pool`]
//! (an operator's output, a copying `contiguous`/`reshape`, a kernel scratch, the engine's
//! temporaries) is counted in it: the scope reads the pool's counters of its thread when it
//! opens and when asked, as it reads the counting allocator's. The kernels' helper threads
//! take no pool memory (`kernels::parallel`), so the calling thread's counters hold all of
//! a step's requests. Every tensor handle created on the thread is remembered (weakly, in a
//! log of the scope's own keyed by handle, which the tensor layer feeds through the
//! observer a scope installs), so that [`ActivationScope::stats`] can report the ones still
//! alive: the handles that keep a step's activations past the step. Leaf gradients written
//! by `backward` are never tied to a scope (they are not reported). A handle's entry goes
//! when its last handle does; the log keeps its capacity across steps (a warm step
//! allocates nothing for it) and drops dead entries (handles dropped on another thread)
//! instead of growing past a few thousand, so a scope held open around a whole training
//! loop costs memory only for the tensors still alive.
//!
//! Returning memory needs nothing from the scope: in Rust a buffer goes back to the pool
//! when its last handle drops, so at the end of a step everything not held by a live
//! handle is already pooled. The scope makes that observable.
//!
//! Scopes nest: an inner scope's requests also count in every enclosing one (its stats
//! are inclusive, like a profiler's). The outermost scope's end tells the pool its peak,
//! which sets the automatic cache limit ([`pool::set_cache_limit`]).
//!
//! Scopes may end in any order (spec section 3 assumes nesting; a guard can be moved or
//! dropped early in Rust): a scope that ends while scopes opened after it are still open
//! only leaves the thread's list of open scopes. Those keep counting, in themselves and in
//! every scope open before them (each counts what happened since it opened); the log of
//! tensors is kept while any scope is open. A scope that ends while no scope opened before it is still open reports its peak
//! to the pool (the outermost one, when they nest).
//!
//! Heap figures come from `CountingAlloc` when the
//! program installed it (the calling thread's allocations only); otherwise they are `None`.
//!
//! ```
//! use om_core::{ActivationScope, Result, ScopeStats, Tensor};
//! // A "step" that makes two activations and lets them go.
//! let step = || -> Result<ScopeStats> {
//!     let scope = ActivationScope::new();
//!     let a = Tensor::zeros(&[1000])?;
//!     let b = Tensor::ones(&[1000])?;
//!     drop((a, b));
//!     Ok(scope.finish())
//! };
//! let first = step()?;
//! assert_eq!((first.pool_requests, first.live_tensors_created), (2, 0));
//! // The next step is warm: both buffers come back from the pool, none is allocated.
//! let second = step()?;
//! assert_eq!((second.pool_requests, second.pool_native_allocations), (2, 0));
//! # Ok::<(), om_core::Error>(())
//! ```

use crate::alloc_count::{self, HeapCounts};
use crate::pool::{self, ThreadCounts};
use crate::tensor::{set_observer, HandleObserver, Inner, Tensor};
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::sync::{Arc, Weak};

/// What happened while a scope was open (see [`ActivationScope::stats`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ScopeStats {
    /// Buffers requested from the pool.
    pub pool_requests: u64,
    /// Bytes requested from the pool (size classes, as the pool counts them).
    pub pool_bytes_requested: u64,
    /// Requests the pool could not serve from its cache (new system allocations).
    pub pool_native_allocations: u64,
    /// The highest process-wide outstanding pool bytes seen at this scope's requests
    /// (at least the outstanding bytes when the scope opened).
    pub peak_outstanding_bytes: u64,
    /// Tensor handles created on this thread in the scope and still alive (leaf gradients
    /// excepted); see [`ActivationScope::live_tensors`].
    pub live_tensors_created: usize,
    /// Heap allocations of this thread in the scope, if a counting allocator is installed.
    pub heap_allocations: Option<u64>,
    /// Bytes of those allocations.
    pub heap_bytes: Option<u64>,
}

thread_local! {
    /// The scopes open on this thread, in the order they were opened.
    static OPEN: RefCell<Vec<Open>> = const { RefCell::new(Vec::new()) };
    /// The id of the next scope opened on this thread.
    static NEXT_ID: Cell<u64> = const { Cell::new(0) };
    /// Tensors created while a scope is open; cleared (capacity kept) when the last open
    /// scope ends.
    static LOG: RefCell<Log> = const { RefCell::new(Log::new()) };
}

/// One open scope in [`OPEN`].
struct Open {
    /// The scope's id (unique on its thread).
    id: u64,
    /// The thread's pool counters when it opened.
    start: ThreadCounts,
    /// The sequence number of the first tensor it logs.
    first_seq: u64,
    /// Its peak of outstanding bytes up to the pool's current window of the thread's peak
    /// (a new scope starts a new window; see [`ActivationScope::new`]).
    peak: u64,
}

/// The observer the open scopes install in the tensor layer.
const OBSERVER: HandleObserver = HandleObserver { created: track, forget };

/// A guard accounting the memory of everything done on this thread until it is dropped.
///
/// ```
/// use om_core::{ActivationScope, Tensor};
/// let scope = ActivationScope::new();
/// let kept = Tensor::zeros(&[256])?;
/// let s = scope.stats();
/// assert_eq!(s.pool_requests, 1);
/// assert_eq!(s.live_tensors_created, 1);
/// assert_eq!(scope.live_tensors()[0].shape(), &[256]);
/// # drop(kept);
/// # Ok::<(), om_core::Error>(())
/// ```
pub struct ActivationScope {
    /// This scope's id in [`OPEN`].
    id: u64,
    heap_start: HeapCounts,
    /// Scopes are per thread.
    _not_send: PhantomData<*const ()>,
}

impl ActivationScope {
    /// Opens a scope on this thread (inside any scope already open).
    pub fn new() -> ActivationScope {
        let id = NEXT_ID.with(|n| n.replace(n.get() + 1));
        let first_seq = LOG.with(|l| l.borrow().next_seq);
        OPEN.with(|o| {
            let mut o = o.borrow_mut();
            // The scopes already open take the peak of the window that ends here; the pool
            // starts a new one, which every scope then open (this one included) spans.
            let window = pool::take_thread_peak();
            for e in o.iter_mut() {
                e.peak = e.peak.max(window);
            }
            if o.is_empty() {
                set_observer(Some(OBSERVER));
            }
            o.push(Open { id, start: pool::thread_counts(), first_seq, peak: pool::stats().outstanding_bytes });
        });
        ActivationScope { id, heap_start: alloc_count::thread(), _not_send: PhantomData }
    }

    /// The figures so far (call it before the scope ends, while the step's handles that
    /// should be gone are gone).
    pub fn stats(&self) -> ScopeStats {
        let heap = alloc_count::is_installed().then(|| alloc_count::thread().since(self.heap_start));
        let (start, first_seq, peak) = OPEN
            .with(|o| o.borrow().iter().find(|e| e.id == self.id).map(|e| (e.start, e.first_seq, e.peak)))
            .unwrap_or((pool::thread_counts(), u64::MAX, 0));
        let pool = pool::thread_counts().since(start);
        ScopeStats {
            pool_requests: pool.requests,
            pool_bytes_requested: pool.bytes,
            pool_native_allocations: pool.native,
            peak_outstanding_bytes: peak.max(pool::thread_peak()),
            live_tensors_created: LOG.with(|l| l.borrow().count_live_since(first_seq)),
            heap_allocations: heap.map(|h| h.allocations),
            heap_bytes: heap.map(|h| h.bytes),
        }
    }

    /// Ends the scope and returns its figures.
    pub fn finish(self) -> ScopeStats {
        self.stats()
    }

    /// The tensors created in this scope that are still alive (new handles to them, in the
    /// order they were created), to find the one that keeps a step's activations: look at
    /// `shape()` and `grad_fn_name()`.
    pub fn live_tensors(&self) -> Vec<Tensor> {
        let first_seq = OPEN.with(|o| o.borrow().iter().find(|e| e.id == self.id).map(|e| e.first_seq)).unwrap_or(u64::MAX);
        let mut live: Vec<(u64, Tensor)> = LOG.with(|l| l.borrow().live_since(first_seq).collect());
        live.sort_by_key(|&(seq, _)| seq);
        live.into_iter().map(|(_, t)| t).collect()
    }
}

impl Default for ActivationScope {
    fn default() -> Self {
        ActivationScope::new()
    }
}

impl Drop for ActivationScope {
    /// Leaves the thread's open scopes wherever this one is among them (see the module
    /// documentation for scopes that end out of order).
    fn drop(&mut self) {
        let ended = OPEN.try_with(|o| {
            let mut o = o.borrow_mut();
            let at = o.iter().position(|e| e.id == self.id)?;
            let me = o.remove(at);
            Some((at == 0, o.is_empty(), me.peak))
        });
        let Ok(Some((outermost, none_open, peak))) = ended else { return };
        if none_open {
            set_observer(None);
            let _ = LOG.try_with(|l| l.borrow_mut().clear());
        }
        if outermost {
            pool::note_step_peak(peak.max(pool::thread_peak()));
        }
    }
}

/// Logs a tensor handle created on this thread while a scope is open.
fn track(t: &Tensor) {
    let _ = LOG.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            l.insert(Arc::downgrade(&t.0));
        }
    });
}

/// Drops this thread's log entry for a handle (whose last handle is going, so that its
/// allocation can be reused, or which became a leaf's gradient); a handle logged on another
/// thread, or no longer, is left alone.
fn forget(t: &Tensor) {
    let _ = LOG.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            l.remove(Arc::as_ptr(&t.0));
        }
    });
}

#[cfg(test)]
fn is_open() -> bool {
    OPEN.try_with(|o| !o.borrow().is_empty()).unwrap_or(false)
}

/// The log is compacted (dead entries dropped) before it grows past this many entries, so
/// a scope kept open around a whole training loop costs memory for its live tensors only.
const COMPACT_AT: usize = 4096;

/// One logged handle.
struct Entry {
    /// The order it was created in (scopes log from a sequence number on).
    seq: u64,
    handle: Weak<Inner>,
}

impl Entry {
    fn key(&self) -> usize {
        self.handle.as_ptr() as usize
    }
}

/// The weak handles of the tensors created while a scope is open, keyed by handle (the
/// address of its allocation, which a weak handle keeps from being reused): an
/// open-addressing table with linear probing, a power of two long and at most half full,
/// whose removal shifts entries back instead of leaving tombstones, so a steady step fills
/// the same table every time and never grows it.
struct Log {
    slots: Vec<Option<Entry>>,
    /// A table of the same length for rebuilding without allocating (compaction).
    spare: Vec<Option<Entry>>,
    len: usize,
    next_seq: u64,
}

impl Log {
    const fn new() -> Log {
        Log { slots: Vec::new(), spare: Vec::new(), len: 0, next_seq: 0 }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.len
    }

    /// The slot where a probe for `key` starts (Fibonacci hashing: the top bits of the
    /// product, which mix every bit of an aligned address).
    fn home(&self, key: usize) -> usize {
        let bits = self.slots.len().trailing_zeros();
        ((key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
    }

    fn insert(&mut self, handle: Weak<Inner>) {
        if 2 * (self.len + 1) > self.slots.len() {
            if self.len >= COMPACT_AT {
                self.rebuild(self.slots.len());
            }
            if 2 * (self.len + 1) > self.slots.len() {
                self.rebuild((2 * self.slots.len()).max(64));
            }
        }
        let entry = Entry { seq: self.next_seq, handle };
        self.next_seq += 1;
        self.place(entry);
        self.len += 1;
    }

    /// Puts `entry` in the first free slot from its home.
    fn place(&mut self, entry: Entry) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(entry.key());
        while self.slots[i].is_some() {
            i = (i + 1) & mask;
        }
        self.slots[i] = Some(entry);
    }

    /// Rehashes the live entries into a table of `len` slots (dead ones are dropped).
    fn rebuild(&mut self, len: usize) {
        let mut old = std::mem::take(&mut self.spare);
        std::mem::swap(&mut old, &mut self.slots);
        self.slots.clear();
        self.slots.resize_with(len, || None);
        self.len = 0;
        for e in old.iter_mut().filter_map(Option::take) {
            if e.handle.strong_count() > 0 {
                self.place(e);
                self.len += 1;
            }
        }
        self.spare = old;
    }

    fn remove(&mut self, key: *const Inner) {
        if self.len == 0 {
            return;
        }
        let (key, mask) = (key as usize, self.slots.len() - 1);
        let mut i = self.home(key);
        loop {
            match &self.slots[i] {
                None => return,
                Some(e) if e.key() == key => break,
                Some(_) => i = (i + 1) & mask,
            }
        }
        self.slots[i] = None;
        self.len -= 1;
        // Shift back the entries after the hole that a probe from their home would no
        // longer reach.
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let Some(e) = &self.slots[j] else { return };
            let home = self.home(e.key());
            let reachable = if i <= j { i < home && home <= j } else { i < home || home <= j };
            if !reachable {
                self.slots[i] = self.slots[j].take();
                i = j;
            }
        }
    }

    /// The live handles logged from sequence number `first_seq` on, with their numbers.
    fn live_since(&self, first_seq: u64) -> impl Iterator<Item = (u64, Tensor)> + '_ {
        self.slots.iter().flatten().filter(move |e| e.seq >= first_seq).filter_map(|e| Some((e.seq, Tensor(e.handle.upgrade()?))))
    }

    /// How many handles logged from sequence number `first_seq` on are alive.
    fn count_live_since(&self, first_seq: u64) -> usize {
        self.slots.iter().flatten().filter(|e| e.seq >= first_seq && e.handle.strong_count() > 0).count()
    }

    /// Empties the log, keeping its capacity.
    fn clear(&mut self) {
        self.slots.iter_mut().for_each(|s| *s = None);
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_nest_and_restore() {
        let outer = ActivationScope::new();
        let a = Tensor::zeros(&[100]).unwrap();
        {
            let inner = ActivationScope::new();
            let b = Tensor::zeros(&[50]).unwrap();
            let s = inner.stats();
            assert_eq!((s.pool_requests, s.live_tensors_created), (1, 1));
            drop(b);
            assert_eq!(inner.stats().live_tensors_created, 0);
        }
        let s = outer.stats();
        assert_eq!(s.pool_requests, 2, "inner requests count in the outer scope");
        assert_eq!(s.live_tensors_created, 1);
        drop(a);
        drop(outer);
        assert!(thread_is_clean());
    }

    #[test]
    fn a_long_scope_keeps_its_log_small() {
        let outer = ActivationScope::new();
        let kept_outer = Tensor::zeros(&[1]).unwrap();
        let mut inner_kept = Vec::new();
        for i in 0..3 * COMPACT_AT {
            drop(Tensor::zeros(&[2]).unwrap());
            if i == COMPACT_AT {
                let inner = ActivationScope::new();
                for j in 0..3 * COMPACT_AT {
                    let t = Tensor::zeros(&[3]).unwrap();
                    if j % 1000 == 0 {
                        inner_kept.push(t);
                    }
                }
                assert_eq!(inner.stats().live_tensors_created, inner_kept.len());
                assert!(inner.live_tensors().iter().all(|t| t.shape() == [3]));
            }
        }
        assert!(LOG.with(|l| l.borrow().len()) <= 2 * COMPACT_AT, "dead entries were dropped");
        assert_eq!(outer.stats().live_tensors_created, 1 + inner_kept.len());
        drop((kept_outer, inner_kept));
        assert_eq!(outer.stats().live_tensors_created, 0);
    }

    #[test]
    fn no_scope_logs_nothing() {
        let t = Tensor::zeros(&[3]).unwrap();
        assert!(LOG.with(|l| l.borrow().len() == 0));
        drop(t);
    }

    /// No scope open, nothing logged, and a new tensor is not logged (no observer).
    fn thread_is_clean() -> bool {
        let probe = Tensor::zeros(&[1]).unwrap();
        let clean = !is_open() && LOG.with(|l| l.borrow().len() == 0);
        drop(probe);
        clean
    }

    /// The outer scope ends first: the inner one keeps counting and logging (before, the
    /// outer's end switched the thread's accounting off and cleared the log under it), and
    /// once it ends too the thread is as if no scope had been opened.
    #[test]
    fn an_outer_scope_ended_first_leaves_the_inner_one_counting() {
        let outer = ActivationScope::new();
        let inner = ActivationScope::new();
        let before = Tensor::zeros(&[7]).unwrap();
        drop(outer);
        let t = Tensor::zeros(&[10]).unwrap();
        let s = inner.stats();
        assert_eq!((s.pool_requests, s.live_tensors_created), (2, 2));
        assert_eq!(inner.live_tensors().iter().map(|t| t.shape().to_vec()).collect::<Vec<_>>(), [vec![7], vec![10]]);
        drop(inner);
        assert!(thread_is_clean());
        // A scope opened now starts from nothing.
        let next = ActivationScope::new();
        let u = Tensor::zeros(&[5]).unwrap();
        let s = next.stats();
        assert_eq!((s.pool_requests, s.live_tensors_created), (1, 1));
        drop((next, t, u, before));
        assert!(thread_is_clean());
    }

    /// A middle scope ends first: the scopes around and inside it go on counting as nested
    /// scopes do, and when the innermost ends the thread accounts to the outermost again
    /// (before, it went on accounting to the ended middle scope, which the outer one never
    /// saw).
    #[test]
    fn a_middle_scope_ended_first_leaves_the_others_nested() {
        let outer = ActivationScope::new();
        let a = Tensor::zeros(&[3]).unwrap();
        let middle = ActivationScope::new();
        let inner = ActivationScope::new();
        drop(middle);
        let b = Tensor::zeros(&[4]).unwrap();
        assert_eq!((inner.stats().pool_requests, inner.stats().live_tensors_created), (1, 1));
        assert_eq!((outer.stats().pool_requests, outer.stats().live_tensors_created), (2, 2));
        drop(inner);
        assert_eq!(OPEN.with(|o| o.borrow().iter().map(|e| e.id).collect::<Vec<_>>()), [outer.id], "back to the outer scope");
        let c = Tensor::zeros(&[5]).unwrap();
        assert_eq!((outer.stats().pool_requests, outer.stats().live_tensors_created), (3, 3));
        drop(outer);
        assert!(thread_is_clean());
        drop((a, b, c));
    }

    /// Every order of ending three scopes leaves the thread clean, and while they end each
    /// open scope counts exactly the requests made after it opened.
    #[test]
    fn any_order_of_ending_three_scopes_counts_and_cleans_up() {
        for order in [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]] {
            let mut scopes: Vec<Option<ActivationScope>> = Vec::new();
            let mut made = Vec::new();
            for _ in 0..3 {
                scopes.push(Some(ActivationScope::new()));
                made.push(Tensor::zeros(&[2]).unwrap());
            }
            // Scope k saw the requests made after it opened: 3 − k.
            let mut seen = [3u64, 2, 1];
            for &k in &order {
                scopes[k] = None;
                made.push(Tensor::zeros(&[2]).unwrap());
                for (j, s) in scopes.iter().enumerate() {
                    if let Some(s) = s {
                        seen[j] += 1;
                        assert_eq!(s.stats().pool_requests, seen[j], "order {order:?}: scope {j} after scope {k} ended");
                    }
                }
            }
            assert!(thread_is_clean(), "order {order:?}");
        }
    }

    /// Removing handles in any order leaves every other one reachable (the backward shift
    /// of the open-addressing log), and a steady loop refills the same table: it never
    /// grows after the first round.
    #[test]
    fn the_log_finds_every_handle_and_a_steady_loop_keeps_its_table() {
        let scope = ActivationScope::new();
        let mut size = 0;
        for round in 0..5 {
            let mut made: Vec<Option<Tensor>> = (0..400).map(|_| Some(Tensor::zeros(&[1]).unwrap())).collect();
            for k in [3, 2, 1] {
                for (i, t) in made.iter_mut().enumerate() {
                    if (i * 7919 + round) % k == 0 {
                        *t = None;
                    }
                }
                let alive = made.iter().flatten().count();
                assert_eq!(scope.stats().live_tensors_created, alive);
                assert_eq!(LOG.with(|l| l.borrow().len()), alive, "every dropped handle's entry was found");
            }
            let slots = LOG.with(|l| l.borrow().slots.len());
            if round > 0 {
                assert_eq!(slots, size, "round {round} grew the table");
            }
            size = slots;
        }
    }
}
