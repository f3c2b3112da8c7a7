//! Sessions: each user's roots (shared roots, `{user}` templates expanded, or the default
//! workspace) and spill directory, made on their first session and kept for the next; and the
//! sessions each user's stateless requests share.
//!
//! A stateless request (MCP 2026-07-28 over HTTP) has no MCP session to keep state in, so
//! the user's stateless requests share a session kept here: one per roots answer the user's
//! clients send (`None`: no client roots), narrowed to that answer when made and never
//! changed after. Reads and the current workspace carry over between the user's requests
//! with the same answer; two answers never mix (each call runs exactly as narrowed as its
//! client asked, however many run at once); users never share one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringfence_core::{CallScope, Session, SpillStore};
use ringfence_fs::{Access, ClientRoots, Denylist, Root, RootOrigin, RootSpec, Workspace};

use crate::config::Config;

/// A configured root: one directory every user shares, or a template (`{user}` in the
/// path) that gives every user their own.
enum RootSlot {
    Shared(Arc<Root>),
    Template(RootSpec),
    /// No root configured: `<data dir>/workspace` for the local user, and
    /// `<data dir>/users/<user>/workspace` for each authenticated one.
    DefaultWorkspace(Arc<Root>),
}

/// Users whose roots (and stateless sessions) are kept; beyond this, the least recently
/// used of those with no live MCP session and no call running are dropped (their directory
/// handles closed, their stateless sessions with them) and made again when they come back.
const USER_CACHE: usize = 1024;

/// Stateless sessions kept per user (one per roots answer); beyond this the least recently
/// used one running no call is dropped.
const STATELESS_PER_USER: usize = 8;

/// A stateless session unused for this long, and running no call, is dropped (its read
/// records with it: the next edit needs a read again).
const STATELESS_IDLE: Duration = Duration::from_secs(30 * 60);

/// Idle stateless sessions are looked for at most this often (on a request).
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// One user's roots and spill store, and the sessions their stateless requests share.
struct UserEntry {
    roots: Vec<Arc<Root>>,
    spill: Arc<SpillStore>,
    stateless: Vec<StatelessSession>,
    used: Instant,
}

impl UserEntry {
    /// Whether an MCP session or a running call holds the user's spill store (each scope
    /// holds it; the entry itself holds it once).
    fn live(&self) -> bool {
        Arc::strong_count(&self.spill) > 1
    }

    fn scope(&self, session: &Arc<Session>) -> CallScope {
        CallScope {
            session: session.clone(),
            spill: self.spill.clone(),
        }
    }

    /// The stateless session for the answer `key`, unless it is blocked (the answer reached
    /// nothing when it was made: made again, as a session re-applies roots while blocked).
    fn stateless(&mut self, key: Option<AnswerKey>, now: Instant) -> Option<Arc<Session>> {
        let found = self
            .stateless
            .iter_mut()
            .find(|s| s.roots == key && s.session.workspace.blocked().is_none())?;
        found.used = now;
        Some(found.session.clone())
    }

    /// Keeps `session` for the answer `key`, dropping a blocked one for the same answer and,
    /// beyond the bound, the least recently used one running no call.
    fn keep(&mut self, key: Option<AnswerKey>, session: Arc<Session>, now: Instant) {
        self.stateless.retain(|s| s.roots != key);
        if self.stateless.len() >= STATELESS_PER_USER
            && let Some(oldest) = self
                .stateless
                .iter()
                .enumerate()
                .filter(|(_, s)| !s.in_use())
                .min_by_key(|(_, s)| s.used)
                .map(|(i, _)| i)
        {
            self.stateless.swap_remove(oldest);
        }
        self.stateless.push(StatelessSession {
            roots: key,
            session,
            used: now,
        });
    }
}

/// A roots answer, by the BLAKE3 hash of its URIs in the client's order (so a client's long
/// answer is not kept, only what tells it apart).
type AnswerKey = [u8; 32];

fn answer_key(uris: &[String]) -> AnswerKey {
    let mut h = blake3::Hasher::new();
    for uri in uris {
        h.update(&(uri.len() as u64).to_le_bytes());
        h.update(uri.as_bytes());
    }
    *h.finalize().as_bytes()
}

/// A session a user's stateless requests share.
struct StatelessSession {
    /// The client roots it was narrowed to; `None`: none.
    roots: Option<AnswerKey>,
    session: Arc<Session>,
    used: Instant,
}

impl StatelessSession {
    /// Whether a call is running in it.
    fn in_use(&self) -> bool {
        Arc::strong_count(&self.session) > 1
    }
}

/// The users' entries, and when idle stateless sessions were last looked for.
struct Users {
    map: HashMap<String, UserEntry>,
    swept: Instant,
}

impl Users {
    /// Drops stateless sessions idle for [`STATELESS_IDLE`] (at most every [`SWEEP_EVERY`]).
    fn sweep(&mut self, now: Instant) {
        if now.duration_since(self.swept) < SWEEP_EVERY {
            return;
        }
        self.swept = now;
        for entry in self.map.values_mut() {
            entry
                .stateless
                .retain(|s| s.in_use() || now.duration_since(s.used) < STATELESS_IDLE);
        }
    }

    /// Makes room for one more user: beyond [`USER_CACHE`], drops the least recently used
    /// users with no live session and no call running.
    fn make_room(&mut self) {
        while self.map.len() >= USER_CACHE {
            let Some(oldest) = self
                .map
                .iter()
                .filter(|(_, e)| !e.live())
                .min_by_key(|(_, e)| e.used)
                .map(|(user, _)| user.clone())
            else {
                return;
            };
            self.map.remove(&oldest);
        }
    }
}

/// Makes the scope of each user's sessions.
pub struct Sessions {
    roots: Vec<RootSlot>,
    /// The configured denylist patterns (per-user roots get them too).
    denylist: Vec<String>,
    data_dir: std::path::PathBuf,
    /// `<data dir>/tool-output/<configuration key>`: one directory per user beneath.
    spill_base: std::path::PathBuf,
    /// Bytes each user's saved outputs may take (`[limits] spill_quota_mb`).
    spill_quota: u64,
    client_roots: ClientRoots,
    /// Each user's roots, spill store and stateless sessions, made on first use and kept.
    users: Mutex<Users>,
    /// Where read records are shared with other instances (HTTP on PostgreSQL).
    shared_reads: std::sync::OnceLock<Arc<dyn ringfence_files::SharedReads>>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("roots", &self.roots.len())
            .finish_non_exhaustive()
    }
}

/// Why a user's roots, saved-output store or session could not be made (the configuration
/// passed its own checks; this is what opening the directories found).
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("denylist: {0}")]
    Denylist(#[from] ringfence_fs::DenylistError),
    #[error(transparent)]
    Fs(#[from] ringfence_fs::FsError),
}

impl Sessions {
    pub fn new(config: &Config) -> Result<Sessions, SessionError> {
        let denylist = Arc::new(Denylist::new(&config.denylist)?);
        let specs: Vec<RootSpec> = if config.roots.is_empty() {
            vec![RootSpec {
                path: config.data_dir.join("workspace"),
                access: Access::ReadWrite,
                origin: RootOrigin::Default,
                label: "workspace".into(),
            }]
        } else {
            config.roots.clone()
        };
        let spill_base = config
            .data_dir
            .join("tool-output")
            .join(spill_key(&specs, &config.denylist));
        let default = config.roots.is_empty();
        let roots = specs
            .into_iter()
            .map(|s| {
                if s.is_template() {
                    return Ok(RootSlot::Template(s));
                }
                let root = root_with_denylist(s, &config.data_dir, &config.denylist, &denylist)?;
                Ok(if default {
                    RootSlot::DefaultWorkspace(root)
                } else {
                    RootSlot::Shared(root)
                })
            })
            .collect::<Result<Vec<_>, SessionError>>()?;
        Ok(Sessions {
            roots,
            denylist: config.denylist.clone(),
            data_dir: config.data_dir.clone(),
            spill_base,
            spill_quota: config.limits.spill_quota_bytes(),
            client_roots: config.client_roots,
            users: Mutex::new(Users {
                map: HashMap::new(),
                swept: Instant::now(),
            }),
            shared_reads: std::sync::OnceLock::new(),
        })
    }

    fn users(&self) -> std::sync::MutexGuard<'_, Users> {
        self.users.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `user`'s entry: their roots (shared ones and their own from templates) and spill
    /// store, made on first use and kept for their later sessions.
    fn user_entry<'a>(
        &self,
        users: &'a mut Users,
        user: &str,
        now: Instant,
    ) -> Result<&'a mut UserEntry, SessionError> {
        users.sweep(now);
        if !users.map.contains_key(user) {
            let (roots, spill) = self.make_user_parts(user)?;
            users.make_room();
            users.map.insert(
                user.to_owned(),
                UserEntry {
                    roots,
                    spill,
                    stateless: Vec::new(),
                    used: now,
                },
            );
        }
        let entry = users
            .map
            .get_mut(user)
            .expect("the entry was inserted above");
        entry.used = now;
        Ok(entry)
    }

    /// `user`'s roots and spill store, made anew.
    fn make_user_parts(
        &self,
        user: &str,
    ) -> Result<(Vec<Arc<Root>>, Arc<SpillStore>), SessionError> {
        let base = Arc::new(Denylist::new(&self.denylist)?);
        let roots = self
            .roots
            .iter()
            .map(|slot| match slot {
                RootSlot::Shared(root) => Ok(root.clone()),
                RootSlot::DefaultWorkspace(root) if user == ringfence_core::LOCAL_USER => {
                    Ok(root.clone())
                }
                RootSlot::DefaultWorkspace(_) => {
                    let spec = RootSpec {
                        path: self
                            .data_dir
                            .join("users")
                            .join(ringfence_fs::user_dir_name(user))
                            .join("workspace"),
                        access: Access::ReadWrite,
                        origin: RootOrigin::PerUser,
                        label: "workspace".into(),
                    };
                    root_with_denylist(spec, &self.data_dir, &self.denylist, &base)
                }
                RootSlot::Template(spec) => {
                    root_with_denylist(spec.for_user(user), &self.data_dir, &self.denylist, &base)
                }
            })
            .collect::<Result<Vec<_>, SessionError>>()?;
        // Saved outputs are readable through the spill root: each user gets their own, within
        // their quota.
        let spill = spill_store(self.spill_base.join(ringfence_fs::user_dir_name(user)))?
            .with_quota(self.spill_quota);
        Ok((roots, Arc::new(spill)))
    }

    /// A new session for `user` over `roots` (plus their read-only spill root).
    fn new_session(
        &self,
        user: &str,
        roots: Vec<Arc<Root>>,
        spill: &SpillStore,
    ) -> Result<Session, SessionError> {
        let ws = Workspace::new(roots)?
            .with_internal_root(spill.root().clone())
            // Client roots (`extend`) never reach ringfence's own data.
            .with_protected_path(&self.data_dir);
        let session = Session::new(ws)
            .with_client_roots(self.client_roots)
            .with_user(user);
        if let Some(store) = self.shared_reads.get() {
            ringfence_files::share_reads(&session, store.clone());
        }
        Ok(session)
    }

    /// A fresh session for `user` over their roots (plus their read-only spill root): one MCP
    /// session's.
    pub fn scope_for(&self, user: &str) -> Result<CallScope, SessionError> {
        let (roots, spill) = {
            let mut users = self.users();
            let entry = self.user_entry(&mut users, user, Instant::now())?;
            (entry.roots.clone(), entry.spill.clone())
        };
        let session = self.new_session(user, roots, &spill)?;
        Ok(CallScope {
            session: Arc::new(session),
            spill,
        })
    }

    /// The session `user`'s stateless requests share for the client roots `roots` (`None`:
    /// the client announced none): made on first use — narrowed to `roots` before anyone
    /// can see it — and kept while used (see the module's documentation). Under the policy
    /// `ignore` every answer is `None`.
    pub fn stateless_scope(
        &self,
        user: &str,
        roots: Option<&[String]>,
    ) -> Result<CallScope, SessionError> {
        let roots = roots.filter(|_| self.client_roots != ClientRoots::Ignore);
        let key = roots.map(answer_key);
        let now = Instant::now();
        let (base, spill) = {
            let mut users = self.users();
            let entry = self.user_entry(&mut users, user, now)?;
            if let Some(session) = entry.stateless(key, now) {
                return Ok(entry.scope(&session));
            }
            (entry.roots.clone(), entry.spill.clone())
        };
        // Made outside the lock (narrowing opens directories), and narrowed before it is
        // kept where other requests find it.
        let session = self.new_session(user, base.clone(), &spill)?;
        // Every instance finds the same records for this user's stateless requests with
        // this roots answer.
        session.set_key(&format!(
            "stateless:{user}:{}",
            key.map_or_else(
                || "none".to_owned(),
                |k| blake3::Hash::from(k).to_hex().to_string()
            )
        ));
        if let Some(uris) = roots {
            let summary = session.apply_client_roots(uris);
            tracing::debug!(user = %user.escape_debug(), summary = %summary.escape_debug(), "stateless session narrowed to the client's roots");
        }
        let session = Arc::new(session);
        let mut users = self.users();
        // Dropped meanwhile (the cache was full): kept again with the parts just used.
        let entry = users
            .map
            .entry(user.to_owned())
            .or_insert_with(|| UserEntry {
                roots: base,
                spill,
                stateless: Vec::new(),
                used: now,
            });
        // Another request for the same answer made one first: share theirs.
        if let Some(theirs) = entry.stateless(key, now) {
            return Ok(entry.scope(&theirs));
        }
        entry.keep(key, session.clone(), now);
        Ok(entry.scope(&session))
    }

    /// Sessions made from now on keep their read records in `store` too (see
    /// [`ringfence_files::SharedReads`]).
    pub fn share_reads(&self, store: Arc<dyn ringfence_files::SharedReads>) {
        let _ = self.shared_reads.set(store);
    }

    /// What the MCP client's roots may do (the configured policy).
    pub fn client_roots(&self) -> ClientRoots {
        self.client_roots
    }

    /// A fresh scope for the local user (stdio, `ringfence call`).
    pub fn local(&self) -> Result<CallScope, SessionError> {
        self.scope_for(ringfence_core::LOCAL_USER)
    }

    /// Deletes saved outputs older than the retention period (every user's).
    /// Every configuration's, not only this one's: a directory whose configuration is gone
    /// (or whose key was made by an older ringfence) would otherwise keep full tool outputs
    /// forever.
    pub fn prune_spill(&self, days: u64) {
        let all = self
            .spill_base
            .parent()
            .map_or_else(|| self.spill_base.clone(), |p| p.to_path_buf());
        let Ok(base) = spill_store(all) else {
            return;
        };
        let removed = base.prune(std::time::Duration::from_secs(days.saturating_mul(86_400)));
        if removed > 0 {
            tracing::info!(removed, days, "deleted old saved tool outputs");
        }
    }

    /// Warns (once, at start) about configured roots that do not exist yet.
    pub fn check_roots(&self) {
        for root in self.roots.iter().filter_map(|r| match r {
            RootSlot::Shared(root) | RootSlot::DefaultWorkspace(root) => Some(root),
            RootSlot::Template(_) => None,
        }) {
            if let Err(err) = root.dir() {
                tracing::warn!(root = root.label(), error = %err.message(), "root is not usable yet; calls will fail until it exists");
            }
        }
    }
}

/// A spill store at `path`: a read-only internal root, created on first use.
fn spill_store(path: std::path::PathBuf) -> Result<SpillStore, SessionError> {
    let root = Root::new(
        RootSpec {
            path,
            access: Access::ReadOnly,
            origin: RootOrigin::Internal,
            label: "tool-output".into(),
        },
        Arc::new(Denylist::empty()),
    )?;
    Ok(SpillStore::new(Arc::new(root)))
}

/// A root with the configured denylist, plus patterns hiding ringfence's own data directory
/// when the root contains it (the saved outputs of every configuration and user, the journal
/// of earlier file versions).
fn root_with_denylist(
    spec: RootSpec,
    data_dir: &std::path::Path,
    patterns: &[String],
    base: &Arc<Denylist>,
) -> Result<Arc<Root>, SessionError> {
    let list = match data_dir_patterns(data_dir, &spec.path) {
        Some(extra) => {
            let mut all = patterns.to_vec();
            all.extend(extra);
            Arc::new(Denylist::new(&all)?)
        }
        None => base.clone(),
    };
    Ok(Arc::new(Root::new(spec, list)?))
}

/// Denylist patterns that hide the data directory inside a root that contains it (judged
/// by the paths as written, normalised lexically), or `None` when it is not inside.
fn data_dir_patterns(data_dir: &std::path::Path, root: &std::path::Path) -> Option<Vec<String>> {
    let data = ringfence_fs::normalize_lexically(data_dir);
    let root = ringfence_fs::normalize_lexically(root);
    let rel = data.strip_prefix(&root).ok()?;
    let escape = |s: &str| -> String {
        s.chars()
            .flat_map(|c| {
                let special = matches!(c, '*' | '?' | '[' | ']' | '\\' | '!' | '#' | ' ');
                special
                    .then_some('\\')
                    .into_iter()
                    .chain(std::iter::once(c))
            })
            .collect()
    };
    let rel = rel.to_string_lossy();
    Some(if rel.is_empty() {
        // The root is the data directory itself: hide what ringfence keeps there.
        [
            "/tool-output/",
            "/ringfence.db",
            "/ringfence.db-*",
            "/memory.db",
            "/memory.db-*",
            "/audit/",
            "/models/",
            "/users/",
        ]
        .map(str::to_owned)
        .to_vec()
    } else {
        vec![format!("/{}/", escape(&rel))]
    })
}

/// The spill directory's name for this configuration. Saved outputs are readable through the
/// spill root, so two servers with different roots or denylists sharing a data directory must
/// not see each other's: each configuration gets its own directory.
fn spill_key(roots: &[RootSpec], denylist: &[String]) -> String {
    // Each part length-prefixed, so no two configurations hash the same bytes.
    let mut h = blake3::Hasher::new();
    let mut part = |bytes: &[u8]| {
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    for r in roots {
        part(r.path.as_os_str().as_encoded_bytes());
        part(r.access.as_str().as_bytes());
    }
    for d in denylist {
        part(d.as_bytes());
    }
    h.finalize().to_hex()[..16].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A root that is the data directory hides every record ringfence keeps there; a root
    /// holding it hides the whole data directory.
    #[test]
    fn the_data_directory_is_hidden_in_a_root() {
        let data = std::path::Path::new("/srv/rf");
        let own = data_dir_patterns(data, data).unwrap();
        for record in [
            "/tool-output/",
            "/ringfence.db",
            "/memory.db",
            "/memory.db-*",
            "/audit/",
            "/models/",
            "/users/",
        ] {
            assert!(
                own.iter().any(|p| p == record),
                "{record} not hidden: {own:?}"
            );
        }
        assert_eq!(
            data_dir_patterns(data, std::path::Path::new("/srv")).unwrap(),
            ["/rf/"]
        );
        assert!(data_dir_patterns(data, std::path::Path::new("/home")).is_none());
    }

    /// Sessions over `<dir>/ws` (holding `a/` and `b/`) with the client-roots `policy`.
    #[allow(clippy::disallowed_methods)] // a test fixture making its own directories
    fn sessions(dir: &std::path::Path, policy: ClientRoots) -> Sessions {
        for sub in ["ws/a", "ws/b"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let mut config = Config::for_tests(&dir.join("data"));
        config.roots = vec![RootSpec::configured(dir.join("ws"), Access::ReadWrite)];
        config.client_roots = policy;
        Sessions::new(&config).unwrap()
    }

    fn uri(dir: &std::path::Path, sub: &str) -> Vec<String> {
        vec![format!("file://{}", dir.join("ws").join(sub).display())]
    }

    fn labels(scope: &CallScope) -> Vec<String> {
        let roots = scope.session.workspace.roots();
        roots.iter().map(|r| r.label().to_owned()).collect()
    }

    #[test]
    fn a_users_stateless_requests_share_one_session_per_answer() {
        let dir = tempfile::tempdir().unwrap();
        let s = sessions(dir.path(), ClientRoots::Narrow);
        let (a, b) = (uri(dir.path(), "a"), uri(dir.path(), "b"));
        let wide = s.stateless_scope("alice", None).unwrap();
        assert!(Arc::ptr_eq(
            &wide.session,
            &s.stateless_scope("alice", None).unwrap().session
        ));
        let narrow = s.stateless_scope("alice", Some(&a)).unwrap();
        assert!(Arc::ptr_eq(
            &narrow.session,
            &s.stateless_scope("alice", Some(&a)).unwrap().session
        ));
        // Narrowed when made, before anyone used it; the wide one is left as it was.
        assert_eq!(labels(&narrow), ["ws/a"]);
        assert_eq!(labels(&wide), ["ws"]);
        let other = s.stateless_scope("alice", Some(&b)).unwrap();
        assert_eq!(labels(&other), ["ws/b"]);
        assert!(!Arc::ptr_eq(&narrow.session, &other.session));
        assert_eq!(labels(&narrow), ["ws/a"]);
        // Users never share one; an MCP session always gets its own.
        let bob = s.stateless_scope("bob", None).unwrap();
        assert!(!Arc::ptr_eq(&wide.session, &bob.session));
        assert_eq!(bob.session.user(), "bob");
        assert!(!Arc::ptr_eq(&wide.spill, &bob.spill));
        let legacy = s.scope_for("alice").unwrap();
        assert!(!Arc::ptr_eq(&wide.session, &legacy.session));
        assert!(Arc::ptr_eq(&wide.spill, &legacy.spill));
    }

    /// `[limits] spill_quota_mb` bounds each user's saved outputs on their own: Alice's
    /// newest push out her oldest, Bob's stay.
    #[test]
    fn each_users_saved_outputs_stay_within_their_quota() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::for_tests(&dir.path().join("data"));
        config.limits.spill_quota_mb = 1;
        let s = Sessions::new(&config).unwrap();
        let (alice, bob) = (s.scope_for("alice").unwrap(), s.scope_for("bob").unwrap());
        let text = "x".repeat(400 << 10);
        let bobs = bob.spill.save(&text).unwrap();
        let saved: Vec<_> = (0..3).map(|_| alice.spill.save(&text).unwrap()).collect();
        let there = |scope: &CallScope, path: &std::path::Path| {
            let dir = scope.spill.root().dir().unwrap();
            dir.metadata(path.file_name().unwrap()).is_ok()
        };
        assert!(!there(&alice, &saved[0].path), "the oldest made room");
        assert!(there(&alice, &saved[1].path) && there(&alice, &saved[2].path));
        assert!(saved.iter().all(|s| s.cut.is_none()));
        assert!(there(&bob, &bobs.path));
    }

    #[test]
    fn under_ignore_every_answer_is_the_configured_roots() {
        let dir = tempfile::tempdir().unwrap();
        let s = sessions(dir.path(), ClientRoots::Ignore);
        let a = uri(dir.path(), "a");
        let scope = s.stateless_scope("alice", Some(&a)).unwrap();
        assert_eq!(labels(&scope), ["ws"]);
        assert!(Arc::ptr_eq(
            &scope.session,
            &s.stateless_scope("alice", None).unwrap().session
        ));
    }

    #[test]
    fn an_answer_that_reached_nothing_is_tried_again() {
        let dir = tempfile::tempdir().unwrap();
        let s = sessions(dir.path(), ClientRoots::Narrow);
        let later = uri(dir.path(), "later");
        let blocked = s.stateless_scope("alice", Some(&later)).unwrap();
        assert!(blocked.session.workspace.blocked().is_some());
        #[allow(clippy::disallowed_methods)] // the client's folder appears
        std::fs::create_dir(dir.path().join("ws/later")).unwrap();
        let scope = s.stateless_scope("alice", Some(&later)).unwrap();
        assert!(scope.session.workspace.blocked().is_none());
        assert_eq!(labels(&scope), ["ws/later"]);
    }

    #[test]
    fn stateless_sessions_are_bounded_per_user_and_dropped_when_idle() {
        let dir = tempfile::tempdir().unwrap();
        let s = sessions(dir.path(), ClientRoots::Narrow);
        let answers: Vec<Vec<String>> = (0..=STATELESS_PER_USER)
            .map(|i| vec![format!("file:///elsewhere/{i}")])
            .collect();
        // The first one is running a call all along: never dropped.
        let running = s.stateless_scope("alice", Some(&answers[0])).unwrap();
        for answer in &answers[1..] {
            s.stateless_scope("alice", Some(answer)).unwrap();
        }
        {
            let users = s.users();
            let kept = &users.map["alice"].stateless;
            assert_eq!(kept.len(), STATELESS_PER_USER);
            assert!(
                kept.iter()
                    .any(|k| Arc::ptr_eq(&k.session, &running.session))
            );
        }
        // Idle long enough: dropped at the next sweep, except the one still running.
        let later = Instant::now() + STATELESS_IDLE + SWEEP_EVERY;
        s.users().sweep(later);
        let users = s.users();
        let kept = &users.map["alice"].stateless;
        assert_eq!(kept.len(), 1);
        assert!(Arc::ptr_eq(&kept[0].session, &running.session));
    }

    #[test]
    fn beyond_the_user_bound_the_least_recently_used_idle_users_go() {
        let dir = tempfile::tempdir().unwrap();
        let s = sessions(dir.path(), ClientRoots::Narrow);
        let live = s.scope_for("user-0").unwrap();
        for i in 0..USER_CACHE + 10 {
            s.stateless_scope(&format!("user-{i}"), None).unwrap();
        }
        let users = s.users();
        assert!(users.map.len() <= USER_CACHE);
        // The user with a live MCP session stays; the oldest idle ones went first.
        assert!(users.map.contains_key("user-0"));
        assert!(!users.map.contains_key("user-1"));
        assert!(users.map.contains_key(&format!("user-{}", USER_CACHE + 9)));
        drop(live);
    }
}
