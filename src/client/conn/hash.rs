//! The hasher of the connection's maps (requests in flight by xid, watches by path): a
//! word at a time, one rotate, xor and multiply per word (the Fx hash rustc uses for its own
//! tables), where std's default `SipHash`-1-3 took about 6% of a lock cycle's instructions
//! (callgrind, issue 44).
//!
//! `SipHash`'s random keys defend a map against keys chosen to collide; these maps hold only
//! keys the client itself put in (the xids it numbers, the paths its callers watch): a
//! server's reply or event only looks one up, so it cannot fill a map with collisions.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` with [`FastHasher`].
pub(super) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// Fx hashing: `h = (h.rotl(5) ^ word) * K` per 8-byte word (a shorter tail as one word,
/// with its length).
#[derive(Default, Clone, Copy)]
pub(super) struct FastHasher(u64);

/// An odd constant with well-spread bits (2^64 / the golden ratio, as rustc's Fx hash).
const K: u64 = 0x9e37_79b9_7f4a_7c15;

impl FastHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut b = [0; 8];
            b.copy_from_slice(w);
            self.add(u64::from_le_bytes(b));
        }
        let tail = words.remainder();
        if !tail.is_empty() {
            // Its length in the last byte, which a tail of at most 7 leaves free: so a
            // tail is never taken for itself with zeros after it.
            let mut b = [0; 8];
            b[..tail.len()].copy_from_slice(tail);
            b[7] = tail.len() as u8;
            self.add(u64::from_le_bytes(b));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_i32(&mut self, n: i32) {
        self.add(u64::from(n as u32));
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::hash::BuildHasher;

    fn hash<T: std::hash::Hash + ?Sized>(v: &T) -> u64 {
        BuildHasherDefault::<FastHasher>::default().hash_one(v)
    }

    #[test]
    fn sequential_xids_spread_over_the_buckets() {
        // hashbrown picks a bucket by the low bits and tags it by the top 7: both vary.
        let hashes: Vec<u64> = (1..=4096i32).map(|x| hash(&x)).collect();
        let low: HashSet<u64> = hashes.iter().map(|h| h & 0xfff).collect();
        let top: HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert_eq!(low.len(), 4096, "4,096 xids in 4,096 low-bit buckets");
        assert_eq!(top.len(), 128, "every top-7-bit tag used");
    }

    #[test]
    fn paths_that_differ_anywhere_hash_apart() {
        let base = "/locks/orders/_c_0f9e8d7c-6b5a-4938-8271-605f4e3d2c1b-lock-0000000001";
        let mut seen = HashSet::new();
        for i in 0..base.len() {
            let mut p = base.as_bytes().to_vec();
            p[i] ^= 1;
            assert!(
                seen.insert(hash(std::str::from_utf8(&p).unwrap())),
                "at {i}"
            );
        }
        // A tail shorter than a word is not taken for itself with zeros after it.
        assert_ne!(hash("/a"), hash("/a\0"));
        let map: FastMap<String, i32> = [("/a".to_string(), 1), ("/b".to_string(), 2)]
            .into_iter()
            .collect();
        assert_eq!(map.get("/b"), Some(&2));
    }
}
