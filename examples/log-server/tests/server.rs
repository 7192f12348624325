//! The service over real HTTP, for each store: every route, a restart on the same storage,
//! and bad requests (always a 4xx with a JSON error, never a 5xx).

mod common;

use common::{
    Binary, FileFactory, Rng, Server, SseReader, StoreFactory, ZoneFactory, RECORD_BYTES_MAX,
    WATCHDOG,
};
use serde_json::Value;

/// Appends, reads (paging), tails, truncates, lists and scrapes metrics; restarts and checks
/// that everything acknowledged is back, with the truncation kept.
async fn every_route_and_restart<F: StoreFactory>(factory: F) {
    let mut rng = Rng(0x5eed_0001);
    let s = Server::start(&factory).await;
    let (status, v) = s.get_json("/logs").await;
    assert_eq!(
        (status, v["logs"].as_array().unwrap().len()),
        (200, 0),
        "{v}"
    );

    // Binary-safe records of many sizes, some with sync=true.
    let mut written = Vec::new();
    let all_bytes: Vec<u8> = (0..=255).collect();
    for i in 0..40usize {
        let data = match i {
            0 => all_bytes.clone(),
            1 => vec![b'x'; RECORD_BYTES_MAX],
            _ => {
                let len = rng.below(3000) as usize + 1;
                rng.bytes(len)
            }
        };
        let pos = s.append("alpha", &data, i % 3 == 0).await;
        if let Some((last, _)) = written.last() {
            assert!(pos > *last, "positions increase");
        }
        written.push((pos, data));
    }
    s.append("beta", b"other log", true).await;

    // Paged reads return exactly what was written, in order.
    for max in [1, 7, 100] {
        assert_eq!(s.read_all("alpha", None, max).await, written, "max {max}");
    }
    let from = written[10].0;
    assert_eq!(s.read_all("alpha", Some(from), 5).await, written[10..]);

    let (status, v) = s.get_json("/logs").await;
    assert_eq!(status, 200);
    let names: Vec<_> = v["logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["alpha", "beta"]);

    // A tail from a position replays, then follows new appends.
    let r = s
        .http
        .get(s.url(&format!("/logs/alpha/tail?from={}", written[38].0)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let mut tail = SseReader::new(r);
    assert_eq!(tail.record().await, written[38]);
    assert_eq!(tail.record().await, written[39]);
    let pos = s.append("alpha", b"live", false).await;
    written.push((pos, b"live".to_vec()));
    assert_eq!(tail.record().await, (pos, b"live".to_vec()));
    // Resuming with Last-Event-ID starts after that record.
    let r = s
        .http
        .get(s.url("/logs/alpha/tail"))
        .header("Last-Event-ID", written[39].0.to_string())
        .send()
        .await
        .unwrap();
    let mut resumed = SseReader::new(r);
    assert_eq!(resumed.record().await, (pos, b"live".to_vec()));

    // Truncation: older positions are gone (410), the rest stays.
    // Far enough in for the zone store (128 KiB zones) to drop its first zone.
    let cut = written[35].0;
    let r = s
        .http
        .delete(s.url(&format!("/logs/alpha?before={cut}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    // The file store starts at `before`; the zone store drops whole zones only.
    assert!(v["start"].as_u64().unwrap() <= cut, "{v}");
    assert!(v["start"].as_u64().unwrap() > written[0].0, "{v}");
    let (status, v) = s
        .get_json(&format!("/logs/alpha?from={}", written[0].0))
        .await;
    assert_eq!(
        (status, v["error"].as_str()),
        (410, Some("truncated")),
        "{v}"
    );
    let after_cut = s.read_all("alpha", None, 50).await;
    let first_kept = written
        .iter()
        .position(|(p, _)| *p == after_cut[0].0)
        .unwrap();
    assert!(
        first_kept <= 35,
        "a truncation keeps the record at `before`"
    );
    assert_eq!(after_cut, written[first_kept..]);

    let r = s.http.get(s.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    for metric in [
        "log_server_http_requests_total",
        "log_server_http_request_duration_seconds_bucket",
        "log_server_appended_records_total",
    ] {
        assert!(text.contains(metric), "{metric} missing from:\n{text}");
    }
    if s.kind == "ziob" {
        // ZIOB's own metrics, published by the zone store for each scrape.
        for metric in [
            "ziob_append_bytes_total{instance=\"log-server\"}",
            "ziob_device_flushes_total",
        ] {
            assert!(text.contains(metric), "{metric} missing from:\n{text}");
        }
    }

    // Shutdown with tails open: they end, the server stops.
    s.stop().await;
    assert!(tail.next().await.is_none(), "a tail ends at shutdown");
    assert!(resumed.next().await.is_none());

    // Restart on the same storage: everything acknowledged is back, truncation kept.
    let s = Server::start(&factory).await;
    assert_eq!(s.read_all("alpha", None, 64).await, after_cut);
    assert_eq!(s.read_all("beta", None, 64).await.len(), 1);
    let pos = s.append("alpha", b"after restart", true).await;
    assert!(pos > written.last().unwrap().0);
    s.stop().await;
}

/// Status and `error` code of a request.
async fn answer(s: &Server, method: &str, path: &str, body: Vec<u8>) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let r = tokio::time::timeout(
        WATCHDOG,
        s.http.request(method, s.url(path)).body(body).send(),
    )
    .await
    .expect("request hung")
    .unwrap();
    let status = r.status().as_u16();
    let is_sse = r
        .headers()
        .get("content-type")
        .is_some_and(|c| c == "text/event-stream");
    // An SSE answer never ends by itself: only its status matters here.
    let body = if is_sse {
        Value::Null
    } else {
        r.json().await.unwrap_or(Value::Null)
    };
    (status, body)
}

/// Each bad request gets its documented 4xx and error code.
async fn bad_requests_get_4xx<F: StoreFactory>(factory: F) {
    let s = Server::start(&factory).await;
    let p0 = s.append("l", b"first record", true).await;
    let p1 = s.append("l", b"second", false).await;
    let long = "n".repeat(65);
    let big = vec![7u8; RECORD_BYTES_MAX + 1];
    let cases: Vec<(&str, String, Vec<u8>, u16, &str)> = vec![
        ("POST", "/logs/a%20b".into(), b"x".to_vec(), 400, "bad_name"),
        (
            "POST",
            format!("/logs/{long}"),
            b"x".to_vec(),
            400,
            "bad_name",
        ),
        ("GET", "/logs/%C3%A9".into(), vec![], 400, "bad_name"),
        ("GET", "/logs/..%2F..%2Fetc".into(), vec![], 400, "bad_name"),
        (
            "POST",
            "/logs/l?sync=maybe".into(),
            b"x".to_vec(),
            400,
            "bad_query",
        ),
        (
            "POST",
            "/logs/l?synk=true".into(),
            b"x".to_vec(),
            400,
            "bad_query",
        ),
        (
            "POST",
            "/logs/l?sync=true&sync=false".into(),
            b"x".to_vec(),
            400,
            "bad_query",
        ),
        ("POST", "/logs/l".into(), big, 413, "record_too_large"),
        (
            "GET",
            "/logs/l?from=abc".into(),
            vec![],
            400,
            "bad_position",
        ),
        ("GET", "/logs/l?from=-1".into(), vec![], 400, "bad_position"),
        (
            "GET",
            "/logs/l?from=99999999999999999999".into(),
            vec![],
            400,
            "bad_position",
        ),
        ("GET", "/logs/l?max=0".into(), vec![], 400, "bad_query"),
        (
            "GET",
            "/logs/l?max=1000000".into(),
            vec![],
            400,
            "bad_query",
        ),
        (
            "GET",
            "/logs/l?from=%ZZ".into(),
            vec![],
            400,
            "bad_position",
        ),
        (
            "GET",
            format!("/logs/l?from={}", u64::MAX),
            vec![],
            416,
            "past_end",
        ),
        ("GET", "/logs/missing".into(), vec![], 404, "log_not_found"),
        (
            "GET",
            "/logs/missing/tail".into(),
            vec![],
            404,
            "log_not_found",
        ),
        (
            "DELETE",
            "/logs/missing?before=0".into(),
            vec![],
            404,
            "log_not_found",
        ),
        ("DELETE", "/logs/l".into(), vec![], 400, "bad_query"),
        (
            "DELETE",
            format!("/logs/l?before={}", u64::MAX),
            vec![],
            416,
            "past_end",
        ),
        (
            "GET",
            "/logs/l/tail?from=x".into(),
            vec![],
            400,
            "bad_position",
        ),
        ("GET", "/logs?x=1".into(), vec![], 400, "bad_query"),
        ("GET", "/nothing/here".into(), vec![], 404, "no_route"),
    ];
    for (method, path, body, status, code) in cases {
        let (got, v) = answer(&s, method, &path, body).await;
        assert_eq!(
            (got, v["error"].as_str()),
            (status, Some(code)),
            "{method} {path}: {v}"
        );
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    // A position inside a record (not one the server handed out) is refused with a 4xx.
    let (got, v) = answer(&s, "GET", &format!("/logs/l?from={}", p0 + 1), vec![]).await;
    assert!((400..500).contains(&got), "{v}");
    let (got, _) = answer(&s, "PUT", "/logs/l", b"x".to_vec()).await;
    assert_eq!(got, 405);
    // Nothing of that changed the log.
    let all = s.read_all("l", None, 10).await;
    assert_eq!(
        all,
        [(p0, b"first record".to_vec()), (p1, b"second".to_vec())]
    );
    s.stop().await;
}

/// Seeded random requests (methods, names, parameters, positions, bodies): never a 5xx, and
/// the server still works afterwards.
async fn random_requests_never_5xx<F: StoreFactory>(factory: F) {
    let seed = 0xbad_5eed_u64;
    let mut rng = Rng(seed);
    let s = Server::start(&factory).await;
    let mut positions = vec![s.append("r", b"seed", true).await];
    let names = [
        "r",
        "r2",
        "",
        "a%2Fb",
        "x.y",
        "%00",
        "-",
        "..",
        "very-long-name-that-is-long-enough-to-pass-the-sixty-four-byte-limit",
    ];
    let keys = ["from", "max", "sync", "before", "x", "", "from"];
    for i in 0..300 {
        let method = ["GET", "POST", "DELETE", "PUT"][rng.below(4) as usize];
        let name = names[rng.below(names.len() as u64) as usize];
        let suffix = ["", "/tail", "/x"][rng.below(3) as usize];
        let mut query = Vec::new();
        for _ in 0..rng.below(3) {
            let key = keys[rng.below(keys.len() as u64) as usize];
            let value = match rng.below(6) {
                0 => positions[rng.below(positions.len() as u64) as usize].to_string(),
                1 => rng.next().to_string(),
                2 => (positions.last().unwrap() + rng.below(20)).to_string(),
                3 => "true".into(),
                4 => rng.below(2000).to_string(),
                _ => "%FF".into(),
            };
            query.push(format!("{key}={value}"));
        }
        let path = format!("/logs/{name}{suffix}?{}", query.join("&"));
        let len = rng.below(100) as usize;
        let body = rng.bytes(len);
        let (status, v) = answer(&s, method, &path, body).await;
        assert!(
            status < 500,
            "seed {seed:#x} request {i}: {method} {path} -> {status} {v}"
        );
        if method == "POST" && status == 200 && name == "r" && suffix.is_empty() {
            positions.push(v["position"].as_u64().unwrap());
        }
    }
    let pos = s.append("r", b"still works", true).await;
    let all = s.read_all("r", None, 1000).await;
    assert_eq!(all.last().unwrap(), &(pos, b"still works".to_vec()));
    s.stop().await;
}

/// What one append of a client under load came to: `Break` stops the client (the server is
/// going away), `Continue(Some(record))` is an acknowledged append the test checks after the
/// restart, `Continue(None)` one it does not check.
type Sent = std::ops::ControlFlow<(), Option<(u64, Vec<u8>)>>;

/// Starts the binary with `args` under appends from 16 clients, client `c` running
/// `append(http, base_url, c, i)` for its `i`-th append; once `min_acked` appends to check
/// were acknowledged, stops it with `stop` (the clients end on their own), and restarts it
/// on the same storage. Answers the restarted binary and every acknowledged append to check.
async fn acked_across_restart<A, AF, S, SF>(
    args: &[String],
    min_acked: usize,
    append: A,
    stop: S,
) -> (Binary, Vec<(u64, Vec<u8>)>)
where
    A: Fn(reqwest::Client, String, u32, u32) -> AF + Clone + Send + 'static,
    AF: std::future::Future<Output = Sent> + Send,
    S: FnOnce(Binary) -> SF,
    SF: std::future::Future<Output = ()>,
{
    let bin = Binary::start(args).await;
    let base = format!("http://{}", bin.addr);
    let (acked_tx, mut acked_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut clients = Vec::new();
    for c in 0..16u32 {
        let (base, acked_tx, append) = (base.clone(), acked_tx.clone(), append.clone());
        clients.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            for i in 0u32.. {
                match append(http.clone(), base.clone(), c, i).await {
                    Sent::Break(()) => return,
                    Sent::Continue(Some(acked)) => acked_tx.send(acked).unwrap(),
                    Sent::Continue(None) => {}
                }
            }
        }));
    }
    drop(acked_tx);
    // Let some appends through, then stop the server under load.
    let mut acked = Vec::new();
    while acked.len() < min_acked {
        acked.push(
            tokio::time::timeout(WATCHDOG, acked_rx.recv())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    stop(bin).await;
    for c in clients {
        tokio::time::timeout(WATCHDOG, c).await.unwrap().unwrap();
    }
    while let Some(a) = acked_rx.recv().await {
        acked.push(a);
    }
    (Binary::start(args).await, acked)
}

/// The binary under appends from 16 clients gets SIGTERM: it exits cleanly, and after a
/// restart every append it acknowledged (`sync=false` included: nearly all are) is there.
async fn sigterm_loses_nothing_acknowledged<F: StoreFactory>(factory: F) {
    let append = |http: reqwest::Client, base: String, c: u32, i: u32| async move {
        let body = format!("client {c} record {i}").into_bytes();
        let sent = http
            .post(format!(
                "{base}/logs/crash?sync={}",
                c == 0 && i.is_multiple_of(8)
            ))
            .body(body.clone())
            .send()
            .await;
        let Ok(r) = sent else {
            return Sent::Break(());
        };
        if r.status() != 200 {
            return Sent::Break(());
        }
        let Ok(v) = r.json::<Value>().await else {
            return Sent::Break(());
        };
        Sent::Continue(Some((v["position"].as_u64().unwrap(), body)))
    };
    let args = factory.binary_args();
    let (bin, acked) = acked_across_restart(&args, 400, append, Binary::terminate).await;
    let s = Server::client_of(bin.addr);
    let stored: std::collections::HashMap<u64, Vec<u8>> =
        s.read_all("crash", None, 1000).await.into_iter().collect();
    for (pos, body) in &acked {
        assert_eq!(
            stored.get(pos),
            Some(body),
            "acknowledged record at {pos} lost"
        );
    }
    bin.terminate().await;
}

/// Appends from 16 clients, three of four with `sync=true`, until the binary is killed
/// (SIGKILL, no shutdown): after a restart every `sync=true` append it acknowledged is there,
/// and the log reads back cleanly past whatever the crash tore.
async fn sigkill_keeps_synced_appends<F: StoreFactory>(factory: F) {
    let append = |http: reqwest::Client, base: String, c: u32, i: u32| async move {
        let sync = !i.is_multiple_of(4);
        let body = format!("client {c} record {i} sync {sync}").into_bytes();
        let sent = http
            .post(format!("{base}/logs/crash?sync={sync}"))
            .body(body.clone())
            .send()
            .await;
        let Ok(r) = sent else {
            return Sent::Break(());
        };
        let Ok(v) = r.json::<Value>().await else {
            return Sent::Break(());
        };
        Sent::Continue(sync.then(|| (v["position"].as_u64().unwrap(), body)))
    };
    let args = factory.binary_args();
    let (bin, acked) = acked_across_restart(&args, 300, append, Binary::kill).await;
    let s = Server::client_of(bin.addr);
    let stored: std::collections::HashMap<u64, Vec<u8>> =
        s.read_all("crash", None, 1000).await.into_iter().collect();
    for (pos, body) in &acked {
        assert_eq!(stored.get(pos), Some(body), "synced record at {pos} lost");
    }
    // The recovered log takes appends again.
    let pos = s.append("crash", b"after the crash", true).await;
    let last = s.read_all("crash", None, 1000).await.pop().unwrap();
    assert_eq!(last, (pos, b"after the crash".to_vec()));
    bin.terminate().await;
}

macro_rules! for_store {
    ($store:ident, $factory:expr) => {
        mod $store {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn every_route_and_restart() {
                super::every_route_and_restart($factory).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn bad_requests_get_4xx() {
                super::bad_requests_get_4xx($factory).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn random_requests_never_5xx() {
                super::random_requests_never_5xx($factory).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sigterm_loses_nothing_acknowledged() {
                super::sigterm_loses_nothing_acknowledged($factory).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sigkill_keeps_synced_appends() {
                super::sigkill_keeps_synced_appends($factory).await;
            }
        }
    };
}

for_store!(file, FileFactory::new());
for_store!(ziob, ZoneFactory::new());

/// A record too large for a zone fails alone: the zone store batches concurrent appends,
/// and the others of its batch still succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ziob_too_large_record_fails_alone() {
    use log_server::{Durability, LogName, LogStore, StoreError};
    let factory = ZoneFactory::new();
    let store = factory.open().await;
    let log = LogName::new("big").unwrap();
    for round in 0..5 {
        let mut calls = Vec::new();
        for i in 0..40usize {
            let (store, log) = (store.clone(), log.clone());
            let len = if i == 20 {
                common::TEST_ZONE_BYTES as usize
            } else {
                100
            };
            calls.push(tokio::spawn(async move {
                let record = bytes::Bytes::from(vec![i as u8; len]);
                store.append(&log, record, Durability::Buffered).await
            }));
        }
        for (i, call) in calls.into_iter().enumerate() {
            match (i, call.await.unwrap()) {
                (20, Err(StoreError::RecordTooLarge { .. })) => {}
                (20, other) => panic!("round {round}: the large record got {other:?}"),
                (_, r) => assert!(r.is_ok(), "round {round} record {i}: {r:?}"),
            }
        }
    }
    store.close().await.unwrap();
}
