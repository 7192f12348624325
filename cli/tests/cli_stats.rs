//! `ziob stats` drives stdin through the buffer and reports what the shards did.

mod cli_support;

use cli_support::ziob;

#[test]
fn stats_reports_write_backs_hits_and_the_durable_result() {
    let dir = tempfile::tempdir().unwrap();
    let dev = format!("emu:{}", dir.path().join("s.zns").display());
    let (code, _, err) = ziob(&["create", &dev, "--zones", "4", "--zone-size", "4M"], b"");
    assert_eq!(code, 0, "{err}");
    let data: Vec<u8> = (0..1_500_000u32).map(|i| (i % 251) as u8).collect();
    let (code, out, err) = ziob(
        &[
            "stats", &dev, "--zone", "3", "--bs", "4K", "--cores", "2", "--json",
        ],
        &data,
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let t = &v["total"];
    assert_eq!(t["bytes_written"], 1_500_000);
    assert_eq!(t["read_hits"], 1, "the read-back came from memory");
    assert_eq!(t["dirty_bytes"], 0, "flushed");
    assert!(t["writebacks"].as_u64().unwrap() >= 3, "{t}");
    assert_eq!(t["writeback_size_max_bytes"], 512 * 1024);
    assert_eq!(v["shards"].as_array().unwrap().len(), 2);
    // Zone 3 belongs to core 1 of 2.
    assert_eq!(v["shards"][1]["bytes_written"], 1_500_000);
    // The data is on the device, padded to a block.
    let (code, out, _) = ziob(&["report", &dev, "--zone", "3", "--json"], b"");
    assert_eq!(code, 0);
    assert!(out.contains("\"write_pointer\": 1503232"), "{out}");
    let (code, _, err) = ziob(&["stats", &dev, "--zone", "9"], b"x");
    assert_eq!(code, 1);
    assert_eq!(
        err.trim(),
        "ziob: LBA Out of Range: zone 9 does not exist, the device has 4 zones"
    );
}
