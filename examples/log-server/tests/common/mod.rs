//! Test harness: a server in this process on an ephemeral port, a real HTTP client, and
//! the stores to run every test on.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use futures::StreamExt;
use log_server::store::file::FileStore;
use log_server::store::zone::{create_emu_if_missing, ZoneStore};
use log_server::{serve, ApiOptions, LogStore, ServeError};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Generous watchdog for anything that waits (a hang fails the test, it never passes it).
pub const WATCHDOG: Duration = Duration::from_secs(30);

/// Opens a store on the same storage each time it is called (so a restart finds the data).
pub trait StoreFactory: Send + Sync {
    /// The store type.
    type Store: LogStore;
    /// Opens the store.
    fn open(&self) -> impl Future<Output = Arc<Self::Store>> + Send;
    /// The `log-server` arguments that select the same storage.
    fn binary_args(&self) -> Vec<String>;
}

/// The file store in a temporary directory.
pub struct FileFactory {
    pub dir: tempfile::TempDir,
}

impl FileFactory {
    pub fn new() -> Self {
        FileFactory {
            dir: tempfile::tempdir().unwrap(),
        }
    }
}

impl StoreFactory for FileFactory {
    type Store = FileStore;
    async fn open(&self) -> Arc<FileStore> {
        Arc::new(FileStore::open(self.dir.path()).await.unwrap())
    }
    fn binary_args(&self) -> Vec<String> {
        let dir = self.dir.path().display().to_string();
        vec!["--store".into(), "file".into(), "--dir".into(), dir]
    }
}

/// The zone store on an emu device in a temporary directory, with a ZIOB runtime of its own.
pub struct ZoneFactory {
    /// Holds the device file (removed on drop).
    pub _dir: tempfile::TempDir,
    pub spec: String,
    pub runtime: ziob::Runtime,
}

/// Zones of the test device: small, so records spread over several zones.
pub const TEST_ZONES: u32 = 32;
/// Zone size of the test device in bytes.
pub const TEST_ZONE_BYTES: u64 = 128 << 10;

impl ZoneFactory {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let spec = format!("emu:{}", dir.path().join("dev.zns").display());
        let runtime = ziob::Runtime::builder().cores(1).build().unwrap();
        ZoneFactory {
            _dir: dir,
            spec,
            runtime,
        }
    }
}

impl StoreFactory for ZoneFactory {
    type Store = ZoneStore;
    async fn open(&self) -> Arc<ZoneStore> {
        let geometry = ziob::Geometry::new(TEST_ZONES, TEST_ZONE_BYTES);
        create_emu_if_missing(&self.runtime.handle(), &self.spec, geometry)
            .await
            .unwrap();
        let config = ziob::ZiobConfig::default();
        Arc::new(
            ZoneStore::open(self.runtime.handle(), &self.spec, config)
                .await
                .unwrap(),
        )
    }
    fn binary_args(&self) -> Vec<String> {
        [
            "--store",
            "ziob",
            "--dev",
            &self.spec,
            "--create-zones",
            &TEST_ZONES.to_string(),
            "--create-zone-size",
            &TEST_ZONE_BYTES.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }
}

/// A running server.
pub struct Server {
    pub addr: SocketAddr,
    /// The store's kind (`LogStore::kind`; empty for a client of the binary).
    pub kind: &'static str,
    pub http: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), ServeError>>>,
}

/// The limit the tests run with (small, so the 413 test is cheap).
pub const RECORD_BYTES_MAX: usize = 64 << 10;

impl Server {
    /// Starts a server over a store from `factory`.
    pub async fn start<F: StoreFactory>(factory: &F) -> Server {
        let store = factory.open().await;
        let kind = store.kind();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let options = ApiOptions {
            record_bytes_max: RECORD_BYTES_MAX,
            sse_keep_alive: Duration::from_millis(200),
            ..ApiOptions::default()
        };
        let task = tokio::spawn(serve(store, listener, options, async move {
            let _ = stopped.await;
        }));
        Server {
            addr,
            kind,
            http: reqwest::Client::new(),
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// A client of a server running elsewhere (the binary); `stop` must not be called.
    pub fn client_of(addr: SocketAddr) -> Server {
        Server {
            addr,
            kind: "",
            http: reqwest::Client::new(),
            stop: None,
            task: None,
        }
    }

    /// `http://ADDR{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Stops the server gracefully and waits until its store is closed.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(WATCHDOG, self.task.take().unwrap())
            .await
            .expect("graceful shutdown hung")
            .unwrap()
            .unwrap();
    }

    /// `POST /logs/{log}` with `body`; answers the position.
    pub async fn append(&self, log: &str, body: &[u8], sync: bool) -> u64 {
        let r = self
            .http
            .post(self.url(&format!("/logs/{log}?sync={sync}")))
            .body(body.to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{:?}", r.text().await);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["durable"], sync);
        v["position"].as_u64().unwrap()
    }

    /// `GET {path}`: status and JSON body.
    pub async fn get_json(&self, path: &str) -> (u16, Value) {
        let r = self.http.get(self.url(path)).send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Every record of `log` from `from` on, paging with `next`, `max` at a time.
    pub async fn read_all(&self, log: &str, from: Option<u64>, max: usize) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        let mut from = from;
        loop {
            let path = match from {
                Some(f) => format!("/logs/{log}?from={f}&max={max}"),
                None => format!("/logs/{log}?max={max}"),
            };
            let (status, v) = self.get_json(&path).await;
            assert_eq!(status, 200, "{v}");
            let records = v["records"].as_array().unwrap();
            assert!(records.len() <= max);
            for r in records {
                let data = BASE64.decode(r["data"].as_str().unwrap()).unwrap();
                out.push((r["position"].as_u64().unwrap(), data));
            }
            if records.is_empty() {
                assert_eq!(v["next"], v["end"], "an empty read must be at the end: {v}");
                return out;
            }
            from = Some(v["next"].as_u64().unwrap());
        }
    }
}

/// One Server-Sent Event.
#[derive(Debug, Default)]
pub struct SseEvent {
    pub event: String,
    pub id: String,
    pub data: String,
}

/// Reads SSE events from a response, skipping keep-alive comments.
pub struct SseReader {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buf: String,
}

impl SseReader {
    pub fn new(r: reqwest::Response) -> Self {
        SseReader {
            body: r.bytes_stream().boxed(),
            buf: String::new(),
        }
    }

    /// The next event, or `None` when the stream ended.
    pub async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(i) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..i + 2).collect();
                let mut ev = SseEvent::default();
                let mut any = false;
                for line in block.lines() {
                    if let Some((k, v)) = line.split_once(':') {
                        let v = v.strip_prefix(' ').unwrap_or(v).to_string();
                        match k {
                            "event" => ev.event = v,
                            "id" => ev.id = v,
                            "data" => ev.data = v,
                            _ => continue,
                        }
                        any = true;
                    }
                }
                if any {
                    return Some(ev);
                }
                continue;
            }
            let chunk = tokio::time::timeout(WATCHDOG, self.body.next())
                .await
                .expect("SSE stream hung")?;
            self.buf
                .push_str(std::str::from_utf8(&chunk.expect("SSE body")).unwrap());
        }
    }

    /// The next `record` event as (position, bytes).
    pub async fn record(&mut self) -> (u64, Vec<u8>) {
        let ev = self.next().await.expect("stream ended early");
        assert_eq!(ev.event, "record", "{ev:?}");
        (ev.id.parse().unwrap(), BASE64.decode(&ev.data).unwrap())
    }
}

/// A deterministic generator for the tests that search (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// The `log-server` binary, started on an ephemeral port; killed if still running when dropped.
pub struct Binary {
    pub child: tokio::process::Child,
    pub addr: SocketAddr,
}

impl Binary {
    /// Starts the binary with `args` and waits for its "listening on" line.
    pub async fn start(args: &[String]) -> Binary {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_log-server"))
            .args(args)
            .args(["--listen", "127.0.0.1:0"])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(WATCHDOG, lines.next_line())
            .await
            .expect("server start hung")
            .unwrap()
            .expect("server exited before listening");
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .parse()
            .unwrap();
        Binary { child, addr }
    }

    /// Sends SIGKILL (a crash: nothing runs after it) and waits for the exit.
    pub async fn kill(mut self) {
        self.child.start_kill().unwrap();
        tokio::time::timeout(WATCHDOG, self.child.wait())
            .await
            .expect("SIGKILL did not end the server")
            .unwrap();
    }

    /// Sends SIGTERM and waits for a successful exit.
    pub async fn terminate(mut self) {
        let pid = self.child.id().unwrap().to_string();
        let kill = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(kill.success());
        let status = tokio::time::timeout(WATCHDOG, self.child.wait())
            .await
            .expect("graceful shutdown hung")
            .unwrap();
        assert!(status.success(), "log-server exited with {status}");
    }
}
