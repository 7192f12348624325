//! The table file: data blocks, then the bloom filter, then the index block, then a fixed
//! 48-byte footer; every block is followed by the CRC-32C of its bytes. Written front to back
//! in one pass (zones take only sequential writes), read with a footer read, an index read and
//! one block read per lookup. Byte layout: `docs/format.md`, "kv-demo SSTable blocks" →
//! "Table file".

use std::collections::VecDeque;
use std::future::Future;

use bytes::Bytes;

use super::block::{key_head, Block, BlockBuilder, BlockIter, KeyOrder};
use super::bloom::{Bloom, BloomBuilder};
use super::cache::BlockCache;
use crate::error::{CorruptionError, Result};
use crate::varint;

/// The footer's magic number (`"KVDEMOT1"` as little-endian bytes).
pub const TABLE_MAGIC: u64 = u64::from_le_bytes(*b"KVDEMOT1");
/// The table format version this code writes and reads.
pub const TABLE_VERSION: u32 = 1;
/// The footer's size in bytes.
pub const FOOTER_BYTES: usize = 48;

/// How tables are built.
#[derive(Debug, Clone, Copy)]
pub struct TableOptions {
    /// A data block is closed once it holds at least this many bytes (default 4 KiB, the
    /// device block).
    pub block_bytes: usize,
    /// Restart interval of data blocks (default 16; index blocks use 1).
    pub restart_interval: usize,
    /// Bloom filter bits per key; 0 = no filter (default 10).
    pub bloom_bits_per_key: u32,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_bytes: 4096,
            restart_interval: super::block::DEFAULT_RESTART_INTERVAL,
            bloom_bits_per_key: 10,
        }
    }
}

/// Where a block is in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHandle {
    /// Offset of the block's first byte.
    pub offset: u64,
    /// The block's length, without its 4-byte checksum.
    pub len: u64,
}

impl BlockHandle {
    fn encode(&self, out: &mut Vec<u8>) {
        varint::put(out, self.offset);
        varint::put(out, self.len);
    }

    fn decode(buf: &[u8]) -> Result<BlockHandle> {
        let bad = || CorruptionError::new("index entry: block handle");
        let (offset, n) = varint::get(buf).ok_or_else(bad)?;
        let (len, m) = varint::get(&buf[n..]).ok_or_else(bad)?;
        if n + m != buf.len() {
            return Err(bad());
        }
        Ok(BlockHandle { offset, len })
    }
}

/// What a finished table holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSummary {
    /// Entries in the table.
    pub entries: u64,
    /// The file's size in bytes.
    pub file_bytes: u64,
    /// The first key (empty for an empty table).
    pub first_key: Vec<u8>,
    /// The last key (empty for an empty table).
    pub last_key: Vec<u8>,
}

/// Builds a table from entries in strictly increasing key order, streaming: the bytes of
/// closed blocks can be taken ([`take_ready`](Self::take_ready)) while entries still come.
#[derive(Debug)]
pub struct TableBuilder {
    opts: TableOptions,
    order: KeyOrder,
    filter_key: fn(&[u8]) -> &[u8],
    data: BlockBuilder,
    index: BlockBuilder,
    bloom: Option<BloomBuilder>,
    out: Vec<u8>,
    /// File offset of `out[0]`.
    out_offset: u64,
    entries: u64,
    first_key: Vec<u8>,
}

impl TableBuilder {
    /// A builder for keys in `order`; the bloom filter is built over `filter_key(key)` (a
    /// store's user key, without its sequence number).
    pub fn new(opts: TableOptions, order: KeyOrder, filter_key: fn(&[u8]) -> &[u8]) -> Self {
        TableBuilder {
            opts,
            order,
            filter_key,
            data: BlockBuilder::new(opts.restart_interval, order),
            index: BlockBuilder::new(1, order),
            bloom: (opts.bloom_bits_per_key > 0)
                .then(|| BloomBuilder::new(opts.bloom_bits_per_key)),
            out: Vec::new(),
            out_offset: 0,
            entries: 0,
            first_key: Vec::new(),
        }
    }

    /// Adds an entry (keys strictly increasing in the builder's order; see
    /// [`BlockBuilder::add`]).
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        if self.entries == 0 {
            self.first_key = key.to_vec();
        }
        if let Some(b) = &mut self.bloom {
            b.add((self.filter_key)(key));
        }
        self.data.add(key, value);
        self.entries += 1;
        if self.data.encoded_len() >= self.opts.block_bytes {
            self.close_data_block();
        }
    }

    /// Bytes the file has so far (taken or not).
    pub fn file_bytes(&self) -> u64 {
        self.out_offset + self.out.len() as u64
    }

    /// Entries added.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Bytes of closed blocks not taken yet.
    pub fn ready_bytes(&self) -> usize {
        self.out.len()
    }

    /// The bytes of closed blocks not taken yet (they are the file's next bytes). The
    /// builder goes on in a buffer of the same capacity (no growing it again block by
    /// block, copying what it holds at each doubling).
    pub fn take_ready(&mut self) -> Vec<u8> {
        let capacity = self.out.capacity();
        let taken = std::mem::replace(&mut self.out, Vec::with_capacity(capacity));
        self.out_offset += taken.len() as u64;
        taken
    }

    fn write_block(&mut self, block: &[u8]) -> BlockHandle {
        let handle = BlockHandle {
            offset: self.file_bytes(),
            len: block.len() as u64,
        };
        self.out.extend_from_slice(block);
        self.out
            .extend_from_slice(&crc32c::crc32c(block).to_le_bytes());
        handle
    }

    fn close_data_block(&mut self) {
        if self.data.is_empty() {
            return;
        }
        let last = self.data.last_key().to_vec();
        let full = std::mem::replace(
            &mut self.data,
            BlockBuilder::new(self.opts.restart_interval, self.order),
        );
        let handle = self.write_block(&full.finish());
        let mut v = Vec::new();
        handle.encode(&mut v);
        self.index.add(&last, &v);
    }

    /// Ends the table: the last data block, the filter, the index and the footer. Returns the
    /// bytes not taken yet and what the table holds.
    pub fn finish(mut self) -> (Vec<u8>, TableSummary) {
        let last_key = self.data.last_key().to_vec();
        let last_key = if self.data.is_empty() {
            self.index.last_key().to_vec()
        } else {
            last_key
        };
        self.close_data_block();
        let filter = match self.bloom.take() {
            Some(b) => self.write_block(&b.finish()),
            None => BlockHandle { offset: 0, len: 0 },
        };
        let index = std::mem::replace(&mut self.index, BlockBuilder::new(1, self.order));
        let index = self.write_block(&index.finish());
        let mut footer = Vec::with_capacity(FOOTER_BYTES);
        footer.extend_from_slice(&filter.offset.to_le_bytes());
        footer.extend_from_slice(&(filter.len as u32).to_le_bytes());
        footer.extend_from_slice(&index.offset.to_le_bytes());
        footer.extend_from_slice(&(index.len as u32).to_le_bytes());
        footer.extend_from_slice(&self.entries.to_le_bytes());
        footer.extend_from_slice(&TABLE_VERSION.to_le_bytes());
        footer.extend_from_slice(&crc32c::crc32c(&footer).to_le_bytes());
        footer.extend_from_slice(&TABLE_MAGIC.to_le_bytes());
        debug_assert_eq!(footer.len(), FOOTER_BYTES);
        self.out.extend_from_slice(&footer);
        let summary = TableSummary {
            entries: self.entries,
            file_bytes: self.file_bytes(),
            first_key: std::mem::take(&mut self.first_key),
            last_key,
        };
        (self.out, summary)
    }
}

/// Where a table's bytes are read from (a zone file, memory in tests).
pub trait TableSource {
    /// Reads exactly `len` bytes at `offset` (an error if the file is shorter).
    fn read_at(&self, offset: u64, len: usize) -> impl Future<Output = std::io::Result<Bytes>>;
}

/// Why a table could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// The source failed.
    #[error("reading the table: {0}")]
    Io(#[from] std::io::Error),
    /// The bytes are not a valid table.
    #[error(transparent)]
    Corrupt(#[from] CorruptionError),
}

/// An open table: its footer, index and filter in memory; data blocks read on demand
/// through the block cache.
#[derive(Debug)]
pub struct Table<S> {
    source: S,
    /// The table's id in the block cache (unique for the cache's lifetime).
    id: u64,
    cache: BlockCache,
    order: KeyOrder,
    filter_key: fn(&[u8]) -> &[u8],
    index: Block,
    /// The [`key_head`] of the filter key of each restart point of the index (every index
    /// entry is one, as written); empty for an index without entries or with a damaged
    /// restart entry (then searched whole). Most of an index search runs over these
    /// numbers, in one array, instead of over the index block's scattered keys.
    index_heads: Vec<u64>,
    filter: Option<Bytes>,
    entries: u64,
}

impl<S: TableSource> Table<S> {
    /// Opens the table of `file_bytes` bytes in `source`, keys in `order`, filter over
    /// `filter_key(key)` (both as when it was built). Its data blocks are cached in `cache`
    /// under `id`, which no other table of that cache may ever use.
    ///
    /// Keys whose filter keys differ must compare in `order` as their filter keys do
    /// bytewise (so it is for a store's internal keys with their user keys, and for bytewise
    /// order with whole keys): the index search first narrows by filter-key prefixes.
    pub async fn open(
        source: S,
        file_bytes: u64,
        order: KeyOrder,
        filter_key: fn(&[u8]) -> &[u8],
        cache: &BlockCache,
        id: u64,
    ) -> std::result::Result<Self, TableError> {
        if file_bytes < FOOTER_BYTES as u64 {
            return Err(CorruptionError::new(format!(
                "table: {file_bytes} bytes, shorter than a footer"
            ))
            .into());
        }
        let f = source
            .read_at(file_bytes - FOOTER_BYTES as u64, FOOTER_BYTES)
            .await?;
        let u64_at = |at: usize| u64::from_le_bytes(f[at..at + 8].try_into().unwrap());
        let u32_at = |at: usize| u32::from_le_bytes(f[at..at + 4].try_into().unwrap());
        if u64_at(40) != TABLE_MAGIC {
            return Err(
                CorruptionError::new("table footer: bad magic (not a kv-demo table)").into(),
            );
        }
        if crc32c::crc32c(&f[..36]) != u32_at(36) {
            return Err(CorruptionError::new("table footer: checksum mismatch").into());
        }
        if u32_at(32) != TABLE_VERSION {
            return Err(CorruptionError::new(format!(
                "table footer: version {} (this build reads {TABLE_VERSION})",
                u32_at(32)
            ))
            .into());
        }
        let filter = BlockHandle {
            offset: u64_at(0),
            len: u64::from(u32_at(8)),
        };
        let index = BlockHandle {
            offset: u64_at(12),
            len: u64::from(u32_at(20)),
        };
        let body = file_bytes - FOOTER_BYTES as u64;
        for (what, h) in [("filter", filter), ("index", index)] {
            if h.offset
                .checked_add(h.len)
                .and_then(|e| e.checked_add(4))
                .is_none_or(|e| e > body)
            {
                return Err(CorruptionError::new(format!(
                    "table footer: {what} block {h:?} past the table's {body} bytes"
                ))
                .into());
            }
        }
        let index = Block::decode(read_block(&source, index).await?)?;
        // A damaged index entry is met (as an error) by the seeks and scans that reach it,
        // the entries before it stay readable: then the index is searched without heads.
        let index_heads = (0..index.restart_count())
            .map(|i| Ok(key_head(filter_key(index.restart_key(i)?))))
            .collect::<Result<Vec<u64>>>()
            .unwrap_or_default();
        let filter = if filter.len == 0 {
            None
        } else {
            let bytes = read_block(&source, filter).await?;
            Bloom::decode(&bytes)?;
            Some(bytes)
        };
        Ok(Table {
            source,
            id,
            cache: cache.clone(),
            order,
            filter_key,
            index,
            index_heads,
            filter,
            entries: u64_at(24),
        })
    }

    /// Entries in the table.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Whether the filter rules out every key whose filter key is `filter_key` (`false`:
    /// it may be there).
    pub fn filter_excludes(&self, filter_key: &[u8]) -> bool {
        self.filter.as_ref().is_some_and(|f| {
            !Bloom::decode(f)
                .expect("checked at open")
                .may_contain(filter_key)
        })
    }

    /// The first entry at or after `target`, if any; `None` right away when the filter
    /// rules out `target`'s filter key and `exact_filter_key` is set (a point lookup).
    pub async fn seek_first(
        &self,
        target: &[u8],
        exact_filter_key: bool,
    ) -> std::result::Result<Option<(Vec<u8>, Bytes)>, TableError> {
        if exact_filter_key && self.filter_excludes((self.filter_key)(target)) {
            return Ok(None);
        }
        let mut it = self.iter_from(target).await?;
        it.next().await
    }

    /// An iterator at the first entry at or after `target` (`&[]` with bytewise order: the
    /// first entry).
    pub async fn iter_from(
        &self,
        target: &[u8],
    ) -> std::result::Result<TableIter<'_, S>, TableError> {
        let cursor = self.cursor_from(target).await?;
        Ok(TableIter {
            table: self,
            cursor,
        })
    }

    /// A [`Cursor`] at the first entry at or after `target`: the position of an iterator
    /// without a borrow of the table, for iterators that own their table (an `Arc`).
    pub async fn cursor_from(&self, target: &[u8]) -> std::result::Result<Cursor, TableError> {
        self.cursor_for(target, CursorUse::Lookup).await
    }

    /// [`Table::cursor_from`] for `reader`: a compaction's cursor reads ahead from its first
    /// block, in bigger pieces, and leaves the block cache as it was.
    pub async fn cursor_for(
        &self,
        target: &[u8],
        reader: CursorUse,
    ) -> std::result::Result<Cursor, TableError> {
        // Index entries whose filter keys' heads are below the target's are before it,
        // those above after it: only entries with the same head need their keys compared.
        let (lo, hi) = if self.index_heads.is_empty() {
            (0, self.index.restart_count())
        } else {
            let head = key_head((self.filter_key)(target));
            let below = self.index_heads.partition_point(|&h| h < head);
            let upto = below + self.index_heads[below..].partition_point(|&h| h == head);
            (below.saturating_sub(1), upto)
        };
        let mut c = Cursor {
            index: self.index.seek_within(target, self.order, lo, hi)?,
            block: None,
            ahead: VecDeque::new(),
            loaded: 0,
            pending: None,
            bad_handle: false,
            reader,
        };
        if let Some(block) = self.next_block(&mut c).await? {
            c.block = Some(block.seek(target, self.order)?);
        }
        Ok(c)
    }

    /// The entry at `cursor` (a cursor of this table), moving it on; `None` at the end.
    pub async fn cursor_next(
        &self,
        cursor: &mut Cursor,
    ) -> std::result::Result<Option<(Vec<u8>, Bytes)>, TableError> {
        Ok(if self.cursor_step(cursor).await? {
            Some((cursor.key().to_vec(), cursor.value_bytes()))
        } else {
            None
        })
    }

    /// Moves `cursor` (a cursor of this table) to its next entry: `true` if there is one
    /// (then [`Cursor::key`] and [`Cursor::value`] are it), `false` at the end. Cancel-safe:
    /// a call dropped at its await (a block read) loses no entry, the next call goes on.
    pub async fn cursor_step(&self, cursor: &mut Cursor) -> std::result::Result<bool, TableError> {
        loop {
            if let Some(it) = &mut cursor.block {
                if it.step()? {
                    return Ok(true);
                }
            }
            match self.next_block(cursor).await? {
                Some(block) => cursor.block = Some(block.iter()),
                None => {
                    cursor.block = None;
                    return Ok(false);
                }
            }
        }
    }

    /// The cursor's next data block. Cancel-safe: the block's handle stays in the cursor
    /// until the block is read, so a call dropped at its read (or failed) reads the same
    /// block again next time instead of skipping it.
    async fn next_block(&self, c: &mut Cursor) -> std::result::Result<Option<Block>, TableError> {
        if let Some(block) = c.ahead.pop_front() {
            return Ok(Some(block));
        }
        let handle = match c.pending {
            Some(h) => h,
            None => {
                // A damaged index entry errs on this call and every later one (the index
                // iterator stays failed; a handle that does not decode is kept as the
                // error): a retry never skips to the next block or ends the table early.
                if c.bad_handle {
                    return Err(CorruptionError::new("index entry: block handle").into());
                }
                if !c.index.step()? {
                    return Ok(None);
                }
                let h =
                    BlockHandle::decode(c.index.value()).inspect_err(|_| c.bad_handle = true)?;
                c.pending = Some(h);
                c.loaded = c.loaded.saturating_add(1);
                h
            }
        };
        // The cache keeps decoded (checked) blocks: a hit costs no checksum and no
        // restart-array check.
        if let Some(block) = self.cache.get(self.id, handle.offset) {
            c.pending = None;
            return Ok(Some(block));
        }
        if c.loaded < c.reader.readahead_after() {
            let block = Block::decode(read_block(&self.source, handle).await?)?;
            if c.reader == CursorUse::Lookup {
                self.cache.insert(self.id, handle.offset, block.clone());
            }
            c.pending = None;
            return Ok(Some(block));
        }
        // A sequential cursor: the following blocks that lie right after this one, up to
        // READAHEAD_BYTES, come with the same read, cached ones included: after point reads
        // the cache holds scattered blocks, and stopping at each would cut the read-ahead
        // into reads of a block or two (a scan after readrandom ran at half the speed). A
        // cached block is taken from the cache, not decoded again. The cursor's index moves
        // past them only once they are read (cancel-safe); `after[j]` is the index past block
        // `j + 1` of the read.
        let mut handles = vec![handle];
        let mut after: Vec<BlockIter> = Vec::new();
        let mut end = block_end(handle)?;
        while end - handle.offset < READAHEAD_BYTES {
            let mut peek = after.last().unwrap_or(&c.index).clone();
            let Some(Ok((_, h))) = peek.next() else { break };
            let Ok(h) = BlockHandle::decode(&h) else {
                break;
            };
            if h.offset != end {
                break;
            }
            let Ok(e) = block_end(h) else { break };
            if e - handle.offset > READAHEAD_BYTES {
                // Reads stay within the limit (and so within their buffer's size class).
                break;
            }
            end = e;
            handles.push(h);
            after.push(peek);
        }
        // Cached blocks at the end of the window are not read: the cursor finds them in the
        // cache when it gets there (only those between uncached ones come with the read).
        while handles.len() > 1 {
            let last = handles[handles.len() - 1];
            if self.cache.get(self.id, last.offset).is_none() {
                break;
            }
            handles.pop();
            after.pop();
            end = last.offset;
        }
        let len = usize::try_from(end - handle.offset)
            .map_err(|_| CorruptionError::new(format!("blocks up to {end}")))?;
        let bytes = self.source.read_at(handle.offset, len).await?;
        let mut blocks = Vec::with_capacity(handles.len());
        for (i, h) in handles.iter().enumerate() {
            // The first and the last block were just found uncached; only those between
            // may be in the cache.
            if i > 0 && i + 1 < handles.len() {
                if let Some(cached) = self.cache.get(self.id, h.offset) {
                    blocks.push(cached);
                    continue;
                }
            }
            let at = (h.offset - handle.offset) as usize;
            let block = check_block(bytes.slice(at..at + h.len as usize + 4), *h)
                .and_then(|data| Ok(Block::decode(data)?));
            match block {
                Ok(block) => blocks.push(block),
                // The first block's error is this call's; a later one is met (and read
                // again) when the cursor gets there.
                Err(e) if blocks.is_empty() => return Err(e),
                Err(_) => break,
            }
        }
        // Blocks read ahead are not cached: a scan that reads ahead would push the point
        // reads' blocks out of the cache for blocks it reads once (scan resistance), and a
        // cached slice of the read would keep the whole read's buffer alive.
        if blocks.len() > 1 {
            c.index = after.swap_remove(blocks.len() - 2);
        }
        c.pending = None;
        let mut blocks = blocks.into_iter();
        let first = blocks.next();
        c.ahead.extend(blocks);
        Ok(first)
    }
}

/// The data block (counted from 1) with which a lookup cursor starts reading ahead: the
/// blocks before it are loaded one by one (a seek reads one or two).
const READAHEAD_AFTER: u32 = 3;
/// Most bytes of data blocks one read-ahead reads.
const READAHEAD_BYTES: u64 = 64 << 10;

/// Who reads through a [`Cursor`], which decides how it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorUse {
    /// A point lookup or a scan: its first two blocks (`READAHEAD_AFTER` − 1; a seek reads
    /// one or two) are read one by one and go into the block cache; from the third on it
    /// reads ahead, 64 KiB (`READAHEAD_BYTES`) at a time, and those blocks are not cached (a long
    /// scan reads them once; cached, they would push out the point reads' blocks, and a
    /// cached slice of a read keeps the whole read's buffer alive).
    Lookup,
    /// A compaction: it reads every block of its inputs once, so it reads ahead from its
    /// first block (64 KiB at a time: reads of 1 MiB, fewer calls to the zone's
    /// core, cost a 2-core host 17–29 % of fillrandom and overwrite and 63 % more CPU with
    /// `O_DIRECT`, not looked into), and fills no cache (RocksDB's `fill_cache = false` for
    /// compaction reads): its inputs are deleted when it ends, and their blocks would push
    /// the readers' blocks out.
    Compaction,
}

impl CursorUse {
    /// The data block (counted from 1) with which the cursor starts reading ahead.
    fn readahead_after(self) -> u32 {
        match self {
            CursorUse::Lookup => READAHEAD_AFTER,
            CursorUse::Compaction => 0,
        }
    }
}

/// Where the block at `h` and its checksum end.
fn block_end(h: BlockHandle) -> std::result::Result<u64, TableError> {
    h.offset
        .checked_add(h.len)
        .and_then(|e| e.checked_add(4))
        .filter(|_| usize::try_from(h.len).is_ok_and(|l| l.checked_add(4).is_some()))
        .ok_or_else(|| CorruptionError::new(format!("block length {}", h.len)).into())
}

/// Reads a block and checks its checksum.
async fn read_block<S: TableSource>(
    source: &S,
    h: BlockHandle,
) -> std::result::Result<Bytes, TableError> {
    let len = usize::try_from(h.len)
        .ok()
        .filter(|l| l.checked_add(4).is_some())
        .ok_or_else(|| CorruptionError::new(format!("block length {}", h.len)))?;
    check_block(source.read_at(h.offset, len + 4).await?, h)
}

/// Checks the checksum of the block at `h` read with its checksum (`h.len + 4` bytes).
fn check_block(mut bytes: Bytes, h: BlockHandle) -> std::result::Result<Bytes, TableError> {
    let len = h.len as usize;
    let crc = bytes.split_off(len);
    if crc32c::crc32c(&bytes) != u32::from_le_bytes(crc[..].try_into().unwrap()) {
        return Err(CorruptionError::new(format!(
            "table: block at {} ({} bytes): checksum mismatch",
            h.offset, h.len
        ))
        .into());
    }
    Ok(bytes)
}

/// Where an iteration over one table stands (index and data block positions); moved on by
/// [`Table::cursor_next`] of the table that made it.
#[derive(Debug)]
pub struct Cursor {
    index: BlockIter,
    block: Option<BlockIter>,
    /// Data blocks read ahead (the index is already past them), in order.
    ahead: VecDeque<Block>,
    /// Data blocks taken from the index so far (read-ahead starts at its reader's
    /// [`CursorUse::readahead_after`]).
    loaded: u32,
    /// The data block taken from the index and not read yet (a read dropped or failed).
    pending: Option<BlockHandle>,
    /// The index entry taken last held no valid block handle: every later read errs.
    bad_handle: bool,
    /// Who reads: how it reads ahead and whether it fills the block cache.
    reader: CursorUse,
}

impl Cursor {
    /// The current entry's key (valid after a [`Table::cursor_step`] that gave `true`).
    pub fn key(&self) -> &[u8] {
        self.block.as_ref().map_or(&[], |b| b.key())
    }

    /// The current entry's value.
    pub fn value(&self) -> &[u8] {
        self.block.as_ref().map_or(&[], |b| b.value())
    }

    /// The current entry's value, sharing the block's memory.
    pub fn value_bytes(&self) -> Bytes {
        self.block
            .as_ref()
            .map_or_else(Bytes::new, |b| b.value_bytes())
    }
}

/// Entries of a [`Table`] in key order, from where it was positioned.
#[derive(Debug)]
pub struct TableIter<'a, S> {
    table: &'a Table<S>,
    cursor: Cursor,
}

impl<S: TableSource> TableIter<'_, S> {
    /// The next entry, or `None` at the end.
    pub async fn next(&mut self) -> std::result::Result<Option<(Vec<u8>, Bytes)>, TableError> {
        self.table.cursor_next(&mut self.cursor).await
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use futures::executor::block_on;
    use proptest::prelude::*;

    use super::super::block::bytewise;
    use super::*;

    /// A table in memory; counts the reads (`.1`) and the bytes they asked for (`.2`).
    struct Mem(Bytes, std::cell::Cell<usize>, std::cell::Cell<usize>);

    impl TableSource for Mem {
        async fn read_at(&self, offset: u64, len: usize) -> std::io::Result<Bytes> {
            self.1.set(self.1.get() + 1);
            self.2.set(self.2.get() + len);
            let end = (offset as usize)
                .checked_add(len)
                .filter(|&e| e <= self.0.len())
                .ok_or_else(|| std::io::Error::other("read past the end"))?;
            Ok(self.0.slice(offset as usize..end))
        }
    }

    /// 5,000 entries (the key number big-endian, 50 bytes of it as the value) and the table
    /// they make with the default options: about 80 blocks, for the read-ahead tests.
    fn numbered_table() -> (BTreeMap<Vec<u8>, Vec<u8>>, Vec<u8>) {
        let entries: BTreeMap<Vec<u8>, Vec<u8>> = (0u64..5000)
            .map(|i| (i.to_be_bytes().to_vec(), vec![i as u8; 50]))
            .collect();
        let (file, _) = build(&entries, TableOptions::default());
        (entries, file)
    }

    fn whole(k: &[u8]) -> &[u8] {
        k
    }

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    fn build(entries: &BTreeMap<Vec<u8>, Vec<u8>>, opts: TableOptions) -> (Vec<u8>, TableSummary) {
        let mut b = TableBuilder::new(opts, bytewise, whole);
        let mut file = Vec::new();
        for (i, (k, v)) in entries.iter().enumerate() {
            b.add(k, v);
            if i % 7 == 0 {
                file.extend(b.take_ready());
            }
        }
        let (rest, summary) = b.finish();
        file.extend(rest);
        assert_eq!(file.len() as u64, summary.file_bytes);
        (file, summary)
    }

    fn open(file: Vec<u8>) -> std::result::Result<Table<Mem>, TableError> {
        open_cached(file, &BlockCache::new(0))
    }

    fn open_cached(
        file: Vec<u8>,
        cache: &BlockCache,
    ) -> std::result::Result<Table<Mem>, TableError> {
        let n = file.len() as u64;
        let source = Mem(Bytes::from(file), Default::default(), Default::default());
        block_on(Table::open(source, n, bytewise, whole, cache, 1))
    }

    #[test]
    fn cached_blocks_are_not_read_again() {
        let entries: BTreeMap<Vec<u8>, Vec<u8>> = (0u64..500)
            .map(|i| (i.to_be_bytes().to_vec(), vec![7; 50]))
            .collect();
        let (file, _) = build(&entries, TableOptions::default());
        let cache = BlockCache::new(1 << 20);
        let t = open_cached(file, &cache).unwrap();
        let all: Entries = entries.clone().into_iter().collect();
        // Seeks to every key: each block is read once, then served from the cache.
        let seek_all = || {
            for k in entries.keys() {
                let got = block_on(t.seek_first(k, true)).unwrap().unwrap();
                assert_eq!(&got.0, k);
            }
        };
        seek_all();
        let reads = t.source.1.get();
        assert!(reads > 0);
        seek_all();
        assert_eq!(t.source.1.get(), reads, "a second pass read the source");
        assert!(cache.bytes() > 0);
        // A scan reads its first blocks through the cache (all cached now) and reads ahead
        // only from an uncached block: it reads nothing either.
        assert_eq!(scan(&t, b"").unwrap(), all);
        assert_eq!(
            t.source.1.get(),
            reads,
            "a scan of cached blocks read the source"
        );
    }

    /// Blocks a scan reads ahead, and every block a compaction reads, stay out of the block
    /// cache (a long scan or a compaction reads each once; cached, they would push out the
    /// point reads' blocks); a compaction's cursor reads ahead from its first block.
    #[test]
    fn read_ahead_and_compaction_blocks_are_not_cached() {
        let (entries, file) = numbered_table();
        let blocks = (file.len() / 4096) as u64;
        let all: Entries = entries.clone().into_iter().collect();
        // A scan caches the blocks it read one by one (the first two), no more.
        let cache = BlockCache::new(64 << 20);
        let t = open_cached(file.clone(), &cache).unwrap();
        assert_eq!(scan(&t, b"").unwrap(), all);
        let cached = cache.bytes();
        assert!(cached > 0 && cached < 3 * 4200, "{cached} bytes cached");
        // A compaction's cursor: nothing cached, one read per ~64 KiB from the first block.
        let cache = BlockCache::new(64 << 20);
        let t = open_cached(file.clone(), &cache).unwrap();
        let opened = t.source.1.get();
        let seen = block_on(async {
            let mut c = t.cursor_for(b"", CursorUse::Compaction).await.unwrap();
            let mut n = 0;
            while t.cursor_step(&mut c).await.unwrap() {
                n += 1;
            }
            n
        });
        assert_eq!(seen, all.len());
        assert_eq!(cache.bytes(), 0, "a compaction filled the cache");
        let reads = (t.source.1.get() - opened) as u64;
        let max_reads = (file.len() as u64).div_ceil(READAHEAD_BYTES - 4200) + 1;
        assert!(
            reads <= max_reads,
            "a compaction's pass over {blocks} blocks took {reads} reads"
        );
    }

    /// After point reads have cached scattered blocks, a scan still reads ahead in reads of
    /// up to READAHEAD_BYTES (through the cached blocks), not one read per uncached run.
    #[test]
    fn a_scan_after_point_reads_still_reads_ahead() {
        let (entries, file) = numbered_table();
        let blocks = (file.len() / 4096) as u64;
        let cache = BlockCache::new(64 << 20);
        let t = open_cached(file.clone(), &cache).unwrap();
        // Seeded point reads: some blocks cached, some not, in no pattern.
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..40 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = (x % 5000).to_be_bytes();
            let got = block_on(t.seek_first(&k, true)).unwrap().unwrap();
            assert_eq!(got.0, k.to_vec());
        }
        let cached_blocks = cache.bytes() / 4096;
        assert!(
            cached_blocks >= 10 && cached_blocks * 2 < blocks,
            "{cached_blocks} of {blocks} blocks cached"
        );
        let before = t.source.1.get() as u64;
        let all: Entries = entries.into_iter().collect();
        assert_eq!(scan(&t, b"").unwrap(), all);
        let reads = t.source.1.get() as u64 - before;
        // The first blocks one by one, then one read per READAHEAD_BYTES at most.
        let max_reads =
            (READAHEAD_AFTER as u64 - 1) + (file.len() as u64).div_ceil(READAHEAD_BYTES - 4200) + 1;
        assert!(
            reads <= max_reads,
            "a scan of {blocks} blocks ({cached_blocks} cached) took {reads} reads, at most {max_reads} expected"
        );
    }

    /// A read-ahead from an uncached block reads no cached blocks at the end of its window:
    /// with every block cached but the few that hold only keys 300..400, a scan reads just
    /// those blocks' bytes.
    #[test]
    fn read_ahead_does_not_read_cached_blocks_at_the_end_of_its_window() {
        let (entries, file) = numbered_table();
        let cache = BlockCache::new(64 << 20);
        let t = open_cached(file, &cache).unwrap();
        let all: Entries = entries
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        // Every block cached by seeks to its keys, except the blocks that hold only keys in
        // 300..400.
        let (skip_from, skip_to) = (300u64, 400u64);
        for (i, k) in entries.keys().enumerate() {
            if !(skip_from..skip_to).contains(&(i as u64)) {
                let got = block_on(t.seek_first(k, true)).unwrap().unwrap();
                assert_eq!(&got.0, k);
            }
        }
        let (reads, bytes) = (t.source.1.get(), t.source.2.get());
        assert_eq!(scan(&t, b"").unwrap(), all);
        let (reads, bytes) = (t.source.1.get() - reads, t.source.2.get() - bytes);
        // The keys 300..400 lie in at most three blocks not cached whole (blocks hold about
        // 60 keys); each read of the scan covers uncached blocks only.
        assert!(reads <= 3, "{reads} reads");
        assert!(
            bytes <= 3 * 4200,
            "the scan read {bytes} bytes in {reads} reads"
        );
    }

    #[test]
    fn sequential_scans_read_ahead_and_seeks_do_not() {
        let (entries, file) = numbered_table();
        let blocks = file.len() / 4096;
        assert!(blocks > 40, "{blocks} blocks");
        // No cache: what a scan sees comes from its read-ahead alone.
        let t = open(file).unwrap();
        let opened = t.source.1.get();
        let all: Entries = entries.clone().into_iter().collect();
        assert_eq!(scan(&t, b"").unwrap(), all);
        let reads = t.source.1.get() - opened;
        assert!(
            reads * 8 < blocks,
            "a full scan of {blocks} blocks took {reads} reads"
        );
        // From the middle too.
        let from = 2500u64.to_be_bytes();
        assert_eq!(scan(&t, &from).unwrap(), all[2500..].to_vec());
        // A seek reads one block.
        let before = t.source.1.get();
        let got = block_on(t.seek_first(&4000u64.to_be_bytes(), false)).unwrap();
        assert_eq!(got.unwrap().0, 4000u64.to_be_bytes().to_vec());
        assert_eq!(t.source.1.get() - before, 1);
    }

    fn scan(t: &Table<Mem>, from: &[u8]) -> std::result::Result<Entries, TableError> {
        block_on(async {
            let mut it = t.iter_from(from).await?;
            let mut out = Vec::new();
            while let Some((k, v)) = it.next().await? {
                out.push((k, v.to_vec()));
            }
            Ok(out)
        })
    }

    #[test]
    fn empty_table_round_trips() {
        let (file, summary) = build(&BTreeMap::new(), TableOptions::default());
        assert_eq!(summary.entries, 0);
        let t = open(file).unwrap();
        assert_eq!(t.entries(), 0);
        assert!(scan(&t, b"").unwrap().is_empty());
        assert_eq!(block_on(t.seek_first(b"a", true)).unwrap(), None);
    }

    #[test]
    fn not_a_table_is_corruption() {
        for file in [vec![], vec![0u8; 47], vec![0u8; 4096]] {
            assert!(matches!(open(file), Err(TableError::Corrupt(_))));
        }
    }

    #[test]
    fn filter_rules_out_absent_keys() {
        let entries: BTreeMap<Vec<u8>, Vec<u8>> = (0u64..2000)
            .map(|i| ((2 * i).to_be_bytes().to_vec(), vec![1; 10]))
            .collect();
        let (file, _) = build(&entries, TableOptions::default());
        let t = open(file).unwrap();
        let excluded = (0u64..2000)
            .filter(|i| t.filter_excludes(&(2 * i + 1).to_be_bytes()))
            .count();
        assert!(
            excluded > 1900,
            "only {excluded} of 2000 absent keys excluded"
        );
        for i in 0u64..2000 {
            assert!(!t.filter_excludes(&(2 * i).to_be_bytes()));
        }
    }

    /// `file` with its index block replaced by `entries` (restart interval 1), then
    /// `damage` applied to the new index block's bytes (its checksum and the footer made to
    /// match again, so only the index's decoder can notice).
    fn with_index(
        file: &[u8],
        entries: &[(Vec<u8>, Vec<u8>)],
        damage: impl FnOnce(&mut Vec<u8>),
    ) -> Vec<u8> {
        let n = file.len();
        let mut footer = file[n - FOOTER_BYTES..].to_vec();
        let index_at = u64::from_le_bytes(footer[12..20].try_into().unwrap()) as usize;
        let mut b = BlockBuilder::new(1, bytewise);
        for (k, v) in entries {
            b.add(k, v);
        }
        let mut index = b.finish();
        damage(&mut index);
        footer[20..24].copy_from_slice(&(index.len() as u32).to_le_bytes());
        let crc = crc32c::crc32c(&footer[..36]);
        footer[36..40].copy_from_slice(&crc.to_le_bytes());
        let mut out = file[..index_at].to_vec();
        out.extend_from_slice(&index);
        out.extend_from_slice(&crc32c::crc32c(&index).to_le_bytes());
        out.extend_from_slice(&footer);
        out
    }

    /// A damaged index entry (an undecodable block handle, or an entry that does not parse)
    /// in a block whose checksum holds: a scan gives the entries before it with none skipped,
    /// then errs on every later step — never the following blocks' entries (a gap) and never
    /// a clean end (a shorter table).
    #[test]
    fn a_damaged_index_entry_errs_on_every_later_step() {
        let entries: BTreeMap<Vec<u8>, Vec<u8>> = (0u64..300)
            .map(|i| (i.to_be_bytes().to_vec(), vec![i as u8; 30]))
            .collect();
        let all: Entries = entries.clone().into_iter().collect();
        let opts = TableOptions {
            block_bytes: 128,
            restart_interval: 4,
            bloom_bits_per_key: 0,
        };
        let (file, _) = build(&entries, opts);
        let t = open(file.clone()).unwrap();
        let index: Vec<(Vec<u8>, Vec<u8>)> = t
            .index
            .iter()
            .map(|e| e.map(|(k, v)| (k, v.to_vec())))
            .collect::<Result<_>>()
            .unwrap();
        assert!(index.len() > 20, "{} blocks", index.len());
        let mut checked = 0;
        for j in 1..index.len() {
            for parse in [false, true] {
                let damaged = if parse {
                    // Entry j claims to share 127 bytes with an 8-byte previous key.
                    with_index(&file, &index, |b| {
                        let at_restarts = b.len() - 4 - 4 * index.len();
                        let r = at_restarts + 4 * j;
                        let at = u32::from_le_bytes(b[r..r + 4].try_into().unwrap()) as usize;
                        b[at] = 127;
                    })
                } else {
                    // Entry j's handle is one truncated varint.
                    let mut idx = index.clone();
                    idx[j].1 = vec![0x80];
                    with_index(&file, &idx, |_| {})
                };
                let t = open(damaged).unwrap();
                // A seek that probes the damaged entry errs right away: nothing to check.
                let Ok(mut c) = block_on(t.cursor_from(b"")) else {
                    continue;
                };
                let mut got = Vec::new();
                let err = loop {
                    match block_on(t.cursor_step(&mut c)) {
                        Ok(true) => got.push((c.key().to_vec(), c.value().to_vec())),
                        Ok(false) => {
                            panic!("entry {j} (parse {parse}): a damaged index ended cleanly")
                        }
                        Err(e) => break e,
                    }
                };
                assert!(matches!(err, TableError::Corrupt(_)), "{err:?}");
                assert!(got.len() < all.len());
                assert_eq!(&got[..], &all[..got.len()], "entry {j} (parse {parse})");
                for again in 0..3 {
                    let next =
                        block_on(t.cursor_step(&mut c)).map(|more| more.then(|| c.key().to_vec()));
                    assert!(
                        next.is_err(),
                        "entry {j} (parse {parse}): step {again} after the error gave {next:?}"
                    );
                }
                checked += 1;
            }
        }
        assert!(
            checked > index.len(),
            "only {checked} damaged tables scanned"
        );
    }

    proptest! {
        // Each case builds and reads a table of up to 300 entries: fewer cases than the
        // default 256 keep the suite quick; the block and bloom tests cover their parts.
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Keys of a 3-letter alphabet with zero bytes, many sharing their first 8 bytes and
        /// many shorter than 8: the index search by key heads lands where a search of the
        /// whole index would.
        #[test]
        fn seeks_through_key_heads_match_a_model(
            entries in proptest::collection::btree_map(
                proptest::collection::vec(0u8..3, 0..12),
                proptest::collection::vec(any::<u8>(), 0..40),
                1..200,
            ),
            probes in proptest::collection::vec(proptest::collection::vec(0u8..3, 0..12), 1..30),
        ) {
            let opts = TableOptions { block_bytes: 64, restart_interval: 2, bloom_bits_per_key: 0 };
            let (file, _) = build(&entries, opts);
            let t = open(file).unwrap();
            prop_assert!(!t.index_heads.is_empty());
            for p in probes.iter().chain(entries.keys()) {
                let want = entries.range(p.clone()..).next().map(|(k, v)| (k.clone(), v.clone()));
                let got = block_on(t.seek_first(p, false)).unwrap().map(|(k, v)| (k, v.to_vec()));
                prop_assert_eq!(got, want);
            }
        }

        #[test]
        fn round_trip_lookups_and_scans(
            entries in proptest::collection::btree_map(
                proptest::collection::vec(any::<u8>(), 0..16),
                proptest::collection::vec(any::<u8>(), 0..300),
                0..300,
            ),
            block_bytes in 64usize..2048,
            bloom_bits_per_key in 0u32..12,
            probes in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..16), 1..20),
        ) {
            let opts = TableOptions { block_bytes, restart_interval: 4, bloom_bits_per_key };
            let (file, summary) = build(&entries, opts);
            prop_assert_eq!(summary.entries, entries.len() as u64);
            prop_assert_eq!(&summary.first_key, &entries.keys().next().cloned().unwrap_or_default());
            prop_assert_eq!(&summary.last_key, &entries.keys().last().cloned().unwrap_or_default());
            let t = open(file).unwrap();
            let all: Vec<(Vec<u8>, Vec<u8>)> = entries.clone().into_iter().collect();
            prop_assert_eq!(scan(&t, b"").unwrap(), all);
            for p in probes.iter().chain(entries.keys()) {
                let want: Vec<(Vec<u8>, Vec<u8>)> =
                    entries.range(p.clone()..).map(|(k, v)| (k.clone(), v.clone())).collect();
                prop_assert_eq!(scan(&t, p).unwrap(), want.clone());
                let first = block_on(t.seek_first(p, false)).unwrap().map(|(k, v)| (k, v.to_vec()));
                prop_assert_eq!(first, want.first().cloned());
                // A point lookup finds every present key (no false negatives).
                if entries.contains_key(p) {
                    let hit = block_on(t.seek_first(p, true)).unwrap().map(|(k, _)| k);
                    prop_assert_eq!(hit.as_ref(), Some(p));
                }
            }
        }

        /// Every single-byte change is caught by a checksum, the magic or a decoder when the
        /// whole table is read (open + full scan): never wrong data, never a panic.
        #[test]
        fn any_flipped_byte_is_detected(
            entries in proptest::collection::btree_map(
                proptest::collection::vec(any::<u8>(), 1..8),
                proptest::collection::vec(any::<u8>(), 0..40),
                1..60,
            ),
            at in any::<usize>(),
            x in 1u8..=255,
        ) {
            let opts = TableOptions { block_bytes: 128, restart_interval: 4, bloom_bits_per_key: 8 };
            let (mut file, _) = build(&entries, opts);
            let n = file.len();
            file[at % n] ^= x;
            let read = open(file).and_then(|t| scan(&t, b""));
            prop_assert!(read.is_err(), "a flipped byte at {} of {} went unnoticed", at % n, n);
        }

        /// A damaged data block met by a reading-ahead cursor: the entries before it come
        /// out in order with none skipped, then the error (also when asked again).
        #[test]
        fn damaged_block_ends_a_scan_after_a_gapless_prefix(
            n in 40u64..400,
            which in any::<prop::sample::Index>(),
            x in 1u8..=255,
        ) {
            let entries: BTreeMap<Vec<u8>, Vec<u8>> =
                (0..n).map(|i| (i.to_be_bytes().to_vec(), vec![i as u8; 30])).collect();
            let opts = TableOptions { block_bytes: 128, restart_interval: 4, bloom_bits_per_key: 0 };
            let (file, _) = build(&entries, opts);
            // Flip a byte of a data block's payload (after the first few blocks).
            let t = open(file.clone()).unwrap();
            let mut c = block_on(t.cursor_from(b"")).unwrap();
            let mut handles = Vec::new();
            while let Some(Ok((_, h))) = c.index.next() {
                handles.push(BlockHandle::decode(&h).unwrap());
            }
            let h = handles[which.index(handles.len())];
            let mut file = file;
            file[h.offset as usize] ^= x;
            let t = open(file).unwrap();
            let all: Entries = entries.into_iter().collect();
            let mut got = Vec::new();
            let mut again = None;
            let res: std::result::Result<(), TableError> = block_on(async {
                let mut it = t.iter_from(b"").await?;
                loop {
                    match it.next().await {
                        Ok(Some((k, v))) => got.push((k, v.to_vec())),
                        Ok(None) => return Ok(()),
                        Err(e) => {
                            again = Some(it.next().await.is_err());
                            return Err(e);
                        }
                    }
                }
            });
            prop_assert!(res.is_err(), "a damaged block went unnoticed");
            prop_assert_ne!(again, Some(false), "asked again after the error, it went on");
            prop_assert!(got.len() < all.len());
            prop_assert_eq!(&got[..], &all[..got.len()]);
        }
    }
}
