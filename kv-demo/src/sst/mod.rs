//! Sorted string tables: blocks, the bloom filter, and the table file made of them.

pub mod block;
pub mod bloom;
pub mod cache;
pub mod table;
