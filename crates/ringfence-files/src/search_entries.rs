//! `search_entries` (seed 002): find files and directories by name, content and time.

use std::collections::BinaryHeap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, SearcherBuilder, Sink, SinkMatch};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use ringfence_fs::{WalkEntry, WalkOptions, WalkState, walk};

use crate::text::{cut_line, thousands};
use crate::{display_path, relative_to};
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::spill::SpillWriter;
use ringfence_core::time::{format_iso, parse_iso};
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EntryType {
    File,
    Directory,
    #[default]
    Both,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchEntriesArgs {
    /// Directory path (absolute, or relative to workspace root). Default: the workspace.
    #[serde(default)]
    pub path: Option<String>,
    /// Entry type filter: `"file"`, `"directory"`, or `"both"` (default).
    #[serde(default, rename = "type")]
    pub entry_type: Option<EntryType>,
    /// Regex to match file/directory names (case-insensitive). JavaScript-style syntax;
    /// look-around and back-references are not supported.
    #[serde(default)]
    pub name_pattern: Option<String>,
    /// Regex to search file contents (case-insensitive, files only).
    #[serde(default)]
    pub content_pattern: Option<String>,
    /// Maximum results (default: config max, 50; at most 5,000).
    #[serde(default)]
    pub max_results: Option<u64>,
    /// Maximum file size in bytes for content searches (capped by config, 10 MiB).
    #[serde(default)]
    pub max_size: Option<u64>,
    /// ISO 8601 datetime — files created after this time.
    #[serde(default)]
    pub created_after: Option<String>,
    /// ISO 8601 datetime — files created before this time.
    #[serde(default)]
    pub created_before: Option<String>,
    /// ISO 8601 datetime — files modified after this time.
    #[serde(default)]
    pub modified_after: Option<String>,
    /// ISO 8601 datetime — files modified before this time.
    #[serde(default)]
    pub modified_before: Option<String>,
    /// Also search what .gitignore/.ignore files exclude, and `.git` (default false).
    #[serde(default)]
    pub include_ignored: bool,
}

pub struct SearchEntries;

const DESCRIPTION: &str = "Searches for files and directories by name, content pattern, and/or creation/modification timestamps. If no filter is provided, all entries are returned (up to max_results).\n\nOne entry per line: content matches as `path:line: content`, name matches as `path`, directories as `path/`; with time filters each line ends with `(created: …, modified: …)`. Filters combine with AND. Results are ordered shallowest first (files before directories at each level, then by path). Binary files, what .gitignore/.ignore exclude and .git are skipped (include_ignored: true searches them). The search stops after 10 s and returns what it found.";

impl BlockingTool for SearchEntries {
    type Args = SearchEntriesArgs;
    const NAME: &'static str = "search_entries";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = DESCRIPTION;
    const ANNOTATIONS: Annotations = Annotations {
        title: "Search entries",
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: SearchEntriesArgs) -> ToolResult<ToolOutput> {
        search_entries(ctx, args)
    }
}

/// One result, ordered shallowest first, files before directories, then by path and line.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Hit {
    depth: usize,
    is_dir: bool,
    path: String,
    line: u64,
    text: String,
}

struct Collector<'a> {
    ctx: &'a ToolContext,
    /// The best `keep` hits so far (a max-heap: the worst is popped when over).
    best: BinaryHeap<Hit>,
    keep: usize,
    /// From this many hits on, everything also goes to a spill file.
    spill_after: usize,
    total: u64,
    spill: Option<SpillWriter>,
    failed: Option<ToolError>,
}

impl Collector<'_> {
    fn add(&mut self, hit: Hit) {
        self.total += 1;
        if self.failed.is_some() {
            return;
        }
        if self.total as usize > self.spill_after {
            if self.spill.is_none() {
                // Nothing has been dropped yet (keep >= spill_after): the heap holds every
                // hit so far.
                match self.ctx.spill.create() {
                    Ok(mut spill) => {
                        let mut earlier: Vec<&Hit> = self.best.iter().collect();
                        earlier.sort();
                        for h in earlier {
                            if let Err(e) = spill
                                .write(h.text.as_bytes())
                                .and_then(|_| spill.write(b"\n"))
                            {
                                self.failed = Some(e);
                                return;
                            }
                        }
                        self.spill = Some(spill);
                    }
                    Err(e) => {
                        self.failed = Some(e);
                        return;
                    }
                }
            }
            if let Some(spill) = self.spill.as_mut()
                && let Err(e) = spill
                    .write(hit.text.as_bytes())
                    .and_then(|_| spill.write(b"\n"))
            {
                self.failed = Some(e);
                return;
            }
        }
        self.best.push(hit);
        if self.best.len() > self.keep {
            self.best.pop();
        }
    }
}

struct TimeFilter {
    created_after: Option<SystemTime>,
    created_before: Option<SystemTime>,
    modified_after: Option<SystemTime>,
    modified_before: Option<SystemTime>,
}

impl TimeFilter {
    fn parse(args: &SearchEntriesArgs) -> ToolResult<Option<TimeFilter>> {
        let p = |name: &str, v: &Option<String>| -> ToolResult<Option<SystemTime>> {
            v.as_deref()
                .map(|s| parse_iso(s).map_err(|e| ToolError::invalid(format!("{name}: {e}"))))
                .transpose()
        };
        let f = TimeFilter {
            created_after: p("created_after", &args.created_after)?,
            created_before: p("created_before", &args.created_before)?,
            modified_after: p("modified_after", &args.modified_after)?,
            modified_before: p("modified_before", &args.modified_before)?,
        };
        let any = f.created_after.is_some()
            || f.created_before.is_some()
            || f.modified_after.is_some()
            || f.modified_before.is_some();
        Ok(any.then_some(f))
    }

    /// `Some((created, modified))` if the entry passes. An entry whose file system does not
    /// record creation times never passes a created filter.
    fn check(&self, entry: &WalkEntry) -> Option<(Option<SystemTime>, SystemTime)> {
        let meta = entry.metadata().ok()?;
        let modified = meta.modified().ok()?.into_std();
        let created = meta.created().ok().map(|t| t.into_std());
        if self.modified_after.is_some_and(|t| modified <= t)
            || self.modified_before.is_some_and(|t| modified >= t)
        {
            return None;
        }
        if self.created_after.is_some() || self.created_before.is_some() {
            let c = created?;
            if self.created_after.is_some_and(|t| c <= t)
                || self.created_before.is_some_and(|t| c >= t)
            {
                return None;
            }
        }
        Some((created, modified))
    }
}

/// Matching lines of one file.
struct Lines<'a, 'c> {
    out: &'a mut Vec<(u64, String)>,
    max_line: usize,
    deadline: Instant,
    /// Where full batches go, so a file with millions of matching lines is never held whole.
    collector: &'a Mutex<Collector<'c>>,
    depth: usize,
    rel: &'a str,
    shown: &'a str,
    suffix: &'a str,
}

/// Matching lines handed to the collector at a time.
const LINE_BATCH: usize = 256;

impl Lines<'_, '_> {
    fn flush(&mut self) {
        if self.out.is_empty() {
            return;
        }
        let mut c = self.collector.lock().unwrap_or_else(|e| e.into_inner());
        for (n, text) in self.out.drain(..) {
            c.add(Hit {
                depth: self.depth,
                is_dir: false,
                path: self.rel.to_owned(),
                line: n,
                text: format!("{}:{n}: {text}{}", self.shown, self.suffix),
            });
        }
    }
}

impl Sink for Lines<'_, '_> {
    type Error = std::io::Error;
    fn matched(
        &mut self,
        _searcher: &grep_searcher::Searcher,
        mat: &SinkMatch<'_>,
    ) -> Result<bool, std::io::Error> {
        let n = mat.line_number().unwrap_or(0);
        for (i, line) in mat.lines().enumerate() {
            let text = String::from_utf8_lossy(line);
            let text = text.trim_end_matches(['\n', '\r']);
            self.out
                .push((n + i as u64, cut_line(text, self.max_line).into_owned()));
        }
        if self.out.len() >= LINE_BATCH {
            self.flush();
        }
        Ok(Instant::now() < self.deadline)
    }
}

fn search_entries(ctx: &ToolContext, args: SearchEntriesArgs) -> ToolResult<ToolOutput> {
    let limits = &ctx.limits;
    let max_results = match args.max_results {
        Some(0) => {
            return Err(ToolError::invalid(
                "search_entries: max_results must be at least 1",
            ));
        }
        Some(n) if n > limits.max_total_entries as u64 => {
            return Err(ToolError::invalid(format!(
                "search_entries: max_results {} is above the hard limit of {}; narrow the search (path, name_pattern, type) instead",
                thousands(n),
                thousands(limits.max_total_entries as u64)
            )));
        }
        Some(n) => n as usize,
        None => limits.max_search_results,
    };
    let max_size = args
        .max_size
        .unwrap_or(limits.max_file_size)
        .min(limits.max_file_size);
    let name_re = args
        .name_pattern
        .as_deref()
        .map(|p| {
            regex::RegexBuilder::new(p)
                .case_insensitive(true)
                .size_limit(1 << 22)
                .build()
                .map_err(|e| {
                    ToolError::invalid(format!(
                        "search_entries: name_pattern is not a valid regular expression: {e}"
                    ))
                })
        })
        .transpose()?;
    let content = args
        .content_pattern
        .as_deref()
        .map(|p| {
            RegexMatcherBuilder::new()
                .case_insensitive(true)
                .size_limit(1 << 22)
                .build(p)
                .map_err(|e| {
                    ToolError::invalid(format!(
                        "search_entries: content_pattern is not a valid regular expression: {e}"
                    ))
                })
        })
        .transpose()?;
    let times = TimeFilter::parse(&args)?;
    let entry_type = args.entry_type.unwrap_or_default();
    if content.is_some() && entry_type == EntryType::Directory {
        return Err(ToolError::invalid(
            "search_entries: content_pattern searches files, but type is \"directory\"; drop one of them",
        ));
    }
    let scope = args
        .path
        .as_deref()
        .filter(|p| !p.is_empty())
        .unwrap_or(".");
    let start = ctx.session.workspace.resolve(scope)?;
    if !start.exists() {
        return Err(ToolError::new(
            ToolErrorKind::NotFound,
            format!("{}: no such directory", start.absolute().display()),
        ));
    }
    let base = start.rel().to_owned();
    let root = start.root().clone();
    let started = Instant::now();
    let deadline = started + Duration::from_millis(limits.search_timeout_ms);
    let timed_out = std::sync::atomic::AtomicBool::new(false);
    let collector = Mutex::new(Collector {
        ctx,
        best: BinaryHeap::new(),
        keep: max_results,
        spill_after: max_results.min(limits.max_display_entries),
        total: 0,
        spill: None,
        failed: None,
    });
    let opts = WalkOptions {
        respect_ignore_files: !args.include_ignored,
        skip_vcs_dirs: !args.include_ignored,
        ..WalkOptions::default()
    };
    let max_line = limits.max_grep_line_chars;
    walk(&start, &opts, || {
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            .heap_limit(Some(64 * 1024 * 1024))
            .build();
        let (collector, name_re, content, times, base, root, timed_out) = (
            &collector, &name_re, &content, &times, &base, &root, &timed_out,
        );
        let mut lines: Vec<(u64, String)> = Vec::new();
        let mut seen = 0u64;
        move |entry: &WalkEntry| {
            seen += 1;
            if seen.is_multiple_of(256) {
                if ctx.cancel.is_cancelled() {
                    return WalkState::Quit;
                }
                if Instant::now() >= deadline {
                    timed_out.store(true, std::sync::atomic::Ordering::Relaxed);
                    return WalkState::Quit;
                }
            }
            let is_dir = entry.is_dir();
            let is_file = entry.file_type.is_file();
            let wanted = match entry_type {
                EntryType::File => is_file,
                EntryType::Directory => is_dir,
                EntryType::Both => true,
            };
            if !wanted || (content.is_some() && !is_file) {
                return WalkState::Continue;
            }
            if let Some(re) = name_re
                && !re.is_match(&entry.name().to_string_lossy())
            {
                return WalkState::Continue;
            }
            let stamps = match times {
                Some(t) => match t.check(entry) {
                    Some(s) => Some(s),
                    None => return WalkState::Continue,
                },
                None => None,
            };
            let rel = relative_to(base, &entry.rel);
            let depth = rel.matches('/').count();
            let shown = display_path(ctx, root, &entry.rel);
            let suffix = stamps
                .map(|(c, m)| {
                    format!(
                        "  (created: {}, modified: {})",
                        c.map(format_iso).unwrap_or_else(|| "unknown".into()),
                        format_iso(m)
                    )
                })
                .unwrap_or_default();
            if let Some(matcher) = content {
                let Ok(file) = entry.open_file() else {
                    return WalkState::Continue;
                };
                if file.metadata().map(|m| m.len() > max_size).unwrap_or(true) {
                    return WalkState::Continue;
                }
                lines.clear();
                let mut sink = Lines {
                    out: &mut lines,
                    max_line,
                    deadline,
                    collector,
                    depth,
                    rel: &entry.rel,
                    shown: &shown,
                    suffix: &suffix,
                };
                let searched = searcher.search_file(matcher, &file.into_std(), &mut sink);
                if searched.is_ok() {
                    sink.flush();
                }
            } else {
                let text = if is_dir {
                    format!("{shown}/{suffix}")
                } else {
                    format!("{shown}{suffix}")
                };
                collector
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .add(Hit {
                        depth,
                        is_dir,
                        path: entry.rel.clone(),
                        line: 0,
                        text,
                    });
            }
            WalkState::Continue
        }
    })?;
    ctx.check_cancelled()?;
    let mut c = collector.into_inner().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = c.failed.take() {
        return Err(e);
    }
    let timed_out = timed_out.into_inner() || Instant::now() >= deadline;
    let total = c.total;
    let hits = std::mem::take(&mut c.best).into_sorted_vec();
    let saved = match c.spill.take() {
        Some(spill) => Some(spill.finish()?),
        None => None,
    };
    let mut text = String::new();
    let summarize = hits.len() > limits.max_display_entries;
    if total == 0 {
        text.push_str("No entries found.");
        if !args.include_ignored {
            text.push_str(
                " (Ignored files and .git were skipped; include_ignored: true searches them.)",
            );
        }
    } else if summarize {
        let dirs = hits.iter().filter(|h| h.is_dir).count();
        text.push_str(&format!(
            "Found {} results ({} shown would exceed the display limit of {}): {} files or matching lines, {} directories among the first {}. Narrow the search with path, name_pattern or type.",
            thousands(total),
            thousands(hits.len() as u64),
            thousands(limits.max_display_entries as u64),
            thousands((hits.len() - dirs) as u64),
            thousands(dirs as u64),
            thousands(hits.len() as u64),
        ));
    } else {
        let lines: Vec<&str> = hits.iter().map(|h| h.text.as_str()).collect();
        text.push_str(&lines.join("\n"));
        if total > hits.len() as u64 {
            text.push_str(&format!(
                "\n\nShowing {} of {} results (max_results={}). Narrow the search, or raise max_results (up to {}).",
                thousands(hits.len() as u64),
                thousands(total),
                max_results,
                thousands(limits.max_total_entries as u64)
            ));
        }
    }
    if let Some(saved) = &saved {
        text.push('\n');
        text.push_str(&saved.notice());
        text.push_str(" (Saved in the order found.)");
    }
    if timed_out {
        text.push_str(&format!(
            "\n\nThe search timed out after {} ms; these results are partial. Narrow the path or patterns.",
            thousands(limits.search_timeout_ms)
        ));
    }
    Ok(ToolOutput::text(text).with_structured(json!({
        "total": total,
        "shown": if summarize { 0 } else { hits.len() },
        "timed_out": timed_out,
        "saved_to": saved.map(|s| s.path.display().to_string()),
    })))
}
