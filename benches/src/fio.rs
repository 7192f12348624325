//! fio's io_uring engine on the same file, parsed from `--output-format=json`.
//!
//! CPU per op comes from the job's `usr_cpu` + `sys_cpu` (percent of the job's runtime), the
//! same user + system accounting the in-process runners take from `getrusage`.

use serde_json::Value;

use crate::meter::Sample;
use crate::spec::{Mode, RunSpec, Workload};

/// The fio command line for `spec` (randread only; fio has no NOP workload).
pub fn args(spec: &RunSpec, fixed: bool) -> Vec<String> {
    assert_eq!(spec.workload, Workload::Randread, "fio runs randread only");
    let mut a = vec![
        "--name=rt-bench".to_string(),
        format!("--filename={}", spec.path.display()),
        "--ioengine=io_uring".into(),
        "--rw=randread".into(),
        "--bs=4k".into(),
        format!("--iodepth={}", spec.qd),
        format!("--direct={}", u8::from(spec.mode == Mode::Direct)),
        format!("--size={}", spec.file_size_bytes),
        "--invalidate=0".into(),
        "--norandommap".into(),
        "--randrepeat=0".into(),
        "--time_based".into(),
        format!("--ramp_time={}ms", spec.warmup.as_millis().max(1)),
        format!("--runtime={}ms", spec.duration.as_millis().max(1)),
        "--numjobs=1".into(),
        "--output-format=json".into(),
    ];
    if fixed {
        a.push("--fixedbufs".into());
        a.push("--registerfiles".into());
    }
    a
}

/// Runs fio and turns its JSON into a [`Sample`].
pub fn run(spec: &RunSpec, fixed: bool) -> Result<Sample, String> {
    let mut words = vec!["fio".to_string()];
    words.extend(args(spec, fixed));
    let stdout = crate::process::output_checked(&words)
        .map_err(|e| format!("{e} (fio: apt-get install fio)"))?;
    parse(&stdout)
}

fn num(v: &Value, path: &[&str]) -> Result<f64, String> {
    let mut cur = v;
    for p in path {
        cur = cur
            .get(p)
            .ok_or_else(|| format!("fio JSON has no {}", path.join(".")))?;
    }
    cur.as_f64()
        .ok_or_else(|| format!("fio JSON {} is not a number", path.join(".")))
}

/// Parses fio's JSON output (anything before the first `{` is ignored).
pub fn parse(stdout: &str) -> Result<Sample, String> {
    let start = stdout.find('{').ok_or("fio printed no JSON")?;
    let v: Value = serde_json::from_str(&stdout[start..]).map_err(|e| format!("fio JSON: {e}"))?;
    let job = v
        .get("jobs")
        .and_then(|j| j.get(0))
        .ok_or("fio JSON has no jobs[0]")?;
    let iops = num(job, &["read", "iops"])?;
    let ios = num(job, &["read", "total_ios"])?;
    let runtime_ms = num(job, &["read", "runtime"])?;
    let job_runtime_ms = num(job, &["job_runtime"]).unwrap_or(runtime_ms);
    let usr = num(job, &["usr_cpu"])?;
    let sys = num(job, &["sys_cpu"])?;
    if ios <= 0.0 {
        return Err("fio completed no reads".into());
    }
    let cpu_ns = (usr + sys) / 100.0 * job_runtime_ms * 1e6;
    Ok(Sample {
        ops: ios as u64,
        secs: runtime_ms / 1e3,
        iops,
        cpu_ns_per_op: cpu_ns / ios,
        thread_cpu_ns_per_op: cpu_ns / ios,
        sys_share: if usr + sys > 0.0 {
            sys / (usr + sys)
        } else {
            0.0
        },
        enters_per_op: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_fields_it_needs() {
        let json = r#"fio: note
        {"jobs":[{"job_runtime":1000,"usr_cpu":10.0,"sys_cpu":40.0,
          "read":{"iops":1000.0,"total_ios":1000,"runtime":1000}}]}"#;
        let s = parse(json).unwrap();
        assert_eq!(s.ops, 1000);
        assert_eq!(s.iops, 1000.0);
        // 50% of 1 s over 1000 ops = 500 µs per op.
        assert!((s.cpu_ns_per_op - 500_000.0).abs() < 1e-6);
        assert!((s.sys_share - 0.8).abs() < 1e-9);
    }
}
