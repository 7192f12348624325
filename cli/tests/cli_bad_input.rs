//! Out-of-range numbers anywhere on the `ziob` command line are errors with a message (exit
//! 1, or 2 for values that do not parse), never a panic.

mod cli_support;

use cli_support::{device, ok, run};

/// Numbers at the edges: zero, block edges, 32- and 64-bit limits, sizes whose suffix
/// overflows, and text that is not a number.
const EDGES: &[&str] = &[
    "0",
    "1",
    "4095",
    "4096",
    "1M",
    "4294967295",
    "4294967296",
    "9223372036854775808",
    "18446744073709547520",
    "18446744073709551615",
    "18446744073709551616",
    "16383P",
    "17179869184G",
    "18014398509481984K",
    "-1",
    "0x10",
    "",
];

/// Tiny seeded generator (xorshift64*), so a failure names a replayable seed.
struct Rng(u64);

impl Rng {
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        from[(self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % from.len() as u64) as usize]
    }
}

fn assert_no_panic(args: &[&str], stdin: &[u8], ctx: &str) {
    let out = run(args, stdin);
    let err = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code();
    assert!(
        matches!(code, Some(0..=2)) && !err.contains("panicked"),
        "{ctx}: ziob {args:?} exited {code:?}: {err}"
    );
    if code != Some(0) {
        assert!(
            err.starts_with("ziob: ") || err.starts_with("error: "),
            "{ctx}: ziob {args:?} failed without a message: {err:?}"
        );
    }
}

/// `read`, `report`, zone actions, `write` and `append` with edge values for every number,
/// on an emu device and on a `mem:` device with the largest zone size.
#[test]
fn edge_numbers_are_errors_not_panics() {
    let seed = std::env::var("CLI_EDGE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0xED6E_5EED_u64);
    eprintln!("seed {seed} (CLI_EDGE_SEED replays it)");
    let mut rng = Rng(seed | 1);
    let d = device(&["--zones", "4", "--zone-size", "1M"]);
    ok(&["write", &d.spec, "--zone", "1"], &[7u8; 8192]);
    let huge = "mem:zones=1,zone_size=18446744073709547520".to_string();
    for round in 0..60 {
        let ctx = format!("seed {seed} round {round}");
        let (z, o, l) = (rng.pick(EDGES), rng.pick(EDGES), rng.pick(EDGES));
        // Valid reads are at most one zone of 1 MiB; on the huge device only tiny ones.
        let spec = if round % 3 == 0 { &huge } else { &d.spec };
        let l = if spec == &huge && !l.is_empty() && l != "0" {
            "4K"
        } else {
            l
        };
        assert_no_panic(
            &["read", spec, "--zone", z, "--offset", o, "--length", l],
            b"",
            &ctx,
        );
        assert_no_panic(&["report", spec, "--zone", z], b"", &ctx);
        let action = rng.pick(&["reset", "open", "close", "finish"]);
        assert_no_panic(&[action, &d.spec, z], b"", &ctx);
        let op = rng.pick(&["write", "append"]);
        assert_no_panic(&[op, &d.spec, "--zone", z, "--pad"], &[1u8; 100], &ctx);
        assert_no_panic(&["info", spec], b"", &ctx);
    }
}

/// `create` with sizes that overflow once the emu file's header is added must be refused
/// with a message (`--zones 1 --zone-size 18446744073709547520` used to create a 12 KiB file
/// for a 16 EiB device, today it panics in the backend's file-size arithmetic).
#[test]
fn create_with_a_geometry_that_overflows_is_an_error() {
    let d = device(&["--zones", "1", "--zone-size", "1M"]);
    let mut rng = Rng(0xC4EA7E);
    for round in 0..30 {
        let path = d.dir.path().join(format!("c{round}.zns"));
        let spec = format!("emu:{}", path.display());
        let (zones, size, cap, bs, max_append) = (
            rng.pick(EDGES),
            rng.pick(EDGES),
            rng.pick(EDGES),
            rng.pick(&["512", "4096", "65536", "0", "3"]),
            rng.pick(EDGES),
        );
        let mut args = vec![
            "create",
            spec.as_str(),
            "--zones",
            zones,
            "--zone-size",
            size,
            "--block-size",
            bs,
        ];
        if round % 2 == 0 {
            args.extend(["--zone-capacity", cap, "--max-append", max_append]);
        }
        assert_no_panic(&args, b"", &format!("round {round}"));
    }
    // The case from the issue, whole.
    let path = d.dir.path().join("huge.zns");
    let spec = format!("emu:{}", path.display());
    let out = run(
        &[
            "create",
            &spec,
            "--zones",
            "1",
            "--zone-size",
            "18446744073709547520",
        ],
        b"",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with("ziob: "), "{err}");
}
