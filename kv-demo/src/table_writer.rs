//! Writes one table file entry by entry (a flush or a compaction streams its merged entries
//! through it), appending closed blocks as they fill and syncing at the end — the streaming
//! form of [`table_file::write_table`](crate::table_file::write_table).

use bytes::Bytes;
use ziob::runtime::{spawn_background, Task};
use ziob_zonefs::{FsError, WriteLifetime, ZoneFs};

use crate::db_error::DbError;
use crate::ikey;
use crate::sst::table::{TableBuilder, TableOptions, TableSummary};
use crate::table_file::APPEND_BYTES;

/// A table file being written.
pub struct TableWriter {
    fs: ZoneFs,
    path: String,
    builder: TableBuilder,
    last_user_key: Vec<u8>,
    /// The last append, a task of its own on this core (a background task, as the flushes
    /// and compactions that write tables), not yet seen to end: the builder goes on with the
    /// next bytes while the zone's core takes these, and the next append waits for it, so a
    /// file's appends stay in order. Awaited one by one, each 1 MiB append's trip to the
    /// zone's core and back (9–55 ms of a 16 MiB flush of 37–177 ms) was time the flush
    /// built nothing.
    in_flight: Option<Task<Result<(), FsError>>>,
}

impl std::fmt::Debug for TableWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableWriter")
            .field("path", &self.path)
            .field("builder", &self.builder)
            .field("append_in_flight", &self.in_flight.is_some())
            .finish()
    }
}

impl TableWriter {
    /// Creates the file `path` of class `lifetime` for a table of internal keys.
    pub async fn create(
        fs: &ZoneFs,
        path: String,
        lifetime: WriteLifetime,
        opts: TableOptions,
    ) -> Result<TableWriter, DbError> {
        fs.create(&path, lifetime).await?;
        Ok(TableWriter {
            fs: fs.clone(),
            path,
            builder: TableBuilder::new(opts, ikey::order, ikey::user_key),
            last_user_key: Vec::new(),
            in_flight: None,
        })
    }

    /// Adds an entry (internal keys strictly increasing).
    pub async fn add(&mut self, key: &[u8], value: &[u8]) -> Result<(), DbError> {
        self.builder.add(key, value);
        self.last_user_key.clear();
        self.last_user_key.extend_from_slice(ikey::user_key(key));
        if self.builder.ready_bytes() >= APPEND_BYTES {
            self.wait_for_append().await?;
            // Handed over, not copied (`append` would copy it).
            let ready = Bytes::from(self.builder.take_ready());
            let (fs, path) = (self.fs.clone(), self.path.clone());
            self.in_flight = Some(spawn_background(async move {
                fs.append_bytes(&path, ready).await
            }));
        }
        Ok(())
    }

    /// Waits for the append under way, if any, and gives its error. Cancel-safe: dropped
    /// while it waits, the append stays under way (and its outcome for the next call).
    async fn wait_for_append(&mut self) -> Result<(), DbError> {
        if let Some(append) = &mut self.in_flight {
            let res = append.await;
            self.in_flight = None;
            res?;
        }
        Ok(())
    }

    /// The user key of the last entry added.
    pub fn last_user_key(&self) -> &[u8] {
        &self.last_user_key
    }

    /// Entries added.
    pub fn entries(&self) -> u64 {
        self.builder.entries()
    }

    /// The file's size so far (bytes taken and not yet taken).
    pub fn file_bytes(&self) -> u64 {
        self.builder.file_bytes()
    }

    /// The file's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Ends the table and syncs the file: durable when this returns.
    pub async fn finish(mut self) -> Result<TableSummary, DbError> {
        self.wait_for_append().await?;
        let (rest, summary) = self.builder.finish();
        self.fs.append_bytes(&self.path, Bytes::from(rest)).await?;
        self.fs.sync(&self.path).await?;
        Ok(summary)
    }
}
