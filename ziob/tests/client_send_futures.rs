//! Compile-time checks: `Client` and `BlockingClient` are `Clone + Send + Sync`, and every
//! `Client` future is `Send` (and `'static` where it owns its inputs), so tokio can spawn it.

use bytes::Bytes;
use ziob::{BlockingClient, Client, DmaBuf, ZoneAction, ZoneTarget};

fn assert_send<T: Send>(_: &T) {}
fn assert_static<T: 'static>(_: &T) {}
fn assert_send_sync_clone<T: Send + Sync + Clone + 'static>() {}

/// Never called: builds every future to check its bounds at compile time.
#[allow(dead_code, clippy::let_underscore_future)]
fn every_future_is_send(c: Client, h: ziob::runtime::Handle) {
    macro_rules! check {
        ($f:expr) => {{
            let f = $f;
            assert_send(&f);
            assert_static(&f);
        }};
    }
    check!(Client::open(h, "mem:", ziob::ZiobConfig::default()));
    check!(c.append(0, Bytes::new()));
    check!(c.append_slice(0, b"x"));
    check!(c.append_dma(0, DmaBuf::from_slice(b"x")));
    check!(c.write_at(0, 0, Bytes::new()));
    check!(c.write_at_slice(0, 0, b"x"));
    check!(c.write_at_dma(0, 0, DmaBuf::from_slice(b"x")));
    check!(c.read(0, 0, 1));
    check!(c.flush(0));
    check!(c.sync());
    check!(c.reset(0));
    check!(c.finish(0));
    check!(c.zone_action(ZoneAction::Open, ZoneTarget::All));
    check!(c.report(0, 1));
    check!(c.stats());
    check!(c.metrics());
    check!(c.close());
    check!(c.with_ziob(|z| async move { Ok(z.view_name().len()) }));
    // Borrows the caller's buffer: Send, not 'static.
    let mut buf = [0u8; 4];
    let f = c.read_into(0, 0, &mut buf);
    assert_send(&f);
    // tokio can spawn them.
    let c2 = c.clone();
    let _ = tokio::spawn(async move { c2.append_slice(1, b"y").await });
    let c3 = c.clone();
    let _ = tokio::spawn(async move {
        let mut b = vec![0u8; 8];
        c3.read_into(1, 0, &mut b).await
    });
}

#[test]
fn clients_are_clone_send_sync() {
    assert_send_sync_clone::<Client>();
    assert_send_sync_clone::<BlockingClient>();
    assert_send_sync_clone::<ziob::runtime::Handle>();
}
