//! The local calendar: objects in `calendar.db` under the data directory, per user, with a
//! calendar "Personal" made on first use. Versions are the ETags.

use std::sync::Arc;

use crate::store::{CalendarStore, Revision, WriteError};
use crate::tools::{CalendarError, CalendarResult};
use ringfence_core::BoxFuture;

use crate::backend::{CalendarInfo, ObjectStore, Stored};

/// The calendar every user starts with.
pub const DEFAULT_CALENDAR: (&str, &str) = ("personal", "Personal");

/// One user's local calendars.
#[derive(Debug, Clone)]
pub struct LocalStore {
    db: Arc<dyn CalendarStore>,
    user: String,
}

impl LocalStore {
    pub fn new(db: Arc<dyn CalendarStore>, user: &str) -> LocalStore {
        LocalStore {
            db,
            user: user.to_owned(),
        }
    }
}

fn failed(e: impl std::fmt::Display) -> CalendarError {
    CalendarError::Failed(format!("the local calendar failed: {e}"))
}

fn stored(o: crate::store::Object) -> Stored {
    Stored {
        href: o.href,
        etag: Some(o.version.to_string()),
        ics: o.ics,
    }
}

fn version(etag: Option<&str>) -> CalendarResult<i64> {
    etag.and_then(|e| e.parse().ok())
        .ok_or_else(|| failed("an object without a version"))
}

fn write_error(e: WriteError) -> CalendarError {
    match e {
        WriteError::Changed => CalendarError::Conflict(
            "the event was changed by someone else while this change was made; nothing was overwritten. List the events again, then retry".into(),
        ),
        WriteError::Missing => CalendarError::NotFound(
            "the event is gone (deleted by someone else); list the events again".into(),
        ),
        WriteError::Exists => failed("an event with this UID exists already"),
        WriteError::Store(m) => failed(m),
    }
}

impl ObjectStore for LocalStore {
    fn provider(&self) -> &'static str {
        "Local"
    }

    fn calendars(&self) -> BoxFuture<'static, CalendarResult<Vec<CalendarInfo>>> {
        let r = self
            .db
            .calendars(&self.user, DEFAULT_CALENDAR, ringfence_core::time::now_ms())
            .map(|cs| {
                cs.into_iter()
                    .map(|(id, name)| CalendarInfo { id, name })
                    .collect()
            })
            .map_err(failed);
        Box::pin(async move { r })
    }

    fn query(
        &self,
        cal: &CalendarInfo,
        from_ms: i64,
        to_ms: i64,
    ) -> BoxFuture<'static, CalendarResult<Vec<Stored>>> {
        let r = self
            .db
            .in_window(&self.user, &cal.id, from_ms, to_ms)
            .map(|os| os.into_iter().map(stored).collect())
            .map_err(failed);
        Box::pin(async move { r })
    }

    fn get(
        &self,
        cal: &CalendarInfo,
        href: &str,
    ) -> BoxFuture<'static, CalendarResult<Option<Stored>>> {
        let r = self
            .db
            .get(&self.user, &cal.id, href)
            .map(|o| o.map(stored))
            .map_err(failed);
        Box::pin(async move { r })
    }

    fn create(
        &self,
        cal: &CalendarInfo,
        uid: &str,
        ics: String,
        span: (i64, i64),
    ) -> BoxFuture<'static, CalendarResult<Stored>> {
        let r = self
            .db
            .insert(
                &self.user,
                &cal.id,
                uid,
                &ics,
                span,
                ringfence_core::time::now_ms(),
            )
            .map(stored)
            .map_err(write_error);
        Box::pin(async move { r })
    }

    fn replace(
        &self,
        cal: &CalendarInfo,
        href: &str,
        etag: Option<String>,
        ics: String,
        span: (i64, i64),
    ) -> BoxFuture<'static, CalendarResult<Stored>> {
        let r = version(etag.as_deref()).and_then(|v| {
            self.db
                .replace(
                    &self.user,
                    &cal.id,
                    href,
                    v,
                    Revision {
                        ics: &ics,
                        span,
                        now_ms: ringfence_core::time::now_ms(),
                    },
                )
                .map(stored)
                .map_err(write_error)
        });
        Box::pin(async move { r })
    }

    fn remove(
        &self,
        cal: &CalendarInfo,
        href: &str,
        etag: Option<String>,
    ) -> BoxFuture<'static, CalendarResult<()>> {
        let r = version(etag.as_deref()).and_then(|v| {
            self.db
                .remove(&self.user, &cal.id, href, v)
                .map_err(write_error)
        });
        Box::pin(async move { r })
    }
}
