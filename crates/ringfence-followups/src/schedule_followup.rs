//! `schedule_followup` (seed 003): a check-in `minutes_from_now`.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{FollowupServices, confirmation, context, due_in, number, storage_failed};
use ringfence_core::error::ToolResult;
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleFollowupArgs {
    /// What to follow up about - be specific for future context
    pub context: String,
    /// How many minutes from now to follow up
    #[serde(deserialize_with = "number")]
    #[schemars(with = "f64")]
    pub minutes_from_now: f64,
}

pub struct ScheduleFollowup {
    pub(crate) s: Arc<FollowupServices>,
}

impl BlockingTool for ScheduleFollowup {
    type Args = ScheduleFollowupArgs;
    const NAME: &'static str = "schedule_followup";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Schedule a future check-in with the user. context: what to follow up about - be specific, it is all you will have later. minutes_from_now: how many minutes from now (more than 0, fractions allowed, at most 527040 = 366 days). Follow-ups are delivered by the proactive messages system: the user must have proactive messages enabled for them to trigger. Returns: Confirmation with follow-up ID and scheduled time (the user's local time and UTC).";
    const ANNOTATIONS: Annotations = Annotations {
        title: "Schedule follow-up",
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: false,
    };
    const SENSITIVE: &'static [&'static str] = &["context"];

    fn run(&self, ctx: &ToolContext, args: ScheduleFollowupArgs) -> ToolResult<ToolOutput> {
        let text = context(&args.context)?;
        let now = self.s.clock.now_ms();
        let due = due_in(args.minutes_from_now, now)?;
        let user = ctx.session.user();
        let f = self
            .s
            .backend
            .schedule(user, &text, due, now)
            .map_err(storage_failed)?;
        let d = self.s.delivery.for_user(user);
        let (out, mut structured) =
            confirmation(format!("Follow-up {} scheduled for", f.id), &f, &d, now);
        structured["channels"] = d.channels.clone().into();
        Ok(ToolOutput::text(out).with_structured(structured))
    }
}
