//! The floor of an async-task executor: no io_uring, no runtime, just `spawn_local` tasks whose
//! schedule function pushes the `Runnable` onto a thread-local `VecDeque`, and a loop that pops
//! and runs them. QD tasks each loop on a yield (`wake_by_ref` + `Pending`), so one op is one
//! wake (schedule) plus one `Runnable::run` (poll) — what any executor built on async-task pays
//! per task switch at least, whatever else it does.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use async_task::Runnable;

use crate::meter::{Meter, Sample};
use crate::spec::{RunSpec, Workload};

thread_local! {
    static QUEUE: RefCell<VecDeque<Runnable>> = RefCell::new(VecDeque::with_capacity(1024));
}

/// Yields once: wakes its own task (which queues it again) and returns `Pending`.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// Runs `spec` (yield workload only) on the calling thread.
pub fn run(spec: &RunSpec) -> Result<Sample, String> {
    if spec.workload != Workload::Yield {
        return Err(format!("async-task has no {} workload", spec.workload));
    }
    let meter = Rc::new(Meter::new(spec.warmup, spec.duration, None));
    let schedule = |r: Runnable| QUEUE.with(|q| q.borrow_mut().push_back(r));
    let tasks: Vec<_> = (0..spec.qd)
        .map(|_| {
            let meter = meter.clone();
            let (runnable, task) = async_task::spawn_local(
                async move {
                    loop {
                        YieldOnce(false).await;
                        if !meter.tick() {
                            return;
                        }
                    }
                },
                schedule,
            );
            runnable.schedule();
            task
        })
        .collect();
    while let Some(r) = QUEUE.with(|q| q.borrow_mut().pop_front()) {
        r.run();
    }
    for t in &tasks {
        if !t.is_finished() {
            return Err("a task did not finish".into());
        }
    }
    drop(tasks);
    meter.sample()
}
