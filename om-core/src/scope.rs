//! [`ActivationScope`] (spec section 3 in Rust terms): a guard opened around a training step
//! that accounts for the step's memory.
//!
//! While a scope is open on a thread, every buffer that thread requests from the [`pool`]
//! (an operator's output, a copying `contiguous`/`reshape`, a kernel scratch, the engine's
//! temporaries) is counted in it, and so are the requests the kernels' helper threads make
//! on its behalf inside `for_each_chunk` (they adopt the
//! caller's scope for the call). Every tensor handle created on the thread is remembered
//! (weakly), so that [`ActivationScope::stats`] can report the ones still alive: the handles
//! that keep a step's activations past the step. Leaf gradients written by `backward` are
//! never tied to a scope (they are not reported). The log of weak handles keeps its
//! capacity across steps (a warm step allocates nothing for it) and drops its dead entries
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
//! every scope open before them; the thread's accounting goes back to what it was before
//! the first of them once the last one ends; the log of tensors is kept while any scope is
//! open. A scope that ends while no scope opened before it is still open reports its peak
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
use crate::pool;
use crate::tensor::{Inner, Tensor};
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
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

/// The counters of one open scope, shared with the helper threads that adopt it.
struct Counters {
    requests: AtomicU64,
    bytes: AtomicU64,
    native: AtomicU64,
    peak: AtomicU64,
    parent: Option<Arc<Counters>>,
}

thread_local! {
    /// The innermost scope this thread accounts to (its own, or one adopted for a kernel call).
    static CURRENT: RefCell<Option<Arc<Counters>>> = const { RefCell::new(None) };
    /// The scopes open on this thread (adoption does not count), in the order they were
    /// opened: tensors are logged while one is open.
    static OPEN: RefCell<Vec<Open>> = const { RefCell::new(Vec::new()) };
    /// The id of the next scope opened on this thread.
    static NEXT_ID: Cell<u64> = const { Cell::new(0) };
    /// Tensors created while a scope is open; cleared (capacity kept) when the outermost
    /// ends, and compacted (dead entries dropped) when it would grow past [`COMPACT_AT`].
    static LOG: RefCell<Vec<Weak<Inner>>> = const { RefCell::new(Vec::new()) };
    /// The counters of the last scope that ended here, reused by the next one opened when
    /// nothing else holds them (so opening a scope per step allocates nothing when warm).
    static SPARE: RefCell<Option<Arc<Counters>>> = const { RefCell::new(None) };
}

impl Counters {
    /// Fresh counters under `parent`, in the spare allocation if it is free.
    fn open(parent: Option<Arc<Counters>>) -> Arc<Counters> {
        let peak = pool::stats().outstanding_bytes;
        let fresh = || Counters {
            requests: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            native: AtomicU64::new(0),
            peak: AtomicU64::new(peak),
            parent,
        };
        let spare = SPARE.try_with(|s| s.borrow_mut().take()).ok().flatten();
        match spare {
            Some(mut c) => match Arc::get_mut(&mut c) {
                Some(slot) => {
                    *slot = fresh();
                    c
                }
                None => Arc::new(fresh()),
            },
            None => Arc::new(fresh()),
        }
    }
}

/// One open scope in [`OPEN`].
struct Open {
    /// The scope's id (unique on its thread).
    id: u64,
    /// Where its tensors start in [`LOG`].
    start: usize,
    /// What the thread accounts to once this scope and every scope opened after it have
    /// ended: the accounting when it was opened, or, if the scope opened just before it
    /// ended first, what that one would have restored.
    prev: Option<Arc<Counters>>,
}

/// The log is compacted instead of grown once it holds this many entries, so a scope kept
/// open around a whole training loop costs memory for its live tensors only.
const COMPACT_AT: usize = 4096;

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
    counters: Arc<Counters>,
    /// This scope's id in [`OPEN`].
    id: u64,
    heap_start: HeapCounts,
    /// Scopes are per thread.
    _not_send: PhantomData<*const ()>,
}

impl ActivationScope {
    /// Opens a scope on this thread (inside any scope already open).
    pub fn new() -> ActivationScope {
        let prev = CURRENT.with(|c| c.borrow().clone());
        let counters = Counters::open(prev.clone());
        CURRENT.with(|c| *c.borrow_mut() = Some(counters.clone()));
        let start = LOG.with(|l| l.borrow().len());
        let id = NEXT_ID.with(|n| n.replace(n.get() + 1));
        OPEN.with(|o| o.borrow_mut().push(Open { id, start, prev }));
        ActivationScope { counters, id, heap_start: alloc_count::thread(), _not_send: PhantomData }
    }

    /// The figures so far (call it before the scope ends, while the step's handles that
    /// should be gone are gone).
    pub fn stats(&self) -> ScopeStats {
        let heap = alloc_count::is_installed().then(|| alloc_count::thread().since(self.heap_start));
        let c = &self.counters;
        ScopeStats {
            pool_requests: c.requests.load(Ordering::Relaxed),
            pool_bytes_requested: c.bytes.load(Ordering::Relaxed),
            pool_native_allocations: c.native.load(Ordering::Relaxed),
            peak_outstanding_bytes: c.peak.load(Ordering::Relaxed),
            live_tensors_created: LOG.with(|l| l.borrow()[self.log_start()..].iter().filter(|w| w.strong_count() > 0).count()),
            heap_allocations: heap.map(|h| h.allocations),
            heap_bytes: heap.map(|h| h.bytes),
        }
    }

    /// Ends the scope and returns its figures.
    pub fn finish(self) -> ScopeStats {
        self.stats()
    }

    /// The tensors created in this scope that are still alive (new handles to them), to
    /// find the one that keeps a step's activations: look at `shape()` and `grad_fn_name()`.
    pub fn live_tensors(&self) -> Vec<Tensor> {
        LOG.with(|l| l.borrow()[self.log_start()..].iter().filter_map(Weak::upgrade).map(Tensor).collect())
    }

    fn log_start(&self) -> usize {
        OPEN.with(|o| o.borrow().iter().find(|e| e.id == self.id).map(|e| e.start)).unwrap_or(0)
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
            if at == o.len() {
                // The innermost: the thread accounts to what was there before it.
                let _ = CURRENT.try_with(|c| *c.borrow_mut() = me.prev);
            } else {
                // Scopes opened after this one are still open: the next one restores, when
                // it ends, what this one would have (this scope's counters stay in their
                // chain of parents, counted but no longer read).
                o[at].prev = me.prev;
            }
            Some((at == 0, o.is_empty()))
        });
        let Ok(Some((outermost, none_open))) = ended else { return };
        if none_open {
            let _ = LOG.try_with(|l| l.borrow_mut().clear());
        }
        if outermost {
            pool::note_step_peak(self.counters.peak.load(Ordering::Relaxed));
        }
        let _ = SPARE.try_with(|s| *s.borrow_mut() = Some(self.counters.clone()));
    }
}

/// Called by the pool for every request made on this thread.
pub(crate) fn on_pool_request(bytes: u64, native: bool, outstanding_now: u64) {
    let _ = CURRENT.try_with(|c| {
        let Ok(c) = c.try_borrow() else { return };
        let mut level = c.as_deref();
        while let Some(l) = level {
            l.requests.fetch_add(1, Ordering::Relaxed);
            l.bytes.fetch_add(bytes, Ordering::Relaxed);
            if native {
                l.native.fetch_add(1, Ordering::Relaxed);
            }
            l.peak.fetch_max(outstanding_now, Ordering::Relaxed);
            level = l.parent.as_deref();
        }
    });
}

/// Called for every tensor handle created (one line in `Tensor::from_storage`).
pub(crate) fn track(t: &Tensor) {
    if is_open() {
        LOG.with(|l| {
            let mut l = l.borrow_mut();
            if l.len() >= COMPACT_AT && l.len() == l.capacity() {
                OPEN.with(|o| compact(&mut l, &mut o.borrow_mut()));
            }
            t.0.log_slot.store(l.len(), Ordering::Relaxed);
            l.push(Arc::downgrade(&t.0));
        });
    }
}

fn is_open() -> bool {
    OPEN.try_with(|o| !o.borrow().is_empty()).unwrap_or(false)
}

/// Drops the log's dead entries, moving each open scope's start to match (the starts
/// increase in the order the scopes were opened).
fn compact(log: &mut Vec<Weak<Inner>>, open: &mut [Open]) {
    let (mut kept, mut scope) = (0, 0);
    for i in 0..log.len() {
        while scope < open.len() && open[scope].start <= i {
            open[scope].start = kept;
            scope += 1;
        }
        if let Some(t) = log[i].upgrade() {
            t.log_slot.store(kept, Ordering::Relaxed);
            log.swap(kept, i);
            kept += 1;
        }
    }
    for s in &mut open[scope..] {
        s.start = kept;
    }
    log.truncate(kept);
}

/// Drops this thread's log entry for a tensor whose last handle is going (so that its
/// allocation can be reused); a tensor logged on another thread, or no longer, is left alone.
pub(crate) fn forget(inner: &Arc<Inner>) {
    let (i, ptr) = (inner.log_slot.load(Ordering::Relaxed), Arc::as_ptr(inner));
    let _ = LOG.try_with(|l| {
        let Ok(mut l) = l.try_borrow_mut() else { return };
        if l.get(i).is_some_and(|w| std::ptr::eq(w.as_ptr(), ptr)) {
            l[i] = Weak::new();
        }
    });
}

/// Forgets a tensor that became a leaf's gradient: leaf gradients are never tied to a scope.
pub(crate) fn untrack(t: &Tensor) {
    if !is_open() {
        return;
    }
    let ptr = Arc::as_ptr(&t.0);
    LOG.with(|l| {
        let mut l = l.borrow_mut();
        if let Some(i) = l.iter().rposition(|w| std::ptr::eq(w.as_ptr(), ptr)) {
            l[i] = Weak::new();
        }
    });
}

/// The calling thread's scope, captured for the helper threads of one parallel call.
pub(crate) struct Inherited(Option<Arc<Counters>>);

impl Inherited {
    /// The scope open on this thread, if any.
    pub(crate) fn capture() -> Inherited {
        Inherited(CURRENT.with(|c| c.borrow().clone()))
    }

    /// Makes this thread account to the captured scope until the guard drops.
    pub(crate) fn adopt(&self) -> Adopted {
        let Some(counters) = &self.0 else { return Adopted(None) };
        Adopted(Some(CURRENT.with(|c| c.borrow_mut().replace(counters.clone()))))
    }
}

/// Restores a helper thread's own scope (see [`Inherited::adopt`]).
pub(crate) struct Adopted(Option<Option<Arc<Counters>>>);

impl Drop for Adopted {
    fn drop(&mut self) {
        if let Some(prev) = self.0.take() {
            CURRENT.with(|c| *c.borrow_mut() = prev);
        }
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
        assert!(!is_open());
        assert!(CURRENT.with(|c| c.borrow().is_none()));
        assert!(LOG.with(|l| l.borrow().is_empty()));
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
        assert!(LOG.with(|l| l.borrow().is_empty()));
        drop(t);
    }

    fn thread_is_clean() -> bool {
        !is_open() && CURRENT.with(|c| c.borrow().is_none()) && LOG.with(|l| l.borrow().is_empty())
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
        assert!(Arc::ptr_eq(CURRENT.with(|c| c.borrow().clone()).as_ref().unwrap(), &outer.counters), "back to the outer scope");
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
}
