//! kv-demo (work in progress).
