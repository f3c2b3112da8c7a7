//! `directory_tree`: an indented tree of a directory, depth-limited and bounded.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use ringfence_fs::{WalkOptions, WalkState, walk_sorted};

use crate::list_directory::CappedLines;
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DirectoryTreeArgs {
    /// Directory to show (absolute, or relative to workspace root). Default: the workspace.
    #[serde(default)]
    pub path: Option<String>,
    /// Levels to expand (default 3; 1 shows only the directory's own entries).
    #[serde(default)]
    pub max_depth: Option<usize>,
    /// Entries to show before cutting (default: config, 1,000); the full tree is saved to a
    /// file the read tools can open.
    #[serde(default)]
    pub max_entries: Option<usize>,
    /// Also show what .gitignore/.ignore files exclude, and `.git` (default false).
    #[serde(default)]
    pub include_ignored: bool,
}

pub struct DirectoryTree;

const DEFAULT_DEPTH: usize = 3;
/// The most entries one call may show.
const MAX_ENTRIES: usize = 10_000;
/// The deepest tree one call may expand.
const MAX_DEPTH: usize = 64;

impl BlockingTool for DirectoryTree {
    type Args = DirectoryTreeArgs;
    const NAME: &'static str = "directory_tree";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Shows a directory as an indented tree (two spaces per level, directories ending in `/`, sorted by name), expanded to max_depth levels (default 3). Skips what .gitignore/.ignore exclude and .git unless include_ignored is true. Cut at max_entries (default 1,000) with the full tree saved to a file the read tools can open.";
    const ANNOTATIONS: Annotations = Annotations {
        title: "Directory tree",
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: DirectoryTreeArgs) -> ToolResult<ToolOutput> {
        let depth = args.max_depth.unwrap_or(DEFAULT_DEPTH);
        if depth == 0 || depth > MAX_DEPTH {
            return Err(ToolError::invalid(format!(
                "directory_tree: max_depth must be between 1 and {MAX_DEPTH}"
            )));
        }
        let cap = args.max_entries.unwrap_or(ctx.limits.max_list_entries);
        if cap == 0 || cap > MAX_ENTRIES {
            return Err(ToolError::invalid(format!(
                "directory_tree: max_entries must be between 1 and {MAX_ENTRIES}; the full tree is saved to a file anyway"
            )));
        }
        let path = args
            .path
            .as_deref()
            .filter(|p| !p.is_empty())
            .unwrap_or(".");
        let target = ctx.session.workspace.resolve(path)?;
        if !target.is_dir() {
            return Err(ToolError::new(
                if target.exists() {
                    ToolErrorKind::WrongType
                } else {
                    ToolErrorKind::NotFound
                },
                format!("{}: not a directory", target.absolute().display()),
            ));
        }
        let opts = WalkOptions {
            respect_ignore_files: !args.include_ignored,
            skip_vcs_dirs: !args.include_ignored,
            threads: 1,
            report_symlinks: true,
        };
        let mut lines = CappedLines::new(ctx, cap);
        let mut unexpanded = 0u64;
        let mut cancelled = false;
        walk_sorted(&target, &opts, Some(depth), &mut |entry, level| {
            if lines.count.is_multiple_of(4096) && ctx.cancel.is_cancelled() {
                cancelled = true;
                return WalkState::Quit;
            }
            let name = entry.name().to_string_lossy();
            let indent = "  ".repeat(level - 1);
            let line = if entry.is_dir() {
                if level == depth {
                    unexpanded += 1;
                }
                format!("{indent}{name}/")
            } else if entry.file_type.is_symlink() {
                match entry.read_link() {
                    Ok(t) => format!("{indent}{name} -> {}", t.display()),
                    Err(_) => format!("{indent}{name} -> ?"),
                }
            } else {
                format!("{indent}{name}")
            };
            if lines.push(&line) {
                WalkState::Continue
            } else {
                WalkState::Quit
            }
        })?;
        if cancelled {
            return Err(ToolError::cancelled());
        }
        let count = lines.count;
        let (mut text, saved) = lines.finish("entries")?;
        let root_line = format!("{}/\n", target.absolute().display());
        if count == 0 {
            text = "(empty directory)".to_owned();
        }
        let mut out = root_line;
        out.push_str(&text);
        if unexpanded > 0 {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&format!(
                "({unexpanded} directories at depth {depth} not expanded; raise max_depth or call directory_tree on one of them.)"
            ));
        }
        Ok(
            ToolOutput::text(out.trim_end().to_owned()).with_structured(json!({
                "path": target.absolute().display().to_string(),
                "entries": count,
                "saved_to": saved,
            })),
        )
    }
}
