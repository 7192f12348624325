//! The ZIOB store: each log is a `ziob::zonelog::ZoneLog` of one `LogSpace` over the whole
//! device, used from tokio through a `ziob::Client`. A record's position is the raw
//! `ziob::zonelog::Position` (`zone sequence << 32 | byte offset`). Appends go through a
//! writer and a syncer task per log ([`commit`]).

pub mod commit;

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use ziob::backends::{create_device, DeviceSpec, Geometry};
use ziob::runtime::Handle;
use ziob::zonelog::{LogSpace, LogSpaceOptions, Position as ZonePosition, ZoneLog};
use ziob::{Client, ZiobConfig, ZiobError};

use self::commit::ZoneWriter;
use crate::name::LogName;
use crate::position::Position;
use crate::store::commit::AppendQueue;
use crate::store::open_logs::OpenLogs;
use crate::store::{Durability, LogInfo, LogStore, ReadBatch, RecordStream, StoreError};

/// Creates the emu file `spec` names with `geometry` if it does not exist yet (on core 0 of
/// the ZIOB runtime, with the backends' own `create_device`, as `ziob create` does). Answers
/// whether it created one. Other specs are left alone.
pub async fn create_emu_if_missing(
    handle: &Handle,
    spec: &str,
    geometry: Geometry,
) -> Result<bool, StoreError> {
    match DeviceSpec::parse(spec).map_err(StoreError::storage)? {
        DeviceSpec::Emu { path, .. } if !path.exists() => {
            let spec = spec.to_string();
            handle
                .call(0, move || async move {
                    create_device(&spec, &geometry).await.map(drop)
                })
                .await
                .map_err(StoreError::storage)?
                .map_err(StoreError::storage)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// One log opened by the store: its handle and its write path.
struct OpenLog {
    log: ZoneLog,
    appends: AppendQueue,
}

impl OpenLog {
    fn new(log: ZoneLog) -> Arc<Self> {
        let appends = AppendQueue::spawn(ZoneWriter(log.clone()));
        Arc::new(OpenLog { log, appends })
    }

    async fn append(&self, record: Bytes, durability: Durability) -> Result<Position, StoreError> {
        // Checked here: one record too large would fail its whole batch.
        let max_bytes = self.log.max_record_bytes() as usize;
        if record.len() > max_bytes {
            return Err(StoreError::RecordTooLarge {
                len: record.len(),
                max_bytes,
            });
        }
        self.appends.append(record, durability).await
    }

    /// Refuses new appends and waits until the queued ones are answered.
    async fn close(&self) {
        let _ = self.appends.close().await;
    }
}

/// Logs stored as ZIOB zone logs.
pub struct ZoneStore {
    client: Client,
    space: LogSpace,
    /// The logs opened so far (the space knows every log).
    logs: OpenLogs<OpenLog>,
}

impl ZoneStore {
    /// Opens the ZIOB instance on `spec` through the runtime of `handle` and the log space
    /// over all of its zones (recovering every log).
    pub async fn open(handle: Handle, spec: &str, config: ZiobConfig) -> Result<Self, StoreError> {
        let client = Client::open(handle, spec, config)
            .await
            .map_err(|e| StoreError::Storage(format!("{spec}: {e}")))?;
        Self::with_client(client).await
    }

    /// Opens the log space over all zones of `client`'s instance.
    pub async fn with_client(client: Client) -> Result<Self, StoreError> {
        let space = LogSpace::open(client.clone(), LogSpaceOptions::default())
            .await
            .map_err(map_error)?;
        for (log, r) in &space.recovery().logs {
            if let Some(cut) = &r.cut {
                tracing::warn!(
                    log,
                    ?cut,
                    dropped_bytes = r.dropped_bytes,
                    "recovery cut the log"
                );
            }
        }
        Ok(ZoneStore {
            client,
            space,
            logs: OpenLogs::new(HashMap::new()),
        })
    }

    /// The client (for metrics and tools).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// An existing log.
    async fn get(&self, name: &LogName) -> Result<ZoneLog, StoreError> {
        if let Some(open) = self.logs.get(name)? {
            return Ok(open.log.clone());
        }
        if !self.space.logs().iter().any(|n| n == name.as_str()) {
            return Err(StoreError::NotFound(name.clone()));
        }
        Ok(self.get_or_create(name).await?.log.clone())
    }

    /// A log, created when missing.
    async fn get_or_create(&self, name: &LogName) -> Result<Arc<OpenLog>, StoreError> {
        if let Some(open) = self.logs.get(name)? {
            return Ok(open);
        }
        // `open_log` serializes creations; the map keeps one writer per log.
        let log = self
            .space
            .open_log(name.as_str())
            .await
            .map_err(map_error)?;
        Ok(self.logs.get_or_insert(name, || OpenLog::new(log)))
    }
}

fn info(log: &ZoneLog) -> LogInfo {
    LogInfo {
        name: log.name().to_string(),
        start: log.start().into_raw(),
        end: log.end().into_raw(),
    }
}

fn past_end(log: &ZoneLog, name: &LogName, pos: Position) -> Result<(), StoreError> {
    let end = log.end().into_raw();
    if pos.0 > end {
        return Err(StoreError::PastEnd {
            log: name.clone(),
            pos,
            end: Position(end),
        });
    }
    Ok(())
}

/// ZIOB's errors as the store's.
fn map_error(e: ZiobError) -> StoreError {
    let name = |n: &str| LogName::new(n).map_err(|_| StoreError::Storage(e.to_string()));
    let mapped = match &e {
        ZiobError::NoSuchLog { name: n } => name(n).map(StoreError::NotFound),
        ZiobError::RecordTooLarge {
            len_bytes,
            max_bytes,
            ..
        } => Ok(StoreError::RecordTooLarge {
            len: *len_bytes as usize,
            max_bytes: *max_bytes as usize,
        }),
        ZiobError::Truncated {
            log,
            position,
            start,
        } => name(log).map(|log| StoreError::Truncated {
            log,
            pos: Position(*position),
            start: Position(*start),
        }),
        ZiobError::InvalidPosition { log, position, .. } => {
            name(log).map(|log| StoreError::NotARecord {
                log,
                pos: Position(*position),
            })
        }
        ZiobError::NoSpace { .. } => Ok(StoreError::NoSpace(e.to_string())),
        ZiobError::Closed | ZiobError::RuntimeStopped { .. } => Ok(StoreError::Closed),
        _ => Ok(StoreError::Storage(e.to_string())),
    };
    mapped.unwrap_or_else(|e| e)
}

impl LogStore for ZoneStore {
    fn kind(&self) -> &'static str {
        "ziob"
    }

    fn record_bytes_max(&self) -> usize {
        // Every log of the space has the same zones; the frame and a zone header of the
        // longest name are what a zone loses.
        let g = self.client.geometry();
        let reserve = 4096 + crate::name::NAME_BYTES_MAX as u64;
        g.zone_capacity_bytes.saturating_sub(reserve) as usize
    }

    async fn append(
        &self,
        log: &LogName,
        record: Bytes,
        durability: Durability,
    ) -> Result<Position, StoreError> {
        self.get_or_create(log)
            .await?
            .append(record, durability)
            .await
    }

    async fn read(
        &self,
        log: &LogName,
        from: Position,
        max_records: usize,
    ) -> Result<ReadBatch, StoreError> {
        let zone_log = self.get(log).await?;
        past_end(&zone_log, log, from)?;
        let end = zone_log.end().into_raw();
        let records = zone_log
            .read_from(ZonePosition::from_raw(from.0), max_records)
            .await
            .map_err(map_error)?;
        // Empty: nothing from `from` up to the end seen before the read.
        let next = records
            .last()
            .map_or(from.0.max(end), |(p, b)| p.after(b.len()).into_raw());
        Ok(ReadBatch {
            records: records
                .into_iter()
                .map(|(p, b)| (Position(p.into_raw()), b))
                .collect(),
            next: Position(next),
        })
    }

    async fn tail(&self, log: &LogName, from: Position) -> Result<RecordStream, StoreError> {
        let zone_log = self.get(log).await?;
        past_end(&zone_log, log, from)?;
        let from = ZonePosition::from_raw(from.0);
        if from < zone_log.end() {
            // Refuses a truncated position or one inside a record before the stream starts.
            zone_log.read_from(from, 1).await.map_err(map_error)?;
        }
        let records = zone_log.tail(from).map(|r| {
            r.map(|(p, b)| (Position(p.into_raw()), b))
                .map_err(map_error)
        });
        Ok(Box::pin(records))
    }

    async fn truncate_before(&self, log: &LogName, before: Position) -> Result<(), StoreError> {
        let zone_log = self.get(log).await?;
        past_end(&zone_log, log, before)?;
        zone_log
            .truncate_before(ZonePosition::from_raw(before.0))
            .await
            .map_err(map_error)
    }

    async fn info(&self, log: &LogName) -> Result<LogInfo, StoreError> {
        Ok(info(&self.get(log).await?))
    }

    async fn list(&self) -> Result<Vec<LogInfo>, StoreError> {
        self.logs.check_open()?;
        let mut all = Vec::new();
        for name in self.space.logs() {
            let name = LogName::new(&name).map_err(StoreError::storage)?;
            all.push(info(&self.get_or_create(&name).await?.log));
        }
        Ok(all)
    }

    /// Publishes ZIOB's merged metrics (`ziob_*`, label `instance="log-server"`; see
    /// docs/METRICS.md) through the `metrics` facade.
    async fn publish_metrics(&self) {
        match self
            .client
            .with_ziob(|z| async move { z.metrics().await })
            .await
        {
            Ok(snapshot) => snapshot.publish("log-server"),
            Err(e) => tracing::warn!(error = %e, "could not read ZIOB's metrics"),
        }
    }

    async fn close(&self) -> Result<(), StoreError> {
        self.logs.mark_closed();
        for log in self.logs.all() {
            log.close().await;
        }
        // Syncs every shard: every acknowledged append is durable once this is Ok.
        self.client.close().await.map_err(map_error)
    }
}
