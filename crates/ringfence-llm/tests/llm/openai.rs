//! The OpenAI-compatible client against a scripted chat-completions API: the request's
//! shape (system first, function tools, tool results as `tool` messages), tool calls read
//! back (arguments parsed from their string, unreadable ones answered with an error), and
//! every failure the API can answer with.

use std::time::{Duration, Instant};

use ringfence_llm::{
    Block, ChatModel, ChatRequest, LlmError, Message, OpenAiCompatible, Provider, Role, StopReason,
    Usage,
};
use serde_json::json;

use crate::{KEY, ask, assert_keyless, config, env_with, quick_retry};
use ringfence_net::fake_api::{FakeApi as Fake, Reply};

/// A client for `fake`, its key in OPENAI_API_KEY.
fn model(fake: &Fake) -> OpenAiCompatible {
    OpenAiCompatible::new(
        &config(Provider::OpenAi, &format!("{}/v1", fake.url)),
        env_with("OPENAI_API_KEY"),
    )
    .unwrap()
    .with_retry(quick_retry())
}

fn text_answer(text: &str) -> Reply {
    Reply::json(
        200,
        json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "test-model",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }],
            "usage": {"prompt_tokens": 41, "completion_tokens": 7, "total_tokens": 48},
        }),
    )
}

/// An answer calling tools: `(id, arguments string)` calls of `read_file`.
fn tool_answer(calls: &[(&str, &str)]) -> Reply {
    let calls: Vec<_> = calls
        .iter()
        .map(|(id, args)| {
            json!({"id": id, "type": "function", "function": {"name": "read_file", "arguments": args}})
        })
        .collect();
    Reply::json(
        200,
        json!({
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": null, "tool_calls": calls},
                "finish_reason": "tool_calls",
            }],
            "usage": {"prompt_tokens": 60, "completion_tokens": 20},
        }),
    )
}

#[tokio::test]
async fn a_text_answer_and_the_request_that_asked_for_it() {
    let fake = Fake::scripted(vec![text_answer("Paris.")]).await;
    let mut req = ask("Capital of France?");
    req.tools.clear();
    let answer = model(&fake).chat(req).await.unwrap();

    assert_eq!(answer.content, vec![Block::text("Paris.")]);
    assert_eq!(answer.stop, StopReason::EndTurn);
    assert_eq!(
        answer.usage,
        Usage {
            input_tokens: 41,
            output_tokens: 7
        }
    );
    let seen = fake.requests();
    assert_eq!(seen.len(), 1);
    let sent = &seen[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.target, "/v1/chat/completions");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(sent.header("content-type"), Some("application/json"));
    let body = sent.json();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["max_tokens"], 512);
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You are a careful assistant."},
            {"role": "user", "content": "Capital of France?"},
        ])
    );
    assert!(
        body.get("tools").is_none(),
        "no tools, no tools field: {body}"
    );
}

#[tokio::test]
async fn a_tool_call_round_trip_links_the_result_to_the_call() {
    let fake = Fake::scripted(vec![
        tool_answer(&[("call_abc", r#"{"path": "src/lib.rs"}"#)]),
        text_answer("It defines main."),
    ])
    .await;
    let model = model(&fake);
    let mut req = ask("What does src/lib.rs do?");
    let first = model.chat(req.clone()).await.unwrap();

    assert_eq!(first.stop, StopReason::ToolUse);
    assert_eq!(
        first.content,
        vec![Block::ToolUse {
            id: "call_abc".into(),
            name: "read_file".into(),
            input: json!({"path": "src/lib.rs"}),
        }]
    );
    assert_eq!(first.tool_uses().len(), 1);
    assert!(first.prepared_results().is_empty());

    req.messages.push(first.assistant_message());
    req.messages.push(Message {
        role: Role::User,
        content: vec![Block::ToolResult {
            id: "call_abc".into(),
            content: "fn main() {}".into(),
            is_error: false,
        }],
    });
    let second = model.chat(req).await.unwrap();
    assert_eq!(second.text(), "It defines main.");

    let seen = fake.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0].json()["tools"],
        json!([{
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Reads a file of the workspace",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
            },
        }])
    );
    let messages = seen[1].json()["messages"].clone();
    assert_eq!(messages.as_array().unwrap().len(), 4, "{messages}");
    let call = &messages[2];
    assert_eq!(call["role"], "assistant");
    assert_eq!(call["content"], json!(null));
    assert_eq!(call["tool_calls"][0]["id"], "call_abc");
    assert_eq!(call["tool_calls"][0]["type"], "function");
    assert_eq!(call["tool_calls"][0]["function"]["name"], "read_file");
    let arguments = call["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .expect("arguments travel as a string");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(arguments).unwrap(),
        json!({"path": "src/lib.rs"})
    );
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "call_abc", "content": "fn main() {}"})
    );
}

#[tokio::test]
async fn unreadable_arguments_become_an_error_result_the_loop_sends_back() {
    let fake = Fake::scripted(vec![
        tool_answer(&[
            ("call_bad", r#"{"path": "src/"#),
            ("call_good", r#"{"path": "Cargo.toml"}"#),
        ]),
        text_answer("Done."),
    ])
    .await;
    let model = model(&fake);
    let mut req = ask("Read two files");
    let first = model.chat(req.clone()).await.unwrap();

    // Only the readable call is to be run; the other is already answered.
    let to_run = first.tool_uses();
    assert_eq!(to_run.len(), 1);
    assert_eq!(to_run[0].0, "call_good");
    assert_eq!(to_run[0].2, &json!({"path": "Cargo.toml"}));
    let prepared = first.prepared_results();
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
    assert_eq!(id, "call_bad");
    assert!(*is_error);
    assert!(content.contains("read_file"), "{content}");
    assert!(content.contains("not valid JSON"), "{content}");
    assert!(content.contains(r#"{"path": "src/"#), "{content}");

    // The loop sends the prepared result beside the result of the call it ran.
    req.messages.push(first.assistant_message());
    let mut results = prepared.clone();
    results.push(Block::ToolResult {
        id: "call_good".into(),
        content: "[package]".into(),
        is_error: false,
    });
    req.messages.push(Message {
        role: Role::User,
        content: results,
    });
    model.chat(req).await.unwrap();

    let messages = fake.requests()[1].json()["messages"].clone();
    let calls = &messages[2]["tool_calls"];
    // The unreadable arguments go back exactly as the model wrote them.
    assert_eq!(calls[0]["function"]["arguments"], r#"{"path": "src/"#);
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(messages[3]["tool_call_id"], "call_bad");
    assert!(
        messages[3]["content"]
            .as_str()
            .unwrap()
            .starts_with("error: ")
    );
    assert_eq!(
        messages[4],
        json!({"role": "tool", "tool_call_id": "call_good", "content": "[package]"})
    );
}

#[tokio::test]
async fn a_refused_key_names_its_variable_and_not_the_key() {
    let fake = Fake::scripted(vec![Reply::json(
        401,
        json!({"error": {"message": format!("Incorrect API key provided: {KEY}"), "type": "invalid_request_error", "code": "invalid_api_key"}}),
    )])
    .await;
    let mut cfg = config(Provider::OpenAi, &format!("{}/v1", fake.url));
    cfg.api_key_env = Some("MY_LLM_KEY".into());
    let model = OpenAiCompatible::new(&cfg, env_with("MY_LLM_KEY")).unwrap();
    let err = model.chat(ask("hi")).await.unwrap_err();

    let LlmError::Refused { status, .. } = &err else {
        panic!("Refused expected: {err:?}");
    };
    assert_eq!(*status, 401);
    let message = err.to_string();
    assert!(message.contains("MY_LLM_KEY"), "{message}");
    assert!(message.contains("HTTP 401"), "{message}");
    assert!(
        message.contains("Incorrect API key provided: [key]"),
        "{message}"
    );
    assert_keyless(&message);
    assert_keyless(&format!("{err:?}"));
    assert_eq!(fake.requests().len(), 1, "a refusal is not retried");
}

#[tokio::test]
async fn a_rate_limit_is_waited_out_as_retry_after_says() {
    let fake = Fake::scripted(vec![
        Reply::json(429, json!({"error": {"message": "Rate limit reached"}}))
            .with_header("retry-after", "1"),
        text_answer("Finally."),
    ])
    .await;
    let started = Instant::now();
    let answer = model(&fake).chat(ask("hi")).await.unwrap();

    assert_eq!(answer.text(), "Finally.");
    assert_eq!(fake.requests().len(), 2);
    // The policy's backoff is 20 ms: only Retry-After explains a wait of a second.
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_server_error_is_quoted_without_the_key() {
    let fake = Fake::scripted(vec![Reply::raw(
        500,
        "text/plain",
        format!("upstream exploded   while\nforwarding Bearer {KEY}").as_bytes(),
    )])
    .await;
    let err = model(&fake).chat(ask("hi")).await.unwrap_err();

    let LlmError::Http {
        status, endpoint, ..
    } = &err
    else {
        panic!("Http expected: {err:?}");
    };
    assert_eq!(*status, 500);
    assert_eq!(endpoint, &format!("{}/v1", fake.url));
    let message = err.to_string();
    assert!(
        message.contains("\"upstream exploded while forwarding Bearer [key]\""),
        "{message}"
    );
    assert_keyless(&message);
}

#[tokio::test]
async fn an_answer_that_is_not_json_is_a_bad_response() {
    let fake = Fake::scripted(vec![Reply::raw(
        200,
        "text/html",
        b"<html><body>502 Bad Gateway</body></html>",
    )])
    .await;
    let err = model(&fake).chat(ask("hi")).await.unwrap_err();

    assert!(matches!(err, LlmError::BadResponse { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("<html><body>502 Bad Gateway</body></html>"),
        "{message}"
    );
}

#[tokio::test]
async fn json_without_choices_is_a_bad_response() {
    let fake = Fake::scripted(vec![Reply::json(200, json!({"choices": []}))]).await;
    let err = model(&fake).chat(ask("hi")).await.unwrap_err();
    let LlmError::BadResponse { reason, .. } = &err else {
        panic!("BadResponse expected: {err:?}");
    };
    assert!(reason.contains("no choices"), "{reason}");
}

#[tokio::test]
async fn a_local_server_needs_no_key_and_gets_none() {
    let fake = Fake::scripted(vec![text_answer("ok")]).await;
    let model = OpenAiCompatible::new(
        &config(Provider::OpenAi, &format!("{}/v1", fake.url)),
        crate::no_env,
    )
    .unwrap();
    assert_eq!(model.chat(ask("hi")).await.unwrap().text(), "ok");
    assert_eq!(fake.requests()[0].header("authorization"), None);
}

#[tokio::test]
async fn older_servers_saying_stop_after_tool_calls_still_mean_tool_use() {
    // Some servers report "stop" with tool calls, or send the arguments as an object.
    let fake = Fake::scripted(vec![Reply::json(
        200,
        json!({"choices": [{
            "message": {"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "read_file", "arguments": {"path": "a"}}},
            ]},
            "finish_reason": "stop",
        }]}),
    )])
    .await;
    let answer = model(&fake)
        .chat(ChatRequest {
            max_tokens: 16,
            ..ask("hi")
        })
        .await
        .unwrap();
    assert_eq!(answer.stop, StopReason::ToolUse);
    assert_eq!(
        answer.content,
        vec![Block::ToolUse {
            id: "call_0".into(),
            name: "read_file".into(),
            input: json!({"path": "a"}),
        }]
    );
    assert_eq!(answer.usage, Usage::default());
}
