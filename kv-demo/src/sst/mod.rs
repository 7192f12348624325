//! The SSTable's building blocks (the table file itself is not built yet).

pub mod block;
pub mod bloom;
