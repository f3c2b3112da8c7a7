//! The Anthropic client against a scripted Messages API: the headers (`x-api-key`,
//! `anthropic-version`), the system prompt as a top-level field, `tool_use` and
//! `tool_result` blocks linked by id, stop reasons, and every failure the API can answer
//! with.

use std::time::{Duration, Instant};

use ringfence_llm::{
    Anthropic, Block, ChatModel, LlmError, Message, Provider, Role, StopReason, Usage,
};
use serde_json::json;

use crate::{KEY, ask, assert_keyless, config, env_with, quick_retry};
use ringfence_net::fake_api::{FakeApi as Fake, Reply};

/// A client for `fake`, its key in ANTHROPIC_API_KEY.
fn model(fake: &Fake) -> Anthropic {
    Anthropic::new(
        &config(Provider::Anthropic, &fake.url),
        env_with("ANTHROPIC_API_KEY"),
    )
    .unwrap()
    .with_retry(quick_retry())
}

fn answer(content: serde_json::Value, stop_reason: &str) -> Reply {
    Reply::json(
        200,
        json!({
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "test-model",
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": null,
            "usage": {
                "input_tokens": 30,
                "cache_creation_input_tokens": 5,
                "cache_read_input_tokens": 100,
                "output_tokens": 9,
            },
        }),
    )
}

#[tokio::test]
async fn a_text_answer_and_the_request_that_asked_for_it() {
    let fake = Fake::scripted(vec![answer(
        json!([{"type": "text", "text": "Paris."}]),
        "end_turn",
    )])
    .await;
    let mut req = ask("Capital of France?");
    req.tools.clear();
    let reply = model(&fake).chat(req).await.unwrap();

    assert_eq!(reply.content, vec![Block::text("Paris.")]);
    assert_eq!(reply.stop, StopReason::EndTurn);
    // Cached tokens were read too: they count as input.
    assert_eq!(
        reply.usage,
        Usage {
            input_tokens: 135,
            output_tokens: 9
        }
    );
    let sent = &fake.requests()[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.target, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some(KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(
        sent.json(),
        json!({
            "model": "test-model",
            "max_tokens": 512,
            "system": "You are a careful assistant.",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Capital of France?"}]},
            ],
        })
    );
}

#[tokio::test]
async fn a_tool_call_round_trip_links_the_result_to_the_call() {
    let fake = Fake::scripted(vec![
        answer(
            json!([
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_01A", "name": "read_file", "input": {"path": "src/lib.rs"}},
            ]),
            "tool_use",
        ),
        answer(json!([{"type": "text", "text": "No such file."}]), "end_turn"),
    ])
    .await;
    let model = model(&fake);
    let mut req = ask("What does src/lib.rs do?");
    let first = model.chat(req.clone()).await.unwrap();

    assert_eq!(first.stop, StopReason::ToolUse);
    assert_eq!(
        first.content,
        vec![
            Block::text("Let me look."),
            Block::ToolUse {
                id: "toolu_01A".into(),
                name: "read_file".into(),
                input: json!({"path": "src/lib.rs"}),
            },
        ]
    );

    req.messages.push(first.assistant_message());
    // Text before the result: the request must still put the result first.
    req.messages.push(Message {
        role: Role::User,
        content: vec![
            Block::text("Be brief."),
            Block::ToolResult {
                id: "toolu_01A".into(),
                content: "no such file".into(),
                is_error: true,
            },
        ],
    });
    let second = model.chat(req).await.unwrap();
    assert_eq!(second.text(), "No such file.");

    let seen = fake.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0].json()["tools"],
        json!([{
            "name": "read_file",
            "description": "Reads a file of the workspace",
            "input_schema": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        }])
    );
    let messages = seen[1].json()["messages"].clone();
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_01A", "name": "read_file", "input": {"path": "src/lib.rs"}},
        ]})
    );
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "no such file", "is_error": true},
            {"type": "text", "text": "Be brief."},
        ]})
    );
}

#[tokio::test]
async fn input_that_is_not_an_object_becomes_an_error_result() {
    let fake = Fake::scripted(vec![answer(
        json!([{"type": "tool_use", "id": "toolu_X", "name": "read_file", "input": "path=src/lib.rs"}]),
        "tool_use",
    )])
    .await;
    let reply = model(&fake).chat(ask("hi")).await.unwrap();

    assert!(reply.tool_uses().is_empty(), "{:?}", reply.tool_uses());
    let prepared = reply.prepared_results();
    let [
        Block::ToolResult {
            id,
            content,
            is_error,
        },
    ] = prepared.as_slice()
    else {
        panic!("one prepared result expected: {prepared:?}");
    };
    assert_eq!(id, "toolu_X");
    assert!(*is_error);
    assert!(content.contains("path=src/lib.rs"), "{content}");
    // The assistant message keeps the call (so the result has something to answer).
    assert!(matches!(
        reply.assistant_message().content.as_slice(),
        [Block::ToolUse { id, .. }] if id == "toolu_X"
    ));
}

#[tokio::test]
async fn a_refused_key_names_its_variable_and_not_the_key() {
    let fake = Fake::scripted(vec![Reply::json(
        401,
        json!({"type": "error", "error": {"type": "authentication_error", "message": format!("invalid x-api-key {KEY}")}}),
    )])
    .await;
    let err = model(&fake).chat(ask("hi")).await.unwrap_err();

    assert!(
        matches!(err, LlmError::Refused { status: 401, .. }),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("ANTHROPIC_API_KEY"), "{message}");
    assert!(message.contains("invalid x-api-key [key]"), "{message}");
    assert_keyless(&message);
    assert_keyless(&format!("{err:?}"));
}

#[tokio::test]
async fn a_rate_limit_is_retried_then_succeeds() {
    let fake = Fake::scripted(vec![
        Reply::json(
            429,
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
        )
        .with_header("retry-after", "0.3"),
        answer(json!([{"type": "text", "text": "ok"}]), "end_turn"),
    ])
    .await;
    let started = Instant::now();
    let reply = model(&fake).chat(ask("hi")).await.unwrap();
    assert_eq!(reply.text(), "ok");
    assert_eq!(fake.requests().len(), 2);
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn rate_limits_are_retried_twice_at_most() {
    let limited = || Reply::json(429, json!({})).with_header("retry-after", "0");
    let fake = Fake::scripted(vec![limited(), limited(), limited(), limited()]).await;
    let err = model(&fake).chat(ask("hi")).await.unwrap_err();

    assert!(
        matches!(
            err,
            LlmError::RateLimited {
                attempts: 3,
                retry_after: Some(Duration::ZERO),
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(fake.requests().len(), 3, "one request and two retries");
}

#[tokio::test]
async fn a_retry_after_beyond_ten_seconds_is_not_waited_for() {
    let fake = Fake::scripted(vec![
        Reply::json(429, json!({})).with_header("retry-after", "60"),
        answer(json!([{"type": "text", "text": "too late"}]), "end_turn"),
    ])
    .await;
    let err = model(&fake).chat(ask("hi")).await.unwrap_err();

    assert!(
        matches!(
            err,
            LlmError::RateLimited { attempts: 1, retry_after: Some(d), .. } if d == Duration::from_secs(60)
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("wait 60 s"), "{err}");
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn a_server_error_is_quoted_without_the_key() {
    let fake = Fake::scripted(vec![Reply::json(
        529,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": format!("Overloaded (request with key {KEY})")}}),
    )])
    .await;
    let err = model(&fake).chat(ask("hi")).await.unwrap_err();

    assert!(matches!(err, LlmError::Http { status: 529, .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("\"Overloaded (request with key [key])\""),
        "{message}"
    );
    assert_keyless(&message);
}

#[tokio::test]
async fn truncated_json_is_a_bad_response_quoting_at_most_300_characters() {
    let body = format!(
        r#"{{"content": [{{"type": "text", "text": "{}"#,
        "x".repeat(1000)
    );
    let fake = Fake::scripted(vec![Reply::raw(200, "application/json", body.as_bytes())]).await;
    let err = model(&fake).chat(ask("hi")).await.unwrap_err();

    let LlmError::BadResponse { quote, .. } = &err else {
        panic!("BadResponse expected: {err:?}");
    };
    assert!(
        quote.starts_with(r#": "{"content": [{"type": "text""#),
        "{quote}"
    );
    // `: "` + 300 characters + `…"`.
    assert_eq!(quote.chars().count(), 3 + 300 + 2, "{quote}");
    assert!(quote.ends_with("…\""), "{quote}");
}

#[tokio::test]
async fn no_key_is_refused_before_any_request() {
    let err = Anthropic::new(
        &config(Provider::Anthropic, "https://api.anthropic.com"),
        crate::no_env,
    )
    .unwrap_err();
    let LlmError::NoKey { var, .. } = &err else {
        panic!("NoKey expected: {err:?}");
    };
    assert_eq!(var, "ANTHROPIC_API_KEY");
    let message = err.to_string();
    assert!(message.contains("set ANTHROPIC_API_KEY"), "{message}");
    assert!(message.contains("api_key_env"), "{message}");
}
