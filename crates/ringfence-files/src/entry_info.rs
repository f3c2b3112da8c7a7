//! `entry_info` (seed 002): metadata of one entry, a symbolic link described as itself.

use std::time::SystemTime;
#[cfg(unix)]
use std::time::{Duration, UNIX_EPOCH};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use ringfence_fs::{EntryKind, TargetState};

use crate::existing_entry;
use ringfence_core::error::ToolResult;
use ringfence_core::time::format_iso;
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EntryInfoArgs {
    /// Path (absolute, or relative to workspace root).
    pub path: String,
}

pub struct EntryInfo;

impl BlockingTool for EntryInfo {
    type Args = EntryInfoArgs;
    const NAME: &'static str = "entry_info";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Returns metadata about a filesystem entry (file, directory, symlink, etc.) — type, size, timestamps, permissions, and symlink target if applicable.\n\nOne line per metadata field. A symbolic link is described itself (not what it points to), with its target and whether that target is usable.";
    const ANNOTATIONS: Annotations = Annotations {
        title: "Entry info",
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: EntryInfoArgs) -> ToolResult<ToolOutput> {
        let ws = &ctx.session.workspace;
        let target = existing_entry(ctx, &args.path)?;
        let abs = target.absolute();
        let meta = target.metadata()?;
        let ft = meta.file_type();
        let kind = file_type_name(&ft);
        let mode = ringfence_fs::mode_of(&meta);
        let when = |t: std::io::Result<cap_std::time::SystemTime>| {
            t.ok().map(|t| format_iso(t.into_std()))
        };
        let changed = changed(&meta).map(format_iso);
        let mut lines = vec![
            format!("Path: {}", abs.display()),
            format!("Type: {kind}"),
            format!("Size: {} bytes", meta.len()),
            format!("Permissions: {}", permission_string(mode)),
        ];
        let created = when(meta.created());
        let modified = when(meta.modified());
        let accessed = when(meta.accessed());
        let unknown = || "unknown (not recorded by this file system)".to_owned();
        lines.push(format!(
            "Created: {}",
            created.clone().unwrap_or_else(unknown)
        ));
        lines.push(format!(
            "Modified (content): {}",
            modified.clone().unwrap_or_else(unknown)
        ));
        lines.push(format!(
            "Accessed: {}",
            accessed.clone().unwrap_or_else(unknown)
        ));
        lines.push(format!(
            "Changed (metadata): {}",
            changed.clone().unwrap_or_else(unknown)
        ));
        let mut link = None;
        if target.state() == TargetState::Exists(EntryKind::Symlink) {
            let text = target.read_link()?;
            let shown = text.display().to_string();
            // Say whether following the link stays inside; never describe what lies outside.
            let status = match ws.resolve(&args.path) {
                Ok(t) if t.exists() => format!(
                    "resolves to {} ({})",
                    t.absolute().display(),
                    match t.state() {
                        TargetState::Exists(EntryKind::Dir) => "directory",
                        TargetState::Exists(EntryKind::File) => "file",
                        _ => "other",
                    }
                ),
                Ok(_) => "dangling: the target does not exist".to_owned(),
                Err(e) if e.kind() == ringfence_fs::FsErrorKind::OutsideRoot => {
                    "points outside the configured directories; it cannot be followed".to_owned()
                }
                Err(e) if e.kind() == ringfence_fs::FsErrorKind::Denied => {
                    "blocked by the denylist".to_owned()
                }
                Err(e) => format!("cannot be followed: {}", e.message()),
            };
            lines.push(format!("Symlink target: {shown} ({status})"));
            link = Some(json!({ "target": shown, "status": status }));
        }
        #[cfg(unix)]
        if ft.is_dir() {
            use ringfence_fs::MetadataExt;
            lines.push(format!("Links: {}", crate::text::thousands(meta.nlink())));
        }
        Ok(ToolOutput::text(lines.join("\n")).with_structured(json!({
            "path": abs.display().to_string(),
            "type": kind,
            "size": meta.len(),
            "permissions": permission_string(mode),
            "mode": format!("{:o}", mode & 0o7777),
            "created": created,
            "modified": modified,
            "accessed": accessed,
            "changed": changed,
            "symlink": link,
        })))
    }
}

/// When the entry's metadata last changed (Unix's ctime; Windows keeps no such time).
fn changed(meta: &ringfence_fs::Metadata) -> Option<SystemTime> {
    #[cfg(unix)]
    {
        use ringfence_fs::MetadataExt;
        ctime(meta.ctime(), meta.ctime_nsec())
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}

#[cfg(unix)]
fn ctime(secs: i64, nsec: i64) -> Option<SystemTime> {
    let nanos = u32::try_from(nsec).ok()?;
    if secs >= 0 {
        Some(UNIX_EPOCH + Duration::new(secs as u64, nanos))
    } else {
        Some(
            UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
                + Duration::from_nanos(nanos.into()),
        )
    }
}

fn file_type_name(ft: &ringfence_fs::FileType) -> &'static str {
    if ft.is_symlink() {
        "symlink"
    } else if ft.is_dir() {
        "directory"
    } else if ft.is_file() {
        "file"
    } else {
        special_type_name(ft)
    }
}

#[cfg(not(unix))]
fn special_type_name(_: &ringfence_fs::FileType) -> &'static str {
    "other"
}

#[cfg(unix)]
fn special_type_name(ft: &ringfence_fs::FileType) -> &'static str {
    use cap_std::fs::FileTypeExt;
    if ft.is_fifo() {
        "fifo"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_block_device() {
        "block device"
    } else {
        "other"
    }
}

/// `rw-r--r--`, with setuid/setgid/sticky shown as `ls` does.
pub(crate) fn permission_string(mode: u32) -> String {
    let mut s = String::with_capacity(9);
    let bits = [
        (0o400, 'r'),
        (0o200, 'w'),
        (0o100, 'x'),
        (0o040, 'r'),
        (0o020, 'w'),
        (0o010, 'x'),
        (0o004, 'r'),
        (0o002, 'w'),
        (0o001, 'x'),
    ];
    for (i, (bit, c)) in bits.iter().enumerate() {
        let set = mode & bit != 0;
        let special = match i {
            2 => mode & 0o4000 != 0,
            5 => mode & 0o2000 != 0,
            8 => mode & 0o1000 != 0,
            _ => false,
        };
        s.push(match (set, special, i) {
            (true, true, 8) => 't',
            (false, true, 8) => 'T',
            (true, true, _) => 's',
            (false, true, _) => 'S',
            (true, false, _) => *c,
            (false, false, _) => '-',
        });
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn permission_strings() {
        assert_eq!(super::permission_string(0o644), "rw-r--r--");
        assert_eq!(super::permission_string(0o755), "rwxr-xr-x");
        assert_eq!(super::permission_string(0o4755), "rwsr-xr-x");
        assert_eq!(super::permission_string(0o1777), "rwxrwxrwt");
        assert_eq!(super::permission_string(0o2640), "rw-r-S---");
    }
}
