//! The images family (seed 003): `generate_image` makes an image from a description through
//! the configured images API, saves it in the user's workspace under
//! `images/YYYY-MM-DD/<slug>-<id>.png` and returns it as image content.
//!
//! The tool validates, counts and saves; making the image lives behind [`ImageGenerator`]
//! ([`client`]: the OpenAI Images API and compatible endpoints). Its failures cross as
//! [`WebError`]s, like the web family's: they are outbound calls to an operator's API with
//! the same kinds of failure.
//!
//! Each user may make at most `daily_limit` images a day (UTC); the counts are kept by a
//! [`UsageLedger`] ([`ImagesPlug`] keeps them in the data directory, so a restart does not
//! reset them).

mod cap;
pub mod client;
mod generate_image;
mod plug;
pub mod settings;

use std::sync::Arc;

use ringfence_core::family::{Family, FamilyInfo};
use ringfence_core::tool::{Async, BoxFuture, Tool};
use ringfence_net::WebError;

pub use cap::{DailyCap, MemoryLedger, UsageLedger};
pub use generate_image::{GenerateImage, IMAGES_DIR, slug};
pub use plug::ImagesPlug;

/// The tool family name (`tools.disable = ["images"]`).
pub const FAMILY: &str = "images";

pub const INFO: FamilyInfo = FamilyInfo {
    name: FAMILY,
    summary: "generate images from a description through a configured images API (OpenAI gpt-image-1 or compatible), saved in the workspace",
    tools: &["generate_image"],
    presets: &[ringfence_core::PresetPart {
        name: ringfence_core::family::ASSISTANT,
        summary: ringfence_core::family::ASSISTANT_SUMMARY,
        tools: ringfence_core::family::EVERY_TOOL,
    }],
};

/// The sizes `generate_image` offers (seed 003).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImageSize {
    /// 1024x1024 (the default).
    Square,
    /// 1536x1024.
    Landscape,
    /// 1024x1536.
    Portrait,
}

impl ImageSize {
    pub const ALL: [ImageSize; 3] = [ImageSize::Square, ImageSize::Landscape, ImageSize::Portrait];

    /// As the API and the tool's argument spell it (`1536x1024`).
    pub fn as_str(self) -> &'static str {
        match self {
            ImageSize::Square => "1024x1024",
            ImageSize::Landscape => "1536x1024",
            ImageSize::Portrait => "1024x1536",
        }
    }

    pub fn parse(text: &str) -> Option<ImageSize> {
        ImageSize::ALL
            .into_iter()
            .find(|s| s.as_str() == text.trim().to_ascii_lowercase())
    }
}

/// One image to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRequest {
    /// The description (the prompt), as the model wrote it.
    pub prompt: String,
    pub size: ImageSize,
    /// Who asks (providers that take an end-user id get it).
    pub user: String,
}

/// An image made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedImage {
    /// `image/png`, `image/jpeg` or `image/webp`.
    pub mime: String,
    pub data: Vec<u8>,
    /// The prompt as the provider rewrote it, when it says.
    pub revised_prompt: Option<String>,
}

/// Makes images (an images API).
pub trait ImageGenerator: Send + Sync {
    fn generate(
        &self,
        request: ImageRequest,
    ) -> BoxFuture<'static, Result<GeneratedImage, WebError>>;
}

/// What the images family is built from.
pub struct ImageServices {
    pub generator: Arc<dyn ImageGenerator>,
    /// Images per user per day (UTC); 0 turns the tool off.
    pub daily_limit: u32,
    /// Where the day's counts are kept.
    pub ledger: Arc<dyn UsageLedger>,
}

/// Builds the images family.
pub fn family(services: ImageServices) -> Family {
    let tools: Vec<Arc<dyn Tool>> = vec![Async::arc(GenerateImage {
        generator: services.generator,
        cap: Arc::new(DailyCap::new(services.daily_limit, services.ledger)),
    })];
    Family::new(&INFO, tools)
}
