//! ringfence-web's tests, in one test binary: real HTTP servers on loopback addresses, the
//! fetcher with a scripted resolver (see `common`).

mod common;

mod documents;
mod extract_hostile;
mod hostile;
mod search;
mod ssrf;
