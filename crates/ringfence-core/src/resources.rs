//! Documents a server offers besides tools: MCP resources and prompts, per user, and text
//! to add to the instructions a client receives at `initialize`. The transport asks; the
//! families answer through their providers (the memory family offers the user's pinned
//! truths). Nothing here knows MCP.

use std::sync::Arc;

use crate::error::BackendError;

/// A resource a client can list and read.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceInfo {
    pub uri: &'static str,
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub mime_type: &'static str,
}

/// A prompt a client can list and get (no arguments).
#[derive(Debug, Clone, PartialEq)]
pub struct PromptInfo {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
}

/// A prompt as got: one user message and a description of what it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptContent {
    pub description: String,
    pub text: String,
}

/// Resources and prompts for a user, offered by one family.
pub trait ResourceProvider: Send + Sync + std::fmt::Debug {
    fn resources(&self) -> Vec<ResourceInfo>;
    /// `None` when no resource of this provider has that URI; `Some(Err)` when it could
    /// not be read.
    fn read(&self, user: &str, uri: &str) -> Option<Result<String, BackendError>>;
    fn prompts(&self) -> Vec<PromptInfo>;
    /// `None` when no prompt of this provider has that name.
    fn prompt(&self, user: &str, name: &str) -> Option<Result<PromptContent, BackendError>>;
    /// Text appended to the server instructions for this user, if any.
    fn instructions(&self, user: &str) -> Option<String>;
}

/// Every provider of the families a server offers, asked in order.
#[derive(Debug, Clone, Default)]
pub struct ResourceSet {
    providers: Vec<Arc<dyn ResourceProvider>>,
}

impl ResourceSet {
    pub fn new(providers: Vec<Arc<dyn ResourceProvider>>) -> ResourceSet {
        ResourceSet { providers }
    }

    pub fn is_empty(&self) -> bool {
        self.providers.is_empty()
    }

    pub fn resources(&self) -> Vec<ResourceInfo> {
        self.providers.iter().flat_map(|p| p.resources()).collect()
    }

    pub fn read(&self, user: &str, uri: &str) -> Option<Result<String, BackendError>> {
        self.providers.iter().find_map(|p| p.read(user, uri))
    }

    pub fn prompts(&self) -> Vec<PromptInfo> {
        self.providers.iter().flat_map(|p| p.prompts()).collect()
    }

    pub fn prompt(&self, user: &str, name: &str) -> Option<Result<PromptContent, BackendError>> {
        self.providers.iter().find_map(|p| p.prompt(user, name))
    }

    /// Every provider's additions for `user`, joined by blank lines.
    pub fn instructions(&self, user: &str) -> Option<String> {
        let parts: Vec<String> = self
            .providers
            .iter()
            .filter_map(|p| p.instructions(user))
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }
}
