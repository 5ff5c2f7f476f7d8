//! The pool's cache keeps the size classes in use when it is full: buffers of classes used
//! less recently (another model's, after a switch) are evicted first, so a step whose
//! buffers fit under the cache limit comes back to allocating nothing. One test binary of
//! its own: the pool and its counters are process-wide.

use om_core::pool::{self, Buffer};

/// `n` buffers of `bytes` each, held at once, then all returned.
fn step(n: usize, bytes: usize) -> u64 {
    let before = pool::stats().native_allocations;
    let held: Vec<Buffer> = (0..n).map(|_| Buffer::try_new(bytes).unwrap()).collect();
    drop(held);
    pool::stats().native_allocations - before
}

#[test]
fn a_full_cache_evicts_the_least_recently_used_classes_first() {
    pool::trim();
    // 4 MiB of cache; "model A" leaves 8 × 256 KiB (2 MiB) cached, "model B" then needs
    // 12 buffers of one 320 KiB class (3.75 MiB): all of B fits only once A's class goes.
    let limit: u64 = 4 << 20;
    pool::set_cache_limit(Some(limit));
    let (a, b) = (256 << 10, 320 << 10);
    assert_eq!(step(8, a), 8);
    assert_eq!(pool::stats().pooled_bytes, 8 * a as u64);
    assert_eq!(step(12, b), 12, "the first step of B allocates its buffers");
    for i in 2..6 {
        assert_eq!(step(12, b), 0, "step {i} of B reuses every buffer (A's class was evicted for them)");
    }
    // B's buffers, and of A's only as many as still fit beside them (evicted one at a time).
    let a_left = ((limit - 12 * b as u64) / a as u64).min(8);
    assert_eq!(pool::stats().pooled_bytes, 12 * b as u64 + a_left * a as u64, "B's buffers stay cached, A's make room");

    // Trimming also lets go of the least recently used class first: A (used before B).
    pool::set_cache_limit(None);
    pool::trim();
    assert_eq!(step(2, a), 2);
    assert_eq!(step(2, b), 2);
    pool::trim_to(2 * b as u64);
    assert_eq!(step(2, b), 0, "B, used last, stays cached");
    assert_eq!(step(2, a), 2, "A, used first, was trimmed");
    pool::trim();
}
