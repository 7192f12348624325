//! Writes one table file entry by entry (a flush or a compaction streams its merged entries
//! through it), appending closed blocks as they fill and syncing at the end — the streaming
//! form of [`table_file::write_table`](crate::table_file::write_table).

use ziob_zonefs::{WriteLifetime, ZoneFs};

use crate::db_error::DbError;
use crate::ikey;
use crate::sst::table::{TableBuilder, TableOptions, TableSummary};
use crate::table_file::APPEND_BYTES;

/// A table file being written.
#[derive(Debug)]
pub struct TableWriter {
    fs: ZoneFs,
    path: String,
    builder: TableBuilder,
    last_user_key: Vec<u8>,
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
        })
    }

    /// Adds an entry (internal keys strictly increasing).
    pub async fn add(&mut self, key: &[u8], value: &[u8]) -> Result<(), DbError> {
        self.builder.add(key, value);
        self.last_user_key.clear();
        self.last_user_key.extend_from_slice(ikey::user_key(key));
        if self.builder.ready_bytes() >= APPEND_BYTES {
            self.fs
                .append(&self.path, &self.builder.take_ready())
                .await?;
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
    pub async fn finish(self) -> Result<TableSummary, DbError> {
        let (rest, summary) = self.builder.finish();
        self.fs.append(&self.path, &rest).await?;
        self.fs.sync(&self.path).await?;
        Ok(summary)
    }
}
