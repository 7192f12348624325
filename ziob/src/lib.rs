//! ziob (work in progress).
