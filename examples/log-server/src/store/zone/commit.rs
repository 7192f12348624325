//! The zone store's part of the shared write path ([`crate::store::commit`]): a batch is one
//! `ZoneLog::append_batch` (one trip to the ZIOB core that owns the zone, one buffer
//! append), a sync one `ZoneLog::sync`.

use ziob::zonelog::ZoneLog;

use super::map_error;
use crate::position::Position;
use crate::store::commit::{BatchWriter, Syncer};
use crate::store::StoreError;

/// Writes and syncs the batches of one zone log.
#[derive(Clone)]
pub struct ZoneWriter(pub ZoneLog);

impl BatchWriter for ZoneWriter {
    type Syncer = ZoneWriter;

    const BATCH_BYTES_MAX: usize = 1 << 20;

    const WRITES_METRIC: &'static str = "log_server_zone_append_batches_total";

    fn syncer(&self) -> ZoneWriter {
        self.clone()
    }

    async fn write(&mut self, records: &[&[u8]]) -> Result<Vec<Position>, StoreError> {
        match self.0.append_batch(records).await {
            Ok(positions) => Ok(positions
                .into_iter()
                .map(|pos| Position(pos.into_raw()))
                .collect()),
            Err(e) => {
                // None of the batch is acknowledged (a prefix may have been appended).
                let e = map_error(e);
                if matches!(e, StoreError::Storage(_)) {
                    tracing::error!(log = self.0.name(), error = %e, "zone log append failed");
                }
                Err(e)
            }
        }
    }
}

impl Syncer for ZoneWriter {
    const SYNCS_METRIC: &'static str = "log_server_zone_syncs_total";

    const GROUP_METRIC: &'static str = "log_server_zone_group_commit_records";

    async fn sync(&self) -> Result<(), StoreError> {
        self.0.sync().await.map_err(map_error)
    }
}
