//! `Storage`: one pooled buffer shared by a tensor and all its views, with the version
//! counter that every in-place write bumps (the engine compares it with the version
//! recorded when a tensor was saved for backward).

use crate::dtype::DType;
use crate::pool::Buffer;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

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
