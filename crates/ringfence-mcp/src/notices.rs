//! Telling clients what happens between their requests: a session's registration in the
//! process's [`LiveSessions`], and what it sends when it is told a [`Notice`].
//!
//! Two protocol generations:
//! - a session opened by `initialize` (stdio; HTTP up to 2025-11-25) gets a
//!   `notifications/message` at level `notice` (unless the client raised its level above
//!   it with `logging/setLevel`) and a `notifications/resources/updated` for each resource
//!   it subscribed to with `resources/subscribe`. Over HTTP such a session is reachable only
//!   while its event stream (`GET /mcp`) is open; without one, nothing could reach it.
//! - 2026-07-28 has no sessions and no logging: a client opens `subscriptions/listen` naming
//!   the resources it wants to hear about, and is told `notifications/resources/updated` on
//!   that stream while it stays open.

#![allow(deprecated)] // logging and resources/subscribe: what clients of 2025-11-25 use

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rmcp::RoleServer;
use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ResourceUpdatedNotificationParam,
};
use rmcp::service::{Peer, SubscriptionSink};

use ringfence_core::BoxFuture;
use ringfence_core::live::{Notice, NoticeSink};

/// The level notices are sent at.
const NOTICE_LEVEL: LoggingLevel = LoggingLevel::Notice;

/// What a handshake session asked to hear: its log level and its resource subscriptions.
#[derive(Debug, Default)]
pub(crate) struct Wants {
    level: Mutex<Option<LoggingLevel>>,
    resources: Mutex<HashSet<String>>,
}

fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

impl Wants {
    pub(crate) fn set_level(&self, level: LoggingLevel) {
        *self.level.lock().unwrap_or_else(|e| e.into_inner()) = Some(level);
    }

    pub(crate) fn subscribe(&self, uri: &str, on: bool) {
        let mut set = self.resources.lock().unwrap_or_else(|e| e.into_inner());
        if on {
            set.insert(uri.to_owned());
        } else {
            set.remove(uri);
        }
    }

    /// Whether a message at [`NOTICE_LEVEL`] passes the client's level (none set: it does).
    fn hears_notices(&self) -> bool {
        self.level
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none_or(|l| rank(l) <= rank(NOTICE_LEVEL))
    }

    fn subscribed(&self, uri: &str) -> bool {
        self.resources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(uri)
    }
}

/// A handshake session (stdio, or HTTP with its session id).
pub(crate) struct SessionNotices {
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) wants: Arc<Wants>,
    /// Whether the client can be reached now (HTTP: an event stream is open).
    pub(crate) reachable: std::sync::Arc<dyn Fn() -> bool + Send + Sync>,
}

impl NoticeSink for SessionNotices {
    fn reachable(&self, resource: &str) -> bool {
        (self.wants.hears_notices() || self.wants.subscribed(resource))
            && (self.reachable)()
            && !self.peer.is_transport_closed()
    }

    fn tell(&self, notice: Arc<Notice>) -> BoxFuture<'static, bool> {
        let peer = self.peer.clone();
        let message = self.wants.hears_notices();
        let update = self.wants.subscribed(notice.resource);
        Box::pin(async move {
            let mut told = false;
            if message {
                let mut data = serde_json::Map::new();
                data.insert(notice.kind.into(), notice.document.clone());
                // The message is always there, whatever a family names its document.
                data.insert("message".into(), notice.message.clone().into());
                let mut param = LoggingMessageNotificationParam::new(
                    NOTICE_LEVEL,
                    serde_json::Value::Object(data),
                );
                param.logger = Some(format!("ringfence.{}", notice.from));
                told |= peer.notify_logging_message(param).await.is_ok();
            }
            if update {
                told |= peer
                    .notify_resource_updated(ResourceUpdatedNotificationParam::new(notice.resource))
                    .await
                    .is_ok();
            }
            told
        })
    }
}

/// A `subscriptions/listen` stream (2026-07-28).
pub(crate) struct ListenNotices {
    pub(crate) sink: SubscriptionSink,
}

impl NoticeSink for ListenNotices {
    fn reachable(&self, resource: &str) -> bool {
        // Registered only while the listen request runs; it hears what it accepted.
        self.sink
            .accepted()
            .resource_subscriptions
            .as_ref()
            .is_some_and(|uris| uris.iter().any(|u| u == resource))
    }

    fn tell(&self, notice: Arc<Notice>) -> BoxFuture<'static, bool> {
        let sink = self.sink.clone();
        Box::pin(async move { sink.notify_resource_updated(notice.resource).await.is_ok() })
    }
}
