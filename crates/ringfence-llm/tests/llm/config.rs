//! Making a model from its configuration (`build`): which key variable is read, when a key
//! is required, what `describe` and `Debug` show (never the key), and the failures that
//! come before or instead of an answer (timeouts, unreachable servers, unusable keys).

use std::time::Duration;

use ringfence_llm::{
    Anthropic, ChatModel, LlmError, OpenAiCompatible, Provider, ProviderConfig, build,
};
use serde_json::json;

use crate::{KEY, ask, assert_keyless, config, env_with, no_env};
use ringfence_net::fake_api::{FakeApi as Fake, Reply};

fn ok_completion() -> Reply {
    Reply::json(
        200,
        json!({"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}),
    )
}

#[tokio::test]
async fn build_reads_the_configured_variable_and_describes_the_model() {
    let fake = Fake::scripted(vec![ok_completion()]).await;
    let cfg = ProviderConfig {
        provider: Provider::OpenAi,
        base_url: Some(format!("{}/v1/", fake.url)),
        model: "qwen3:8b".into(),
        api_key_env: Some("LOCAL_LLM_KEY".into()),
    };
    let model = build(&cfg, env_with("LOCAL_LLM_KEY")).unwrap();
    assert_eq!(
        model.describe(),
        format!("openai-compatible qwen3:8b at {}/v1", fake.url)
    );
    model.chat(ask("hi")).await.unwrap();
    assert_eq!(
        fake.requests()[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(fake.requests()[0].json()["model"], "qwen3:8b");
}

#[test]
fn build_makes_an_anthropic_model_from_its_default_variable() {
    let cfg = ProviderConfig {
        provider: Provider::Anthropic,
        base_url: None,
        model: "claude-sonnet-4-5".into(),
        api_key_env: None,
    };
    let model = build(&cfg, env_with("ANTHROPIC_API_KEY")).unwrap();
    assert_eq!(
        model.describe(),
        "anthropic claude-sonnet-4-5 at https://api.anthropic.com"
    );
    // The same configuration with the key under another name finds none.
    let err = build(&cfg, env_with("OPENAI_API_KEY")).err().unwrap();
    assert!(matches!(err, LlmError::NoKey { ref var, .. } if var == "ANTHROPIC_API_KEY"));
}

#[test]
fn a_remote_openai_endpoint_needs_a_key_and_an_empty_variable_is_none() {
    let cfg = ProviderConfig {
        provider: Provider::OpenAi,
        base_url: None,
        model: "gpt-4o".into(),
        api_key_env: None,
    };
    let err = build(&cfg, no_env).err().unwrap();
    let LlmError::NoKey { var, endpoint } = &err else {
        panic!("NoKey expected: {err:?}");
    };
    assert_eq!(var, "OPENAI_API_KEY");
    assert_eq!(endpoint, "https://api.openai.com/v1");
    let blank = |name: &str| (name == "OPENAI_API_KEY").then(|| "  \n".to_owned());
    assert!(matches!(
        build(&cfg, blank).err().unwrap(),
        LlmError::NoKey { .. }
    ));
    // A LAN address is not loopback.
    let lan = ProviderConfig {
        base_url: Some("http://192.168.1.20:11434/v1".into()),
        ..cfg
    };
    assert!(matches!(
        build(&lan, no_env).err().unwrap(),
        LlmError::NoKey { .. }
    ));
}

#[test]
fn debug_output_never_shows_the_key() {
    let openai = OpenAiCompatible::new(
        &config(Provider::OpenAi, "https://api.openai.com/v1"),
        env_with("OPENAI_API_KEY"),
    )
    .unwrap();
    let anthropic = Anthropic::new(
        &config(Provider::Anthropic, "https://api.anthropic.com"),
        env_with("ANTHROPIC_API_KEY"),
    )
    .unwrap();
    for debug in [format!("{openai:?}"), format!("{anthropic:?}")] {
        assert_keyless(&debug);
        assert!(debug.contains("[redacted]"), "{debug}");
        assert!(debug.contains("test-model"), "{debug}");
    }
}

#[test]
fn credentials_in_the_base_url_stay_out_of_messages() {
    let cfg = config(Provider::OpenAi, "https://user:hunter2@llm.example/v1");
    let err = build(&cfg, no_env).err().unwrap();
    let message = err.to_string();
    assert!(message.contains("https://llm.example/v1"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");
}

#[test]
fn unusable_urls_and_keys_are_setup_errors_without_the_key() {
    let bad_url = build(&config(Provider::OpenAi, "ftp://host/v1"), no_env)
        .err()
        .unwrap();
    assert!(matches!(bad_url, LlmError::Setup(_)), "{bad_url:?}");
    let broken_key = |_: &str| Some(format!("{KEY}\u{1}tail"));
    let err = build(
        &config(Provider::Anthropic, "https://api.anthropic.com"),
        broken_key,
    )
    .err()
    .unwrap();
    assert!(matches!(err, LlmError::Setup(_)), "{err:?}");
    assert!(err.to_string().contains("ANTHROPIC_API_KEY"), "{err}");
    assert_keyless(&err.to_string());
}

#[tokio::test]
async fn surrounding_whitespace_is_trimmed_from_the_key() {
    let fake = Fake::scripted(vec![ok_completion()]).await;
    let padded = |_: &str| Some(format!("  {KEY}\n"));
    let model = build(&config(Provider::OpenAi, &fake.url), padded).unwrap();
    model.chat(ask("hi")).await.unwrap();
    assert_eq!(
        fake.requests()[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
}

#[tokio::test]
async fn an_anthropic_base_url_ending_in_v1_is_not_doubled() {
    let fake = Fake::scripted(vec![Reply::json(
        200,
        json!({"content": [], "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 0}}),
    )])
    .await;
    let model = build(
        &config(Provider::Anthropic, &format!("{}/v1", fake.url)),
        env_with("ANTHROPIC_API_KEY"),
    )
    .unwrap();
    let reply = model.chat(ask("hi")).await.unwrap();
    assert!(reply.content.is_empty());
    assert_eq!(fake.requests()[0].target, "/v1/messages");
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let fake = Fake::scripted(vec![ok_completion().after(Duration::from_secs(5))]).await;
    let model = OpenAiCompatible::new(&config(Provider::OpenAi, &fake.url), no_env)
        .unwrap()
        .with_timeout(Duration::from_millis(300));
    let err = model.chat(ask("hi")).await.unwrap_err();
    assert!(
        matches!(err, LlmError::Timeout { after, .. } if after == Duration::from_millis(300)),
        "{err:?}"
    );
    assert!(err.to_string().contains(&fake.url), "{err}");
}

#[tokio::test]
async fn an_unreachable_server_is_a_transport_error_naming_it() {
    // A port that was just free: nothing listens there.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let model = build(&config(Provider::OpenAi, &url), env_with("OPENAI_API_KEY")).unwrap();
    let err = model.chat(ask("hi")).await.unwrap_err();
    let LlmError::Transport { endpoint, .. } = &err else {
        panic!("Transport expected: {err:?}");
    };
    assert_eq!(endpoint, &url);
    assert_keyless(&err.to_string());
}

#[tokio::test]
async fn the_future_outlives_the_model_it_came_from() {
    let fake = Fake::scripted(vec![ok_completion()]).await;
    let future = {
        let model = build(&config(Provider::OpenAi, &fake.url), no_env).unwrap();
        model.chat(ask("hi"))
    };
    let reply = tokio::spawn(future).await.unwrap().unwrap();
    assert_eq!(reply.text(), "ok");
}
