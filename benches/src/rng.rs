//! A tiny deterministic generator for random block offsets (xorshift64*).

/// xorshift64*: fast, deterministic from its seed, good enough for spreading offsets.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator for stream `stream` (e.g. a task index); never zero-seeded.
    pub fn new(stream: u64) -> Self {
        XorShift((stream + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A random block index in `0..blocks_count` (`blocks_count > 0`).
    pub fn block_index(&mut self, blocks_count: u64) -> u64 {
        (self.next_u64() >> 11) % blocks_count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_stay_in_range_and_spread() {
        let mut r = XorShift::new(0);
        let mut seen = [false; 64];
        for _ in 0..10_000 {
            let i = r.block_index(64);
            assert!(i < 64);
            seen[i as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }
}
