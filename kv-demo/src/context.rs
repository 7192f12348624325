//! What every shard of a store shares: the file system, the block cache, the runtime, the
//! options, the sequence numbers, the snapshots and every shard's log.

use std::sync::Arc;

use ziob_zonefs::ZoneFs;

use crate::durable::ShardLog;
use crate::options::Options;
use crate::snapshot::{Sequencer, SnapshotRegistry};
use crate::sst::cache::BlockCache;
use crate::sst::table::TableOptions;

/// What every shard of a store shares.
#[derive(Debug)]
pub struct StoreCtx {
    /// The zone file system holding the tables.
    pub fs: ZoneFs,
    /// The block cache of all tables.
    pub cache: BlockCache,
    /// The runtime (background work is spawned on the shards' cores).
    pub handle: ziob::runtime::Handle,
    /// The store's options.
    pub opts: Options,
    /// The store's sequence numbers.
    pub seq: Sequencer,
    /// The live snapshots.
    pub snapshots: Arc<SnapshotRegistry>,
    /// Every shard's log (a flush syncs all their WALs, see a shard's flush).
    pub logs: Vec<ShardLog>,
}

impl StoreCtx {
    /// How tables are built.
    pub fn table_options(&self) -> TableOptions {
        TableOptions {
            bloom_bits_per_key: self.opts.bloom_bits_per_key,
            ..TableOptions::default()
        }
    }
}
