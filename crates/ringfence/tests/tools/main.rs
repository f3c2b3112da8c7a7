//! The tool tests, in one test binary: each module calls tools the way the transport does,
//! over a fresh root and data directory per test (the fixture is in `common`).
#![allow(clippy::disallowed_methods)] // fixtures and oracles use std::fs on purpose

mod common;

mod containment;
mod delegate;
mod encodings;
mod grep_glob;
mod images;
mod llm_chat_seed;
mod media;
mod own_tools;
mod privileges;
mod read_file;
mod runner;
mod shell;
mod web;
mod write_edit;
