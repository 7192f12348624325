//! Model-based test of a zone log on small `emu:` zones: random appends (single and batch,
//! small to zone-sized), syncs, truncations and reopens, checked after every step against
//! a `Vec` of the records the log must hold. Zones roll over often (64 KiB zones), and a
//! full device is met and cleared by truncation.

mod zonelog_support;

use bytes::Bytes;
use proptest::prelude::*;
use ziob::zonelog::{LogSpace, LogSpaceOptions, Position, ZoneLog};
use ziob::{Client, Runtime, ZiobConfig, ZiobError};
use zonelog_support::{record, tokio_rt, ziob_rt, EmuFile};

const ZONES: u32 = 8;
const ZONE_BYTES: u64 = 64 << 10;

/// How often the device was found full (reported at the end).
static NO_SPACE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[derive(Debug, Clone)]
enum Op {
    Append(usize),
    Batch(Vec<usize>),
    Sync,
    /// Truncate before the record at this fraction (per mille) of the log.
    Truncate(u32),
    Reopen,
    /// Read the record at this fraction (per mille) of the log by its position.
    ReadOne(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => prop_oneof![0usize..200, 200usize..6000, 20_000usize..65_000].prop_map(Op::Append),
        3 => proptest::collection::vec(0usize..3000, 1..12).prop_map(Op::Batch),
        2 => Just(Op::Sync),
        1 => (0u32..=1000).prop_map(Op::Truncate),
        1 => Just(Op::Reopen),
        2 => (0u32..1000).prop_map(Op::ReadOne),
    ]
}

struct Open {
    rt: Runtime,
    client: Client,
    space: LogSpace,
    log: ZoneLog,
}

async fn open(file: &EmuFile) -> Open {
    let rt = ziob_rt(2);
    let client = Client::open(rt.handle(), &file.spec(), ZiobConfig::default())
        .await
        .unwrap();
    let space = LogSpace::open(client.clone(), LogSpaceOptions::default())
        .await
        .unwrap();
    let log = space.open_log("model").await.unwrap();
    Open {
        rt,
        client,
        space,
        log,
    }
}

/// Closes the instance and lets go of the device (every handle, then the runtime).
async fn close(o: Open) {
    let Open {
        rt,
        client,
        space,
        log,
    } = o;
    client.close().await.unwrap();
    drop((log, space, client));
    drop(rt);
}

/// Checks the whole log against the model: same records, same positions, in order.
async fn check(log: &ZoneLog, model: &[(Position, Vec<u8>)]) -> Result<(), TestCaseError> {
    let got = log.read_from(log.start(), usize::MAX).await.unwrap();
    prop_assert_eq!(got.len(), model.len());
    for ((p, b), (q, r)) in got.iter().zip(model) {
        prop_assert_eq!(p, q);
        prop_assert_eq!(&b[..], &r[..]);
    }
    if let Some((last, r)) = model.last() {
        prop_assert!(log.end() >= last.after(r.len()));
    }
    Ok(())
}

/// Appends `records` (retrying once after freeing every old zone if the device is full);
/// returns their positions.
async fn append(
    log: &ZoneLog,
    model: &mut Vec<(Position, Vec<u8>)>,
    records: Vec<Vec<u8>>,
) -> Result<(), TestCaseError> {
    let refs: Vec<&[u8]> = records.iter().map(|r| &r[..]).collect();
    let ps = match log.append_batch(&refs).await {
        Ok(ps) => ps,
        Err(ZiobError::NoSpace { .. }) => {
            // Full: the log spans (nearly) every zone. Drop all but the newest records.
            NO_SPACE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            prop_assert!(log.zones().len() >= ZONES as usize - 2, "{:?}", log.zones());
            log.truncate_before(log.end()).await.unwrap();
            let start = log.start();
            model.retain(|(p, _)| *p >= start);
            log.append_batch(&refs).await.unwrap()
        }
        Err(e) => return Err(TestCaseError::fail(e.to_string())),
    };
    for w in ps.windows(2) {
        prop_assert!(w[0] < w[1]);
    }
    if let (Some((last, _)), Some(first)) = (model.last(), ps.first()) {
        prop_assert!(last < first);
    }
    model.extend(ps.into_iter().zip(records));
    Ok(())
}

fn run(ops: Vec<Op>, seed: u64) -> Result<(), TestCaseError> {
    let file = EmuFile::create("model", ZONES, ZONE_BYTES);
    tokio_rt(2).block_on(async {
        let mut o = open(&file).await;
        let mut model: Vec<(Position, Vec<u8>)> = Vec::new();
        let mut id = seed << 20;
        for op in ops {
            match op {
                Op::Append(len) => {
                    id += 1;
                    append(&o.log, &mut model, vec![record(id, len)]).await?;
                }
                Op::Batch(lens) => {
                    let recs = lens
                        .into_iter()
                        .map(|l| {
                            id += 1;
                            record(id, l)
                        })
                        .collect();
                    append(&o.log, &mut model, recs).await?;
                }
                Op::Sync => o.log.sync().await.unwrap(),
                Op::Truncate(per_mille) => {
                    if model.is_empty() {
                        continue;
                    }
                    let i = (model.len() - 1) * per_mille as usize / 1000;
                    let pos = model[i].0;
                    let free_before = o.space.free_zones();
                    o.log.truncate_before(pos).await.unwrap();
                    let start = o.log.start();
                    prop_assert!(start <= pos, "records at or after the cut are kept");
                    let dropped = model.iter().filter(|(p, _)| *p < start).count();
                    model.retain(|(p, _)| *p >= start);
                    if dropped > 0 {
                        prop_assert!(o.space.free_zones() > free_before);
                    }
                    if let Some((p, _)) = model.first() {
                        prop_assert!(*p >= start);
                    }
                }
                Op::Reopen => {
                    close(o).await;
                    o = open(&file).await;
                    prop_assert_eq!(o.space.recovery().dropped_bytes, 0);
                }
                Op::ReadOne(per_mille) => {
                    if let Some((p, r)) = model.get(model.len() * per_mille as usize / 1000) {
                        prop_assert_eq!(&o.log.read(*p).await.unwrap()[..], &r[..]);
                    }
                }
            }
            check(&o.log, &model).await?;
        }
        // A final reopen keeps everything.
        close(o).await;
        let o = open(&file).await;
        check(&o.log, &model).await?;
        let streamed: Vec<(Position, Bytes)> = {
            use futures::TryStreamExt;
            o.log.stream(o.log.start()).try_collect().await.unwrap()
        };
        prop_assert_eq!(streamed.len(), model.len());
        close(o).await;
        Ok(())
    })
}

proptest! {
    // ZIOB_ZONELOG_MODEL_CASES=N runs more cases.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("ZIOB_ZONELOG_MODEL_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(24),
        ..ProptestConfig::default()
    })]
    #[test]
    fn zone_log_matches_a_vec_model(ops in proptest::collection::vec(op(), 1..60), seed in 0u64..1000) {
        run(ops, seed)?;
        eprintln!("device full {} times so far", NO_SPACE.load(std::sync::atomic::Ordering::Relaxed));
    }
}
