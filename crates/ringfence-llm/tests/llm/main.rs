//! ringfence-llm's tests, in one test binary: each provider against a scripted fake of its
//! API on loopback (`fake`), checking what is sent as closely as what comes of each answer.

mod anthropic;
mod config;
mod openai;

use std::time::Duration;

use ringfence_llm::{ChatRequest, Message, ProviderConfig, RetryPolicy, ToolSpec};
use serde_json::json;

/// The key every test configures; no message or `Debug` output may contain it.
pub const KEY: &str = "sk-test-93fe1c0a7b";

/// An environment holding `KEY` in `var` and nothing else.
pub fn env_with(var: &'static str) -> impl Fn(&str) -> Option<String> {
    move |name: &str| (name == var).then(|| KEY.to_owned())
}

/// An empty environment.
pub fn no_env(_: &str) -> Option<String> {
    None
}

pub fn config(provider: ringfence_llm::Provider, base_url: &str) -> ProviderConfig {
    ProviderConfig {
        provider,
        base_url: Some(base_url.to_owned()),
        model: "test-model".to_owned(),
        api_key_env: None,
    }
}

/// Quick retries, so the rate-limit tests take moments.
pub fn quick_retry() -> RetryPolicy {
    RetryPolicy {
        retries: 2,
        backoff: Duration::from_millis(20),
        max_wait: Duration::from_secs(10),
    }
}

/// The tool every tool test offers.
pub fn read_file_tool() -> ToolSpec {
    ToolSpec {
        name: "read_file".to_owned(),
        description: "Reads a file of the workspace".to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        }),
    }
}

/// A one-question request with the tool `read_file_tool` offered.
pub fn ask(question: &str) -> ChatRequest {
    ChatRequest {
        system: "You are a careful assistant.".to_owned(),
        messages: vec![Message::user(question)],
        tools: vec![read_file_tool()],
        max_tokens: 512,
    }
}

/// Panics unless `text` is free of the key.
pub fn assert_keyless(text: &str) {
    assert!(!text.contains(KEY), "the key leaked: {text}");
}
