//! The block cache: decoded (checksummed and checked) data blocks of every open table, shared by a store's
//! shards, bounded in bytes (RocksDB's `--cache_size`). Keys are `(table id, block offset)`;
//! table ids are never reused, so a deleted table's blocks are never served again and simply
//! age out.

use super::block::Block;

/// The cache proper: `(table id, block offset)` → block.
type Blocks = quick_cache::sync::Cache<(u64, u64), Block, BlockWeight>;

/// A shared block cache of at most `capacity` bytes of block data (0 = off).
#[derive(Clone)]
pub struct BlockCache {
    inner: Option<std::sync::Arc<Blocks>>,
}

/// Weighs a block by its length (at least 1).
#[derive(Clone, Copy)]
pub struct BlockWeight;

impl quick_cache::Weighter<(u64, u64), Block> for BlockWeight {
    fn weight(&self, _: &(u64, u64), block: &Block) -> u64 {
        block.size().max(1) as u64
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
    pub fn get(&self, table: u64, offset: u64) -> Option<Block> {
        self.inner.as_ref()?.get(&(table, offset))
    }

    /// Keeps a block.
    pub fn insert(&self, table: u64, offset: u64, block: Block) {
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
    use bytes::Bytes;

    use super::super::block::{bytewise, BlockBuilder};
    use super::*;

    /// A block of about 4 KiB whose one entry's value is `fill`.
    fn block(fill: u8) -> Block {
        let mut b = BlockBuilder::new(16, bytewise);
        b.add(b"k", &[fill; 4080]);
        Block::decode(Bytes::from(b.finish())).unwrap()
    }

    fn value(b: &Block) -> Vec<u8> {
        b.iter().next().unwrap().unwrap().1.to_vec()
    }

    #[test]
    fn bounded_by_bytes_and_off_at_zero() {
        let c = BlockCache::new(64 << 10);
        for i in 0..100u64 {
            c.insert(1, i * 4096, block(i as u8));
        }
        assert!(c.bytes() <= 64 << 10, "{} bytes held", c.bytes());
        assert_eq!(
            c.get(1, 99 * 4096).map(|b| value(&b)),
            Some(vec![99u8; 4080])
        );
        assert!(c.get(2, 99 * 4096).is_none());
        let off = BlockCache::new(0);
        off.insert(1, 0, block(1));
        assert!(off.get(1, 0).is_none());
        assert_eq!(off.capacity(), 0);
    }
}
