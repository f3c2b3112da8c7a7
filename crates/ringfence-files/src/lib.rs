//! The file tools: seed 000's five (read_file, write_file, edit_file, grep, glob), seed 002's
//! thirteen (read_file and write_file shared with seed 000), and ringfence's own.

use std::io::Read;
use std::sync::Arc;

use ringfence_fs::{File, Metadata, Target};

use crate::journal::Journaling;
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::family::{Family, FamilyInfo, PresetPart};
use ringfence_core::tool::{Blocking, Tool, ToolContext};

pub use plug::FilesPlug;
pub use reads::{ReadRecord, SharedReads, reads, share_reads};

pub mod copy_file;
pub mod create_folder;
pub mod delete_file;
pub mod directory_tree;
pub(crate) mod edit;
pub mod edit_file;
pub mod encoding;
pub mod entry_info;
pub mod file_access_info;
pub mod glob;
pub mod grep;
pub mod insert_file_content;
pub mod journal;
pub mod list_directory;
pub mod media;
pub mod move_file;
pub mod multi_edit;
mod plug;
pub mod read_file;
pub mod read_media_file;
pub mod reads;
pub mod replace_file_content;
pub mod replace_file_lines;
pub mod search_entries;
pub mod switch_workspace;
pub mod text;
pub mod undo_edit;
pub mod write_file;

/// The files family in the catalogue: its name and tool names, in listing order (seed
/// 000's, then the rest of seed 002's, then ringfence's own).
pub const INFO: FamilyInfo = FamilyInfo {
    name: FAMILY,
    summary: "read, write, edit, search and organise files inside the allowed directories",
    tools: &[
        "read_file",
        "write_file",
        "edit_file",
        "grep",
        "glob",
        "search_entries",
        "list_directory",
        "replace_file_lines",
        "insert_file_content",
        "replace_file_content",
        "entry_info",
        "delete_file",
        "create_folder",
        "move_file",
        "file_access_info",
        "switch_workspace",
        "copy_file",
        "multi_edit",
        "directory_tree",
        "undo_edit",
        "read_media_file",
    ],
    presets: &[
        PresetPart {
            name: "iris",
            summary: "the Iris workspace tools: five file tools",
            tools: &["read_file", "write_file", "edit_file", "grep", "glob"],
        },
        PresetPart {
            name: ringfence_core::family::ASSISTANT,
            summary: ringfence_core::family::ASSISTANT_SUMMARY,
            // Not the llm-chat tools that repeat these (search_entries, the three line and
            // content editors, entry_info), directory_tree (list_directory's recursive) nor
            // switch_workspace (absolute paths reach every root).
            tools: &[
                "read_file",
                "write_file",
                "edit_file",
                "multi_edit",
                "grep",
                "glob",
                "list_directory",
                "move_file",
                "copy_file",
                "delete_file",
                "create_folder",
                "undo_edit",
                "read_media_file",
                "file_access_info",
            ],
        },
        PresetPart {
            name: "llm-chat",
            summary: "the llm-chat file tools: thirteen",
            tools: &[
                "search_entries",
                "list_directory",
                "read_file",
                "write_file",
                "replace_file_lines",
                "insert_file_content",
                "replace_file_content",
                "entry_info",
                "delete_file",
                "create_folder",
                "move_file",
                "file_access_info",
                "switch_workspace",
            ],
        },
    ],
};

/// The family name (`tools.disable = ["files"]` turns every file tool off).
pub const FAMILY: &str = "files";

/// What the instructions at `initialize` teach the model about the file tools.
pub const INSTRUCTIONS: &str = "ringfence gives you file tools confined to the directories the user allowed. Call file_access_info (when offered) to see them, with their access (read or write) and the current workspace.\n\
\n\
Paths: relative paths (`notes/todo.md`) resolve against the current workspace; `~` is the current workspace (not the user's home). Absolute paths work inside the allowed directories. `..` may move within a directory, never out of it; symbolic links that lead outside are refused, and some paths may be blocked by the user's denylist. switch_workspace changes the current workspace.\n\
\n\
Read first: a new file can be written at once, but overwriting or editing an existing file requires that you read it with read_file in this session first, and that it has not changed since. If it changed, read it again. undo_edit reverts ringfence's last change to a file.\n\
\n\
Large output: read_file returns at most 500 lines or 30,000 characters (10,000 characters per file with `paths`), grep 100 matches, glob 100 paths, list_directory 1,000 entries. When a cap cuts the output, a notice says what was shown and gives the path of a file holding the full output: read it with read_file using offset and limit, or search it with grep. Page through big files with read_file offset/limit (or start_line/end_line with `paths`).";

/// What the file tools need beyond a call's context.
#[derive(Debug, Clone, Default)]
pub struct FileServices {
    /// Where changes are journaled for `undo_edit`.
    pub journal: Journaling,
}

/// Builds the files family: every file tool, in [`INFO`]'s order, sharing `services`.
pub fn family(services: FileServices) -> Family {
    let journal = services.journal;
    let tools: Vec<Arc<dyn Tool>> = vec![
        Blocking::arc(read_file::ReadFile),
        Blocking::arc(write_file::WriteFile {
            journal: journal.clone(),
        }),
        Blocking::arc(edit_file::EditFile {
            journal: journal.clone(),
        }),
        Blocking::arc(grep::Grep),
        Blocking::arc(glob::Glob),
        Blocking::arc(search_entries::SearchEntries),
        Blocking::arc(list_directory::ListDirectory),
        Blocking::arc(replace_file_lines::ReplaceFileLines {
            journal: journal.clone(),
        }),
        Blocking::arc(insert_file_content::InsertFileContent {
            journal: journal.clone(),
        }),
        Blocking::arc(replace_file_content::ReplaceFileContent {
            journal: journal.clone(),
        }),
        Blocking::arc(entry_info::EntryInfo),
        Blocking::arc(delete_file::DeleteFile {
            journal: journal.clone(),
        }),
        Blocking::arc(create_folder::CreateFolder),
        Blocking::arc(move_file::MoveFile {
            journal: journal.clone(),
        }),
        Blocking::arc(file_access_info::FileAccessInfo),
        Blocking::arc(switch_workspace::SwitchWorkspace),
        Blocking::arc(copy_file::CopyFile {
            journal: journal.clone(),
        }),
        Blocking::arc(multi_edit::MultiEdit {
            journal: journal.clone(),
        }),
        Blocking::arc(directory_tree::DirectoryTree),
        Blocking::arc(undo_edit::UndoEdit { journal }),
        Blocking::arc(read_media_file::ReadMediaFile),
    ];
    Family::new(&INFO, tools).with_instructions(INSTRUCTIONS)
}

/// Resolves `path` as an entry (a final symlink is the link itself) that must exist.
pub(crate) fn existing_entry(ctx: &ToolContext, path: &str) -> ToolResult<Target> {
    let target = ctx.session.workspace.resolve_entry(path)?;
    if !target.exists() {
        return Err(ToolError::new(
            ToolErrorKind::NotFound,
            format!("{}: no such file or directory", target.absolute().display()),
        ));
    }
    Ok(target)
}

/// The source and destination of a move or copy: the source must exist; a destination
/// ending in `/` names the source's name inside that directory; an existing directory as the
/// destination of a file is an error that says how to move or copy into it.
pub(crate) fn transfer_targets(
    ctx: &ToolContext,
    source: &str,
    destination: &str,
    verb: &str,
) -> ToolResult<(Target, Target)> {
    let source_t = existing_entry(ctx, source)?;
    let dest_input = if destination.ends_with('/') && destination != "/" {
        let rel = source_t.rel();
        format!("{destination}{}", rel.rsplit('/').next().unwrap_or(rel))
    } else {
        destination.to_owned()
    };
    let dest = ctx.session.workspace.resolve_entry(&dest_input)?;
    if dest.is_dir() && !source_t.is_dir() && !destination.ends_with('/') {
        return Err(ToolError::new(
            ToolErrorKind::AlreadyExists,
            format!(
                "{}: is an existing directory; to {verb} the file into it, end the destination with `/` (\"{destination}/\") or give the full new path",
                dest.absolute().display()
            ),
        ));
    }
    Ok((source_t, dest))
}

/// Before a move or copy replaces an existing file: the same read-first gate as write_file
/// (the model must have read what it is about to destroy), and its bytes for the journal.
pub(crate) fn guard_overwrite(ctx: &ToolContext, dest: &Target) -> ToolResult<Option<Vec<u8>>> {
    if dest.state() != ringfence_fs::TargetState::Exists(ringfence_fs::EntryKind::File) {
        return Ok(None);
    }
    let (old, current) = read_whole(dest, ctx.limits.max_edit_bytes)?;
    check_read_first(ctx, dest, &current)?;
    Ok(Some(old))
}

/// Journals the replacement of `dest` (whose earlier bytes `old` were) by a move or copy.
pub(crate) fn journal_overwrite(
    journal: &crate::journal::Journaling,
    dest: &Target,
    tool: &str,
    old: &[u8],
) -> Option<String> {
    let after = read_whole(dest, crate::journal::MAX_JOURNALED_BYTES as u64)
        .ok()
        .map(|(b, _)| b);
    journal.note(
        dest,
        tool,
        crate::journal::Before::of(old),
        after.as_deref(),
        None,
    )
}

/// How a result names an entry: relative to the current workspace when it lies inside it
/// (what the model passes back to other tools), otherwise absolute.
pub(crate) fn display_path(ctx: &ToolContext, root: &Arc<ringfence_fs::Root>, rel: &str) -> String {
    let current = ctx.session.workspace.current();
    if Arc::ptr_eq(root, &current.root) {
        if current.rel.is_empty() {
            return rel.to_owned();
        }
        if let Some(inside) = rel
            .strip_prefix(current.rel.as_str())
            .and_then(|r| r.strip_prefix('/'))
        {
            return inside.to_owned();
        }
    }
    ringfence_fs::Target::absolute_of(root, rel)
        .display()
        .to_string()
}

/// `rel` (root-relative) relative to the search base `base` (root-relative, empty for the
/// root), for patterns the model wrote relative to the `path` it gave.
pub(crate) fn relative_to<'a>(base: &str, rel: &'a str) -> &'a str {
    if base.is_empty() {
        return rel;
    }
    rel.strip_prefix(base)
        .and_then(|r| r.strip_prefix('/'))
        .unwrap_or(rel)
}

/// Bytes sampled to decide whether a file is text (seed 000: 8,192).
pub const SAMPLE_BYTES: usize = 8192;

/// Reads a whole file (bounded by `max`), returning the bytes and a read record.
pub(crate) fn read_whole(target: &Target, max: u64) -> ToolResult<(Vec<u8>, ReadRecord)> {
    let (file, meta) = target.open_read()?;
    if meta.len() > max {
        return Err(ToolError::new(
            ToolErrorKind::TooLarge,
            format!(
                "{}: the file is {} bytes, above the {}-byte limit for rewriting a whole file",
                target.input(),
                text::thousands(meta.len()),
                text::thousands(max)
            ),
        ));
    }
    let bytes = read_all(file, &meta, target)?;
    let record = record_for(&bytes, &meta);
    Ok((bytes, record))
}

fn read_all(file: File, meta: &Metadata, target: &Target) -> ToolResult<Vec<u8>> {
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.into_std().read_to_end(&mut bytes).map_err(|e| {
        ToolError::new(
            ToolErrorKind::Io,
            format!("{}: read failed: {e}", target.input()),
        )
    })?;
    Ok(bytes)
}

pub(crate) fn record_for(bytes: &[u8], meta: &Metadata) -> ReadRecord {
    ReadRecord {
        hash: *blake3::hash(bytes).as_bytes(),
        size: bytes.len() as u64,
        mtime: meta.modified().ok().map(|t| t.into_std()),
    }
}

/// The read-first gate: the file must have been read in this session and be unchanged since
/// (by content hash: a touch without change passes, any content change does not).
pub(crate) fn check_read_first(
    ctx: &ToolContext,
    target: &Target,
    current: &ReadRecord,
) -> ToolResult<()> {
    if !ctx.limits.require_read_before_write {
        return Ok(());
    }
    let reads = crate::reads::reads(&ctx.session);
    let Some(record) = reads.get(target) else {
        return Err(ToolError::new(
            ToolErrorKind::NotReadFirst,
            format!(
                "{}: the file exists and has not been read in this session. Read it with read_file first, then retry.",
                target.input()
            ),
        ));
    };
    if record.hash != current.hash {
        return Err(ToolError::new(
            ToolErrorKind::Stale,
            format!(
                "{}: the file changed since it was last read ({} bytes then, {} now). Read it again with read_file, then retry.",
                target.input(),
                text::thousands(record.size),
                text::thousands(current.size)
            ),
        ));
    }
    Ok(())
}

/// Whether `sample` (the first bytes of a file) looks like UTF-8 text: no NUL byte and valid
/// UTF-8, allowing a multi-byte sequence cut by the sample's end.
pub fn is_text_sample(sample: &[u8], complete: bool) -> bool {
    if memchr::memchr(0, sample).is_some() {
        return false;
    }
    match std::str::from_utf8(sample) {
        Ok(_) => true,
        Err(e) => !complete && e.error_len().is_none() && sample.len() - e.valid_up_to() < 4,
    }
}

pub(crate) fn binary_error(target: &Target) -> ToolError {
    ToolError::new(
        ToolErrorKind::Binary,
        format!(
            "{}: binary content detected in the first {} bytes: not text (UTF-8, UTF-16 with a byte-order mark, or a legacy encoding), nor an image or audio file, so it cannot be read",
            target.input(),
            text::thousands(SAMPLE_BYTES as u64)
        ),
    )
}
