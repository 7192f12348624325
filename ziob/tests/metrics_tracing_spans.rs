//! Issue #13, tracing: every public call opens a debug-level span named after it with its
//! zone and sizes, and the shards open `writeback` and `device_flush` spans around the device
//! I/O they issue. Spans are collected by a layer installed for this test process.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::Subscriber;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;
use ziob::{DmaBuf, Runtime, Ziob, ZiobConfig, ZoneAction, ZoneTarget};

/// Spans created: (name, "field=value ...").
type Seen = Arc<Mutex<Vec<(String, String)>>>;

struct Collect(Seen);

struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

impl<S: Subscriber> Layer<S> for Collect {
    fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: Context<'_, S>) {
        if !attrs.metadata().target().starts_with("ziob") {
            return;
        }
        let mut fields = String::new();
        attrs.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push((
            attrs.metadata().name().to_string(),
            fields.trim().to_string(),
        ));
    }
}

#[test]
fn calls_and_device_io_open_debug_spans() {
    let seen = Seen::default();
    let subscriber =
        tracing_subscriber::registry().with(Collect(seen.clone()).with_filter(LevelFilter::DEBUG));
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let rt = Runtime::builder().cores(2).build().unwrap();
    rt.block_on(|| async {
        let z = Ziob::open("mem:zones=4,zone_size=1M", ZiobConfig::default())
            .await
            .unwrap();
        z.append(3, DmaBuf::from_slice(&[1u8; 100])).await.unwrap();
        z.write_at(3, 100, DmaBuf::from_slice(&[2u8; 50]))
            .await
            .unwrap();
        z.read(3, 0, 150).await.unwrap();
        z.flush(3).await.unwrap();
        z.zone_action(ZoneAction::Finish, ZoneTarget::One(2))
            .await
            .unwrap();
        z.sync().await.unwrap();
        z.report(0, 4).await.unwrap();
        z.close().await.unwrap();
    })
    .unwrap();
    let seen = seen.lock().unwrap().clone();
    let has = |name: &str, fields: &str| {
        assert!(
            seen.iter().any(|(n, f)| n == name && f == fields),
            "no span {name} with {fields:?} in {seen:#?}"
        );
    };
    has("append", "zone=3 len=100");
    has("write_at", "zone=3 offset=100 len=50");
    has("read", "zone=3 offset=0 len=150");
    has("flush", "zone=3");
    has("zone_action", "action=finish target=One(2)");
    has("sync", "");
    has("report", "first=0 count=4");
    has("close", "");
    // The flush of zone 3 wrote one padded block back (and flushed the device cache: the
    // zone had not been covered by a device flush since the open).
    has("writeback", "zone=3 offset=0 len=4096");
    assert!(
        seen.iter()
            .any(|(n, f)| n == "device_flush" && f.starts_with("core=1 ")),
        "{seen:#?}"
    );
}
