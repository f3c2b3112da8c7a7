#![allow(clippy::disallowed_methods)]
// fixtures and oracles use std::fs on purpose
// The fixtures make FIFOs and read /proc: these run on Linux (the only platform tested by
// running; the others are type-checked).
#![cfg(target_os = "linux")]

//! Integration tests of ringfence-fs, in one test binary (one link step instead of one per
//! file):
//!
//! - `client_roots`: what an MCP client's roots may do under each policy;
//! - `containment`: a table of hostile inputs against a fresh tree, plus standalone cases
//!   (missing, nested and internal roots, modes, denied paths, symlink loops);
//! - `path_properties`: generated paths never resolve or write outside the root;
//! - `races`: a directory swapped for a symlink while writers and a walker run;
//! - `crash_safety`: a writer killed mid-write never leaves a torn file;
//! - `set_id`: copies and writes never hand set-user-ID/set-group-ID bits to a new owner;
//! - `rejection_log`: a rejected path cannot forge log lines;
//! - `private_data`: the data directory's records are made and kept private.
//!
//! `common` holds the fixtures they share: a one-root workspace, tree snapshots, walk listings.

mod client_roots;
mod common;
mod containment;
mod crash_safety;
mod path_properties;
mod private_data;
mod races;
mod rejection_log;
mod set_id;
