//! The one shape of every refusal the HTTP gate answers: a status, `Retry-After` where waiting
//! helps, and a JSON-RPC error naming the limit and the setting that raises it. The request's
//! id is not known (its body was not read), so the error's id is `null`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// JSON-RPC "server error" code used for every HTTP-level refusal.
const SERVER_ERROR: i64 = -32000;

/// A request the gate will not serve.
#[derive(Debug, Clone)]
pub(super) struct Refusal {
    pub(super) status: StatusCode,
    /// What was hit, short (`"rate"`, `"sessions"`, `"body_timeout"`, ...).
    pub(super) limit: &'static str,
    /// The configuration key that raises the limit, when there is one.
    pub(super) setting: Option<&'static str>,
    /// Seconds to wait before trying again, when waiting helps.
    pub(super) retry_after: Option<u64>,
    /// What happened and what to do, for a person reading the client's log.
    pub(super) message: String,
}

impl Refusal {
    pub(super) fn new(status: StatusCode, limit: &'static str, message: String) -> Refusal {
        Refusal {
            status,
            limit,
            setting: None,
            retry_after: None,
            message,
        }
    }

    pub(super) fn setting(mut self, key: &'static str) -> Refusal {
        self.setting = Some(key);
        self
    }

    pub(super) fn retry_after(mut self, seconds: u64) -> Refusal {
        self.retry_after = Some(seconds.max(1));
        self
    }

    /// The JSON-RPC error document.
    pub(super) fn body(&self) -> serde_json::Value {
        let mut data = serde_json::json!({
            "status": self.status.as_u16(),
            "limit": self.limit,
            "setting": self.setting,
        });
        if let Some(s) = self.retry_after {
            data["retry_after"] = s.into();
        }
        serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": { "code": SERVER_ERROR, "message": self.message, "data": data },
        })
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut r = (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            format!("{}\n", self.body()),
        )
            .into_response();
        if let Some(s) = self.retry_after
            && let Ok(v) = HeaderValue::from_str(&s.to_string())
        {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_a_json_rpc_error_naming_the_setting() {
        let r = Refusal::new(
            StatusCode::TOO_MANY_REQUESTS,
            "sessions",
            "session limit (http.limits.sessions)".into(),
        )
        .setting("http.limits.sessions")
        .retry_after(0);
        let body = r.body();
        assert_eq!(body["id"], serde_json::Value::Null);
        assert_eq!(body["error"]["code"], -32000);
        assert_eq!(body["error"]["data"]["setting"], "http.limits.sessions");
        assert_eq!(body["error"]["data"]["retry_after"], 1);
        let response = r.into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
    }
}
