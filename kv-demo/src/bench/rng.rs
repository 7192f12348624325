//! The two random number generators of db_bench 7.8.3, bit for bit, so that the same
//! `--seed` gives kv-demo exactly the keys and values db_bench uses.
//!
//! - [`Random`]: RocksDB's `util/random.h` `Random`, the Park–Miller "minimal standard"
//!   generator (`seed = seed * 16807 mod 2^31-1`); db_bench builds its value data with it
//!   (seeded with 301).
//! - [`Random64`]: RocksDB's `Random64`, which is `std::mt19937_64`; each benchmark thread
//!   draws its keys from one, seeded with `--seed` + the thread's number in the process
//!   (db_bench's `ThreadState(index, ++total_thread_count_)`).

use rand_mt::Mt64;

/// RocksDB's 31-bit `Random` (Park–Miller, multiplier 16807, modulus 2^31 − 1).
#[derive(Debug, Clone)]
pub struct Random {
    seed: u32,
}

impl Random {
    const M: u32 = 2_147_483_647;
    const A: u64 = 16_807;

    /// Seeded as RocksDB's `Random(s)` (a seed of 0 or a multiple of 2^31 − 1 becomes 1).
    pub fn new(s: u32) -> Random {
        let s = s & Self::M;
        Random {
            seed: if s != 0 { s } else { 1 },
        }
    }

    /// The next value in `[1, 2^31 − 2]`.
    pub fn next_u32(&mut self) -> u32 {
        let product = u64::from(self.seed) * Self::A;
        // (product % M) using ((x << 31) % M) == x, as RocksDB computes it.
        let mut seed = ((product >> 31) + (product & u64::from(Self::M))) as u32;
        if seed > Self::M {
            seed -= Self::M;
        }
        self.seed = seed;
        seed
    }

    /// A value in `[0, n)` (`Next() % n`), `n > 0`.
    pub fn uniform(&mut self, n: u32) -> u32 {
        self.next_u32() % n
    }

    /// `len` printable bytes `' '..='~'` (RocksDB's `RandomString`).
    pub fn random_string(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| b' ' + self.uniform(95) as u8).collect()
    }
}

/// RocksDB's `Random64`: a 64-bit Mersenne Twister (`std::mt19937_64`).
pub struct Random64 {
    mt: Mt64,
}

impl Random64 {
    /// Seeded as `std::mt19937_64(seed)`.
    pub fn new(seed: u64) -> Random64 {
        Random64 {
            mt: Mt64::new(seed),
        }
    }

    /// The next 64-bit value.
    pub fn next_u64(&mut self) -> u64 {
        self.mt.next_u64()
    }
}

impl std::fmt::Debug for Random64 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Random64(mt19937_64)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn park_miller_and_mt19937_64_known_values() {
        // Park–Miller from seed 1: 16807, 282475249, 1622650073 (the published sequence).
        let mut r = Random::new(1);
        assert_eq!(
            [r.next_u32(), r.next_u32(), r.next_u32()],
            [16807, 282475249, 1622650073]
        );
        assert_eq!(Random::new(0).next_u32(), 16807);
        // std::mt19937_64 with its default seed 5489: the 10000th value is
        // 9981545732273789042 (C++ standard, [rand.predef]).
        let mut m = Random64::new(5489);
        let mut v = 0;
        for _ in 0..10_000 {
            v = m.next_u64();
        }
        assert_eq!(v, 9_981_545_732_273_789_042);
    }
}
