//! `glob`: list files by pattern, through a contained walk, sorted.

use std::sync::Mutex;

use schemars::JsonSchema;
use serde::Deserialize;

use ringfence_fs::{WalkOptions, WalkState, walk};

use crate::grep::build_globset;
use crate::relative_to;
use crate::text::thousands;
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs {
    /// Glob pattern to match against workspace-relative paths (e.g. `**/*.md`,
    /// `src/**/*.{ts,tsx}`). `*` stays within one directory; `**` crosses directories.
    pub pattern: String,
    /// Workspace-relative subdirectory to restrict the search scope. Defaults to the
    /// workspace root. The pattern is matched relative to it.
    #[serde(default)]
    pub path: Option<String>,
    /// Also list files ignored by .gitignore/.ignore (default false).
    #[serde(default)]
    pub include_ignored: bool,
}

pub struct Glob;

const DESCRIPTION: &str = "List files matching a glob pattern within the workspace. Use to discover files by name, extension, or directory structure. Returns a lexicographically sorted list of matching workspace-relative paths.\n\nSupports `**` (any depth), `*` and `?` (within one directory), braces `{a,b}` and classes `[abc]`. Files ignored by .gitignore/.ignore are skipped unless include_ignored is true; .git is never listed. At most 100 paths are returned; when cut, a notice gives the total and where the full list was saved.";

impl BlockingTool for Glob {
    type Args = GlobArgs;
    const NAME: &'static str = "glob";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = DESCRIPTION;
    const ANNOTATIONS: Annotations = Annotations {
        title: "Find files by pattern",
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: GlobArgs) -> ToolResult<ToolOutput> {
        glob(ctx, args)
    }
}

/// Leading pattern components without glob syntax: where the walk can start.
fn literal_prefix(pattern: &str) -> Vec<&str> {
    let comps: Vec<&str> = pattern.split('/').collect();
    let mut out = Vec::new();
    for (i, c) in comps.iter().enumerate() {
        if i == comps.len() - 1
            || c.is_empty()
            || c.contains(['*', '?', '[', ']', '{', '}', '\\'])
            || *c == ".."
            || *c == "."
        {
            break;
        }
        out.push(*c);
    }
    out
}

fn glob(ctx: &ToolContext, args: GlobArgs) -> ToolResult<ToolOutput> {
    let pattern = args.pattern.trim();
    if pattern.is_empty() {
        return Err(ToolError::invalid(
            "glob: pattern is empty; try `**/*` or `*.md`",
        ));
    }
    if pattern.split('/').any(|c| c == "..") {
        return Err(ToolError::new(
            ToolErrorKind::OutsideWorkspace,
            format!(
                "glob: pattern `{pattern}` contains `..`; patterns match paths inside the workspace only. Use the path parameter to choose a directory"
            ),
        ));
    }
    let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
    if pattern.starts_with('/') {
        return Err(ToolError::invalid(format!(
            "glob: pattern `{pattern}` is absolute; give a pattern relative to the workspace (e.g. `**/*.md`) and put the directory in path"
        )));
    }
    let set = build_globset(pattern, "glob")?;
    let scope = args
        .path
        .as_deref()
        .filter(|p| !p.is_empty())
        .unwrap_or("~");
    let base_target = ctx.session.workspace.resolve(scope)?;
    if !base_target.is_dir() {
        return Err(ToolError::new(
            if base_target.exists() {
                ToolErrorKind::WrongType
            } else {
                ToolErrorKind::NotFound
            },
            format!("{scope}: not a directory; path must name a directory to search in"),
        ));
    }
    let base = base_target.rel().to_owned();
    // Start the walk as deep as the pattern's literal prefix allows.
    let prefix = literal_prefix(pattern);
    let start = if prefix.is_empty() {
        base_target
    } else {
        let input = format!("{}/{}", scope.trim_end_matches('/'), prefix.join("/"));
        match ctx.session.workspace.resolve(&input) {
            Ok(t) if t.is_dir() && std::sync::Arc::ptr_eq(t.root(), base_target.root()) => t,
            Ok(_) | Err(_) => return Ok(no_match(pattern, scope)),
        }
    };
    let found: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let opts = WalkOptions {
        respect_ignore_files: !args.include_ignored,
        ..WalkOptions::default()
    };
    walk(&start, &opts, || {
        let (found, set, base) = (&found, &set, &base);
        move |entry| {
            if ctx.cancel.is_cancelled() {
                return WalkState::Quit;
            }
            if entry.is_dir() {
                return WalkState::Continue;
            }
            let rel_to_base = relative_to(base, &entry.rel);
            if set.is_match(rel_to_base) || set.is_match(&entry.rel) {
                found
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(entry.rel.clone());
            }
            WalkState::Continue
        }
    })?;
    ctx.check_cancelled()?;
    let mut found = found.into_inner().unwrap_or_else(|e| e.into_inner());
    if found.is_empty() {
        return Ok(no_match(pattern, scope));
    }
    found.sort_unstable();
    let cap = ctx.limits.max_glob_results;
    if found.len() <= cap {
        return Ok(ToolOutput::text(found.join("\n")));
    }
    let saved = ctx.spill.save(&(found.join("\n") + "\n"))?;
    let mut text = found[..cap].join("\n");
    text.push_str(&format!(
        "\n\nShowing {} of {} files. Use a more specific pattern or path to narrow results.\n{}",
        thousands(cap as u64),
        thousands(found.len() as u64),
        saved.notice()
    ));
    Ok(ToolOutput::text(text))
}

fn no_match(pattern: &str, scope: &str) -> ToolOutput {
    let scope = if scope == "~" { "the workspace" } else { scope };
    ToolOutput::text(format!(
        "No files match `{pattern}` in {scope}. (`*` stays within one directory: use `**/{pattern}` to search at any depth; ignored files are skipped unless include_ignored is true.)"
    ))
}
