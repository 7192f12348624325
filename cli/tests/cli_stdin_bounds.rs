//! `write`, `append` and `stats` read stdin only up to what the zone takes (plus one byte):
//! larger input is refused at once, naming the zone and its remaining capacity, and nothing
//! is written — even when stdin never ends.

mod cli_support;

use std::io::Write;

use cli_support::{data, device, fails, ok, run, spawn, wait_or_kill, zone_json};

/// Bytes the endless feeder offers before it just holds the pipe open.
const FEED_BYTES: usize = 16 << 20;

/// Runs `ziob args` with a stdin that offers `FEED_BYTES` and then stays open (as `cat
/// /dev/zero` would, without the memory blow-up in the test). Returns the output and how
/// many bytes the feeder got into the pipe before the CLI closed it.
fn run_with_endless_stdin(args: &[&str]) -> (std::process::Output, usize) {
    let mut child = spawn(args, &[]);
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let chunk = vec![0xA5u8; 64 << 10];
        let mut sent = 0;
        while sent < FEED_BYTES {
            if stdin.write_all(&chunk).is_err() {
                break;
            }
            sent += chunk.len();
        }
        // Returned, not dropped: the pipe stays open until the test is done with the child.
        (stdin, sent)
    });
    let out = wait_or_kill(child, &format!("ziob {args:?} with endless stdin"));
    let (stdin, sent) = feeder.join().unwrap();
    drop(stdin);
    (out, sent)
}

#[test]
fn endless_stdin_is_refused_at_once_and_nothing_is_written() {
    // 4 zones of 1 MiB, capacity 768 KiB; zone 1 holds one block.
    let d = device(&[
        "--zones",
        "4",
        "--zone-size",
        "1M",
        "--zone-capacity",
        "768K",
    ]);
    let first = data(4096, 7);
    ok(&["write", &d.spec, "--zone", "1"], &first);
    let cases: [(&[&str], &str); 4] = [
        (
            &["write", &d.spec, "--zone", "1"],
            "ziob: input is larger than zone 1 can take: 782336 bytes of capacity remain after its write pointer (byte 4096); nothing was written\n",
        ),
        (
            &["write", &d.spec, "--zone", "1", "--pad"],
            "ziob: input is larger than zone 1 can take: 782336 bytes of capacity remain after its write pointer (byte 4096); nothing was written\n",
        ),
        (
            &["append", &d.spec, "--zone", "1"],
            "ziob: input is larger than one append to zone 1 may be: the zone append size limit is 524288 bytes (782336 bytes of capacity remain in the zone); nothing was written\n",
        ),
        (
            &["stats", &d.spec, "--zone", "1"],
            "ziob: input is larger than zone 1 can take: 782336 bytes of capacity remain after its write pointer (byte 4096); nothing was written\n",
        ),
    ];
    for (args, want) in cases {
        let (out, sent) = run_with_endless_stdin(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err, want, "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
        assert!(
            sent < FEED_BYTES,
            "{args:?} read all {sent} bytes offered instead of stopping after what fits"
        );
        let z = zone_json(&d.spec, 1);
        assert_eq!(z["write_pointer"], 4096, "{args:?} wrote: {z}");
        assert_eq!(z["state"], "closed", "{args:?}: {z}");
    }
    let back = run(
        &[
            "read", &d.spec, "--zone", "1", "--offset", "0", "--length", "8K",
        ],
        b"",
    );
    assert_eq!(&back.stdout[..4096], &first[..]);
    assert!(back.stdout[4096..].iter().all(|&b| b == 0));
}

/// Tiny seeded generator (xorshift64*), so a failure names a replayable seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// Around the bound: input of exactly what fits is accepted (whole, at the write pointer);
/// one byte more is refused and leaves the zone as it was. Seeded write pointers.
#[test]
fn exactly_what_fits_is_accepted_and_one_byte_more_is_refused() {
    let seed = std::env::var("CLI_BOUNDS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_0001_u64);
    eprintln!("seed {seed} (CLI_BOUNDS_SEED replays it)");
    let mut rng = Rng(seed | 1);
    // Capacity 192 blocks, append limit 32 blocks.
    let d = device(&[
        "--zones",
        "6",
        "--zone-size",
        "1M",
        "--zone-capacity",
        "768K",
        "--max-append",
        "128K",
    ]);
    let cap = 768 * 1024u64;
    for zone in 0..6u32 {
        let z = zone.to_string();
        let append = zone % 2 == 1;
        let op = if append { "append" } else { "write" };
        let pad = rng.below(2) == 1;
        // Fill to a random block (the last zones close to or at the capacity).
        let wp = match zone {
            4 => cap - 4096,
            5 => cap - 64 * 1024,
            _ => rng.below(cap / 4096) * 4096,
        };
        let mut filled = 0;
        while filled < wp {
            let n = (wp - filled).min(128 * 1024);
            ok(&["append", &d.spec, "--zone", &z], &data(n as usize, 1));
            filled += n;
        }
        let room = cap - wp;
        let limit = if append { room.min(128 * 1024) } else { room };
        let ctx = format!("seed {seed} zone {zone} {op} pad {pad} wp {wp} limit {limit}");
        let mut args = vec![op, d.spec.as_str(), "--zone", &z];
        if pad {
            args.push("--pad");
        }
        // One byte more than fits (padded or not: the input itself is too large).
        let err = fails(&args, &data(limit as usize + 1, 2));
        assert!(err.contains("is larger than"), "{ctx}: {err}");
        assert!(
            err.contains(&format!("{room} bytes of capacity remain")),
            "{ctx}: {err}"
        );
        assert_eq!(
            zone_json(&d.spec, zone)["write_pointer"],
            wp,
            "{ctx}: refused input wrote"
        );
        // Exactly what fits.
        let input = data(limit as usize, 3);
        let out = ok(&args, &input);
        if append {
            assert_eq!(out, format!("{wp}\n"), "{ctx}");
        }
        let after = zone_json(&d.spec, zone);
        assert_eq!(after["write_pointer"], wp + limit, "{ctx}");
        let back = run(
            &[
                "read",
                &d.spec,
                "--zone",
                &z,
                "--offset",
                &wp.to_string(),
                "--length",
                &limit.to_string(),
            ],
            b"",
        );
        assert!(back.stdout == input, "{ctx}: data read back differs");
    }
}

#[test]
fn a_full_zone_is_refused_before_stdin_is_read() {
    let d = device(&["--zones", "2", "--zone-size", "1M"]);
    ok(&["finish", &d.spec, "0"], b"");
    let (out, sent) = run_with_endless_stdin(&["append", &d.spec, "--zone", "0"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with("ziob: Zone Is Full: append"), "{err}");
    assert!(sent < FEED_BYTES);
}
