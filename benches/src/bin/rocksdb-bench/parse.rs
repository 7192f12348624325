//! Reading `db_bench`'s stdout: the shared parser of the benches library (also used by
//! `kv-bench` for kv-demo's db_bench-format output).

pub use ziob_benches::db_bench::*;
