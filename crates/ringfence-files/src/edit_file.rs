//! `edit_file`: exact-string replacement behind the read-first gate, with a diff back.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::edit;
use crate::journal::Journaling;
use crate::text::{cut_line, thousands};
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFileArgs {
    /// Workspace-relative path to the file to edit.
    pub path: String,
    /// Exact string to find and replace. Must appear in the file. Must differ from
    /// `new_string`.
    pub old_string: String,
    /// Replacement string. Must differ from `old_string`.
    pub new_string: String,
    /// When `false` (default), `old_string` must be unique — multiple matches return an
    /// error. When `true`, all occurrences are replaced.
    #[serde(default)]
    pub replace_all: bool,
}

pub struct EditFile {
    pub(crate) journal: Journaling,
}

const DESCRIPTION: &str = "Perform an exact-string replacement on a file within the workspace. The file must have been read in the current session via read_file first (read-first gate), and must not have changed since.\n\n`old_string` must appear in the file exactly (whitespace included; copy it from read_file output without the line-number prefix) and, unless `replace_all` is true, exactly once: add surrounding lines to make it unique. Returns the replacement count and a unified diff of the change. CRLF files stay CRLF when the strings use LF; the byte-order mark and final-newline state are kept; the write is atomic.";

/// Diff lines returned at most (the rest is summarised).
const MAX_DIFF_LINES: usize = 80;
/// Hunks shown in the diff at most.
const MAX_DIFF_HUNKS: usize = 5;
/// The most lines of the file one hunk spans: replacements close together share a hunk
/// only up to this, so one hunk can never carry the whole file.
const MAX_HUNK_SPAN: usize = MAX_DIFF_LINES / 2;

impl BlockingTool for EditFile {
    type Args = EditFileArgs;
    const NAME: &'static str = "edit_file";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = DESCRIPTION;
    const SENSITIVE: &'static [&'static str] = &["old_string", "new_string"];
    const ANNOTATIONS: Annotations = Annotations {
        title: "Edit file",
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: EditFileArgs) -> ToolResult<ToolOutput> {
        edit_file(ctx, &self.journal, args)
    }
}

fn edit_file(
    ctx: &ToolContext,
    journal: &Journaling,
    args: EditFileArgs,
) -> ToolResult<ToolOutput> {
    if args.old_string.is_empty() {
        return Err(ToolError::invalid(
            "edit_file: old_string is empty; give the exact text to replace (use write_file to create a file)",
        ));
    }
    if args.old_string == args.new_string {
        return Err(ToolError::invalid(
            "edit_file: old_string and new_string are identical; nothing would change",
        ));
    }
    let ed = edit::open(ctx, &args.path)?;
    let text = &ed.text;
    let old = ed.normalize_arg(&args.old_string);
    let new = ed.normalize_arg(&args.new_string);
    let found = edit::find(text, &old);
    if found.ranges.is_empty() {
        return Err(no_match("old_string", &args.path, text, &old));
    }
    let positions: Vec<usize> = found.ranges.iter().map(|r| r.0).collect();
    if positions.len() > 1 && !args.replace_all {
        let lines: Vec<String> = positions
            .iter()
            .take(10)
            .map(|&p| thousands(line_of(text, p) as u64))
            .collect();
        return Err(ToolError::new(
            ToolErrorKind::AmbiguousMatch,
            format!(
                "{}: old_string occurs {} times (at lines {}{}). Add surrounding lines to old_string to make it unique, or set replace_all to true",
                args.path,
                positions.len(),
                lines.join(", "),
                if positions.len() > 10 { ", …" } else { "" }
            ),
        ));
    }
    // Refuse before allocating: replace_all with a long new_string can multiply the size.
    let matched_len: u128 = found.ranges.iter().map(|(s, e)| (e - s) as u128).sum();
    let count = found.ranges.len();
    edit::check_size(
        ctx,
        &args.path,
        text.len() as u128 - matched_len + (count as u128) * (new.len() as u128),
    )?;
    ctx.check_cancelled()?;
    let replaced = edit::replace_ranges(text, &found.ranges, &new);
    let saved = edit::save(ctx, journal, &ed, &replaced, "edit_file")?;
    let diff = render_diff(ed.target.display(), text, &found.ranges, &new);
    let mut msg = format!(
        "Edited {}: {} replacement{}.",
        ed.target.display(),
        count,
        if count == 1 { "" } else { "s" }
    );
    if let Some(note) = &found.tolerated {
        msg.push_str(&format!(" Note: {note}."));
    }
    if let Some(kept) = ed.describe_kept() {
        msg.push(' ');
        msg.push_str(&kept);
    }
    msg.push_str("\n\n");
    msg.push_str(&diff);
    if let Some(note) = &saved.journal_note {
        msg.push('\n');
        msg.push_str(note);
    }
    Ok(ToolOutput::text(msg).with_structured(json!({
        "path": ed.target.display(),
        "replacements": count,
        "tolerant_match": found.tolerated,
        "diff": diff,
    })))
}

/// 1-based line number of byte offset `pos`.
fn line_of(text: &str, pos: usize) -> usize {
    memchr::memchr_iter(b'\n', &text.as_bytes()[..pos]).count() + 1
}

/// Start offsets of every line.
fn line_starts(text: &str) -> Vec<usize> {
    let mut starts = vec![0];
    starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
    if starts.last() == Some(&text.len()) && !text.is_empty() {
        starts.pop();
    }
    starts
}

/// A unified diff built around the replacements (3 lines of context), without diffing the
/// whole file: the cost is proportional to the change, not the file. Replacements on the same
/// line, or close enough that their hunks would touch, share one hunk.
pub(crate) fn render_diff(path: &str, text: &str, ranges: &[(usize, usize)], new: &str) -> String {
    const CONTEXT: usize = 3;
    let starts = line_starts(text);
    let line_index = |pos: usize| match starts.binary_search(&pos) {
        Ok(i) => i,
        Err(i) => i - 1,
    };
    let line_text = |i: usize| -> &str {
        let s = starts[i];
        let e = starts.get(i + 1).map(|e| e - 1).unwrap_or(text.len());
        &text[s..e.max(s)]
    };
    // Whole lines, each with its newline: up to and including the line where a match ends
    // (the match may itself end with that line's newline).
    let region_end = |end: usize| {
        if text.as_bytes()[end - 1] == b'\n' {
            end
        } else {
            memchr::memchr(b'\n', &text.as_bytes()[end..])
                .map(|i| end + i + 1)
                .unwrap_or(text.len())
        }
    };
    // Groups of replacements (indices into `ranges`) whose hunks would overlap or touch.
    let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
    let mut group_last_line = 0usize;
    for (n, &(pos, end)) in ranges.iter().enumerate() {
        let first = line_index(pos);
        let last = line_index(region_end(end) - 1);
        let group_first = groups
            .last()
            .map(|g| line_index(ranges[g.start].0))
            .unwrap_or(first);
        match groups.last_mut() {
            Some(g)
                if first <= group_last_line + 2 * CONTEXT + 1
                    && last.saturating_sub(group_first) < MAX_HUNK_SPAN =>
            {
                g.end = n + 1;
                group_last_line = group_last_line.max(last);
            }
            _ => {
                groups.push(n..n + 1);
                group_last_line = last;
            }
        }
    }
    let mut out = format!("--- a/{path}\n+++ b/{path}\n");
    let mut lines_out = 0usize;
    // Net lines added by earlier replacements, for the new file's numbering.
    let mut shift: isize = 0;
    for (g, group) in groups.iter().enumerate() {
        if g >= MAX_DIFF_HUNKS || lines_out >= MAX_DIFF_LINES {
            let rest = ranges.len() - group.start;
            out.push_str(&format!(
                "… {rest} more replacement{} not shown\n",
                if rest == 1 { "" } else { "s" }
            ));
            break;
        }
        let members = &ranges[group.clone()];
        let first = line_index(members[0].0);
        let end_of_region = members
            .iter()
            .map(|&(_, end)| region_end(end))
            .max()
            .unwrap_or(text.len());
        let region_start = starts[first];
        let old_region = &text[region_start..end_of_region];
        // The region with every replacement of the group made.
        let mut new_region = String::with_capacity(old_region.len());
        let mut at = region_start;
        for &(pos, end) in members {
            new_region.push_str(&text[at..pos]);
            new_region.push_str(new);
            at = end;
        }
        new_region.push_str(&text[at..end_of_region]);
        let last = line_index(end_of_region - 1);
        let ctx_start = first.saturating_sub(CONTEXT);
        let ctx_end = (last + CONTEXT).min(starts.len().saturating_sub(1));
        let diff = similar::TextDiff::from_lines(old_region, &new_region);
        let mut body = String::new();
        let (mut old_count, mut new_count) = (0usize, 0usize);
        for i in ctx_start..first {
            body.push_str(&format!(" {}\n", cut_line(line_text(i), 200)));
            old_count += 1;
            new_count += 1;
        }
        for change in diff.iter_all_changes() {
            let line = change.value().trim_end_matches('\n');
            let sign = match change.tag() {
                similar::ChangeTag::Equal => {
                    old_count += 1;
                    new_count += 1;
                    ' '
                }
                similar::ChangeTag::Delete => {
                    old_count += 1;
                    '-'
                }
                similar::ChangeTag::Insert => {
                    new_count += 1;
                    '+'
                }
            };
            body.push_str(&format!("{sign}{}\n", cut_line(line, 200)));
        }
        for i in last + 1..=ctx_end {
            body.push_str(&format!(" {}\n", cut_line(line_text(i), 200)));
            old_count += 1;
            new_count += 1;
        }
        let new_start = (ctx_start as isize + 1 + shift).max(1);
        out.push_str(&format!(
            "@@ -{},{} +{},{} @@\n",
            ctx_start + 1,
            old_count,
            new_start,
            new_count
        ));
        lines_out += body.lines().count();
        out.push_str(&body);
        for &(pos, end) in members {
            shift +=
                new.matches('\n').count() as isize - text[pos..end].matches('\n').count() as isize;
        }
    }
    out
}

/// The error for an `old_string` that does not occur, with the closest lines of the file.
/// `param`: the caller's name for the text looked for (`old_string`, `old_content`).
pub(crate) fn no_match(param: &str, path: &str, text: &str, old: &str) -> ToolError {
    let needle = old
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or(old)
        .trim();
    let mut candidates: Vec<(f32, usize, &str)> = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let fuzzy = lines.len() <= 20_000 && needle.len() <= 400;
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        let score = if t == needle {
            1.0
        } else if fuzzy && t.len() <= needle.len() * 2 + 20 && needle.len() <= t.len() * 2 + 20 {
            similar::TextDiff::from_chars(needle, t).ratio()
        } else {
            0.0
        };
        if score >= 0.5 {
            candidates.push((score, i + 1, line));
        }
    }
    candidates.sort_by(|a, b| {
        b.0.partial_cmp(&a.0)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.1.cmp(&b.1))
    });
    let mut msg = format!(
        "{path}: {param} was not found in the file. It must match exactly, including whitespace and indentation."
    );
    if candidates.is_empty() {
        msg.push_str(" No similar lines were found; read the file again with read_file and copy the text exactly.");
    } else {
        msg.push_str(" The closest lines are:\n");
        for (_, n, line) in candidates.iter().take(3) {
            msg.push_str(&format!("{n:>6}\t{}\n", cut_line(line, 200)));
        }
        msg.push_str(
            "Copy the text exactly from read_file output (without the line-number prefix).",
        );
    }
    ToolError::new(ToolErrorKind::NoMatch, msg)
}

#[cfg(test)]
mod tests {
    use super::render_diff;

    fn ranges(text: &str, needle: &str) -> Vec<(usize, usize)> {
        text.match_indices(needle)
            .map(|(i, m)| (i, i + m.len()))
            .collect()
    }

    #[test]
    fn two_matches_on_one_line_make_one_hunk_with_both_changed() {
        let text = "x foo y foo z\nline2\nfoo\n";
        let diff = render_diff("f.txt", text, &ranges(text, "foo"), "bar");
        assert_eq!(
            diff,
            "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n-x foo y foo z\n+x bar y bar z\n line2\n-foo\n+bar\n"
        );
    }

    #[test]
    fn distant_matches_get_hunks_of_their_own_numbered_in_the_new_file() {
        let mut text = String::from("foo\n");
        for i in 1..=10 {
            text.push_str(&format!("l{i}\n"));
        }
        text.push_str("foo\n");
        let diff = render_diff("f.txt", &text, &ranges(&text, "foo"), "a\nb");
        assert_eq!(diff.matches("@@ -").count(), 2, "{diff}");
        assert!(
            diff.contains("@@ -1,4 +1,5 @@\n-foo\n+a\n+b\n l1\n"),
            "{diff}"
        );
        // The second hunk's new line numbers count the line the first one added.
        assert!(
            diff.contains("@@ -9,4 +10,5 @@\n l8\n l9\n l10\n-foo\n+a\n+b\n"),
            "{diff}"
        );
    }

    #[test]
    fn a_match_on_every_line_still_gives_a_short_diff() {
        let text: String = (0..20_000).map(|i| format!("foo {i}\n")).collect();
        let diff = render_diff("f.txt", &text, &ranges(&text, "foo"), "bar");
        let lines = diff.lines().count();
        assert!(lines < 3 * super::MAX_DIFF_LINES, "{lines} lines");
        assert!(diff.contains("more replacements not shown"), "{diff}");
        // What is shown is right: the first lines changed, in order.
        assert!(diff.contains("-foo 0\n-foo 1\n"), "{diff}");
        assert!(diff.contains("+bar 0\n+bar 1\n"), "{diff}");
    }
}
