//! `grep`: regex search over the workspace with ripgrep's searcher, through a contained
//! parallel walk.

use std::borrow::Cow;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use schemars::JsonSchema;
use serde::Deserialize;

use ringfence_fs::{WalkOptions, WalkState, walk};

use crate::relative_to;
use crate::text::{cut_line, thousands};
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// Matching file paths only.
    #[default]
    FilesWithMatches,
    /// `path:line: text` for each matching line.
    Content,
    /// `path:count` of matching lines per file.
    Count,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// Regular expression to search for (Rust/ripgrep regex syntax, without delimiters).
    pub pattern: String,
    /// Workspace-relative subdirectory (or file) to restrict the search scope. Defaults to
    /// the workspace root.
    #[serde(default)]
    pub path: Option<String>,
    /// Glob pattern matched against workspace-relative file paths to filter which files are
    /// searched (e.g. `**/*.php`, `*.{ts,tsx}`). A glob without `/` matches file names.
    #[serde(default)]
    pub glob: Option<String>,
    /// `files_with_matches` (default) — matching file paths only; `content` — `path:line:
    /// text` matching lines; `count` — match counts per file.
    #[serde(default)]
    pub output_mode: OutputMode,
    /// Match case-insensitively (default false).
    #[serde(default, alias = "-i")]
    pub case_insensitive: bool,
    /// Lines of context before each match (content mode).
    #[serde(default, alias = "-B")]
    pub before_context: Option<usize>,
    /// Lines of context after each match (content mode).
    #[serde(default, alias = "-A")]
    pub after_context: Option<usize>,
    /// Lines of context before and after each match (content mode).
    #[serde(default, alias = "-C")]
    pub context: Option<usize>,
    /// Let the pattern span lines; `.` also matches newlines (default false).
    #[serde(default)]
    pub multiline: bool,
    /// File type to search, as ripgrep names them (`rust`, `py`, `js`, `md`, ...).
    #[serde(default, rename = "type")]
    pub file_type: Option<String>,
    /// Return at most this many entries (lines, files or counts) after `offset`.
    #[serde(default)]
    pub head_limit: Option<usize>,
    /// Skip this many entries first (for paging with head_limit).
    #[serde(default)]
    pub offset: Option<usize>,
}

pub struct Grep;

const DESCRIPTION: &str = "Search file contents for a regular expression within the workspace, optionally scoped by subdirectory, glob or file type. Respects .gitignore and .ignore files, skips .git and binary files, searches hidden files. Results are sorted by path and capped at 100 matches; when cut, a notice says how many there were and where the full output was saved (page with head_limit and offset).";

impl BlockingTool for Grep {
    type Args = GrepArgs;
    const NAME: &'static str = "grep";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = DESCRIPTION;
    const ANNOTATIONS: Annotations = Annotations {
        title: "Search file contents",
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: GrepArgs) -> ToolResult<ToolOutput> {
        grep(ctx, args)
    }
}

#[derive(Debug)]
struct FileHits {
    rel: String,
    count: u64,
    /// Content mode only: the file's formatted output lines, one after another, with `--`
    /// between non-adjacent groups; formatted once, by the worker that found them.
    text: String,
    /// Byte range of each line in `text`, and whether it is a match (or context/separator).
    lines: Vec<(usize, usize, bool)>,
}

struct Collect<'a> {
    mode: OutputMode,
    rel: &'a str,
    count: u64,
    text: String,
    lines: Vec<(usize, usize, bool)>,
    max_line: usize,
}

impl Collect<'_> {
    fn push(&mut self, n: u64, bytes: &[u8], is_match: bool) {
        use std::fmt::Write;
        let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        let line = String::from_utf8_lossy(bytes);
        let line = cut_line(&line, self.max_line);
        let sep = if is_match { ':' } else { '-' };
        let start = self.text.len();
        let _ = write!(self.text, "{}{sep}{n}{sep} {line}", self.rel);
        self.lines.push((start, self.text.len(), is_match));
    }

    fn separator(&mut self) {
        let start = self.text.len();
        self.text.push_str("--");
        self.lines.push((start, self.text.len(), false));
    }
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        match self.mode {
            OutputMode::FilesWithMatches => {
                self.count += 1;
                Ok(false) // one match decides; stop reading this file
            }
            OutputMode::Count => {
                self.count += m.lines().count() as u64;
                Ok(true)
            }
            OutputMode::Content => {
                for (n, line) in (m.line_number().unwrap_or(0)..).zip(m.lines()) {
                    self.count += 1;
                    self.push(n, line, true);
                }
                Ok(true)
            }
        }
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, Self::Error> {
        if self.mode == OutputMode::Content {
            self.push(c.line_number().unwrap_or(0), c.bytes(), false);
        }
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, Self::Error> {
        if self.mode == OutputMode::Content {
            self.separator();
        }
        Ok(true)
    }
}

/// Which files to search, by glob and type.
pub(crate) struct FileFilter {
    by_path: Option<GlobSet>,
    by_name: Option<GlobSet>,
    types: Option<ignore::types::Types>,
}

impl FileFilter {
    pub(crate) fn new(glob: Option<&str>, file_type: Option<&str>) -> ToolResult<FileFilter> {
        let (mut by_path, mut by_name) = (None, None);
        if let Some(g) = glob.filter(|g| !g.trim().is_empty()) {
            let set = build_globset(g, "glob")?;
            if g.contains('/') {
                by_path = Some(set);
            } else {
                by_name = Some(set);
            }
        }
        let types = match file_type.filter(|t| !t.trim().is_empty()) {
            None => None,
            Some(t) => {
                let mut b = ignore::types::TypesBuilder::new();
                b.add_defaults();
                let known: Vec<String> = b
                    .definitions()
                    .iter()
                    .map(|d| d.name().to_owned())
                    .collect();
                if !known.iter().any(|k| k == t) {
                    return Err(ToolError::invalid(format!(
                        "grep: unknown file type `{t}`; use ripgrep type names such as rust, py, js, ts, go, java, c, cpp, md, json, yaml, toml, html, css, sh"
                    )));
                }
                b.select(t);
                Some(
                    b.build()
                        .map_err(|e| ToolError::invalid(format!("grep: type: {e}")))?,
                )
            }
        };
        Ok(FileFilter {
            by_path,
            by_name,
            types,
        })
    }

    pub(crate) fn accepts(&self, rel: &str, rel_to_base: &str) -> bool {
        if let Some(set) = &self.by_path
            && !set.is_match(rel)
            && !set.is_match(rel_to_base)
        {
            return false;
        }
        let name = rel.rsplit('/').next().unwrap_or(rel);
        if let Some(set) = &self.by_name
            && !set.is_match(name)
        {
            return false;
        }
        if let Some(types) = &self.types
            && !types.matched(name, false).is_whitelist()
        {
            return false;
        }
        true
    }
}

/// Compiles a glob (`**`, braces, classes); `*` does not cross `/`.
pub(crate) fn build_globset(pattern: &str, what: &str) -> ToolResult<GlobSet> {
    let glob = GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| {
            ToolError::invalid(format!("invalid {what} pattern `{pattern}`: {}", e.kind()))
        })?;
    GlobSetBuilder::new()
        .add(glob)
        .build()
        .map_err(|e| ToolError::invalid(format!("invalid {what} pattern `{pattern}`: {e}")))
}

fn build_matcher(args: &GrepArgs) -> ToolResult<RegexMatcher> {
    if args.pattern.is_empty() {
        return Err(ToolError::invalid(
            "grep: pattern is empty; give a regular expression",
        ));
    }
    let mut b = RegexMatcherBuilder::new();
    b.case_insensitive(args.case_insensitive);
    if args.multiline {
        b.multi_line(true).dot_matches_new_line(true);
    } else {
        b.line_terminator(Some(b'\n'));
    }
    b.build(&args.pattern).map_err(|e| {
        ToolError::invalid(format!(
            "grep: invalid regular expression: {e}\nEscape special characters such as ( ) [ ] {{ }} . * + ? | \\ with a backslash to match them literally."
        ))
    })
}

/// Reports progress after the first 64 files, then at most every 250 ms, from any worker.
struct Throttle {
    files: AtomicU64,
    last: Mutex<Option<Instant>>,
}

impl Throttle {
    fn new() -> Throttle {
        Throttle {
            files: AtomicU64::new(0),
            last: Mutex::new(None),
        }
    }

    fn tick(&self, ctx: &ToolContext) {
        let n = self.files.fetch_add(1, Ordering::Relaxed) + 1;
        if !ctx.progress.is_enabled() || !n.is_multiple_of(64) {
            return;
        }
        let Ok(mut last) = self.last.try_lock() else {
            return;
        };
        if last.is_none_or(|t| t.elapsed() >= Duration::from_millis(250)) {
            *last = Some(Instant::now());
            // Read the counter again under the lock: reports never go backwards.
            let n = self.files.load(Ordering::Relaxed);
            ctx.progress
                .report(n as f64, None, format!("searched {} files", thousands(n)));
        }
    }
}

fn grep(ctx: &ToolContext, args: GrepArgs) -> ToolResult<ToolOutput> {
    let matcher = build_matcher(&args)?;
    let filter = FileFilter::new(args.glob.as_deref(), args.file_type.as_deref())?;
    let scope = args
        .path
        .as_deref()
        .filter(|p| !p.is_empty())
        .unwrap_or("~");
    let start = ctx.session.workspace.resolve(scope)?;
    if !start.exists() {
        return Err(ToolError::new(
            ToolErrorKind::NotFound,
            format!("{scope}: no such file or directory to search"),
        ));
    }
    let base = start.rel().to_owned();
    let (before, after) = if args.output_mode == OutputMode::Content {
        (
            args.before_context.or(args.context).unwrap_or(0),
            args.after_context.or(args.context).unwrap_or(0),
        )
    } else {
        (0, 0)
    };
    let results: Mutex<Vec<FileHits>> = Mutex::new(Vec::new());
    let throttle = Throttle::new();
    let max_line = ctx.limits.max_grep_line_chars;
    walk(&start, &WalkOptions::default(), || {
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            // A file with a gigantic line (or multiline mode on a huge file) is skipped
            // rather than buffered whole.
            .heap_limit(Some(64 * 1024 * 1024))
            .multi_line(args.multiline)
            .before_context(before)
            .after_context(after)
            .build();
        let matcher = matcher.clone();
        let (results, filter, base, throttle) = (&results, &filter, &base, &throttle);
        let mode = args.output_mode;
        move |entry| {
            if ctx.cancel.is_cancelled() {
                return WalkState::Quit;
            }
            if entry.is_dir() || !entry.file_type.is_file() {
                return WalkState::Continue;
            }
            let rel_to_base = relative_to(base, &entry.rel);
            if !filter.accepts(&entry.rel, rel_to_base) {
                return WalkState::Continue;
            }
            let Ok(file) = entry.open_file() else {
                return WalkState::Continue;
            };
            let mut sink = Collect {
                mode,
                rel: &entry.rel,
                count: 0,
                text: String::new(),
                lines: Vec::new(),
                max_line,
            };
            if let Err(err) = searcher.search_file(&matcher, &file.into_std(), &mut sink) {
                tracing::debug!(file = %entry.rel.escape_debug(), error = %err, "search failed");
            }
            throttle.tick(ctx);
            if sink.count > 0 {
                results
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(FileHits {
                        rel: entry.rel.clone(),
                        count: sink.count,
                        text: sink.text,
                        lines: sink.lines,
                    });
            }
            WalkState::Continue
        }
    })?;
    ctx.check_cancelled()?;
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by(|a, b| a.rel.cmp(&b.rel));
    render(ctx, &args, start.display(), results)
}

/// Every output line in order, borrowed where the workers already formatted it.
fn entries(mode: OutputMode, results: &[FileHits], context: bool) -> Vec<(Cow<'_, str>, bool)> {
    let mut out = Vec::new();
    for hit in results {
        match mode {
            OutputMode::FilesWithMatches => out.push((Cow::Borrowed(hit.rel.as_str()), true)),
            OutputMode::Count => out.push((Cow::Owned(format!("{}:{}", hit.rel, hit.count)), true)),
            OutputMode::Content => {
                if context && !out.is_empty() {
                    out.push((Cow::Borrowed("--"), false));
                }
                out.extend(
                    hit.lines
                        .iter()
                        .map(|&(s, e, m)| (Cow::Borrowed(&hit.text[s..e]), m)),
                );
            }
        }
    }
    out
}

fn render(
    ctx: &ToolContext,
    args: &GrepArgs,
    scope: &str,
    results: Vec<FileHits>,
) -> ToolResult<ToolOutput> {
    let mode = args.output_mode;
    let context = args
        .before_context
        .or(args.after_context)
        .or(args.context)
        .unwrap_or(0)
        > 0;
    let all = entries(mode, &results, context);
    let total_matches = all.iter().filter(|e| e.1).count();
    if total_matches == 0 {
        let scope = if scope == "." { "the workspace" } else { scope };
        let text = format!(
            "No matches found for pattern `{}` in {scope}. (Files ignored by .gitignore/.ignore and binary files are not searched.)",
            args.pattern
        );
        return Ok(ToolOutput::text(text));
    }
    let skip = args.offset.unwrap_or(0);
    if skip >= all.len() {
        return Err(ToolError::invalid(format!(
            "grep: offset {skip} is past the end of the results ({} entries)",
            all.len()
        )));
    }
    let head = args.head_limit.unwrap_or(usize::MAX).max(1);
    let cap = ctx.limits.max_grep_matches;
    let mut shown = Vec::new();
    let mut shown_matches = 0usize;
    let mut cap_hit = false;
    for (text, is_match) in all.iter().skip(skip) {
        if shown.len() >= head {
            break;
        }
        if *is_match && shown_matches >= cap {
            cap_hit = true;
            break;
        }
        if *is_match {
            shown_matches += 1;
        }
        shown.push(text.as_ref());
    }
    while shown.last() == Some(&"--") {
        shown.pop();
    }
    let mut text = shown.join("\n");
    if cap_hit {
        let mut spill = ctx.spill.create()?;
        for (text, _) in &all {
            spill.write(text.as_bytes())?;
            spill.write(b"\n")?;
        }
        let saved = spill.finish()?;
        // Seed 000 counts matches; in the file-listing modes each entry is a file.
        let what = match mode {
            OutputMode::Content => "matches",
            OutputMode::FilesWithMatches | OutputMode::Count => "files",
        };
        text.push_str(&format!(
            "\n\nShowing {} of {} {what}. Use a more specific pattern or path to narrow results.\n{}",
            thousands(shown_matches as u64),
            thousands(total_matches as u64),
            saved.notice()
        ));
    } else if skip + shown.len() < all.len() {
        text.push_str(&format!(
            "\n\n(Entries {}-{} of {}. Call grep again with offset={} to see more.)",
            skip + 1,
            skip + shown.len(),
            all.len(),
            skip + shown.len()
        ));
    }
    Ok(ToolOutput::text(text))
}
