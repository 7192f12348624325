//! glommio 0.9: QD tasks on one `LocalExecutor`. `O_DIRECT` reads use `DmaFile::read_at_aligned`
//! and buffered reads `BufferedFile::read_at`; both return a buffer glommio allocates per read
//! (its API has no caller-owned read buffer), which is glommio's normal shape. The NOP workload
//! uses `glommio::nop::NopSubmitter::run_nop` (glommio's `bench` feature).

use std::rc::Rc;

use glommio::io::{BufferedFile, DmaFile};
use glommio::nop::NopSubmitter;
use glommio::{LocalExecutorBuilder, Placement};

use super::{nop_loop, read_loop};
use crate::meter::{Meter, Sample};
use crate::spec::{Mode, RunSpec, Workload, BLOCK_SIZE_BYTES};

/// Memory glommio registers for its I/O buffers, in bytes (fits the default 8 MiB
/// `RLIMIT_MEMLOCK`).
const IO_MEMORY_BYTES: usize = 2 << 20;

enum AnyFile {
    Dma(DmaFile),
    Buffered(BufferedFile),
}

pub(super) fn run(spec: &RunSpec) -> Result<Sample, String> {
    let spec = spec.clone();
    let handle = LocalExecutorBuilder::new(Placement::Unbound)
        .io_memory(IO_MEMORY_BYTES)
        .name("rt-bench-glommio")
        .spawn(move || async move {
            let meter = Rc::new(Meter::new(spec.warmup, spec.duration, None));
            if spec.workload == Workload::Nop {
                let tasks: Vec<_> = (0..spec.qd)
                    .map(|_| {
                        let meter = meter.clone();
                        glommio::spawn_local(async move {
                            let nop = NopSubmitter::new();
                            nop_loop(&meter, || nop.run_nop()).await
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await?;
                }
                return meter.sample();
            }
            let file = match spec.mode {
                Mode::Direct => DmaFile::open(&spec.path).await.map(AnyFile::Dma),
                Mode::Buffered => BufferedFile::open(&spec.path).await.map(AnyFile::Buffered),
            }
            .map_err(|e| format!("open {}: {e}", spec.path.display()))?;
            let file = Rc::new(file);
            let blocks = spec.blocks_count();
            let tasks: Vec<_> = (0..spec.qd)
                .map(|i| {
                    let (file, meter) = (file.clone(), meter.clone());
                    glommio::spawn_local(async move {
                        let len = BLOCK_SIZE_BYTES as usize;
                        let file: &AnyFile = &file;
                        read_loop(i, blocks, &meter, (), |(), off| async move {
                            let res = match file {
                                AnyFile::Dma(f) => f.read_at_aligned(off, len).await,
                                AnyFile::Buffered(f) => f.read_at(off, len).await,
                            };
                            (res.map(|r| r.len()).map_err(Into::into), ())
                        })
                        .await
                    })
                })
                .collect();
            for t in tasks {
                t.await?;
            }
            meter.sample()
        })
        .map_err(|e| format!("glommio executor: {e}"))?;
    handle
        .join()
        .map_err(|e| format!("glommio executor: {e}"))?
}
