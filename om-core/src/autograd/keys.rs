//! Hash maps and sets keyed by an address or a `TypeId`: the engine's visited nodes and
//! their positions, the node recycler's record types. Their keys are a few machine words
//! the program itself makes (never input an adversary chooses), so one multiply per word
//! ([`AddrHasher`], the shape of rustc's FxHash) replaces the standard SipHash, which cost
//! more than the rest of the lookups: 8% of the instructions of `om bench sweep`'s chain of
//! 64 small operators with backward (callgrind, Intel Xeon model 167).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A map keyed by an address or a `TypeId`.
pub(crate) type AddrMap<K, V> = HashMap<K, V, BuildHasherDefault<AddrHasher>>;

/// A set of addresses.
pub(crate) type AddrSet<K> = HashSet<K, BuildHasherDefault<AddrHasher>>;

/// Multiplies each word in (after a rotation of what came before); the result is rotated so
/// that the product's well-mixed high bits pick the bucket.
#[derive(Default, Clone, Copy)]
pub(crate) struct AddrHasher(u64);

/// An odd constant with well-spread bits (2^64 / φ).
const K: u64 = 0x9E37_79B9_7F4A_7C15;

impl Hasher for AddrHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(K);
    }

    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }

    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash};

    /// Aligned addresses (low bits zero) still spread over the buckets and the tag bits.
    #[test]
    fn aligned_addresses_spread() {
        let build = BuildHasherDefault::<AddrHasher>::default();
        let hashes: Vec<u64> = (0..1024usize).map(|i| build.hash_one((0x7f00_0000_0000 + 64 * i) as *const ())).collect();
        let buckets: HashSet<u64> = hashes.iter().map(|h| h & 1023).collect();
        let tags: HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert!(buckets.len() > 600, "{} of 1024 buckets", buckets.len());
        assert!(tags.len() > 100, "{} of 128 tags", tags.len());
        let mut a = AddrHasher::default();
        std::any::TypeId::of::<u8>().hash(&mut a);
        let mut b = AddrHasher::default();
        std::any::TypeId::of::<u16>().hash(&mut b);
        assert_ne!(a.finish(), b.finish());
    }
}
