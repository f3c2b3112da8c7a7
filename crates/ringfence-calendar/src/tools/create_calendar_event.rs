//! `create_calendar_event` (seed 003).

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    CalendarBackend, MAX_DESCRIPTION_CHARS, MAX_LOCATION_CHARS, MAX_TITLE_CHARS, NewEvent,
    check_span, describe, given_time, structured, text_arg,
};
use ringfence_core::error::{ToolError, ToolResult};
use ringfence_core::tool::{Annotations, AsyncTool, BoxFuture, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateCalendarEventArgs {
    /// Event title
    pub title: String,
    /// ISO 8601 format with timezone (2026-01-29T10:00:00-05:00)
    pub start_date_time: String,
    /// ISO 8601 format with timezone
    pub end_date_time: String,
    /// Event notes
    pub description: Option<String>,
    /// Address or meeting link
    pub location: Option<String>,
    /// Add Google Meet link
    pub add_meet_link: Option<bool>,
}

pub struct CreateCalendarEvent {
    pub(crate) backend: Arc<dyn CalendarBackend>,
}

impl AsyncTool for CreateCalendarEvent {
    type Args = CreateCalendarEventArgs;
    const NAME: &'static str = "create_calendar_event";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Create a new calendar event. title: event title. startDateTime, endDateTime: ISO 8601 with a time zone offset or Z (2026-01-29T10:00:00-05:00); convert natural language yourself; the end must be after the start. description: event notes. location: address or meeting link. addMeetLink: add a Google Meet link (Google Calendar only; other calendars refuse it rather than ignore it). Returns: Event ID and confirmation, with the Meet link if one was made.";
    const ANNOTATIONS: Annotations = Annotations {
        title: "Create calendar event",
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: true,
    };
    const SENSITIVE: &'static [&'static str] = &["title", "description", "location"];

    fn run(
        self: Arc<Self>,
        ctx: ToolContext,
        args: CreateCalendarEventArgs,
    ) -> BoxFuture<'static, ToolResult<ToolOutput>> {
        Box::pin(async move {
            let title = text_arg("title", Some(args.title), MAX_TITLE_CHARS)?.unwrap_or_default();
            if title.is_empty() {
                return Err(ToolError::invalid("title is empty: say what the event is"));
            }
            let start = given_time("startDateTime", &args.start_date_time)?;
            let end = given_time("endDateTime", &args.end_date_time)?;
            check_span(start.ms, end.ms)?;
            let event = NewEvent {
                title,
                start,
                end,
                description: text_arg("description", args.description, MAX_DESCRIPTION_CHARS)?
                    .filter(|d| !d.is_empty()),
                location: text_arg("location", args.location, MAX_LOCATION_CHARS)?
                    .filter(|l| !l.is_empty()),
                add_meet_link: args.add_meet_link.unwrap_or(false),
            };
            let user = ctx.session.user().to_owned();
            let zone = self.backend.zone(&user);
            let created = self.backend.create(&user, event).await?;
            let mut out = format!("Event created: {}\n", describe(&created, &zone));
            if let Some(link) = &created.meet_link {
                out.push_str(&format!("Join with: {link}\n"));
            }
            Ok(ToolOutput::text(out).with_structured(structured(&created, &zone)))
        })
    }
}
