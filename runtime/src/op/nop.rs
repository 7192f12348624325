//! The NOP op: a full round trip through the ring that does nothing.

use super::Op;
use crate::error::{Error, Result};
use crate::ring::Sqe;

/// Submits a NOP and waits for its completion.
pub async fn nop() -> Result<()> {
    let sqe = io_uring::opcode::Nop::new().build();
    // SAFETY: a NOP refers to no memory.
    let op = unsafe { Op::submit("nop", Sqe::Normal(sqe), ()) }.map_err(|(e, _)| e)?;
    let (c, ()) = op.await;
    if c.result < 0 {
        return Err(Error::from_errno("nop", c.result));
    }
    Ok(())
}
