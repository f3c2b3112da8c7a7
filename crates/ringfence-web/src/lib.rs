//! The backends of ringfence's web and images families: the fetcher behind `web_fetch`
//! (every request through the SSRF guard of `ringfence-net`), main-content extraction, the
//! search providers behind `web_search`, and the images API client behind `generate_image`.

pub mod charset;
pub mod extract;
pub mod fetch;
pub mod images;
#[cfg(feature = "pdf")]
pub mod pdf_budget;
pub mod render;
pub mod robots;
pub mod search;

mod api;

pub use api::SetupError;

pub use fetch::{FetchSettings, WebFetcher};
