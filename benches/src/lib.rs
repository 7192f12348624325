//! ziob-benches (work in progress).
