//! ziob-backends (work in progress).
