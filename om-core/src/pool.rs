//! The buffer pool: every tensor buffer and every kernel scratch comes from here.
//!
//! Buffers are 64-byte aligned (they are made of [`Block`]s, 64 bytes each) and rounded up
//! to a size class (exact below 8 blocks, then four classes per doubling), so a warm
//! training step finds every request already pooled and allocates nothing:
//! [`stats`]`().native_allocations` stays put. Dropping a [`Buffer`] returns it to its class.
//! The pool never hands out uninitialised memory (recycled buffers hold old values; the
//! callers that need zeros ask for them).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// 64 bytes, 64-byte aligned: the unit of every pooled buffer.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
pub struct Block([u32; 16]);

/// Bytes in one [`Block`].
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
}

static NATIVE: AtomicU64 = AtomicU64::new(0);
static OUTSTANDING: AtomicU64 = AtomicU64::new(0);
static POOLED: AtomicU64 = AtomicU64::new(0);

type FreeLists = Mutex<HashMap<usize, Vec<Vec<Block>>>>;

fn free_lists() -> &'static FreeLists {
    static LISTS: OnceLock<FreeLists> = OnceLock::new();
    LISTS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The pool's counters now.
pub fn stats() -> PoolStats {
    PoolStats {
        native_allocations: NATIVE.load(Ordering::Relaxed),
        outstanding_bytes: OUTSTANDING.load(Ordering::Relaxed),
        pooled_bytes: POOLED.load(Ordering::Relaxed),
    }
}

/// Returns every pooled buffer to the system allocator.
pub fn trim() {
    let mut lists = free_lists().lock().unwrap_or_else(|e| e.into_inner());
    lists.clear();
    POOLED.store(0, Ordering::Relaxed);
}

/// The size class (in blocks) serving a request of `blocks` blocks.
pub fn size_class(blocks: usize) -> usize {
    if blocks < 8 {
        return blocks.max(1);
    }
    let top = usize::BITS - 1 - blocks.leading_zeros(); // 2^top <= blocks
    let quarter = 1usize << (top - 2);
    blocks.div_ceil(quarter) * quarter
}

/// A pooled, 64-byte aligned buffer. Returned to the pool on drop.
pub struct Buffer {
    blocks: Vec<Block>,
}

impl Buffer {
    /// A buffer of at least `bytes` bytes; its contents are unspecified (but initialised).
    pub fn new(bytes: usize) -> Buffer {
        let class = size_class(bytes.div_ceil(BLOCK_BYTES));
        let class_bytes = (class * BLOCK_BYTES) as u64;
        let reused = {
            let mut lists = free_lists().lock().unwrap_or_else(|e| e.into_inner());
            lists.get_mut(&class).and_then(|l| l.pop())
        };
        let blocks = match reused {
            Some(b) => {
                POOLED.fetch_sub(class_bytes, Ordering::Relaxed);
                b
            }
            None => {
                NATIVE.fetch_add(1, Ordering::Relaxed);
                vec![Block([0; 16]); class]
            }
        };
        OUTSTANDING.fetch_add(class_bytes, Ordering::Relaxed);
        Buffer { blocks }
    }

    /// A buffer of at least `bytes` bytes filled with zero bytes.
    pub fn zeroed(bytes: usize) -> Buffer {
        let mut b = Buffer::new(bytes);
        b.blocks.fill(Block([0; 16]));
        b
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
        POOLED.fetch_add(bytes, Ordering::Relaxed);
        let mut lists = free_lists().lock().unwrap_or_else(|e| e.into_inner());
        lists.entry(class).or_default().push(blocks);
    }
}

/// A pooled scratch of `len` doubles, zeroed, for sums that accumulate in f64.
pub struct F64Scratch {
    buf: Buffer,
    len: usize,
}

impl F64Scratch {
    /// `len` zeros.
    pub fn zeroed(len: usize) -> F64Scratch {
        F64Scratch { buf: Buffer::zeroed(len * 8), len }
    }

    /// The values.
    pub fn values(&mut self) -> &mut [f64] {
        &mut self.buf.f64_mut()[..self.len]
    }
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
    fn buffers_are_aligned_and_reused() {
        let a = Buffer::new(1000);
        assert_eq!(a.f32().as_ptr() as usize % 64, 0);
        let cap = a.capacity_bytes();
        drop(a);
        let before = stats().native_allocations;
        let b = Buffer::new(1000);
        assert_eq!(b.capacity_bytes(), cap);
        // Other tests may allocate concurrently, but this request is served from the pool
        // unless another thread took our buffer first; retry once to be robust.
        let after = stats().native_allocations;
        assert!(after - before <= 1);
    }
}
