//! SPDK tasks for the `spdk:` backend (see docs/SPDK.md): `spdk-build` builds a
//! user-supplied SPDK source tree into a prefix with the switches the backend needs;
//! `spdk-test` runs every SPDK test and the CLI over `spdk:` in the QEMU guest. The
//! repository contains no SPDK or DPDK code; these tasks only drive the user's copy.

mod bind;
mod guest_test;
mod install;
mod packages;
mod patch;
mod source_build;

pub use bind::BIND_FUNCTIONS;
pub use guest_test::{run_test, TestArgs};
pub use install::{find_install, prefix as install_prefix};
pub use source_build::{run_build, BuildArgs};
