//! `update_calendar_event` (seed 003): only the fields given change.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    CalendarBackend, EventPatch, MAX_DESCRIPTION_CHARS, MAX_LOCATION_CHARS, MAX_TITLE_CHARS,
    check_span, describe, event_id, given_time, structured, text_arg,
};
use ringfence_core::error::{ToolError, ToolResult};
use ringfence_core::tool::{Annotations, AsyncTool, BoxFuture, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UpdateCalendarEventArgs {
    /// Event to update
    pub event_id: String,
    /// New title
    pub title: Option<String>,
    /// New start time (ISO 8601 with timezone)
    pub start_date_time: Option<String>,
    /// New end time (ISO 8601 with timezone)
    pub end_date_time: Option<String>,
    /// New description
    pub description: Option<String>,
    /// New location
    pub location: Option<String>,
}

pub struct UpdateCalendarEvent {
    pub(crate) backend: Arc<dyn CalendarBackend>,
}

impl AsyncTool for UpdateCalendarEvent {
    type Args = UpdateCalendarEventArgs;
    const NAME: &'static str = "update_calendar_event";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Modify an existing event: only the fields given change. eventId: the event to update (from list_calendar_events; the ID of one occurrence of a recurring event changes that occurrence only). title, description, location: new values (\"\" clears description or location). startDateTime, endDateTime: new times, ISO 8601 with a time zone offset or Z; moving only the start keeps the event's length. Returns: the event as it is now. A change someone else made since it was read is reported as a conflict, and nothing is overwritten.";
    const ANNOTATIONS: Annotations = Annotations {
        title: "Update calendar event",
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: true,
    };
    const SENSITIVE: &'static [&'static str] = &["title", "description", "location"];

    fn run(
        self: Arc<Self>,
        ctx: ToolContext,
        args: UpdateCalendarEventArgs,
    ) -> BoxFuture<'static, ToolResult<ToolOutput>> {
        Box::pin(async move {
            let id = event_id(&args.event_id)?;
            let title = text_arg("title", args.title, MAX_TITLE_CHARS)?;
            if title.as_deref() == Some("") {
                return Err(ToolError::invalid(
                    "title cannot be empty; leave it out to keep the title",
                ));
            }
            let start = args
                .start_date_time
                .map(|s| given_time("startDateTime", &s))
                .transpose()?;
            let end = args
                .end_date_time
                .map(|s| given_time("endDateTime", &s))
                .transpose()?;
            if let (Some(s), Some(e)) = (start, end) {
                check_span(s.ms, e.ms)?;
            }
            let patch = EventPatch {
                title,
                start,
                end,
                description: text_arg("description", args.description, MAX_DESCRIPTION_CHARS)?,
                location: text_arg("location", args.location, MAX_LOCATION_CHARS)?,
            };
            if patch == EventPatch::default() {
                return Err(ToolError::invalid(
                    "nothing to change: give at least one of title, startDateTime, endDateTime, description, location",
                ));
            }
            let user = ctx.session.user().to_owned();
            let zone = self.backend.zone(&user);
            let updated = self.backend.update(&user, id, patch).await?;
            let out = format!("Event updated: {}\n", describe(&updated, &zone));
            Ok(ToolOutput::text(out).with_structured(structured(&updated, &zone)))
        })
    }
}
