//! The user's pinned truths, always available to the client: as the resource
//! `ringfence://truths/pinned`, as the prompt `pinned_truths`, and (when configured)
//! appended to the server instructions.

use std::sync::Arc;

use super::{Item, MemoryBackend};
use ringfence_core::error::BackendError;
use ringfence_core::resources::{PromptContent, PromptInfo, ResourceInfo, ResourceProvider};

pub const PINNED_URI: &str = "ringfence://truths/pinned";
pub const PINNED_PROMPT: &str = "pinned_truths";

/// Serves the pinned truths of whoever asks.
#[derive(Debug)]
pub struct PinnedTruths {
    memory: Arc<dyn MemoryBackend>,
    in_instructions: bool,
}

impl PinnedTruths {
    pub fn new(memory: Arc<dyn MemoryBackend>, in_instructions: bool) -> PinnedTruths {
        PinnedTruths {
            memory,
            in_instructions,
        }
    }

    fn text(&self, user: &str) -> Result<String, BackendError> {
        Ok(render(&self.memory.pinned(user)?))
    }
}

/// The pinned truths as a short list the model can take in at once.
pub fn render(items: &[Item]) -> String {
    if items.is_empty() {
        return "No truths are pinned yet. Pin a core fact with store_truth(isPinned: true)."
            .into();
    }
    let mut s = String::from("Pinned truths about the user (always relevant, whatever the topic):");
    for t in items {
        s.push_str(&format!("\n- [truth #{}] {}", t.id, t.content));
        if let Some(c) = &t.category {
            s.push_str(&format!(" ({c})"));
        }
    }
    s
}

impl ResourceProvider for PinnedTruths {
    fn resources(&self) -> Vec<ResourceInfo> {
        vec![ResourceInfo {
            uri: PINNED_URI,
            name: "pinned-truths",
            title: "Pinned truths",
            description: "The user's pinned truths: core facts to keep in mind in every conversation",
            mime_type: "text/plain",
        }]
    }

    fn read(&self, user: &str, uri: &str) -> Option<Result<String, BackendError>> {
        (uri == PINNED_URI).then(|| self.text(user))
    }

    fn prompts(&self) -> Vec<PromptInfo> {
        vec![PromptInfo {
            name: PINNED_PROMPT,
            title: "Pinned truths",
            description: "Adds the user's pinned truths (core facts to keep in mind) to the conversation",
        }]
    }

    fn prompt(&self, user: &str, name: &str) -> Option<Result<PromptContent, BackendError>> {
        (name == PINNED_PROMPT).then(|| {
            self.text(user).map(|text| PromptContent {
                description: "The user's pinned truths".into(),
                text,
            })
        })
    }

    fn instructions(&self, user: &str) -> Option<String> {
        if !self.in_instructions {
            return None;
        }
        match self.memory.pinned(user) {
            Ok(items) if !items.is_empty() => Some(render(&items)),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "pinned truths left out of the instructions");
                None
            }
        }
    }
}
