//! `update_followup` (seed 003): new context or a new time for a pending follow-up.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    ChangeOutcome, FollowupServices, confirmation, context, due_in, not_found, not_pending,
    optional_number, storage_failed,
};
use ringfence_core::args::whole_number;
use ringfence_core::error::{ToolError, ToolResult};
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateFollowupArgs {
    /// ID of follow-up to update
    #[serde(deserialize_with = "whole_number")]
    #[schemars(with = "i64")]
    pub followup_id: i64,
    /// New context (replaces old)
    pub context: Option<String>,
    /// Reschedule to this many minutes from now
    #[serde(default, deserialize_with = "optional_number")]
    #[schemars(with = "Option<f64>")]
    pub minutes_from_now: Option<f64>,
}

pub struct UpdateFollowup {
    pub(crate) s: Arc<FollowupServices>,
}

impl BlockingTool for UpdateFollowup {
    type Args = UpdateFollowupArgs;
    const NAME: &'static str = "update_followup";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Update the context or reschedule a pending follow-up. followup_id: ID of follow-up to update. context: new context (replaces old). minutes_from_now: reschedule to this many minutes from now (more than 0, at most 527040). At least one of context or minutes_from_now must be provided. Returns: Confirmation with updated details. Errors: \"not found\" - the follow-up doesn't exist or belongs to another user; \"already completed\" - a completed follow-up can't be updated.";
    const ANNOTATIONS: Annotations = Annotations {
        title: "Update follow-up",
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: false,
    };
    const SENSITIVE: &'static [&'static str] = &["context"];

    fn run(&self, ctx: &ToolContext, args: UpdateFollowupArgs) -> ToolResult<ToolOutput> {
        if args.context.is_none() && args.minutes_from_now.is_none() {
            return Err(ToolError::invalid(
                "give context, minutes_from_now, or both: at least one must be provided",
            ));
        }
        let text = args.context.as_deref().map(context).transpose()?;
        let now = self.s.clock.now_ms();
        let due = args.minutes_from_now.map(|m| due_in(m, now)).transpose()?;
        let user = ctx.session.user();
        let f = match self
            .s
            .backend
            .update(user, args.followup_id, text.as_deref(), due, now)
            .map_err(storage_failed)?
        {
            ChangeOutcome::Changed(f) => f,
            ChangeOutcome::NotFound => return Err(not_found(args.followup_id)),
            ChangeOutcome::NotPending(f) => return Err(not_pending(&f, "updated")),
        };
        let d = self.s.delivery.for_user(user);
        let mut changed = Vec::new();
        if text.is_some() {
            changed.push("context");
        }
        if due.is_some() {
            changed.push("time");
        }
        let headline = format!(
            "Follow-up {} updated ({}): due",
            f.id,
            changed.join(" and ")
        );
        let (out, mut structured) = confirmation(headline, &f, &d, now);
        structured["updated"] = changed.into();
        Ok(ToolOutput::text(out).with_structured(structured))
    }
}
