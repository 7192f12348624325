//! `pin_cores`: core i runs on the i-th CPU of the affinity mask of the thread that built the
//! runtime (a restricted cpuset or taskset), not on CPU `i % nproc`.

use std::time::Duration;

use ziob_runtime::Runtime;

fn affinity() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0
        );
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

fn set_affinity(cpus: &[usize]) {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0
        );
    }
}

#[test]
fn cores_pin_to_the_cpus_of_the_builders_mask() {
    let allowed = affinity();
    // Every one-CPU mask the process may use (the last first: not CPU 0 = `i % nproc`).
    let masks: Vec<Vec<usize>> = allowed.iter().rev().map(|&c| vec![c]).collect();
    let t = std::thread::spawn(move || {
        for mask in masks {
            set_affinity(&mask);
            let rt = Runtime::builder().cores(3).pin_cores(true).build().unwrap();
            let got = rt.run_on_all(|_| async { affinity() }).unwrap();
            for (core, cpus) in got.iter().enumerate() {
                assert_eq!(cpus, &mask, "core {core} runs on {cpus:?}, mask {mask:?}");
            }
        }
        if allowed.len() >= 2 {
            // Two CPUs: cores take them in order and wrap around.
            let mask = vec![allowed[allowed.len() - 1], allowed[0]];
            set_affinity(&mask);
            let rt = Runtime::builder().cores(3).pin_cores(true).build().unwrap();
            let got = rt.run_on_all(|_| async { affinity() }).unwrap();
            let mut sorted = mask.clone();
            sorted.sort();
            assert_eq!(got[0], vec![sorted[0]]);
            assert_eq!(got[1], vec![sorted[1]]);
            assert_eq!(got[2], vec![sorted[0]]);
        }
    });
    let start = std::time::Instant::now();
    while !t.is_finished() {
        assert!(start.elapsed() < Duration::from_secs(30), "hung");
        std::thread::sleep(Duration::from_millis(10));
    }
    t.join().unwrap();
}
