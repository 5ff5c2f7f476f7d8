//! [`CountingAlloc`]: a [`GlobalAlloc`] over [`System`] that counts heap allocations and
//! their bytes, per thread and for the whole process. The library never installs it; a
//! binary or a test that wants heap figures does:
//!
//! ```
//! #[global_allocator]
//! static ALLOC: om_core::alloc_count::CountingAlloc = om_core::alloc_count::CountingAlloc;
//! ```
//!
//! [`ActivationScope`](crate::scope::ActivationScope) then reports the heap calls and bytes
//! of its thread in its [`ScopeStats`](crate::scope::ScopeStats). It lives under `kernels/`
//! only because implementing `GlobalAlloc` takes `unsafe`, which the project keeps there.
//!
//! An allocation is a call to `alloc`, `alloc_zeroed` or `realloc` (a `realloc` counts its
//! new size); frees are not counted. The thread counters are `const`-initialised cells
//! without destructors, so reading them inside the allocator never allocates or panics.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Heap allocation counters (see [`process`] and [`thread`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct HeapCounts {
    /// Calls to `alloc`, `alloc_zeroed` and `realloc`.
    pub allocations: u64,
    /// Bytes those calls asked for.
    pub bytes: u64,
}

static INSTALLED: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static T_ALLOCS: Cell<u64> = const { Cell::new(0) };
    static T_BYTES: Cell<u64> = const { Cell::new(0) };
}

/// The counting allocator: [`System`] plus counters.
pub struct CountingAlloc;

fn count(bytes: usize) {
    INSTALLED.store(true, Ordering::Relaxed);
    ALLOCS.fetch_add(1, Ordering::Relaxed);
    BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
    let _ = T_ALLOCS.try_with(|c| c.set(c.get() + 1));
    let _ = T_BYTES.try_with(|c| c.set(c.get() + bytes as u64));
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the
// counting touches only atomics and destructor-free thread-local cells (no allocation).
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which we pass on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through this allocator with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: `ptr` came from `System` through this allocator with `layout`; the caller
        // upholds `realloc`'s contract for `new_size`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Whether a [`CountingAlloc`] is installed (it has counted at least one allocation; every
/// Rust program allocates before `main`).
pub fn is_installed() -> bool {
    INSTALLED.load(Ordering::Relaxed)
}

/// Allocations of the whole process so far (zeros unless [`is_installed`]).
pub fn process() -> HeapCounts {
    HeapCounts { allocations: ALLOCS.load(Ordering::Relaxed), bytes: BYTES.load(Ordering::Relaxed) }
}

/// Allocations made by the calling thread so far (zeros unless [`is_installed`]).
pub fn thread() -> HeapCounts {
    HeapCounts { allocations: T_ALLOCS.with(Cell::get), bytes: T_BYTES.with(Cell::get) }
}

impl HeapCounts {
    /// The counts since `earlier`.
    pub fn since(self, earlier: HeapCounts) -> HeapCounts {
        HeapCounts { allocations: self.allocations - earlier.allocations, bytes: self.bytes - earlier.bytes }
    }
}
