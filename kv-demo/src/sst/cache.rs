//! The block cache: decoded-from-disk data blocks of every open table, shared by a store's
//! shards, bounded in bytes (RocksDB's `--cache_size`). Keys are `(table id, block offset)`;
//! table ids are never reused, so a deleted table's blocks are never served again and simply
//! age out.

use bytes::Bytes;

/// The cache proper: `(table id, block offset)` → block.
type Blocks = quick_cache::sync::Cache<(u64, u64), Bytes, BlockWeight>;

/// A shared block cache of at most `capacity` bytes of block data (0 = off).
#[derive(Clone)]
pub struct BlockCache {
    inner: Option<std::sync::Arc<Blocks>>,
}

/// Weighs a block by its length (at least 1).
#[derive(Clone, Copy)]
pub struct BlockWeight;

impl quick_cache::Weighter<(u64, u64), Bytes> for BlockWeight {
    fn weight(&self, _: &(u64, u64), block: &Bytes) -> u64 {
        block.len().max(1) as u64
    }
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity", &self.capacity())
            .field("bytes", &self.bytes())
            .finish()
    }
}

impl BlockCache {
    /// A cache holding at most `capacity_bytes` of blocks; 0 turns it off.
    pub fn new(capacity_bytes: u64) -> BlockCache {
        let inner = (capacity_bytes > 0).then(|| {
            // Estimated items: 4 KiB blocks.
            let items = (capacity_bytes / 4096).clamp(16, 1 << 24) as usize;
            std::sync::Arc::new(quick_cache::sync::Cache::with_weighter(
                items,
                capacity_bytes,
                BlockWeight,
            ))
        });
        BlockCache { inner }
    }

    /// The block of table `table` at `offset`, if cached.
    pub fn get(&self, table: u64, offset: u64) -> Option<Bytes> {
        self.inner.as_ref()?.get(&(table, offset))
    }

    /// Keeps a block.
    pub fn insert(&self, table: u64, offset: u64, block: Bytes) {
        if let Some(c) = &self.inner {
            c.insert((table, offset), block);
        }
    }

    /// The capacity in bytes (0 when off).
    pub fn capacity(&self) -> u64 {
        self.inner.as_ref().map_or(0, |c| c.capacity())
    }

    /// Bytes held now.
    pub fn bytes(&self) -> u64 {
        self.inner.as_ref().map_or(0, |c| c.weight())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_by_bytes_and_off_at_zero() {
        let c = BlockCache::new(64 << 10);
        for i in 0..100u64 {
            c.insert(1, i * 4096, Bytes::from(vec![i as u8; 4096]));
        }
        assert!(c.bytes() <= 64 << 10, "{} bytes held", c.bytes());
        assert_eq!(c.get(1, 99 * 4096).as_deref(), Some(&[99u8; 4096][..]));
        assert_eq!(c.get(2, 99 * 4096), None);
        let off = BlockCache::new(0);
        off.insert(1, 0, Bytes::from_static(b"x"));
        assert_eq!(off.get(1, 0), None);
        assert_eq!(off.capacity(), 0);
    }
}
