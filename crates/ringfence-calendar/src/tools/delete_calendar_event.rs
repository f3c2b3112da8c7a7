//! `delete_calendar_event` (seed 003).

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{CalendarBackend, event_id};
use ringfence_core::error::ToolResult;
use ringfence_core::tool::{Annotations, AsyncTool, BoxFuture, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeleteCalendarEventArgs {
    /// Event to delete
    pub event_id: String,
}

pub struct DeleteCalendarEvent {
    pub(crate) backend: Arc<dyn CalendarBackend>,
}

impl AsyncTool for DeleteCalendarEvent {
    type Args = DeleteCalendarEventArgs;
    const NAME: &'static str = "delete_calendar_event";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Remove an event from the calendar. eventId: the event to delete (from list_calendar_events; the ID of one occurrence of a recurring event removes that occurrence only). Returns: Confirmation of deletion.";
    const ANNOTATIONS: Annotations = Annotations {
        title: "Delete calendar event",
        read_only: false,
        destructive: true,
        idempotent: true,
        open_world: true,
    };

    fn run(
        self: Arc<Self>,
        ctx: ToolContext,
        args: DeleteCalendarEventArgs,
    ) -> BoxFuture<'static, ToolResult<ToolOutput>> {
        Box::pin(async move {
            let id = event_id(&args.event_id)?;
            let user = ctx.session.user().to_owned();
            let d = self.backend.delete(&user, id.clone()).await?;
            let what = if d.occurrence_only {
                "This occurrence of"
            } else {
                "Event"
            };
            let out = format!(
                "{what} \"{}\" deleted from calendar {}.\n",
                ringfence_core::text::indented(&d.title, "  "),
                ringfence_core::text::indented(&d.calendar_name, "  ")
            );
            Ok(ToolOutput::text(out).with_structured(json!({
                "deleted": true,
                "eventId": id,
                "title": d.title,
                "calendar": d.calendar_name,
                "occurrenceOnly": d.occurrence_only,
            })))
        })
    }
}
