//! Documents a server offers besides tools: MCP resources and prompts, per user, and text
//! to add to the instructions a client receives at `initialize`. The transport asks; the
//! tool families answer (the memory family offers the user's pinned truths).

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

/// Resources and prompts for a user.
pub trait Resources: Send + Sync + std::fmt::Debug {
    fn resources(&self) -> Vec<ResourceInfo>;
    /// `None` when no resource has that URI; `Some(Err)` when it could not be read.
    fn read(&self, user: &str, uri: &str) -> Option<Result<String, String>>;
    fn prompts(&self) -> Vec<PromptInfo>;
    /// `None` when no prompt has that name.
    fn prompt(&self, user: &str, name: &str) -> Option<Result<String, String>>;
    /// Text appended to the server instructions for this user, if any.
    fn instructions(&self, user: &str) -> Option<String>;
}
