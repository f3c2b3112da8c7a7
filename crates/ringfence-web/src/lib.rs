//! The web family of ringfence: its two tools ([`tools`]), the fetcher behind `web_fetch`
//! (every request through the SSRF guard of `ringfence-net`), main-content extraction, the
//! search providers behind `web_search`, its `[web]` settings and [`WebPlug`].

pub mod charset;
pub mod extract;
pub mod fetch;
#[cfg(feature = "pdf")]
pub mod pdf_budget;
mod plug;
pub mod render;
pub mod robots;
pub mod search;
mod search_settings;
pub mod settings;
pub mod tools;

pub use ringfence_net::service::SetupError;

pub use fetch::{FetchSettings, WebFetcher};
pub use plug::WebPlug;
