//! Values exactly as db_bench 7.8.3 makes them (`RandomGenerator` in
//! `tools/db_bench_tool.cc`): a buffer of at least 1 MiB built from 100-byte pieces, each a
//! random printable string of `100 × compression_ratio` bytes repeated to 100 bytes
//! (`test::CompressibleString`, so a compressor shrinks it to about that fraction), with
//! `Random(301)`; each value is the next `value_size` bytes of the buffer, wrapping to the
//! start when the rest is too short.

use std::sync::Arc;

use super::rng::Random;

/// db_bench's value generator. A clone shares the data and starts at its beginning, as
/// every db_bench thread's own `RandomGenerator` does.
#[derive(Debug)]
pub struct ValueGenerator {
    data: Arc<[u8]>,
    pos: usize,
}

impl Clone for ValueGenerator {
    fn clone(&self) -> ValueGenerator {
        ValueGenerator {
            data: self.data.clone(),
            pos: 0,
        }
    }
}

impl ValueGenerator {
    /// The generator for values of up to `max_value_size` bytes with db_bench's
    /// `--compression_ratio` (0.5 by default).
    pub fn new(max_value_size: usize, compression_ratio: f64) -> ValueGenerator {
        let mut rnd = Random::new(301);
        let target = max_value_size.max(1 << 20);
        let mut data = Vec::with_capacity(target + 100);
        while data.len() < target {
            // CompressibleString(&rnd, ratio, 100, &piece)
            let raw = ((100.0 * compression_ratio) as usize).max(1);
            let raw_data = rnd.random_string(raw);
            let mut piece = Vec::with_capacity(100 + raw);
            while piece.len() < 100 {
                piece.extend_from_slice(&raw_data);
            }
            piece.truncate(100);
            data.extend_from_slice(&piece);
        }
        ValueGenerator {
            data: data.into(),
            pos: 0,
        }
    }

    /// The next value of `len` bytes (`len` at most the buffer's size).
    pub fn generate(&mut self, len: usize) -> &[u8] {
        assert!(
            len <= self.data.len(),
            "value larger than the generator's data"
        );
        if self.pos + len > self.data.len() {
            self.pos = 0;
        }
        self.pos += len;
        &self.data[self.pos - len..self.pos]
    }
}
