//! The plug contract: how a family is configured and built, whatever binary assembles it.
//!
//! A family crate offers one [`FamilyPlug`]: its catalogue entry, its table of the
//! configuration file and its `RINGFENCE_*` variables (resolved into its own settings type
//! when the configuration loads, offered or not, so a mistake stops the start), why its tools
//! may be withheld, what state it keeps (for `store migrate`), and how it is built from a
//! [`FamilyEnv`]: the data directory, the shared store, the model of `[llm]`, the supervisor of
//! background work, and one value per type shared by the whole build. The binary lists its
//! plugs, one line per family.

use std::any::Any;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ringfence_llm::LlmSettings;
use ringfence_store::SharedStore;
use ringfence_store::pg::copy;

use crate::family::{Family, FamilyInfo};
use crate::supervisor::Supervisor;

pub mod check;
pub mod settings;
pub mod words;

pub use check::{Check, Outcome, ProbeCall, ProbeEnv};

pub use settings::{
    Env, FamilySettings, FileText, ProcessEnv, SectionInput, SettingsError, Shown, zone_setting,
};

/// What a plug may use to build its family.
pub struct FamilyEnv<'a> {
    /// Every family's resolved settings (a plug reads its own through [`Plug::build`]).
    pub settings: &'a FamilySettings,
    /// The data directory (databases, saved outputs, logins).
    pub data_dir: &'a Path,
    /// The configuration file read, if any.
    pub config_file: Option<&'a Path>,
    /// What no tool may expose, each with what it is: the data directory, the configuration
    /// file, where the users' own roots live.
    pub private: &'a [(PathBuf, String)],
    /// The state store of the process (SQLite files, or the PostgreSQL pool).
    pub store: &'a Arc<SharedStore>,
    /// The `[llm]` model, if configured.
    pub llm: Option<&'a LlmSettings>,
    pub supervisor: &'a Arc<Supervisor>,
    /// Start background work now (opening databases ahead of the first call, loading the
    /// model, periodic writes). Only `serve` sets it; elsewhere services open on first use.
    pub background: bool,
    /// Services that must be one per server even when several plugs use them (the
    /// sessions follow-ups are delivered to, the count of a user's running commands).
    pub shared: &'a Shared,
}

/// What decides whether a family's tools are offered besides its own settings.
pub struct Offer<'a> {
    /// The `[llm]` model, if configured.
    pub llm: Option<&'a LlmSettings>,
    /// The tools the configuration selects (`None` when the selection is refused).
    pub selected: Option<&'a [&'static str]>,
    /// Why another family's tool is withheld by its own settings, if it is.
    pub withheld: &'a dyn Fn(&str) -> Option<String>,
}

/// Why a family could not be built.
#[derive(Debug, thiserror::Error)]
#[error("the {family} tools cannot be built: {reason}")]
pub struct BuildError {
    pub family: &'static str,
    pub reason: String,
}

impl BuildError {
    pub fn new(family: &'static str, reason: impl std::fmt::Display) -> BuildError {
        BuildError {
            family,
            reason: reason.to_string(),
        }
    }
}

/// One value per type: for a whole build, the first plug to ask makes it and later ones get
/// the same (`env.shared.get_or_init(Running::default)`); per session, what each family keeps
/// ([`crate::Session::state`]).
#[derive(Default)]
pub struct Shared {
    values: Mutex<HashMap<std::any::TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.values.lock().unwrap_or_else(|e| e.into_inner()).len();
        f.debug_struct("Shared").field("values", &n).finish()
    }
}

impl Shared {
    pub fn get_or_init<T: Any + Send + Sync>(&self, make: impl FnOnce() -> T) -> Arc<T> {
        let mut values = self.values.lock().unwrap_or_else(|e| e.into_inner());
        let value = values
            .entry(std::any::TypeId::of::<T>())
            .or_insert_with(|| Arc::new(make()))
            .clone();
        value.downcast::<T>().expect("stored under its own type")
    }

    /// The value of type `T`, if a plug made one.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        let values = self.values.lock().unwrap_or_else(|e| e.into_inner());
        let value = values.get(&std::any::TypeId::of::<T>())?.clone();
        Some(value.downcast::<T>().expect("stored under its own type"))
    }
}

/// How a binary configures and builds one family.
pub trait FamilyPlug: Sync {
    /// The family's resolved settings (`()` when it has none).
    type Settings: Any + Send + Sync;
    /// The family's table in the configuration file (`[memory]`), when it has one: the file
    /// may then hold that key, and only the plug reads it.
    const SECTION: Option<&'static str> = None;
    /// The `RINGFENCE_*` variables the family reads (known to the typo check at start).
    const ENV_VARS: &'static [&'static str] = &[];
    /// The family's part of the personal configuration `ringfence init` writes: its table,
    /// every line a comment — `# ` before a setting (removing it must leave a valid file),
    /// `## ` before prose.
    const SAMPLE: Option<&'static str> = None;

    /// The family's catalogue entry (its name and tool names).
    fn info(&self) -> &'static FamilyInfo;
    /// Resolves the settings: the table (`input.table(SECTION)`), then the variables. Errors
    /// name the key or variable at fault.
    fn settings(&self, input: &SectionInput<'_>) -> Result<Self::Settings, SettingsError>;
    /// Why the family's tools are not offered under these settings (a family that is off
    /// until an operator turns it on), with how to turn them on; `None` offers them as the
    /// tool selection says. Withheld tools are left out of every listing and call, and
    /// `ringfence tools` prints the reason.
    fn withheld(&self, _settings: &Self::Settings, _offer: &Offer<'_>) -> Option<String> {
        None
    }
    /// The state the family keeps in the store, for `ringfence store migrate`: its schemas,
    /// tables and SQLite file under these settings.
    fn state(&self, _settings: &Self::Settings, _data_dir: &Path) -> Vec<copy::Family> {
        Vec::new()
    }
    /// Builds the family. Called only when at least one of its tools is offered.
    fn build(&self, settings: &Self::Settings, env: &FamilyEnv<'_>) -> Result<Family, BuildError>;
    /// What the family finds about its setup under these settings, without reaching any
    /// network (a model's files, a credential's file and mode): shown at start and by
    /// `ringfence doctor`.
    fn checks(&self, _settings: &Self::Settings, _data_dir: &Path) -> Vec<Check> {
        Vec::new()
    }
    /// The settings in effect, key by key in the file's terms, for `ringfence config show`
    /// (which finds where each value came from). Secrets as set or unset.
    fn shown(&self, _settings: &Self::Settings) -> Shown {
        Shown::default()
    }
    /// A tool call `ringfence doctor` makes to see the family work as configured (one that
    /// changes nothing), when the family is on.
    fn probe_call(&self, _settings: &Self::Settings) -> Option<ProbeCall> {
        None
    }
    /// What `ringfence doctor` finds by reaching what the family is configured to use beyond
    /// its tools (a mail server: connected and logged in, nothing sent).
    fn probe<'a>(
        &'a self,
        _settings: &'a Self::Settings,
        _env: &'a ProbeEnv<'a>,
    ) -> crate::tool::BoxFuture<'a, Vec<Check>> {
        Box::pin(async { Vec::new() })
    }
}

/// Resolves `plug`'s settings from the text of a configuration file and `vars`, with the data
/// directory at `data_dir`, as a binary does when its configuration loads (for a family's
/// tests).
pub fn resolve_text<P: FamilyPlug>(
    plug: &P,
    toml: &str,
    vars: &[(&str, &str)],
    data_dir: &Path,
) -> Result<P::Settings, SettingsError> {
    let file = FileText {
        path: data_dir.join("config.toml"),
        text: toml.to_owned(),
    };
    let env: std::collections::BTreeMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    plug.settings(&SectionInput {
        file: Some(&file),
        env: &env,
        data_dir,
    })
}

/// A [`FamilyPlug`] with its settings type erased, for a binary's list of families.
pub trait Plug: Sync {
    fn info(&self) -> &'static FamilyInfo;
    fn section(&self) -> Option<&'static str>;
    fn env_vars(&self) -> &'static [&'static str];
    fn sample(&self) -> Option<&'static str>;
    fn resolve(
        &self,
        input: &SectionInput<'_>,
    ) -> Result<Arc<dyn Any + Send + Sync>, SettingsError>;
    fn withheld(&self, settings: &FamilySettings, offer: &Offer<'_>) -> Option<String>;
    fn state(&self, settings: &FamilySettings, data_dir: &Path) -> Vec<copy::Family>;
    fn build(&self, env: &FamilyEnv<'_>) -> Result<Family, BuildError>;
    fn checks(&self, settings: &FamilySettings, data_dir: &Path) -> Vec<Check>;
    fn shown(&self, settings: &FamilySettings) -> Shown;
    fn probe_call(&self, settings: &FamilySettings) -> Option<ProbeCall>;
    fn probe<'a>(
        &'a self,
        settings: &'a FamilySettings,
        env: &'a ProbeEnv<'a>,
    ) -> crate::tool::BoxFuture<'a, Vec<Check>>;
}

impl<P: FamilyPlug> Plug for P {
    fn info(&self) -> &'static FamilyInfo {
        FamilyPlug::info(self)
    }
    fn section(&self) -> Option<&'static str> {
        P::SECTION
    }
    fn env_vars(&self) -> &'static [&'static str] {
        P::ENV_VARS
    }
    fn sample(&self) -> Option<&'static str> {
        P::SAMPLE
    }
    fn resolve(
        &self,
        input: &SectionInput<'_>,
    ) -> Result<Arc<dyn Any + Send + Sync>, SettingsError> {
        Ok(Arc::new(self.settings(input)?))
    }
    fn withheld(&self, settings: &FamilySettings, offer: &Offer<'_>) -> Option<String> {
        let name = FamilyPlug::info(self).name;
        FamilyPlug::withheld(self, settings.get::<P::Settings>(name), offer)
    }
    fn state(&self, settings: &FamilySettings, data_dir: &Path) -> Vec<copy::Family> {
        let name = FamilyPlug::info(self).name;
        FamilyPlug::state(self, settings.get::<P::Settings>(name), data_dir)
    }
    fn build(&self, env: &FamilyEnv<'_>) -> Result<Family, BuildError> {
        let name = FamilyPlug::info(self).name;
        FamilyPlug::build(self, env.settings.get::<P::Settings>(name), env)
    }
    fn checks(&self, settings: &FamilySettings, data_dir: &Path) -> Vec<Check> {
        let name = FamilyPlug::info(self).name;
        FamilyPlug::checks(self, settings.get::<P::Settings>(name), data_dir)
    }
    fn shown(&self, settings: &FamilySettings) -> Shown {
        let name = FamilyPlug::info(self).name;
        FamilyPlug::shown(self, settings.get::<P::Settings>(name))
    }
    fn probe_call(&self, settings: &FamilySettings) -> Option<ProbeCall> {
        let name = FamilyPlug::info(self).name;
        FamilyPlug::probe_call(self, settings.get::<P::Settings>(name))
    }
    fn probe<'a>(
        &'a self,
        settings: &'a FamilySettings,
        env: &'a ProbeEnv<'a>,
    ) -> crate::tool::BoxFuture<'a, Vec<Check>> {
        let name = FamilyPlug::info(self).name;
        FamilyPlug::probe(self, settings.get::<P::Settings>(name), env)
    }
}

/// Why a service could not be opened (kept, and shared by every call that asks again).
pub type OpenFailure = Arc<dyn std::error::Error + Send + Sync + 'static>;

type Opener<T> = Box<dyn Fn() -> Result<Arc<T>, OpenFailure> + Send + Sync>;

/// A service opened on first use: the first call opens it (once, whoever asks first), and a
/// failure is kept and reported to every later call. An opener that panics leaves nothing
/// kept: the next call opens again.
pub struct Lazy<T: ?Sized> {
    cell: std::sync::OnceLock<Result<Arc<T>, OpenFailure>>,
    open: Opener<T>,
}

impl<T: ?Sized> std::fmt::Debug for Lazy<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lazy")
            .field("opened", &self.cell.get().map(|r| r.is_ok()))
            .finish()
    }
}

impl<T: ?Sized> Lazy<T> {
    /// A service `open` makes on first use.
    pub fn new<E>(open: impl Fn() -> Result<Arc<T>, E> + Send + Sync + 'static) -> Lazy<T>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        Lazy {
            cell: std::sync::OnceLock::new(),
            open: Box::new(move || open().map_err(|e| Arc::new(e) as OpenFailure)),
        }
    }

    /// The service, opening it now if no call has yet; the failure if it could not be.
    pub fn open(&self) -> Result<&Arc<T>, &OpenFailure> {
        self.cell.get_or_init(|| (self.open)()).as_ref()
    }

    /// [`Lazy::open`] as a tool's backend reports it.
    pub fn get(&self) -> Result<&Arc<T>, crate::error::BackendError> {
        self.open()
            .map_err(|e| crate::error::BackendError::new(SharedFailure(e.clone())))
    }

    /// The service if it is open already (never opens it).
    pub fn opened(&self) -> Option<&Arc<T>> {
        self.cell.get().and_then(|r| r.as_ref().ok())
    }
}

/// A kept failure, reported again.
#[derive(Debug)]
struct SharedFailure(OpenFailure);

impl std::fmt::Display for SharedFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for SharedFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("the disk is gone")]
    struct Gone;

    #[test]
    fn a_service_opens_once_and_a_failure_is_kept() {
        let opened = Arc::new(AtomicUsize::new(0));
        let n = opened.clone();
        let lazy: Lazy<u32> = Lazy::new(move || {
            n.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Gone>(Arc::new(7))
        });
        assert!(
            lazy.opened().is_none(),
            "nothing opens before the first call"
        );
        assert_eq!(**lazy.open().unwrap(), 7);
        assert_eq!(**lazy.get().unwrap(), 7);
        assert_eq!(opened.load(Ordering::SeqCst), 1);
        let tries = Arc::new(AtomicUsize::new(0));
        let t = tries.clone();
        let failing: Lazy<u32> = Lazy::new(move || {
            t.fetch_add(1, Ordering::SeqCst);
            Err(Gone)
        });
        assert_eq!(failing.get().unwrap_err().to_string(), "the disk is gone");
        assert_eq!(failing.open().unwrap_err().to_string(), "the disk is gone");
        assert_eq!(tries.load(Ordering::SeqCst), 1, "the failure is kept");
    }

    #[test]
    fn an_opener_that_panics_is_tried_again() {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let lazy: Lazy<u32> = Lazy::new(move || {
            if c.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("first open panics");
            }
            Ok::<_, Gone>(Arc::new(9))
        });
        let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| lazy.open().is_ok()));
        assert!(first.is_err());
        assert_eq!(**lazy.open().unwrap(), 9);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}
