//! Exercises the private-file helpers against a real file system and prints what each entry's
//! protection reads as afterwards; exits 1 when one is not private as promised. Built for
//! Windows and run under Wine by `scripts/cross.sh wine` (the only Windows run this project
//! can make here); on Unix it checks modes instead.
//!
//! Usage: `private_acl <empty scratch directory> [--wine]`
//!
//! `--wine`: Wine keeps an access list as Unix mode bits and reads it back from them, so the
//! list's "protected" flag never comes back; with it the flag is shown, not required, and a
//! second tightening (which the missing flag makes change everything again) is not judged.

// A check program: its report is its output, and it makes its own scratch files.
#![allow(clippy::print_stdout, clippy::print_stderr, clippy::disallowed_methods)]

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(base) = std::env::args_os().nth(1) else {
        eprintln!("usage: private_acl <empty scratch directory>");
        return ExitCode::from(2);
    };
    let base = Path::new(&base);
    let wine = std::env::args().any(|a| a == "--wine");
    let failed = std::cell::Cell::new(0);
    let check = |what: &str, path: &Path, want_private: bool| {
        let (private, shown) = protection(path, wine);
        let ok = private == want_private;
        failed.set(failed.get() + usize::from(!ok));
        println!("{} {what}: {shown}", if ok { "ok  " } else { "FAIL" });
    };

    // A private directory and its missing parents, and files made in it.
    let data = base.join("data");
    let deep = data.join("audit").join("2026");
    ringfence_fs::create_private_dir_all(&deep).expect("create_private_dir_all");
    check("new private directory", &data, true);
    check("its new subdirectory", &deep, true);
    let record = deep.join("record.jsonl");
    ringfence_fs::open_with_mode(
        &record,
        ringfence_fs::PRIVATE_FILE_MODE,
        ringfence_fs::Opening::Append,
    )
    .expect("open_with_mode");
    check("a 0600 file opened for appending", &record, true);

    // Files written whole in an ordinary folder: 0600 is private, 0644 keeps the folder's.
    let plain = base.join("plain");
    std::fs::create_dir_all(&plain).expect("create_dir_all");
    let secret = plain.join("token.json");
    ringfence_fs::write_private_file(&secret, b"{}").expect("write_private_file");
    check("a file written private", &secret, true);
    let config = plain.join("client.json");
    ringfence_fs::replace_file(&config, b"{}", 0o644).expect("replace_file");
    check("a file written with 0644", &config, false);
    let created = plain.join("config.toml");
    ringfence_fs::create_private_file(&created, b"x = 1\n").expect("create_private_file");
    check("a configuration created private", &created, true);

    // An ordinary file opened to be rewritten private: given the list, then cut.
    let leftover = plain.join("leftover.partial");
    std::fs::write(&leftover, b"old contents").expect("write");
    check("an ordinary file before", &leftover, false);
    let file = ringfence_fs::open_with_mode(
        &leftover,
        ringfence_fs::PRIVATE_FILE_MODE,
        ringfence_fs::Opening::Truncate,
    )
    .expect("open_with_mode truncate");
    let len = file.metadata().expect("metadata").len();
    drop(file);
    // (On Unix an existing file keeps its mode: opening does not change it.)
    check(
        "the same file opened private to be rewritten",
        &leftover,
        cfg!(windows),
    );
    if len != 0 {
        println!("FAIL it still holds {len} bytes (want 0)");
        failed.set(failed.get() + 1);
    }

    // Tightening: an ordinary tree becomes private, once.
    let loose = base.join("loose");
    std::fs::create_dir_all(loose.join("sub")).expect("create_dir_all");
    std::fs::write(loose.join("sub").join("a.txt"), b"a").expect("write");
    check("an ordinary directory before tightening", &loose, false);
    let changed = ringfence_fs::make_private(&loose, ringfence_fs::Reach::Tree).expect("tighten");
    println!("     tightening changed {changed} entries");
    check("the directory after tightening", &loose, true);
    check(
        "a file in it after tightening",
        &loose.join("sub").join("a.txt"),
        true,
    );
    let again = ringfence_fs::make_private(&loose, ringfence_fs::Reach::Tree).expect("again");
    if wine {
        println!("     tightening again changed {again} entries (not judged under Wine)");
    } else if again != 0 {
        println!("FAIL tightening again changed {again} entries (want 0)");
        failed.set(failed.get() + 1);
    }
    // Itself only: the file inside keeps its protection.
    let itself = base.join("workspace");
    std::fs::create_dir_all(&itself).expect("create_dir_all");
    std::fs::write(itself.join("mine.txt"), b"m").expect("write");
    ringfence_fs::make_private(&itself, ringfence_fs::Reach::Itself).expect("tighten itself");
    check("a workspace tightened itself", &itself, true);
    check("the user's file in it", &itself.join("mine.txt"), false);

    let failed = failed.get();
    if failed == 0 {
        println!("all private as promised");
        ExitCode::SUCCESS
    } else {
        println!("{failed} not as promised");
        ExitCode::FAILURE
    }
}

/// Whether the entry at `path` is private, and how its protection reads.
#[cfg(windows)]
fn protection(path: &Path, wine: bool) -> (bool, String) {
    match ringfence_fs::access_list_of(path) {
        Ok(Some(list)) => (
            list.owned_by_account
                && if wine {
                    list.account_full && list.others.is_empty()
                } else {
                    list.is_owner_only()
                },
            format!(
                "owner {} (the account's: {}), protected {}, account in full {}, others {:?}",
                list.owner, list.owned_by_account, list.protected, list.account_full, list.others
            ),
        ),
        Ok(None) => (false, "a link or special file".to_string()),
        Err(e) => (false, format!("cannot read: {e}")),
    }
}

/// Whether the entry at `path` is private, and how its protection reads.
#[cfg(unix)]
fn protection(path: &Path, _wine: bool) -> (bool, String) {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) => {
            let mode = m.permissions().mode() & 0o777;
            (mode & 0o077 == 0, format!("mode {mode:04o}"))
        }
        Err(e) => (false, format!("cannot read: {e}")),
    }
}
