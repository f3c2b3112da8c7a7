//! Adversarial containment through the tools: every path-taking tool against a table of
//! escape inputs, recursive deletes meeting symlinks, moves across the boundary, the
//! read-only root, the denylist and switch_workspace.
//!
//! Every case builds a fresh temporary tree:
//!
//! ```text
//! <tmp>/ws/...                 read-write root (current), see `plant`
//! <tmp>/ro/...                 read-only root
//! <tmp>/outside/secret.txt     what an escape would reach (+ outside/dir/inner.txt)
//! <tmp>/ws-evil/file.txt       shares the root's name as a prefix
//! ```
//!
//! After every call the whole temp tree minus `<tmp>/ws` (so `outside`, `ws-evil`, the
//! read-only root and the data directory) is compared, names and bytes, with a snapshot taken
//! before; a refused call must also leave `<tmp>/ws` untouched. Every input stays inside the
//! temp dir, so even a containment failure cannot damage the machine running the tests.

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use crate::common::Fx;
use ringfence_core::{Limits, ToolErrorKind};
use ringfence_fs::Access;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------
// Fixture
// ---------------------------------------------------------------------------------------

/// Contents no output may ever show. Each contains `payload`, which the grep-style
/// probes search for.
const SECRET: &str = "outside-secret-payload-5b1e";
const INNER: &str = "outside-inner-payload-c07a";
const SIBLING: &str = "sibling-payload-92de";
const KEY: &str = "denied-key-payload-4f60";
const ENV: &str = "denied-env-payload-a8d3";
const PAYLOADS: &[&str] = &[SECRET, INNER, SIBLING, KEY, ENV];

const RO_TEXT: &str = "read-only line one\nread-only line two\n";
const LEGIT: &str = "legit\n";
const DENY: &[&str] = &["secrets/", "*.env"];

fn fixture() -> Fx {
    let fx = Fx::with_roots(
        Limits::default(),
        DENY,
        &[("ws", Access::ReadWrite), ("ro", Access::ReadOnly)],
    );
    plant(&fx);
    fx
}

fn tmp(fx: &Fx) -> &Path {
    fx.tmp.path()
}

fn outside_dir(fx: &Fx) -> PathBuf {
    tmp(fx).join("outside")
}

fn ro_root(fx: &Fx) -> &Path {
    &fx.roots[1]
}

fn s(p: &Path) -> String {
    p.to_str().expect("utf-8 temp path").to_owned()
}

fn put(path: &Path, content: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

fn link(target: impl AsRef<Path>, at: &Path) {
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    symlink(target, at).unwrap();
}

fn is_link(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

fn present(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

fn content(p: &Path) -> String {
    String::from_utf8(std::fs::read(p).unwrap()).unwrap()
}

/// The standard tree: outside files, a sibling-prefix directory, the read-only root's
/// files, and inside the read-write root plain files, denied entries and every kind of
/// escaping symlink.
fn plant(fx: &Fx) {
    let out = outside_dir(fx);
    put(&out.join("secret.txt"), SECRET);
    put(&out.join("dir/inner.txt"), INNER);
    put(&tmp(fx).join("ws-evil/file.txt"), SIBLING);
    put(&ro_root(fx).join("ro.txt"), RO_TEXT);
    put(&ro_root(fx).join("dir/ro_inner.txt"), RO_TEXT);

    fx.write("file.txt", "inside\n");
    fx.write("legit.txt", LEGIT);
    fx.write("sub/note.txt", "note\n");
    fx.write("secrets/key", KEY);
    fx.write("app.env", ENV);

    let r = |rel: &str| fx.path(rel);
    link("../outside", &r("link_out_dir"));
    link(&out, &r("link_out_dir_abs"));
    link("../outside/secret.txt", &r("link_out_file"));
    link(out.join("secret.txt"), &r("link_out_file_abs"));
    link("chain2", &r("chain1"));
    link("sub/../../outside/secret.txt", &r("chain2"));
    link("chain_dir2", &r("chain_dir1"));
    link("../outside", &r("chain_dir2"));
    link(out.join("created.txt"), &r("dangle_out"));
    link(out.join("newdir/created.txt"), &r("dangle_out_dir"));
    link("..", &r("link_updir"));
    link("../../outside", &r("sub/link_up"));
    link("../ws-evil", &r("link_sibling"));
    link("secrets/key", &r("ok.txt"));
}

/// `{tmp}`, `{outside}`, `{ws}` and `{ro}` in a case's input.
fn expand(fx: &Fx, template: &str) -> String {
    template
        .replace("{outside}", &s(&outside_dir(fx)))
        .replace("{tmp}", &s(tmp(fx)))
        .replace("{ws}", &s(&fx.root))
        .replace("{ro}", &s(ro_root(fx)))
}

// ---------------------------------------------------------------------------------------
// Snapshots
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Dir,
    File(Vec<u8>),
    Link(PathBuf),
    Other,
}

type Tree = BTreeMap<String, Node>;

/// Every entry under `dir` (never following symlinks) by `/`-joined relative path,
/// skipping the subtrees named in `skip`.
fn snapshot(dir: &Path, skip: &[&str]) -> Tree {
    let mut out = Tree::new();
    collect(dir, "", skip, &mut out);
    out
}

fn collect(dir: &Path, rel: &str, skip: &[&str], out: &mut Tree) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let child = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        if skip.contains(&child.as_str()) {
            continue;
        }
        let path = entry.path();
        let ft = std::fs::symlink_metadata(&path).unwrap().file_type();
        let node = if ft.is_symlink() {
            Node::Link(std::fs::read_link(&path).unwrap())
        } else if ft.is_dir() {
            collect(&path, &child, skip, out);
            Node::Dir
        } else if ft.is_file() {
            Node::File(std::fs::read(&path).unwrap())
        } else {
            Node::Other
        };
        out.insert(child, node);
    }
}

/// Everything but the read-write root: outside, the sibling, the read-only root, data.
/// Resolving an absolute path may create ringfence's own (empty) storage directory on first
/// use; that directory is not an escape, anything in it would be.
fn outside_tree(fx: &Fx) -> Tree {
    let mut tree = snapshot(tmp(fx), &["ws"]);
    for own in ["data", "data/tool-output"] {
        if tree.get(own) == Some(&Node::Dir) {
            tree.remove(own);
        }
    }
    tree
}

fn ws_tree(fx: &Fx) -> Tree {
    snapshot(&fx.root, &[])
}

/// `(what, path)` for every difference.
fn diff(before: &Tree, after: &Tree) -> Vec<(&'static str, String)> {
    let mut d = Vec::new();
    for (k, v) in before {
        match after.get(k) {
            None => d.push(("removed", k.clone())),
            Some(w) if w != v => d.push(("changed", k.clone())),
            _ => {}
        }
    }
    for k in after.keys() {
        if !before.contains_key(k) {
            d.push(("created", k.clone()));
        }
    }
    d
}

fn describe(d: &[(&'static str, String)]) -> String {
    d.iter()
        .map(|(what, k)| format!("{what} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn leaks(text: &str) -> Vec<&'static str> {
    PAYLOADS
        .iter()
        .copied()
        .filter(|p| text.contains(p))
        .collect()
}

// ---------------------------------------------------------------------------------------
// 1. The escape table against every path-taking tool
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    Outside,
    Denied,
    Invalid,
}

impl Want {
    fn kind(self) -> ToolErrorKind {
        match self {
            Want::Outside => ToolErrorKind::OutsideWorkspace,
            Want::Denied => ToolErrorKind::Denied,
            Want::Invalid => ToolErrorKind::InvalidArgument,
        }
    }
}

struct Case {
    name: &'static str,
    input: &'static str,
    want: Want,
    /// When the last component is a symlink inside the root: its root-relative name. Tools
    /// that act on an entry itself (entry_info, delete_file, move_file) may act on the
    /// link, never on what it points at.
    link: Option<&'static str>,
}

fn c(name: &'static str, input: &'static str, want: Want) -> Case {
    Case {
        name,
        input,
        want,
        link: None,
    }
}

fn l(name: &'static str, input: &'static str, want: Want, link: &'static str) -> Case {
    Case {
        name,
        input,
        want,
        link: Some(link),
    }
}

fn cases() -> Vec<Case> {
    use Want::*;
    vec![
        // `..` above the root
        c("dotdot_secret", "../outside/secret.txt", Outside),
        c("dotdot_new_file", "../outside/new.txt", Outside),
        c("dotdot_outside_dir", "../outside", Outside),
        c("dotdot_parent_of_roots", "..", Outside),
        c(
            "dotdot_deep_from_sub",
            "sub/../../outside/secret.txt",
            Outside,
        ),
        c(
            "dotdot_through_missing_dir",
            "nodir/../../outside/new.txt",
            Outside,
        ),
        c("dotdot_into_other_root", "../ro/ro.txt", Outside),
        c("tilde_dotdot", "~/../outside/secret.txt", Outside),
        // absolute paths outside
        c("abs_outside_file", "{outside}/secret.txt", Outside),
        c(
            "abs_outside_new_nested",
            "{outside}/newdir/new.txt",
            Outside,
        ),
        c("abs_outside_dir", "{outside}", Outside),
        c("abs_parent_of_roots", "{tmp}", Outside),
        c("abs_root_dotdot", "{ws}/../outside/secret.txt", Outside),
        c("abs_other_root_dotdot", "{ro}/../outside/dir", Outside),
        c("abs_double_slash", "/{outside}/secret.txt", Outside),
        c(
            "proc_self_root",
            "/proc/self/root{outside}/secret.txt",
            Outside,
        ),
        // sibling-prefix paths
        c("abs_sibling_prefix", "{ws}-evil/file.txt", Outside),
        c("rel_sibling_prefix", "../ws-evil/file.txt", Outside),
        // symlinks leaving the root
        c("link_dir_then_file", "link_out_dir/secret.txt", Outside),
        c(
            "link_dir_abs_missing_below",
            "link_out_dir_abs/newdir/new.txt",
            Outside,
        ),
        c(
            "link_dir_missing_below",
            "link_out_dir/created.txt",
            Outside,
        ),
        l("link_dir_itself", "link_out_dir", Outside, "link_out_dir"),
        l(
            "link_dir_trailing_slash",
            "link_out_dir/",
            Outside,
            "link_out_dir",
        ),
        l("link_dir_dot", "link_out_dir/.", Outside, "link_out_dir"),
        l("link_file_rel", "link_out_file", Outside, "link_out_file"),
        l(
            "link_file_abs",
            "link_out_file_abs",
            Outside,
            "link_out_file_abs",
        ),
        l("link_chain_file", "chain1", Outside, "chain1"),
        c("link_chain_dir", "chain_dir1/dir/inner.txt", Outside),
        l("dangling_to_outside", "dangle_out", Outside, "dangle_out"),
        l(
            "dangling_to_missing_outside_dir",
            "dangle_out_dir",
            Outside,
            "dangle_out_dir",
        ),
        c("link_to_parent", "link_updir/outside/secret.txt", Outside),
        c("link_up_from_sub", "sub/link_up/dir", Outside),
        c("link_to_sibling_prefix", "link_sibling/file.txt", Outside),
        // malformed
        c("nul_byte", "file.txt\0/../../outside/secret.txt", Invalid),
        c("empty", "", Invalid),
        // denylist
        c("denied_dir_entry", "secrets/key", Denied),
        c("denied_dir", "secrets", Denied),
        c("denied_pattern_file", "app.env", Denied),
        c("denied_pattern_new", "sub/new.env", Denied),
        c("denied_passed_through", "secrets/../file.txt", Denied),
        l("link_to_denied", "ok.txt", Denied, "ok.txt"),
    ]
}

/// One way of handing a path to a tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    ReadPath,
    ReadPaths,
    Write,
    Edit,
    Grep,
    Glob,
    SearchEntries,
    ListRecursive,
    ListFlat,
    ReplaceLines,
    Insert,
    ReplaceContent,
    EntryInfo,
    Delete,
    CreateFolder,
    MoveSource,
    MoveDest,
    Switch,
    CopySource,
    CopyDest,
    MultiEdit,
    Undo,
    Tree,
    Media,
}

impl Role {
    fn tool(self) -> &'static str {
        match self {
            Role::ReadPath | Role::ReadPaths => "read_file",
            Role::Write => "write_file",
            Role::Edit => "edit_file",
            Role::Grep => "grep",
            Role::Glob => "glob",
            Role::SearchEntries => "search_entries",
            Role::ListRecursive | Role::ListFlat => "list_directory",
            Role::ReplaceLines => "replace_file_lines",
            Role::Insert => "insert_file_content",
            Role::ReplaceContent => "replace_file_content",
            Role::EntryInfo => "entry_info",
            Role::Delete => "delete_file",
            Role::CreateFolder => "create_folder",
            Role::MoveSource | Role::MoveDest => "move_file",
            Role::Switch => "switch_workspace",
            Role::CopySource | Role::CopyDest => "copy_file",
            Role::MultiEdit => "multi_edit",
            Role::Undo => "undo_edit",
            Role::Tree => "directory_tree",
            Role::Media => "read_media_file",
        }
    }

    fn args(self, p: &str) -> Value {
        match self {
            Role::ReadPath => json!({"path": p}),
            Role::ReadPaths => json!({"paths": [p]}),
            Role::Write => json!({"path": p, "content": "PWNED\n"}),
            Role::Edit => {
                json!({"path": p, "old_string": "never-present-old", "new_string": "PWNED"})
            }
            Role::Grep => json!({"pattern": "payload", "path": p, "output_mode": "content"}),
            Role::Glob => json!({"pattern": "**/*", "path": p}),
            Role::SearchEntries => json!({"path": p, "content_pattern": "payload"}),
            Role::ListRecursive => json!({"path": p, "recursive": true}),
            Role::ListFlat => json!({"path": p}),
            Role::ReplaceLines => {
                json!({"path": p, "content": "PWNED", "start_line": 1, "end_line": 1})
            }
            Role::Insert => json!({"path": p, "content": "PWNED", "line": 1}),
            Role::ReplaceContent => {
                json!({"path": p, "old_content": "never-present-old", "new_content": "PWNED"})
            }
            Role::EntryInfo => json!({"path": p}),
            Role::Delete => json!({"path": p, "recursive": true}),
            Role::CreateFolder => json!({"path": p}),
            Role::MoveSource => json!({"source": p, "destination": "moved"}),
            Role::MoveDest => {
                json!({"source": "legit.txt", "destination": p, "overwrite": true})
            }
            Role::Switch => json!({"path": p}),
            Role::CopySource => json!({"source": p, "destination": "copied"}),
            Role::CopyDest => {
                json!({"source": "legit.txt", "destination": p, "overwrite": true})
            }
            Role::MultiEdit => json!({"path": p, "edits": [
                {"old_string": "never-present-old", "new_string": "PWNED"}
            ]}),
            Role::Undo => json!({"path": p}),
            Role::Tree => json!({"path": p, "max_depth": 9}),
            Role::Media => json!({"path": p}),
        }
    }

    /// Acts on the last component itself (a symlink is the entry, not followed).
    fn acts_on_entry(self) -> bool {
        matches!(
            self,
            Role::EntryInfo
                | Role::Delete
                | Role::MoveSource
                | Role::MoveDest
                | Role::CopySource
                | Role::CopyDest
        )
    }

    /// `path` is optional and an empty one means the workspace.
    fn optional_path(self) -> bool {
        matches!(
            self,
            Role::Grep | Role::Glob | Role::SearchEntries | Role::Tree
        )
    }
}

/// What a successful call on the link itself may have done to the read-write root.
fn check_entry_success(role: Role, link: &str, before: &Tree, after: &Tree) -> Vec<String> {
    let mut problems = Vec::new();
    for (what, k) in diff(before, after) {
        if k != link && k != "moved" && k != "copied" && k != "legit.txt" {
            problems.push(format!("unexpected change in the root: {what} {k}"));
        }
    }
    let was = before.get(link).cloned();
    match role {
        Role::EntryInfo => {
            if before != after {
                problems.push("entry_info changed the root".into());
            }
        }
        Role::Delete => {
            if after.contains_key(link) {
                problems.push(format!("{link} still there after a successful delete"));
            }
        }
        Role::MoveSource => {
            if after.contains_key(link) || after.get("moved") != was.as_ref() {
                problems.push(format!("{link} was not moved as a link to `moved`"));
            }
        }
        Role::MoveDest => {
            if after.get(link) != Some(&Node::File(LEGIT.as_bytes().to_vec()))
                || after.contains_key("legit.txt")
            {
                problems.push(format!("legit.txt did not replace the link {link}"));
            }
        }
        Role::CopySource => {
            if after.get(link) != was.as_ref() || after.get("copied") != was.as_ref() {
                problems.push(format!("{link} was not copied as a link to `copied`"));
            }
        }
        Role::CopyDest => {
            if after.get(link) != Some(&Node::File(LEGIT.as_bytes().to_vec()))
                || !after.contains_key("legit.txt")
            {
                problems.push(format!("legit.txt was not copied over the link {link}"));
            }
        }
        _ => problems.push("only entry tools may succeed".into()),
    }
    problems
}

async fn run_table(role: Role) {
    let mut failures = Vec::new();
    let all = cases();
    assert!(all.len() >= 15);
    for case in &all {
        let fx = fixture();
        let input = expand(&fx, case.input);
        let out_before = outside_tree(&fx);
        // The snapshot covers what an escape would reach.
        for key in [
            "outside/secret.txt",
            "outside/dir/inner.txt",
            "ws-evil/file.txt",
        ] {
            assert!(out_before.contains_key(key), "snapshot misses {key}");
        }
        assert!(out_before.contains_key("ro/ro.txt"));
        let ws_before = ws_tree(&fx);
        let result = fx.call(role.tool(), role.args(&input)).await;
        let out_after = outside_tree(&fx);
        let ws_after = ws_tree(&fx);

        let mut problems = Vec::new();
        let text = match &result {
            Ok(t) => t.clone(),
            Err(e) => e.message.clone(),
        };
        let leaked = leaks(&text);
        if !leaked.is_empty() {
            problems.push(format!("output reveals {leaked:?}: {text}"));
        }
        let changed = diff(&out_before, &out_after);
        if !changed.is_empty() {
            problems.push(format!("outside changed: {}", describe(&changed)));
        }
        match &result {
            Err(e) => {
                if e.kind != case.want.kind() {
                    problems.push(format!(
                        "expected {:?}, got {:?}: {}",
                        case.want.kind(),
                        e.kind,
                        e.message
                    ));
                }
                let d = diff(&ws_before, &ws_after);
                if !d.is_empty() {
                    problems.push(format!("refused call changed the root: {}", describe(&d)));
                }
            }
            Ok(out) => {
                if let (true, Some(link)) = (role.acts_on_entry(), case.link) {
                    problems.extend(check_entry_success(role, link, &ws_before, &ws_after));
                } else if role.optional_path() && input.is_empty() {
                    if ws_before != ws_after {
                        problems.push("a search changed the root".into());
                    }
                } else {
                    problems.push(format!("unexpectedly succeeded: {out}"));
                }
            }
        }
        if !problems.is_empty() {
            failures.push(format!(
                "[{}] {:?} input {:?}: {}",
                case.name,
                role,
                input,
                problems.join("; ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed for {:?}:\n{}",
        failures.len(),
        all.len(),
        role,
        failures.join("\n")
    );
}

#[tokio::test]
async fn escapes_read_file_path() {
    run_table(Role::ReadPath).await;
}

#[tokio::test]
async fn escapes_read_file_paths() {
    run_table(Role::ReadPaths).await;
}

#[tokio::test]
async fn escapes_write_file() {
    run_table(Role::Write).await;
}

#[tokio::test]
async fn escapes_edit_file() {
    run_table(Role::Edit).await;
}

#[tokio::test]
async fn escapes_grep() {
    run_table(Role::Grep).await;
}

#[tokio::test]
async fn escapes_glob() {
    run_table(Role::Glob).await;
}

#[tokio::test]
async fn escapes_search_entries() {
    run_table(Role::SearchEntries).await;
}

#[tokio::test]
async fn escapes_list_directory_recursive() {
    run_table(Role::ListRecursive).await;
}

#[tokio::test]
async fn escapes_list_directory_flat() {
    run_table(Role::ListFlat).await;
}

#[tokio::test]
async fn escapes_replace_file_lines() {
    run_table(Role::ReplaceLines).await;
}

#[tokio::test]
async fn escapes_insert_file_content() {
    run_table(Role::Insert).await;
}

#[tokio::test]
async fn escapes_replace_file_content() {
    run_table(Role::ReplaceContent).await;
}

#[tokio::test]
async fn escapes_entry_info() {
    run_table(Role::EntryInfo).await;
}

#[tokio::test]
async fn escapes_delete_file() {
    run_table(Role::Delete).await;
}

#[tokio::test]
async fn escapes_create_folder() {
    run_table(Role::CreateFolder).await;
}

#[tokio::test]
async fn escapes_move_file_source() {
    run_table(Role::MoveSource).await;
}

#[tokio::test]
async fn escapes_move_file_destination() {
    run_table(Role::MoveDest).await;
}

#[tokio::test]
async fn escapes_copy_file_source() {
    run_table(Role::CopySource).await;
}

#[tokio::test]
async fn escapes_copy_file_destination() {
    run_table(Role::CopyDest).await;
}

#[tokio::test]
async fn escapes_multi_edit() {
    run_table(Role::MultiEdit).await;
}

#[tokio::test]
async fn escapes_undo_edit() {
    run_table(Role::Undo).await;
}

#[tokio::test]
async fn escapes_directory_tree() {
    run_table(Role::Tree).await;
}

#[tokio::test]
async fn escapes_read_media_file() {
    run_table(Role::Media).await;
}

#[tokio::test]
async fn escapes_switch_workspace() {
    run_table(Role::Switch).await;
}

/// No existence probe: for every tool, an escaping (or denied) path that exists and one that
/// does not get the same error kind and the same message (up to the echoed input).
#[tokio::test]
async fn errors_never_reveal_whether_an_outside_path_exists() {
    let pairs = [
        ("{outside}/secret.txt", "{outside}/nope.txt"),
        ("{outside}/dir", "{outside}/nodir"),
        ("{outside}/dir/inner.txt", "{outside}/nodir/inner.txt"),
        (
            "{outside}/dir/../secret.txt",
            "{outside}/nodir/../secret.txt",
        ),
        ("../outside/secret.txt", "../outside/nope.txt"),
        ("../outside/dir", "../nowhere/dir"),
        ("link_out_dir/secret.txt", "link_out_dir/nope.txt"),
        ("link_out_dir/dir/inner.txt", "link_out_dir/nodir/inner.txt"),
        ("chain_dir1/dir", "chain_dir1/nodir"),
        ("{ws}-evil/file.txt", "{ws}-nope/file.txt"),
        ("secrets/key", "secrets/nope"),
        ("secrets", "sub/secrets"),
        ("app.env", "nope.env"),
        ("secrets/key/../../file.txt", "secrets/nope/../../file.txt"),
    ];
    let roles = [
        Role::ReadPath,
        Role::ReadPaths,
        Role::Write,
        Role::Edit,
        Role::Grep,
        Role::Glob,
        Role::SearchEntries,
        Role::ListRecursive,
        Role::ListFlat,
        Role::ReplaceLines,
        Role::Insert,
        Role::ReplaceContent,
        Role::EntryInfo,
        Role::Delete,
        Role::CreateFolder,
        Role::MoveSource,
        Role::MoveDest,
        Role::Switch,
    ];
    let fx = fixture();
    let mut failures = Vec::new();
    for role in roles {
        for (there, absent) in pairs {
            let mut seen = Vec::new();
            for template in [there, absent] {
                let input = expand(&fx, template);
                let answer = match fx.call(role.tool(), role.args(&input)).await {
                    Ok(out) => format!("ok: {out}"),
                    Err(e) => format!("{:?}: {}", e.kind, e.message.replace(&input, "<INPUT>")),
                };
                seen.push(answer);
            }
            let want = if there.starts_with("secrets") || there.ends_with(".env") {
                "Denied:"
            } else {
                "OutsideWorkspace:"
            };
            if seen[0] != seen[1] || !seen[0].starts_with(want) {
                failures.push(format!("{role:?} {there} vs {absent}: {seen:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A batch mixing escapes with a legit file answers each path on its own: the escapes as
/// errors of the right kind, the legit file with its content, nothing from outside.
#[tokio::test]
async fn read_file_batch_mixing_escapes_and_a_legit_file() {
    let fx = fixture();
    let before = outside_tree(&fx);
    let escapes = [
        expand(&fx, "{outside}/secret.txt"),
        "../outside/secret.txt".to_owned(),
        "link_out_file".to_owned(),
        "chain_dir1/dir/inner.txt".to_owned(),
        "link_sibling/file.txt".to_owned(),
        "secrets/key".to_owned(),
        "ok.txt".to_owned(),
    ];
    let mut paths: Vec<String> = escapes.to_vec();
    paths.push("file.txt".to_owned());
    let out = fx
        .call_full("read_file", json!({"paths": paths}))
        .await
        .expect("a batch with one good file succeeds");
    let text = out.all_text();
    assert!(leaks(&text).is_empty(), "{text}");
    let structured = out.structured.expect("structured results");
    let results = structured["results"].as_array().unwrap();
    assert_eq!(results.len(), paths.len());
    for (i, r) in results.iter().enumerate() {
        if i < escapes.len() {
            assert_eq!(r["status"], "error", "{r}");
            let kind = r["error"].as_str().unwrap();
            assert!(kind == "outside_workspace" || kind == "denied", "{r}");
        } else {
            assert_eq!(r["status"], "success", "{r}");
            assert!(r["result"].as_str().unwrap().contains("inside"), "{r}");
        }
    }
    assert!(leaks(&structured.to_string()).is_empty());
    assert_eq!(diff(&before, &outside_tree(&fx)), vec![]);
}

/// Walks from the root never descend into symlinks that leave it, nor into denied entries.
#[tokio::test]
async fn walks_from_the_root_never_reach_outside() {
    let fx = fixture();
    let before = outside_tree(&fx);
    let probes = [
        (
            "grep",
            json!({"pattern": "payload", "output_mode": "content"}),
        ),
        (
            "grep",
            json!({"pattern": "payload", "output_mode": "files_with_matches"}),
        ),
        ("glob", json!({"pattern": "**/*"})),
        ("glob", json!({"pattern": "**/*", "include_ignored": true})),
        ("search_entries", json!({})),
        ("search_entries", json!({"content_pattern": "payload"})),
        ("search_entries", json!({"name_pattern": "inner|secret"})),
        (
            "list_directory",
            json!({"path": ".", "recursive": true, "include_ignored": true}),
        ),
        ("list_directory", json!({"path": "~", "recursive": true})),
        ("list_directory", json!({"path": "sub", "recursive": true})),
    ];
    for (tool, args) in probes {
        let out = fx.ok(tool, args.clone()).await;
        assert!(leaks(&out).is_empty(), "{tool} {args}: {out}");
        for name in [
            "inner.txt",
            "secret.txt",
            "ws-evil",
            "secrets/key",
            "app.env",
        ] {
            let listed = listed_lines(&out, &args).any(|line| line.contains(name));
            assert!(!listed, "{tool} {args} shows {name}: {out}");
        }
    }
    assert_eq!(diff(&before, &outside_tree(&fx)), vec![]);
}

/// Patterns that try to climb out (glob's pattern, grep's glob filter) match nothing.
#[tokio::test]
async fn escaping_patterns_match_nothing() {
    let fx = fixture();
    for pattern in [
        "../outside/*",
        "../outside/**",
        "../**/*.txt",
        "sub/../../outside/*",
        "link_out_dir/*",
        "link_out_dir/**/*",
        "link_out_dir_abs/dir/*",
        "chain_dir1/**",
        "sub/link_up/**",
        "link_sibling/*",
        "**/inner.txt",
        "**/secret.txt",
        "**/*.env",
        "secrets/**",
    ] {
        match fx.call("glob", json!({"pattern": pattern})).await {
            Ok(out) => assert!(out.starts_with("No files match"), "glob {pattern}: {out}"),
            Err(e) => assert!(
                matches!(
                    e.kind,
                    ToolErrorKind::InvalidArgument | ToolErrorKind::OutsideWorkspace
                ),
                "glob {pattern}: {e:?}"
            ),
        }
        let grep = fx
            .call(
                "grep",
                json!({"pattern": "payload", "glob": pattern, "output_mode": "content"}),
            )
            .await;
        if let Ok(out) = &grep {
            assert!(leaks(out).is_empty(), "grep glob {pattern}: {out}");
        }
    }
    let abs = expand(&fx, "{outside}/*");
    let e = fx.err("glob", json!({"pattern": abs})).await;
    assert_eq!(e.kind, ToolErrorKind::InvalidArgument);
}

// ---------------------------------------------------------------------------------------
// 2. Recursive delete meeting symlinks
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn recursive_delete_removes_links_never_their_targets() {
    let fx = fixture();
    let out = outside_dir(&fx);
    fx.write("doomed/own.txt", "own\n");
    fx.write("doomed/nested/deeper/own2.txt", "own2\n");
    link(out.join("dir"), &fx.path("doomed/to_dir_abs"));
    link("../../outside/dir", &fx.path("doomed/to_dir_rel"));
    link("../../outside/secret.txt", &fx.path("doomed/to_file"));
    link(&out, &fx.path("doomed/nested/deeper/to_outside"));
    link(
        out.join("secret.txt"),
        &fx.path("doomed/nested/to_file_abs"),
    );
    let before = outside_tree(&fx);

    let e = fx
        .err("delete_file", json!({"path": "doomed", "recursive": false}))
        .await;
    assert_eq!(e.kind, ToolErrorKind::NotEmpty);
    assert!(present(&fx.path("doomed/to_dir_abs")));

    fx.ok("delete_file", json!({"path": "doomed", "recursive": true}))
        .await;
    assert!(!present(&fx.path("doomed")));
    assert_eq!(diff(&before, &outside_tree(&fx)), vec![]);
    assert_eq!(content(&out.join("secret.txt")), SECRET);
    assert_eq!(content(&out.join("dir/inner.txt")), INNER);
    // Untouched neighbours inside.
    assert_eq!(fx.read_str("file.txt"), "inside\n");
    assert!(is_link(&fx.path("link_out_dir")));
}

#[tokio::test]
async fn deleting_a_link_to_outside_removes_only_the_link() {
    for (path, recursive) in [
        ("link_out_dir", false),
        ("link_out_dir", true),
        ("link_out_dir_abs", true),
        ("link_out_file", false),
        ("link_out_file_abs", true),
        ("chain_dir1", true),
        ("dangle_out", false),
        ("sub/link_up", true),
        ("link_updir", true),
    ] {
        let fx = fixture();
        let before = outside_tree(&fx);
        let ws_before = ws_tree(&fx);
        let out = fx
            .ok("delete_file", json!({"path": path, "recursive": recursive}))
            .await;
        assert!(out.contains("symbolic link"), "{path}: {out}");
        assert!(!present(&fx.path(path)), "{path} still there");
        assert_eq!(diff(&before, &outside_tree(&fx)), vec![], "{path}");
        // Only the link itself went away inside the root.
        let d = diff(&ws_before, &ws_tree(&fx));
        assert_eq!(d, vec![("removed", path.to_owned())], "{path}");
        assert_eq!(content(&outside_dir(&fx).join("secret.txt")), SECRET);
        assert_eq!(content(&outside_dir(&fx).join("dir/inner.txt")), INNER);
    }
}

#[tokio::test]
async fn entry_info_on_a_link_to_outside_describes_only_the_link() {
    let fx = fixture();
    for path in [
        "link_out_dir",
        "link_out_file",
        "link_out_file_abs",
        "chain1",
        "dangle_out",
    ] {
        let out = fx.ok("entry_info", json!({"path": path})).await;
        assert!(out.contains("points outside"), "{path}: {out}");
        assert!(leaks(&out).is_empty(), "{path}: {out}");
    }
    let out = fx.ok("entry_info", json!({"path": "ok.txt"})).await;
    assert!(out.contains("blocked by the denylist"), "{out}");
    assert!(leaks(&out).is_empty(), "{out}");
}

// ---------------------------------------------------------------------------------------
// 3. Moves across the boundary
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn moves_out_of_the_root_are_refused() {
    let destinations = [
        "{outside}/x.txt",
        "{outside}/",
        "{outside}/newdir/x.txt",
        "{outside}/secret.txt",
        "../outside/x.txt",
        "../outside/",
        "../x.txt",
        "sub/../../outside/x.txt",
        "link_out_dir/x.txt",
        "link_out_dir/",
        "link_out_dir/secret.txt",
        "link_out_dir_abs/newdir/x.txt",
        "link_out_file/",
        "sub/link_up/",
        "sub/link_up/dir/x.txt",
        "chain_dir1/x.txt",
        "link_updir/outside/x.txt",
        "../ws-evil/x.txt",
        "{ws}-evil/",
        "link_sibling/x.txt",
        "~/../outside/x.txt",
        "/proc/self/root{outside}/x.txt",
    ];
    let mut failures = Vec::new();
    for source in ["legit.txt", "movable"] {
        for dest in destinations {
            for overwrite in [false, true] {
                let fx = fixture();
                fx.write("movable/a.txt", "a\n");
                fx.write("movable/b/c.txt", "c\n");
                let dest = expand(&fx, dest);
                let before = outside_tree(&fx);
                let ws_before = ws_tree(&fx);
                let args = json!({"source": source, "destination": dest, "overwrite": overwrite});
                let result = fx.call("move_file", args.clone()).await;
                let mut problems = Vec::new();
                match &result {
                    Err(e) if e.kind == ToolErrorKind::OutsideWorkspace => {}
                    other => problems.push(format!("result {other:?}")),
                }
                let d = diff(&before, &outside_tree(&fx));
                if !d.is_empty() {
                    problems.push(format!("outside changed: {}", describe(&d)));
                }
                let d = diff(&ws_before, &ws_tree(&fx));
                if !d.is_empty() {
                    problems.push(format!("root changed: {}", describe(&d)));
                }
                if !problems.is_empty() {
                    failures.push(format!("{args}: {}", problems.join("; ")));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn moves_into_the_root_from_outside_are_refused() {
    let sources = [
        "{outside}/secret.txt",
        "{outside}/dir",
        "{outside}",
        "../outside/secret.txt",
        "../outside/dir",
        "sub/../../outside/secret.txt",
        "link_out_dir/secret.txt",
        "link_out_dir/dir",
        "link_out_dir_abs/dir/inner.txt",
        "chain_dir1/dir",
        "sub/link_up/secret.txt",
        "link_updir/outside",
        "{tmp}/ws-evil/file.txt",
        "{ws}-evil",
        "link_sibling/file.txt",
        "/proc/self/root{outside}/secret.txt",
    ];
    let mut failures = Vec::new();
    for source in sources {
        for dest in ["stolen", "sub/stolen", "{outside}/renamed", "{ro}/stolen"] {
            let fx = fixture();
            let source = expand(&fx, source);
            let dest = expand(&fx, dest);
            let before = outside_tree(&fx);
            let ws_before = ws_tree(&fx);
            let args = json!({"source": source, "destination": dest, "overwrite": true});
            let result = fx.call("move_file", args.clone()).await;
            let mut problems = Vec::new();
            match &result {
                Err(e) if e.kind == ToolErrorKind::OutsideWorkspace => {
                    if !leaks(&e.message).is_empty() {
                        problems.push(format!("message leaks: {}", e.message));
                    }
                }
                other => problems.push(format!("result {other:?}")),
            }
            let d = diff(&before, &outside_tree(&fx));
            if !d.is_empty() {
                problems.push(format!("outside changed: {}", describe(&d)));
            }
            let d = diff(&ws_before, &ws_tree(&fx));
            if !d.is_empty() {
                problems.push(format!("root changed: {}", describe(&d)));
            }
            if !problems.is_empty() {
                failures.push(format!("{args}: {}", problems.join("; ")));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A link moved deeper keeps its text, so a relative link to outside now points elsewhere;
/// it still cannot be followed out, and nothing outside is touched.
#[tokio::test]
async fn a_moved_link_stays_a_link_and_still_cannot_escape() {
    let fx = fixture();
    let before = outside_tree(&fx);
    fx.ok(
        "move_file",
        json!({"source": "link_out_dir", "destination": "sub/deeper/moved_link"}),
    )
    .await;
    let moved = fx.path("sub/deeper/moved_link");
    assert!(is_link(&moved));
    assert_eq!(std::fs::read_link(&moved).unwrap(), Path::new("../outside"));
    for (tool, args) in [
        (
            "read_file",
            json!({"path": "sub/deeper/moved_link/secret.txt"}),
        ),
        ("list_directory", json!({"path": "sub/deeper/moved_link"})),
    ] {
        let e = fx.err(tool, args).await;
        // `../outside` from `sub/deeper` is `sub/outside`: missing, not an escape.
        assert!(
            matches!(
                e.kind,
                ToolErrorKind::NotFound | ToolErrorKind::OutsideWorkspace
            ),
            "{tool}: {e:?}"
        );
    }
    // A write through it creates `sub/outside/x.txt`, inside the root, or is refused.
    let written = fx
        .call(
            "write_file",
            json!({"path": "sub/deeper/moved_link/x.txt", "content": "x"}),
        )
        .await;
    if written.is_ok() {
        assert_eq!(fx.read_str("sub/outside/x.txt"), "x");
    }
    assert_eq!(diff(&before, &outside_tree(&fx)), vec![]);
}

// ---------------------------------------------------------------------------------------
// 4. The read-only root
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn read_only_root_refuses_every_mutation() {
    let fx = fixture();
    let ro = |rel: &str| {
        if rel.is_empty() {
            s(ro_root(&fx))
        } else {
            s(&ro_root(&fx).join(rel))
        }
    };
    let file = ro("ro.txt");
    let dir = ro("dir");
    // The gate must not be what stops the edits: read both files first.
    fx.ok("read_file", json!({"path": file})).await;
    fx.ok("read_file", json!({"path": ro("dir/ro_inner.txt")}))
        .await;
    let before_ro = snapshot(ro_root(&fx), &[]);
    let before_out = outside_tree(&fx);
    let before_ws = ws_tree(&fx);
    let calls = [
        ("write_file", json!({"path": file, "content": "PWNED\n"})),
        (
            "write_file",
            json!({"path": ro("new.txt"), "content": "PWNED\n"}),
        ),
        (
            "write_file",
            json!({"path": ro("newdir/new.txt"), "content": "PWNED\n"}),
        ),
        (
            "edit_file",
            json!({"path": file, "old_string": "line one", "new_string": "PWNED"}),
        ),
        (
            "edit_file",
            json!({"path": file, "old_string": "read-only", "new_string": "PWNED", "replace_all": true}),
        ),
        (
            "replace_file_lines",
            json!({"path": file, "content": "PWNED", "start_line": 1, "end_line": 2}),
        ),
        (
            "insert_file_content",
            json!({"path": file, "content": "PWNED", "line": 1}),
        ),
        (
            "insert_file_content",
            json!({"path": file, "content": "PWNED"}),
        ),
        (
            "replace_file_content",
            json!({"path": file, "old_content": "line two", "new_content": "PWNED"}),
        ),
        ("delete_file", json!({"path": file})),
        ("delete_file", json!({"path": dir, "recursive": true})),
        (
            "delete_file",
            json!({"path": ro("dir/ro_inner.txt"), "recursive": false}),
        ),
        ("create_folder", json!({"path": ro("newdir")})),
        ("create_folder", json!({"path": ro("dir/sub/deeper")})),
        ("create_folder", json!({"path": dir})),
        (
            "move_file",
            json!({"source": file, "destination": "moved.txt"}),
        ),
        (
            "move_file",
            json!({"source": file, "destination": ro("renamed.txt")}),
        ),
        (
            "move_file",
            json!({"source": dir, "destination": "moved_dir"}),
        ),
        (
            "move_file",
            json!({"source": "legit.txt", "destination": ro("legit.txt")}),
        ),
        (
            "move_file",
            json!({"source": "legit.txt", "destination": file, "overwrite": true}),
        ),
        (
            "move_file",
            json!({"source": "legit.txt", "destination": format!("{dir}/")}),
        ),
        (
            "move_file",
            json!({"source": "sub", "destination": ro("sub")}),
        ),
        (
            "multi_edit",
            json!({"path": file, "edits": [{"old_string": "line one", "new_string": "PWNED"}]}),
        ),
        (
            "copy_file",
            json!({"source": "legit.txt", "destination": ro("copied.txt")}),
        ),
        (
            "copy_file",
            json!({"source": "legit.txt", "destination": file, "overwrite": true}),
        ),
        (
            "copy_file",
            json!({"source": "sub", "destination": ro("sub_copy")}),
        ),
        ("undo_edit", json!({"path": file})),
    ];
    let mut failures = Vec::new();
    for (tool, args) in calls {
        match fx.call(tool, args.clone()).await {
            Err(e) if e.kind == ToolErrorKind::ReadOnly => {}
            other => failures.push(format!("{tool} {args}: {other:?}")),
        }
        let d = diff(&before_ro, &snapshot(ro_root(&fx), &[]));
        if !d.is_empty() {
            failures.push(format!("{tool} {args}: ro changed: {}", describe(&d)));
        }
        let d = diff(&before_ws, &ws_tree(&fx));
        if !d.is_empty() {
            failures.push(format!("{tool} {args}: ws changed: {}", describe(&d)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(content(&ro_root(&fx).join("ro.txt")), RO_TEXT);
    assert_eq!(diff(&before_out, &outside_tree(&fx)), vec![]);
    // The root itself cannot be deleted either (read-only, and a root).
    let e = fx
        .err("delete_file", json!({"path": ro(""), "recursive": true}))
        .await;
    assert!(
        matches!(e.kind, ToolErrorKind::ReadOnly | ToolErrorKind::Refused),
        "{e:?}"
    );
    assert_eq!(snapshot(ro_root(&fx), &[]), before_ro);
}

/// With the read-only root as the workspace, relative paths hit it and are refused.
#[tokio::test]
async fn read_only_root_as_workspace_refuses_relative_writes() {
    let fx = fixture();
    fx.ok("switch_workspace", json!({"path": s(ro_root(&fx))}))
        .await;
    fx.ok("read_file", json!({"path": "ro.txt"})).await;
    let before = snapshot(ro_root(&fx), &[]);
    for (tool, args) in [
        ("write_file", json!({"path": "ro.txt", "content": "x"})),
        ("write_file", json!({"path": "n.txt", "content": "x"})),
        (
            "edit_file",
            json!({"path": "ro.txt", "old_string": "one", "new_string": "1"}),
        ),
        ("delete_file", json!({"path": "dir", "recursive": true})),
        ("create_folder", json!({"path": "made"})),
        (
            "move_file",
            json!({"source": "ro.txt", "destination": "r.txt"}),
        ),
    ] {
        let e = fx.err(tool, args.clone()).await;
        assert_eq!(e.kind, ToolErrorKind::ReadOnly, "{tool} {args}: {e:?}");
    }
    assert_eq!(snapshot(ro_root(&fx), &[]), before);
}

/// ringfence's own storage is readable by absolute path but never writable, and cannot
/// become the workspace.
#[tokio::test]
async fn internal_storage_is_never_written() {
    let fx = fixture();
    let store = fx.data.join("tool-output");
    put(&store.join("planted.txt"), "planted\n");
    let planted = s(&store.join("planted.txt"));
    fx.ok("read_file", json!({"path": planted})).await;
    let before = snapshot(&fx.data, &[]);
    for (tool, args) in [
        ("write_file", json!({"path": planted, "content": "x"})),
        (
            "write_file",
            json!({"path": s(&store.join("new.txt")), "content": "x"}),
        ),
        (
            "edit_file",
            json!({"path": planted, "old_string": "planted", "new_string": "x"}),
        ),
        ("delete_file", json!({"path": planted})),
        ("create_folder", json!({"path": s(&store.join("d"))})),
        (
            "move_file",
            json!({"source": planted, "destination": "stolen.txt"}),
        ),
        (
            "move_file",
            json!({"source": "legit.txt", "destination": s(&store.join("x.txt"))}),
        ),
        ("switch_workspace", json!({"path": s(&store)})),
    ] {
        let e = fx.err(tool, args.clone()).await;
        assert!(
            matches!(
                e.kind,
                ToolErrorKind::ReadOnly | ToolErrorKind::OutsideWorkspace
            ),
            "{tool} {args}: {e:?}"
        );
    }
    assert_eq!(snapshot(&fx.data, &[]), before);
    assert_eq!(fx.read_str("legit.txt"), LEGIT);
}

// ---------------------------------------------------------------------------------------
// 5. The denylist
// ---------------------------------------------------------------------------------------

fn plant_project(fx: &Fx) {
    fx.write("proj/a.txt", "alpha\n");
    fx.write("proj/config.env", ENV);
    fx.write("proj/secrets/key.txt", KEY);
    fx.write("proj/deep/b.txt", "beta\n");
    fx.write("proj/deep/secrets/x.txt", KEY);
    fx.write("proj/nested/c.txt", "gamma\n");
    fx.write("proj/nested/app.env", ENV);
    fx.write("clean/d.txt", "delta\n");
}

/// The lines of a result that are not an echo of one of the call's patterns (a "no match"
/// notice repeats the pattern; that is not a listed entry).
fn listed_lines<'a>(out: &'a str, args: &'a Value) -> impl Iterator<Item = &'a str> {
    let echoes: Vec<&str> = ["pattern", "name_pattern", "content_pattern"]
        .iter()
        .filter_map(|k| args.get(*k).and_then(Value::as_str))
        .collect();
    out.lines()
        .filter(move |line| !echoes.iter().any(|e| line.contains(e)))
}

fn lines(text: &str) -> Vec<&str> {
    let mut v: Vec<&str> = text.lines().collect();
    v.sort_unstable();
    v
}

#[tokio::test]
async fn listings_and_searches_never_show_denied_entries() {
    let fx = fixture();
    plant_project(&fx);
    let out = fx.ok("list_directory", json!({"path": "proj"})).await;
    assert_eq!(lines(&out), ["a.txt", "deep/", "nested/"], "{out}");
    let out = fx
        .ok("list_directory", json!({"path": "proj", "recursive": true}))
        .await;
    assert_eq!(
        lines(&out),
        ["a.txt", "deep/", "deep/b.txt", "nested/", "nested/c.txt"],
        "{out}"
    );
    let probes = [
        ("list_directory", json!({"path": "."})),
        ("list_directory", json!({"path": ".", "recursive": true})),
        (
            "list_directory",
            json!({"path": ".", "recursive": true, "include_ignored": true}),
        ),
        ("list_directory", json!({"path": "proj/deep"})),
        ("search_entries", json!({})),
        ("search_entries", json!({"path": "proj"})),
        (
            "search_entries",
            json!({"path": "proj", "type": "directory"}),
        ),
        ("search_entries", json!({"name_pattern": "secret|env|key"})),
        ("search_entries", json!({"content_pattern": "payload"})),
        (
            "search_entries",
            json!({"content_pattern": "payload", "include_ignored": true}),
        ),
        (
            "grep",
            json!({"pattern": "payload", "output_mode": "content"}),
        ),
        ("grep", json!({"pattern": "payload", "path": "proj"})),
        ("glob", json!({"pattern": "**/*"})),
        (
            "glob",
            json!({"pattern": "**/*.env", "include_ignored": true}),
        ),
    ];
    for (tool, args) in probes {
        let out = fx.ok(tool, args.clone()).await;
        assert!(leaks(&out).is_empty(), "{tool} {args}: {out}");
        for name in ["secrets", ".env", "key"] {
            let listed = listed_lines(&out, &args).any(|line| line.contains(name));
            assert!(!listed, "{tool} {args} shows {name}: {out}");
        }
    }
}

#[tokio::test]
async fn deleting_a_directory_holding_a_denied_entry_is_refused() {
    for path in [
        "proj",
        "proj/deep",
        "proj/nested",
        "proj/secrets",
        "proj/config.env",
    ] {
        let fx = fixture();
        plant_project(&fx);
        let before = ws_tree(&fx);
        let e = fx
            .err("delete_file", json!({"path": path, "recursive": true}))
            .await;
        assert_eq!(e.kind, ToolErrorKind::Denied, "{path}: {e:?}");
        assert!(leaks(&e.message).is_empty(), "{}", e.message);
        assert_eq!(describe(&diff(&before, &ws_tree(&fx))), "", "{path}");
    }
    // Control: the same call on a clean directory works.
    let fx = fixture();
    plant_project(&fx);
    fx.ok("delete_file", json!({"path": "clean", "recursive": true}))
        .await;
    assert!(!present(&fx.path("clean")));
}

#[tokio::test]
async fn moving_denied_entries_or_onto_denied_names_is_refused() {
    let moves = [
        // directories holding a denied entry
        json!({"source": "proj", "destination": "proj2"}),
        json!({"source": "proj/deep", "destination": "deep2"}),
        json!({"source": "proj/nested", "destination": "clean/nested"}),
        json!({"source": "proj/nested", "destination": "clean/"}),
        // denied sources
        json!({"source": "proj/config.env", "destination": "leak.txt"}),
        json!({"source": "proj/secrets", "destination": "public"}),
        json!({"source": "proj/secrets/key.txt", "destination": "key.txt"}),
        json!({"source": "secrets/../legit.txt", "destination": "x.txt"}),
        // a normal file onto a denied name
        json!({"source": "proj/a.txt", "destination": "proj/a.env"}),
        json!({"source": "proj/a.txt", "destination": "proj/secrets/a.txt"}),
        json!({"source": "proj/a.txt", "destination": "proj/secrets/"}),
        json!({"source": "proj/a.txt", "destination": "newdir/secrets/a.txt"}),
        json!({"source": "proj/a.txt", "destination": "proj/deep/secrets/"}),
        json!({"source": "proj/a.txt", "destination": "proj/config.env", "overwrite": true}),
        json!({"source": "proj/a.txt", "destination": "app.env", "overwrite": true}),
        json!({"source": "proj/a.txt", "destination": "secrets/key", "overwrite": true}),
        json!({"source": "legit.txt", "destination": "ok.txt/../x.env"}),
        // a clean directory onto a denied name
        json!({"source": "clean", "destination": "clean.env"}),
        json!({"source": "clean", "destination": "proj/secrets/clean"}),
    ];
    let mut failures = Vec::new();
    for args in moves {
        let fx = fixture();
        plant_project(&fx);
        let before = ws_tree(&fx);
        match fx.call("move_file", args.clone()).await {
            Err(e) if e.kind == ToolErrorKind::Denied => {
                if !leaks(&e.message).is_empty() {
                    failures.push(format!("{args}: message leaks: {}", e.message));
                }
            }
            other => failures.push(format!("{args}: {other:?}")),
        }
        let d = diff(&before, &ws_tree(&fx));
        if !d.is_empty() {
            failures.push(format!("{args}: root changed: {}", describe(&d)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Control: moving the clean directory elsewhere works.
    let fx = fixture();
    plant_project(&fx);
    fx.ok(
        "move_file",
        json!({"source": "clean", "destination": "clean2"}),
    )
    .await;
    assert_eq!(fx.read_str("clean2/d.txt"), "delta\n");
}

#[tokio::test]
async fn writes_never_create_denied_entries() {
    let calls = [
        ("write_file", json!({"path": "clean/x.env", "content": "x"})),
        (
            "write_file",
            json!({"path": "clean/secrets/x.txt", "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": "proj/secrets/key.txt", "content": "x"}),
        ),
        ("create_folder", json!({"path": "clean/conf.env"})),
        ("create_folder", json!({"path": "clean/secrets/inner"})),
        ("create_folder", json!({"path": "proj/secrets"})),
    ];
    for (tool, args) in calls {
        let fx = fixture();
        plant_project(&fx);
        let before = ws_tree(&fx);
        let e = fx.err(tool, args.clone()).await;
        assert_eq!(e.kind, ToolErrorKind::Denied, "{tool} {args}: {e:?}");
        assert_eq!(describe(&diff(&before, &ws_tree(&fx))), "", "{tool} {args}");
    }
}

/// A new directory whose name the denylist blocks (`secrets/` is a directory pattern) is a
/// denied entry once it exists; creating it, or renaming a directory to it, is a write to
/// a denied path.
#[tokio::test]
async fn creating_or_renaming_to_a_denied_directory_name_is_refused() {
    let calls = [
        ("create_folder", json!({"path": "clean/secrets"})),
        (
            "move_file",
            json!({"source": "clean", "destination": "hidden/secrets"}),
        ),
    ];
    let mut failures = Vec::new();
    for (tool, args) in calls {
        let fx = fixture();
        plant_project(&fx);
        let before = ws_tree(&fx);
        match fx.call(tool, args.clone()).await {
            Err(e) if e.kind == ToolErrorKind::Denied => {}
            other => failures.push(format!("{tool} {args}: {other:?}")),
        }
        let d = diff(&before, &ws_tree(&fx));
        if !d.is_empty() {
            failures.push(format!("{tool} {args}: root changed: {}", describe(&d)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A pattern with a directory part blocks writing a file there (`deploy/run.sh`); renaming a
/// directory that holds such a file to that place must not create the entry either, or the
/// denylist's write protection (`.github/workflows/*.yml`, say) is a rename away.
#[tokio::test]
async fn moving_a_directory_never_creates_denied_entries_at_the_destination() {
    for (pattern, file, source, dest, created) in [
        (
            "deploy/*.sh",
            "stage/run.sh",
            "stage",
            "deploy",
            "deploy/run.sh",
        ),
        (
            ".github/workflows/*.yml",
            "wf/ci.yml",
            "wf",
            ".github/workflows",
            ".github/workflows/ci.yml",
        ),
    ] {
        let fx = Fx::with_roots(Limits::default(), &[pattern], &[("ws", Access::ReadWrite)]);
        // Control: writing the file there directly is refused.
        let e = fx
            .err("write_file", json!({"path": created, "content": "x\n"}))
            .await;
        assert_eq!(e.kind, ToolErrorKind::Denied, "{created}");
        fx.ok(
            "write_file",
            json!({"path": file, "content": "echo planted\n"}),
        )
        .await;
        let before = ws_tree(&fx);
        let result = fx
            .call("move_file", json!({"source": source, "destination": dest}))
            .await;
        assert!(
            !present(&fx.path(created)),
            "{source} -> {dest} created the denied {created}: {result:?}"
        );
        assert_eq!(
            result.as_ref().map_err(|e| e.kind).err(),
            Some(ToolErrorKind::Denied),
            "{result:?}"
        );
        assert_eq!(describe(&diff(&before, &ws_tree(&fx))), "");
    }
}

// ---------------------------------------------------------------------------------------
// 6. switch_workspace
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn switch_workspace_never_leaves_the_roots() {
    let fx = fixture();
    for path in [
        "{outside}",
        "{outside}/dir",
        "{tmp}",
        "{ws}-evil",
        "{ws}/..",
        "{ro}/..",
        "..",
        "../outside",
        "../ro",
        "~/..",
        "sub/../..",
        "link_out_dir",
        "link_out_dir_abs",
        "link_out_dir/dir",
        "chain_dir1",
        "sub/link_up",
        "link_updir",
        "link_sibling",
        "/proc/self/root{outside}",
    ] {
        let path = expand(&fx, path);
        let e = fx.err("switch_workspace", json!({"path": path})).await;
        assert_eq!(e.kind, ToolErrorKind::OutsideWorkspace, "{path}: {e:?}");
    }
    let e = fx.err("switch_workspace", json!({"path": "secrets"})).await;
    assert_eq!(e.kind, ToolErrorKind::Denied);
    // Still in the first root.
    assert!(
        fx.ok("read_file", json!({"path": "file.txt"}))
            .await
            .contains("inside")
    );
}

#[tokio::test]
async fn a_subdirectory_workspace_is_no_new_base_for_escapes() {
    let fx = fixture();
    let before = outside_tree(&fx);
    fx.ok("switch_workspace", json!({"path": "sub"})).await;
    // Inside the root, `..` from the subdirectory works.
    assert!(
        fx.ok("read_file", json!({"path": "../file.txt"}))
            .await
            .contains("inside")
    );
    assert!(
        fx.ok("read_file", json!({"path": "note.txt"}))
            .await
            .contains("note")
    );
    let refusals = [
        ("read_file", json!({"path": "../../outside/secret.txt"})),
        ("read_file", json!({"path": "../../outside/x"})),
        ("read_file", json!({"path": "link_up/secret.txt"})),
        ("read_file", json!({"path": "../link_out_file"})),
        (
            "write_file",
            json!({"path": "../../outside/x", "content": "x"}),
        ),
        ("write_file", json!({"path": "link_up/x", "content": "x"})),
        ("create_folder", json!({"path": "../../outside/newdir"})),
        (
            "move_file",
            json!({"source": "note.txt", "destination": "../../outside/note.txt"}),
        ),
        (
            "move_file",
            json!({"source": "../../outside/secret.txt", "destination": "s.txt"}),
        ),
        (
            "delete_file",
            json!({"path": "../../outside/dir", "recursive": true}),
        ),
        ("list_directory", json!({"path": "../.."})),
        ("list_directory", json!({"path": "link_up"})),
        (
            "grep",
            json!({"pattern": "payload", "path": "../../outside"}),
        ),
        ("glob", json!({"pattern": "*", "path": "../../outside"})),
        ("search_entries", json!({"path": "../.."})),
        ("entry_info", json!({"path": "../../outside/secret.txt"})),
        ("switch_workspace", json!({"path": "../.."})),
        ("switch_workspace", json!({"path": "../../outside"})),
        ("switch_workspace", json!({"path": "link_up"})),
    ];
    for (tool, args) in refusals {
        let e = fx.err(tool, args.clone()).await;
        assert_eq!(
            e.kind,
            ToolErrorKind::OutsideWorkspace,
            "{tool} {args}: {e:?}"
        );
        assert!(leaks(&e.message).is_empty(), "{}", e.message);
    }
    // The refused switches left the workspace where it was.
    assert!(
        fx.ok("read_file", json!({"path": "note.txt"}))
            .await
            .contains("note")
    );
    // Writes relative to the subdirectory land inside it.
    fx.ok(
        "write_file",
        json!({"path": "../from_sub.txt", "content": "ok\n"}),
    )
    .await;
    assert_eq!(fx.read_str("from_sub.txt"), "ok\n");
    assert_eq!(diff(&before, &outside_tree(&fx)), vec![]);
    // Back up to the root is allowed; one more step is not.
    fx.ok("switch_workspace", json!({"path": ".."})).await;
    let e = fx.err("switch_workspace", json!({"path": ".."})).await;
    assert_eq!(e.kind, ToolErrorKind::OutsideWorkspace);
}
