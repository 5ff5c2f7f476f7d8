//! `Storage`: one pooled buffer shared by a tensor and all its views, with the version
//! counter that every in-place write bumps (the engine compares it with the version
//! recorded when a tensor was saved for backward).
//!
//! The shared allocation of a storage is recycled per thread (`shared`, `release`, through
//! the one [`Recycler`](crate::recycle::Recycler)): when its last handle goes, its buffer
//! goes back to the pool and the emptied allocation waits for the next tensor built on that
//! thread, so a warm step allocates none.

use crate::dtype::DType;
use crate::pool::Buffer;
use crate::recycle::{take_last, Recycler};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

thread_local! {
    /// Emptied storage allocations, each with no other handle.
    static RECYCLED: Recycler<Storage> = const { Recycler::new() };
    /// What a released handle's slot holds until the handle is gone.
    static PLACEHOLDER: Arc<Storage> = Arc::new(Storage::new(Buffer::empty(), 0, DType::F32));
}

/// A shared storage of `buffer` (holding `len` elements of `dtype`), in a recycled
/// allocation when this thread has one.
pub(crate) fn shared(buffer: Buffer, len: usize, dtype: DType) -> Arc<Storage> {
    Recycler::arc(&RECYCLED, Storage::new(buffer, len, dtype))
}

/// This thread's empty placeholder storage (a clone of one handle), or `None` while the
/// thread is being torn down.
pub(crate) fn placeholder() -> Option<Arc<Storage>> {
    PLACEHOLDER.try_with(Arc::clone).ok()
}

/// Gives up one handle on a storage (a tensor handle being dropped): when it is the last,
/// the buffer goes back to the pool now and the allocation is kept for [`shared`].
pub(crate) fn release(slot: &mut Arc<Storage>) {
    let empty = |s: &mut Storage| drop(std::mem::replace(s.data.get_mut().unwrap_or_else(|e| e.into_inner()), Buffer::empty()));
    if let Some(emptied) = take_last(slot, placeholder, empty) {
        Recycler::keep(&RECYCLED, emptied);
    }
}

/// A buffer of `len` elements of one dtype, shared by views.
pub struct Storage {
    data: RwLock<Buffer>,
    len: usize,
    dtype: DType,
    version: AtomicU64,
}

impl Storage {
    /// Wraps a pooled buffer holding `len` elements of `dtype`.
    pub fn new(buffer: Buffer, len: usize, dtype: DType) -> Storage {
        debug_assert!(buffer.capacity_bytes() >= len * dtype.size());
        Storage { data: RwLock::new(buffer), len, dtype, version: AtomicU64::new(0) }
    }

    /// Elements held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the storage holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The version counter: the number of in-place writes so far.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Shared read access to the buffer.
    pub fn read(&self) -> RwLockReadGuard<'_, Buffer> {
        self.data.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Exclusive write access for an in-place write; bumps the version.
    pub fn write(&self) -> RwLockWriteGuard<'_, Buffer> {
        self.version.fetch_add(1, Ordering::AcqRel);
        self.data.write().unwrap_or_else(|e| e.into_inner())
    }
}
