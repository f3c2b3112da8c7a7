//! Windows access lists as text (SDDL): the list ringfence gives its private entries, and the
//! reading of an entry's owner and list, to tell whether anyone but the account and SYSTEM
//! is allowed in. Plain text handling, so it is compiled and tested on every platform; the
//! Win32 calls that read and set lists are in `windows_acl.rs`.

/// SYSTEM, as SDDL names it (and as its SID).
const SYSTEM: [&str; 2] = ["SY", "S-1-5-18"];

/// The discretionary list of a private entry, in SDDL: protected (nothing inherited from the
/// folder above), full control for `account` (a SID as text) and for SYSTEM, no one else. A
/// directory's entries are inherited by what is later made in it (`OICI`); they are not
/// pushed onto what is already there (the list is set on the one entry, without propagation).
pub fn owner_only(account: &str, dir: bool) -> String {
    let inherit = if dir { "OICI" } else { "" };
    format!("D:P(A;{inherit};FA;;;{account})(A;{inherit};FA;;;SY)")
}

/// An entry's owner and what its discretionary list allows, read from its SDDL text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// The owner as SDDL spells it (a SID, or an alias such as `BA`); empty when the text
    /// names none.
    pub owner: String,
    /// Whether the owner is the account, Administrators (the owner an elevated process's
    /// entries get) or SYSTEM (which the list lets in anyway); any other owner could change
    /// the list back.
    pub owned_by_account: bool,
    /// Whether the list is protected from inheriting its folder's entries.
    pub protected: bool,
    /// Whether the account has an allowing entry with full control that applies to the entry
    /// itself (not one that is only inherited by what is made in it).
    pub account_full: bool,
    /// The trustees other than the account and SYSTEM that an entry allows something (as
    /// SDDL spells them: `BU`, `WD`, `S-1-5-…`); `everyone (no access list)` for a null list.
    pub others: Vec<String>,
}

impl Reading {
    /// Whether the list is what [`owner_only`] sets, or as tight: protected, the account in
    /// full, no one else allowed anything.
    pub fn is_owner_only(&self) -> bool {
        self.protected && self.account_full && self.others.is_empty()
    }
}

/// Reads the owner and discretionary list in `sddl` (as Windows writes them for
/// `OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION`: `O:` and the owner, `D:` with
/// flags, then one parenthesised entry per ACE) for the account, named by its spellings in
/// `account`: its SID as text and, where Windows writes one for it, its alias (`LA` for the
/// machine's built-in administrator). `None` when there is no `D:` part or it does not parse.
///
/// Deny entries grant nothing and are passed over; every other entry type (allow, object
/// allow, callback allow, and any type this reading does not know) counts as allowing its
/// trustee something, inherit-only entries included (they reach what is made later). Besides
/// the spellings given, the aliases taken for the account are those of fixed SIDs (SYSTEM,
/// local service, network service): `LA` or `LG` is someone else unless given, even when the
/// account is a domain's RID 500 or 501.
pub fn read(sddl: &str, account: &[&str]) -> Option<Reading> {
    let owner = sddl
        .strip_prefix("O:")
        .map(|rest| {
            // The owner runs to the letter that starts the next part (`G:`, `D:`, `S:`).
            let next = rest.find(':').map_or(rest.len(), |i| i.saturating_sub(1));
            &rest[..next]
        })
        .unwrap_or("");
    let start = sddl.find("D:")? + 2;
    let body = &sddl[start..];
    // The list ends where another part (`S:`, the audit list) begins outside parentheses.
    let dacl = &body[..part_end(body)?];
    let flags_end = dacl.find('(').unwrap_or(dacl.len());
    let flags = &dacl[..flags_end];
    let mut reading = Reading {
        owner: owner.to_string(),
        owned_by_account: !owner.is_empty()
            && (same_trustee(owner, account)
                || ["BA", "SY"].iter().any(|o| owner.eq_ignore_ascii_case(o))),
        // The flags: `P` (protected), `AI`, `AR`, `NO_ACCESS_CONTROL`; only `P` holds a `P`.
        protected: flags.contains('P'),
        account_full: false,
        others: Vec::new(),
    };
    if flags.contains("NO_ACCESS_CONTROL") {
        reading.account_full = true;
        reading.others.push("everyone (no access list)".to_string());
        return Some(reading);
    }
    for ace in entries(&dacl[flags_end..])? {
        let fields: Vec<&str> = ace.splitn(7, ';').collect();
        if fields.len() < 6 {
            return None;
        }
        let (kind, ace_flags, rights, trustee) = (fields[0], fields[1], fields[2], fields[5]);
        if matches!(kind, "D" | "OD" | "XD") {
            continue;
        }
        if same_trustee(trustee, account) {
            reading.account_full |=
                kind == "A" && !ace_flags.contains("IO") && full_control(rights);
        } else if !SYSTEM.iter().any(|s| trustee.eq_ignore_ascii_case(s))
            && !reading
                .others
                .iter()
                .any(|o| o.eq_ignore_ascii_case(trustee))
        {
            reading.others.push(trustee.to_string());
        }
    }
    Some(reading)
}

/// Where the part starting `body` ends: at an `S:` outside parentheses, or at its end;
/// `None` when parentheses do not balance.
fn part_end(body: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut quoted = false;
    for (i, c) in body.char_indices() {
        match c {
            '"' if depth > 0 => quoted = !quoted,
            _ if quoted => {}
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1)?,
            _ if depth == 0 && body[i..].starts_with("S:") => return Some(i),
            _ => {}
        }
    }
    (depth == 0 && !quoted).then_some(body.len())
}

/// The top-level parenthesised entries of `list` (a conditional entry may hold parentheses of
/// its own, and quoted strings holding anything); `None` when they do not balance or
/// something else stands between them.
fn entries(list: &str) -> Option<Vec<&str>> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut quoted = false;
    let mut open = 0;
    for (i, c) in list.char_indices() {
        match c {
            '"' if depth > 0 => quoted = !quoted,
            _ if quoted => {}
            '(' => {
                if depth == 0 {
                    open = i + 1;
                }
                depth += 1;
            }
            ')' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    out.push(&list[open..i]);
                }
            }
            _ if depth == 0 && !c.is_whitespace() => return None,
            _ => {}
        }
    }
    (depth == 0 && !quoted).then_some(out)
}

/// Whether `trustee` (an SDDL trustee field) names the account spelled `account`: one of its
/// spellings, or the alias of its SID if that SID is a fixed one (SYSTEM, local service,
/// network service).
fn same_trustee(trustee: &str, account: &[&str]) -> bool {
    if account.iter().any(|a| trustee.eq_ignore_ascii_case(a)) {
        return true;
    }
    let fixed = match trustee {
        "SY" => "S-1-5-18",
        "LS" => "S-1-5-19",
        "NS" => "S-1-5-20",
        _ => return false,
    };
    account.first() == Some(&fixed)
}

/// Whether an SDDL rights field is full control: `FA` (file all), `GA` (generic all), or the
/// hexadecimal mask of all file rights (0x1F01FF) or more.
fn full_control(rights: &str) -> bool {
    if rights == "FA" || rights == "GA" {
        return true;
    }
    let hex = rights
        .strip_prefix("0x")
        .or_else(|| rights.strip_prefix("0X"));
    hex.and_then(|h| u32::from_str_radix(h, 16).ok())
        .is_some_and(|mask| mask & 0x001F_01FF == 0x001F_01FF || mask & 0x1000_0000 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: &str = "S-1-5-21-1004336348-1177238915-682003330-1001";

    #[test]
    fn the_list_set_on_a_private_entry_reads_back_as_owner_only() {
        for dir in [false, true] {
            let text = owner_only(ME, dir);
            let reading = read(&text, &[ME]).unwrap();
            assert!(reading.is_owner_only(), "{text}: {reading:?}");
        }
        assert_eq!(
            owner_only(ME, true),
            format!("D:P(A;OICI;FA;;;{ME})(A;OICI;FA;;;SY)")
        );
        assert_eq!(
            owner_only(ME, false),
            format!("D:P(A;;FA;;;{ME})(A;;FA;;;SY)")
        );
    }

    #[test]
    fn a_profile_folder_list_is_not_owner_only_and_names_who_else_is_in() {
        // As Windows reads back a folder under a user's profile: inherited, not protected,
        // the account, SYSTEM and Administrators.
        let profile = format!("D:AI(A;OICIID;FA;;;SY)(A;OICIID;FA;;;BA)(A;OICIID;FA;;;{ME})");
        let reading = read(&profile, &[ME]).unwrap();
        assert!(!reading.protected);
        assert!(reading.account_full);
        assert_eq!(reading.others, vec!["BA"]);
        assert!(!reading.is_owner_only());

        // A folder at a drive's top: Users may read and create, Authenticated Users modify.
        let shared = "D:PAI(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICI;0x1200a9;;;BU)\
                      (A;CIIO;DCLCRPCR;;;BU)(A;OICIIO;SDGRGWGX;;;AU)(A;;0x1301bf;;;AU)";
        let reading = read(shared, &[ME]).unwrap();
        assert!(reading.protected);
        assert!(!reading.account_full);
        assert_eq!(reading.others, vec!["BA", "BU", "AU"]);
    }

    #[test]
    fn deny_entries_grant_nothing_and_unknown_or_callback_entries_count_as_allowing() {
        let text = format!(
            "D:P(D;;FA;;;WD)(A;;FA;;;{ME})(XA;;FR;;;S-1-5-32-545;(@User.Dept == \"x(y)\"))(ZZ;;FR;;;AN)"
        );
        let reading = read(&text, &[ME]).unwrap();
        assert!(reading.protected && reading.account_full);
        assert_eq!(reading.others, vec!["S-1-5-32-545", "AN"]);
    }

    #[test]
    fn a_null_list_lets_everyone_in_and_an_empty_one_lacks_the_account() {
        let null = read("D:NO_ACCESS_CONTROL", &[ME]).unwrap();
        assert!(!null.is_owner_only());
        assert_eq!(null.others, vec!["everyone (no access list)"]);

        let empty = read("D:P", &[ME]).unwrap();
        assert!(empty.protected && !empty.account_full && empty.others.is_empty());
        assert!(!empty.is_owner_only());
    }

    #[test]
    fn the_account_is_known_by_sid_in_any_case_by_mask_and_by_alias() {
        let lower = ME.to_ascii_lowercase();
        assert!(
            read(&format!("D:P(A;;FA;;;{lower})"), &[ME])
                .unwrap()
                .is_owner_only()
        );
        assert!(
            read(&format!("D:P(A;;0x1f01ff;;;{ME})"), &[ME])
                .unwrap()
                .is_owner_only()
        );
        assert!(
            read(&format!("D:P(A;;GA;;;{ME})"), &[ME])
                .unwrap()
                .is_owner_only()
        );
        // Read and execute only: allowed, not in full.
        assert!(
            !read(&format!("D:P(A;;0x1200a9;;;{ME})"), &[ME])
                .unwrap()
                .account_full
        );
        assert!(
            read("D:P(A;;FA;;;SY)", &["S-1-5-18"])
                .unwrap()
                .is_owner_only()
        );
        assert!(
            read("D:P(A;;FA;;;LS)(A;;FA;;;SY)", &["S-1-5-19"])
                .unwrap()
                .is_owner_only()
        );
        assert!(
            read("D:P(A;;FA;;;NS)", &["S-1-5-20"])
                .unwrap()
                .is_owner_only()
        );
        // The built-in administrator's alias is never taken for the account, even one whose
        // SID ends in 500 (a domain's administrator is not the machine's).
        let admin = "S-1-5-21-1004336348-1177238915-682003330-500";
        assert_eq!(
            read("D:P(A;;FA;;;LA)", &[admin]).unwrap().others,
            vec!["LA"]
        );
        assert_eq!(read("D:P(A;;FA;;;LA)", &[ME]).unwrap().others, vec!["LA"]);
        // Running as the machine's built-in administrator, Windows writes the account as LA:
        // given as one of its spellings, it is the account.
        assert!(
            read("O:LAD:P(A;;FA;;;LA)(A;;FA;;;SY)", &[admin, "LA"])
                .unwrap()
                .is_owner_only()
        );
        // Full control only inherited by what is made inside is not the account's here.
        let inherit_only = format!("D:P(A;OICIIO;FA;;;{ME})(A;;0x1200a9;;;{ME})");
        assert!(!read(&inherit_only, &[ME]).unwrap().account_full);
    }

    #[test]
    fn quoted_parentheses_in_a_condition_cannot_hide_an_entry() {
        // Unquoted, the "(" and ")" would join the three last entries into one, and Everyone
        // would not be seen.
        let text = format!(
            "D:P(A;;FA;;;{ME})(XA;;FA;;;SY;(@User.x == \"(\"))(A;;FA;;;WD)(XA;;FA;;;SY;(@User.y == \")\"))"
        );
        let reading = read(&text, &[ME]).unwrap();
        assert_eq!(reading.others, vec!["WD"]);
        assert!(!reading.is_owner_only());
        // A quote left open is no list.
        assert_eq!(read("D:P(XA;;FA;;;SY;(@User.x == \"))", &[ME]), None);
    }

    #[test]
    fn the_owner_is_read_and_only_the_account_or_administrators_will_do() {
        let mine = read(&format!("O:{ME}D:P(A;;FA;;;{ME})"), &[ME]).unwrap();
        assert_eq!(mine.owner, ME);
        assert!(mine.owned_by_account && mine.is_owner_only());
        // Elevated, ringfence's entries are owned by Administrators.
        let elevated = read(&format!("O:BAD:PAI(A;;FA;;;{ME})(A;;FA;;;SY)"), &[ME]).unwrap();
        assert_eq!(elevated.owner, "BA");
        assert!(elevated.owned_by_account && elevated.protected);
        // SYSTEM (an installer's directory) is let in by the list anyway.
        assert!(read("O:SYD:P(A;;FA;;;SY)", &[ME]).unwrap().owned_by_account);
        // Another account's entry: the list may look private, the owner can widen it.
        let theirs = read(
            &format!("O:S-1-5-21-1-2-3-1002G:DUD:P(A;;FA;;;{ME})"),
            &[ME],
        )
        .unwrap();
        assert_eq!(theirs.owner, "S-1-5-21-1-2-3-1002");
        assert!(!theirs.owned_by_account);
        assert!(theirs.is_owner_only());
        // No owner in the text: not taken as the account's.
        let unstated = read(&format!("D:P(A;;FA;;;{ME})"), &[ME]).unwrap();
        assert!(unstated.owner.is_empty() && !unstated.owned_by_account);
    }

    #[test]
    fn text_that_is_no_list_is_not_read() {
        assert_eq!(read("O:BAG:SY", &[ME]), None);
        assert_eq!(read("D:P(A;;FA;;;SY", &[ME]), None);
        assert_eq!(read("D:P(A;;FA)", &[ME]), None);
        assert_eq!(read("D:P)(", &[ME]), None);
        assert_eq!(read("D:P(A;;FA;;;SY) junk", &[ME]), None);
        // An audit part after the list ends it.
        let with_sacl = format!("D:P(A;;FA;;;{ME})S:(AU;SA;FA;;;WD)");
        assert!(read(&with_sacl, &[ME]).unwrap().is_owner_only());
    }
}
