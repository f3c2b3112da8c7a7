//! `list_followups` (seed 003): the user's follow-ups by status.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{FollowupServices, ListFilter, line, storage_failed};
use ringfence_core::args::{limit, optional_whole_number};
use ringfence_core::error::{ToolError, ToolResult};
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

/// Results when `limit` is not given, and at most.
const DEFAULT_LIMIT: usize = 10;
const MAX_LIMIT: usize = 50;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListFollowupsArgs {
    /// pending (default), completed, or all
    #[schemars(extend("enum" = ["pending", "completed", "all"]))]
    pub status: Option<String>,
    /// Max results 1-50 (default: 10)
    #[serde(default, deserialize_with = "optional_whole_number")]
    #[schemars(with = "Option<i64>", range(min = 1, max = 50))]
    pub limit: Option<i64>,
}

pub struct ListFollowups {
    pub(crate) s: Arc<FollowupServices>,
}

impl BlockingTool for ListFollowups {
    type Args = ListFollowupsArgs;
    const NAME: &'static str = "list_followups";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "List scheduled follow-ups. status: pending (default; not delivered yet), completed (delivered), or all (also cancelled and failed ones). limit: max results 1-50 (default: 10). Returns: List of follow-ups with ID, context, scheduled time (local and UTC), and status; delivered ones say when and how, cancelled ones why.";
    const ANNOTATIONS: Annotations = Annotations {
        title: "List follow-ups",
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };

    fn run(&self, ctx: &ToolContext, args: ListFollowupsArgs) -> ToolResult<ToolOutput> {
        let filter = match args.status.as_deref().map(|s| s.trim().to_lowercase()) {
            None => ListFilter::Pending,
            Some(s) if s.is_empty() || s == "pending" => ListFilter::Pending,
            Some(s) if s == "completed" => ListFilter::Completed,
            Some(s) if s == "all" => ListFilter::All,
            Some(s) => {
                return Err(ToolError::invalid(format!(
                    "status {s:?} is not valid; use one of: pending, completed, all"
                )));
            }
        };
        let n = limit(args.limit, DEFAULT_LIMIT, MAX_LIMIT)?;
        let user = ctx.session.user();
        let listed = self
            .s
            .backend
            .list(user, filter, n)
            .map_err(storage_failed)?;
        let d = self.s.delivery.for_user(user);
        let now = self.s.clock.now_ms();
        let what = match filter {
            ListFilter::Pending => "pending",
            ListFilter::Completed => "completed",
            ListFilter::All => "",
        };
        let mut out = if listed.followups.is_empty() {
            format!(
                "No {}follow-ups.\n",
                if what.is_empty() {
                    String::new()
                } else {
                    format!("{what} ")
                }
            )
        } else {
            format!(
                "{} of {} {}follow-up{} (times in {}):\n",
                listed.followups.len(),
                listed.total,
                if what.is_empty() {
                    String::new()
                } else {
                    format!("{what} ")
                },
                if listed.total == 1 { "" } else { "s" },
                d.zone_name
            )
        };
        for f in &listed.followups {
            out.push_str(&line(f, &d, now));
            out.push('\n');
        }
        if filter == ListFilter::Pending && !d.proactive && !listed.followups.is_empty() {
            out.push_str(&format!(
                "Proactive messages are off for this user: none of these will be delivered until they are turned on ({}).\n",
                d.enable_hint
            ));
        }
        let structured = json!({
            "status": match filter {
                ListFilter::Pending => "pending",
                ListFilter::Completed => "completed",
                ListFilter::All => "all",
            },
            "total": listed.total,
            "timezone": d.zone_name,
            "proactive": d.proactive,
            "followups": listed
                .followups
                .iter()
                .map(|f| super::structured(f, &d))
                .collect::<Vec<_>>(),
        });
        Ok(ToolOutput::text(out).with_structured(structured))
    }
}
