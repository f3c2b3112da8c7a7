//! `list_calendar_events` (seed 003): the events of the next days.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{CalendarBackend, describe, structured};
use ringfence_core::error::{ToolError, ToolResult};
use ringfence_core::tool::{Annotations, AsyncTool, BoxFuture, ToolContext, ToolOutput};

/// Days listed when `days` is not given, and at most.
const DEFAULT_DAYS: f64 = 7.0;
const MAX_DAYS: f64 = 30.0;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ListCalendarEventsArgs {
    /// Days ahead, 1-30 (default: 7)
    #[schemars(with = "Option<i64>", range(min = 1, max = 30))]
    pub days: Option<f64>,
    /// Specific calendar to filter by (its ID or name)
    pub calendar_id: Option<String>,
}

pub struct ListCalendarEvents {
    pub(crate) backend: Arc<dyn CalendarBackend>,
}

impl AsyncTool for ListCalendarEvents {
    type Args = ListCalendarEventsArgs;
    const NAME: &'static str = "list_calendar_events";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Fetch upcoming events. days: days ahead, 1-30 (default: 7). calendarId: a specific calendar to filter by (default: all calendars). Returns: List of events with title, time (in the user's time zone, and the event's own when it differs), location, calendar name, event ID, and recurring / all-day markers; each occurrence of a recurring event has its own ID. \"No events found\" when the period is empty.";
    const ANNOTATIONS: Annotations = Annotations {
        title: "List calendar events",
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: true,
    };

    fn run(
        self: Arc<Self>,
        ctx: ToolContext,
        args: ListCalendarEventsArgs,
    ) -> BoxFuture<'static, ToolResult<ToolOutput>> {
        Box::pin(async move {
            let days = args.days.unwrap_or(DEFAULT_DAYS);
            if !days.is_finite() || days.fract() != 0.0 || !(1.0..=MAX_DAYS).contains(&days) {
                return Err(ToolError::invalid(format!(
                    "days must be from 1 to 30 (a whole number of days); got {days}"
                )));
            }
            let days = days as i64;
            let calendar = args
                .calendar_id
                .map(|c| c.trim().to_owned())
                .filter(|c| !c.is_empty());
            let user = ctx.session.user().to_owned();
            let zone = self.backend.zone(&user);
            let from = ringfence_core::time::now_ms();
            let to = from + days * 86_400_000;
            let events = self.backend.list(&user, from, to, calendar.clone()).await?;
            let period = if days == 1 {
                "the next day".to_owned()
            } else {
                format!("the next {days} days")
            };
            let scope = calendar
                .as_deref()
                .map(|c| format!(" in calendar {c}"))
                .unwrap_or_default();
            let mut out = if events.is_empty() {
                format!("No events found in {period}{scope}.\n")
            } else {
                format!(
                    "{} event{} in {period}{scope} (times in {}):\n",
                    events.len(),
                    if events.len() == 1 { "" } else { "s" },
                    zone.0
                )
            };
            for (i, e) in events.iter().enumerate() {
                out.push_str(&format!("{}. {}\n", i + 1, describe(e, &zone)));
            }
            let items: Vec<_> = events.iter().map(|e| structured(e, &zone)).collect();
            Ok(ToolOutput::text(out).with_structured(json!({
                "events": items,
                "count": events.len(),
                "days": days,
                "timezone": zone.0,
            })))
        })
    }
}
