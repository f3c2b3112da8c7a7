//! `list_directory` (seed 002): the entries of a directory, or of a whole tree, bounded.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use ringfence_fs::{WalkOptions, WalkState, walk_sorted};

use crate::relative_to;
use crate::text::thousands;
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::spill::SpillWriter;
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDirectoryArgs {
    /// Directory path (absolute, or relative to workspace root).
    pub path: String,
    /// Set to `true` for recursive depth-first listing.
    #[serde(default)]
    pub recursive: bool,
    /// With `recursive`: also list what .gitignore/.ignore files exclude, and `.git`
    /// (default false). A plain listing always shows every entry.
    #[serde(default)]
    pub include_ignored: bool,
}

pub struct ListDirectory;

impl BlockingTool for ListDirectory {
    type Args = ListDirectoryArgs;
    const NAME: &'static str = "list_directory";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Lists files and directories in a path. Directories are suffixed with /.\n\nOne entry per line, sorted by name; with recursive=true the whole tree depth-first (paths relative to the listed directory), skipping what .gitignore/.ignore exclude and .git unless include_ignored is true. Long listings are cut at 1,000 entries; the full listing is saved to a file the read tools can open.";
    const ANNOTATIONS: Annotations = Annotations {
        title: "List directory",
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: ListDirectoryArgs) -> ToolResult<ToolOutput> {
        list_directory(ctx, args)
    }
}

/// Collects listing lines up to a cap and everything (from the first cut on) into a spill.
pub(crate) struct CappedLines<'a> {
    ctx: &'a ToolContext,
    cap: usize,
    pub shown: String,
    pub count: u64,
    spill: Option<SpillWriter>,
    failed: Option<ToolError>,
}

impl<'a> CappedLines<'a> {
    pub fn new(ctx: &'a ToolContext, cap: usize) -> CappedLines<'a> {
        CappedLines {
            ctx,
            cap,
            shown: String::new(),
            count: 0,
            spill: None,
            failed: None,
        }
    }

    /// Adds one line; `false` once writing the spill failed (stop then).
    pub fn push(&mut self, line: &str) -> bool {
        self.count += 1;
        if self.count as usize <= self.cap {
            self.shown.push_str(line);
            self.shown.push('\n');
            return true;
        }
        if self.spill.is_none() {
            match self.ctx.spill.create() {
                Ok(mut spill) => {
                    if let Err(e) = spill.write(self.shown.as_bytes()) {
                        self.failed = Some(e);
                        return false;
                    }
                    self.spill = Some(spill);
                }
                Err(e) => {
                    self.failed = Some(e);
                    return false;
                }
            }
        }
        if let Some(spill) = self.spill.as_mut() {
            let r = spill
                .write(line.as_bytes())
                .and_then(|_| spill.write(b"\n"));
            if let Err(e) = r {
                self.failed = Some(e);
                return false;
            }
        }
        true
    }

    /// The shown lines and, if the cap cut them, a notice naming the saved full listing.
    pub fn finish(mut self, what: &str) -> ToolResult<(String, Option<String>)> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let mut text = self.shown;
        let mut saved = None;
        if let Some(spill) = self.spill.take() {
            let spilled = spill.finish()?;
            text.push_str(&format!(
                "… showing {} of {} {what}.\n{}",
                thousands(self.cap as u64),
                thousands(self.count),
                spilled.notice()
            ));
            saved = Some(spilled.path.display().to_string());
        }
        Ok((text, saved))
    }
}

fn list_directory(ctx: &ToolContext, args: ListDirectoryArgs) -> ToolResult<ToolOutput> {
    let target = ctx.session.workspace.resolve(&args.path)?;
    if !target.exists() {
        return Err(ToolError::new(
            ToolErrorKind::NotFound,
            format!("{}: no such directory", target.absolute().display()),
        ));
    }
    if !target.is_dir() {
        return Err(ToolError::new(
            ToolErrorKind::WrongType,
            format!(
                "{}: is a file, not a directory; use entry_info or read_file on it",
                target.absolute().display()
            ),
        ));
    }
    let filtered = args.recursive && !args.include_ignored;
    let opts = WalkOptions {
        respect_ignore_files: filtered,
        skip_vcs_dirs: filtered,
        threads: 1,
        report_symlinks: true,
    };
    let base = target.rel().to_owned();
    let mut lines = CappedLines::new(ctx, ctx.limits.max_list_entries);
    let mut cancelled = false;
    walk_sorted(
        &target,
        &opts,
        if args.recursive { None } else { Some(1) },
        &mut |entry, _depth| {
            if lines.count.is_multiple_of(4096) && ctx.cancel.is_cancelled() {
                cancelled = true;
                return WalkState::Quit;
            }
            let rel = relative_to(&base, &entry.rel);
            let ok = if entry.is_dir() {
                lines.push(&format!("{rel}/"))
            } else {
                lines.push(rel)
            };
            if ok {
                WalkState::Continue
            } else {
                WalkState::Quit
            }
        },
    )?;
    if cancelled {
        return Err(ToolError::cancelled());
    }
    let count = lines.count;
    let (mut text, saved) = lines.finish("entries")?;
    if count == 0 {
        text = if filtered {
            "(empty directory, or everything in it is ignored; pass include_ignored: true to see ignored entries)".to_owned()
        } else {
            "(empty directory)".to_owned()
        };
    } else if text.ends_with('\n') {
        text.pop();
    }
    Ok(ToolOutput::text(text).with_structured(json!({
        "path": target.absolute().display().to_string(),
        "entries": count,
        "saved_to": saved,
    })))
}
