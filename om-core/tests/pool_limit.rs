//! The pool gives memory back: buffers returned beyond the cache limit are freed, lowering
//! the limit or `trim` frees cached buffers now, the automatic limit follows the peak of
//! the recent steps (outermost activation scopes), and the counters stay exact throughout.
//! One test, since the pool and its limit are process-wide.

use om_core::pool::{self, Buffer, CACHE_FLOOR_BYTES};
use om_core::ActivationScope;

const MIB: usize = 1 << 20;

#[test]
fn the_pool_keeps_at_most_its_cache_limit() {
    // A fixed limit: two of four returned 512 KiB buffers stay cached, two are freed.
    pool::set_cache_limit(Some(MIB as u64));
    let s0 = pool::stats();
    let bufs: Vec<Buffer> = (0..4).map(|_| Buffer::try_new(MIB / 2).unwrap()).collect();
    let class = bufs[0].capacity_bytes() as u64;
    assert_eq!(class, (MIB / 2) as u64, "512 KiB is a size class");
    let s1 = pool::stats();
    assert_eq!(s1.outstanding_bytes - s0.outstanding_bytes, 4 * class);
    assert!(s1.peak_outstanding_bytes >= s1.outstanding_bytes);
    assert_eq!(s1.requested_bytes - s0.requested_bytes, 4 * class);
    drop(bufs);
    let s2 = pool::stats();
    assert_eq!(s2.outstanding_bytes, s0.outstanding_bytes);
    assert!(s2.pooled_bytes <= MIB as u64);
    assert_eq!(s2.native_frees - s1.native_frees, (s1.pooled_bytes + 4 * class - s2.pooled_bytes) / class);

    // What stayed cached is served again without a native allocation.
    let cached = (s2.pooled_bytes / class) as usize;
    assert!(cached >= 1);
    let again: Vec<Buffer> = (0..cached).map(|_| Buffer::try_new(MIB / 2).unwrap()).collect();
    assert_eq!(pool::stats().native_allocations, s2.native_allocations);
    drop(again);

    // Lowering the limit frees cached buffers at once; `trim` frees them all.
    pool::set_cache_limit(Some(0));
    assert_eq!(pool::stats().pooled_bytes, 0);
    let b = Buffer::try_new(1000).unwrap();
    drop(b);
    assert_eq!(pool::stats().pooled_bytes, 0, "nothing is cached under a zero limit");
    pool::set_cache_limit(None);
    drop(Buffer::try_new(1000).unwrap());
    assert!(pool::stats().pooled_bytes > 0);
    pool::trim();
    assert_eq!(pool::stats().pooled_bytes, 0);

    // The automatic limit: twice the peak of the recent steps, at least the floor. A big
    // step raises it; small steps afterwards bring it back down and free the excess.
    let big = 40 * MIB;
    {
        let _scope = ActivationScope::new();
        let held: Vec<Buffer> = (0..4).map(|_| Buffer::try_new(big / 4).unwrap()).collect();
        drop(held);
    }
    assert!(pool::cache_limit() >= 2 * big as u64);
    let kept_after_big = pool::stats().pooled_bytes;
    assert!(kept_after_big >= big as u64, "the big step's buffers stay cached for the next step");
    for _ in 0..pool::RECENT_STEPS {
        let _scope = ActivationScope::new();
        drop(Buffer::try_new(1000).unwrap());
    }
    let s3 = pool::stats();
    assert!(pool::cache_limit() < 2 * big as u64);
    assert!(pool::cache_limit() >= CACHE_FLOOR_BYTES);
    assert!(s3.pooled_bytes <= pool::cache_limit(), "moving on to small steps gave the big buffers back");
    assert!(s3.pooled_bytes < kept_after_big);
}
