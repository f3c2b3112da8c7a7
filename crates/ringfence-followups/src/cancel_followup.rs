//! `cancel_followup` (seed 003): a pending follow-up will not be delivered.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    ChangeOutcome, FollowupServices, MAX_REASON_CHARS, not_found, not_pending, storage_failed,
};
use ringfence_core::args::whole_number;
use ringfence_core::error::{ToolError, ToolResult};
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelFollowupArgs {
    /// ID of follow-up to cancel
    #[serde(deserialize_with = "whole_number")]
    #[schemars(with = "i64")]
    pub followup_id: i64,
    /// Reason for cancellation
    pub reason: Option<String>,
}

pub struct CancelFollowup {
    pub(crate) s: Arc<FollowupServices>,
}

impl BlockingTool for CancelFollowup {
    type Args = CancelFollowupArgs;
    const NAME: &'static str = "cancel_followup";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Cancel a pending follow-up. followup_id: ID of follow-up to cancel. reason: reason for cancellation (optional; kept and shown by list_followups). Returns: Confirmation of cancellation. Errors: \"not found\" - the follow-up doesn't exist or belongs to another user; \"already completed\" - it was delivered already.";
    const ANNOTATIONS: Annotations = Annotations {
        title: "Cancel follow-up",
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: false,
    };
    const SENSITIVE: &'static [&'static str] = &["reason"];

    fn run(&self, ctx: &ToolContext, args: CancelFollowupArgs) -> ToolResult<ToolOutput> {
        let reason = args
            .reason
            .as_deref()
            .map(str::trim)
            .filter(|r| !r.is_empty());
        if let Some(r) = reason {
            ringfence_core::text::refuse_controls("reason", r)?;
        }
        if let Some(r) = reason
            && r.chars().count() > MAX_REASON_CHARS
        {
            return Err(ToolError::invalid(format!(
                "reason has {} characters; the limit is {MAX_REASON_CHARS}",
                r.chars().count()
            )));
        }
        let now = self.s.clock.now_ms();
        let user = ctx.session.user();
        let f = match self
            .s
            .backend
            .cancel(user, args.followup_id, reason, now)
            .map_err(storage_failed)?
        {
            ChangeOutcome::Changed(f) => f,
            ChangeOutcome::NotFound => return Err(not_found(args.followup_id)),
            ChangeOutcome::NotPending(f) => return Err(not_pending(&f, "cancelled")),
        };
        let d = self.s.delivery.for_user(user);
        let out = format!(
            "Follow-up {} cancelled{}; it will not be delivered.\nContext: {}\n",
            f.id,
            reason
                .map(|r| format!(" ({})", ringfence_core::text::indented(r, "  ")))
                .unwrap_or_default(),
            ringfence_core::text::indented(&f.context, "  ")
        );
        Ok(ToolOutput::text(out).with_structured(super::structured(&f, &d)))
    }
}
