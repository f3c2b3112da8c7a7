//! The families this binary offers, and how each is built from the configuration.
//!
//! Each family has a plug here: a small module that resolves its configuration section (its
//! table of the file and its `RINGFENCE_*` variables) into its settings, makes its services
//! (lazily: building a family opens nothing), registers its background jobs and exit steps
//! with the [`Supervisor`], and calls the family's constructor. Adding a family is its module
//! (tools, plus a backend where it has one) and one line in [`FAMILIES`]; see "Adding a tool
//! family" in ARCHITECTURE.md.

use std::any::Any;
use std::sync::Arc;

use ringfence_tools::{Catalogue, Family, FamilyInfo};

use crate::config::{Config, ConfigError, SectionInput};
use crate::supervisor::Supervisor;

pub mod calendar;
pub mod delegate;

pub mod files;
pub mod followups;
pub mod images;
pub mod memory;
pub mod shell;
pub mod web;

/// What a plug may use to build its family.
pub struct FamilyEnv<'a> {
    pub config: &'a Config,
    pub supervisor: &'a Arc<Supervisor>,
    /// Start background work now (opening databases ahead of the first call, loading the
    /// model, periodic writes). Only `serve` sets it; elsewhere services open on first use.
    pub background: bool,
    /// Services that must be one per server even when several plugs build the same family
    /// (the sub-agent's shell counts against its user's running commands).
    pub shared: &'a Shared,
}

/// One value per type for a whole build: the first plug to ask makes it, later ones get
/// the same (`env.shared.get_or_init(Running::default)`).
#[derive(Default)]
pub struct Shared {
    values:
        std::sync::Mutex<std::collections::HashMap<std::any::TypeId, Arc<dyn Any + Send + Sync>>>,
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

/// How the binary configures and builds one family.
pub trait FamilyPlug: Sync {
    /// The family's resolved settings (`()` when it has none).
    type Settings: Any + Send + Sync;
    /// The family's table in the configuration file (`[memory]`), when it has one: the file
    /// may then hold that key, and only the plug reads it.
    const SECTION: Option<&'static str> = None;
    /// The `RINGFENCE_*` variables the family reads (known to the typo check at start).
    const ENV_VARS: &'static [&'static str] = &[];

    /// The family's catalogue entry (its name and tool names).
    fn info(&self) -> &'static FamilyInfo;
    /// Resolves the settings: the table (`input.table(SECTION)`), then the variables. Called
    /// when the configuration loads, for every family whether offered or not, so that any
    /// mistake stops the start; errors name the key or variable at fault.
    fn settings(&self, input: &SectionInput<'_>) -> Result<Self::Settings, ConfigError>;
    /// Why the family's tools are not offered under these settings (a family that is off
    /// until an operator turns it on), with how to turn them on; `None` offers them as the
    /// tool selection says. Withheld tools are left out of every listing and call, and
    /// `ringfence tools` prints the reason. `config` is the whole configuration, for a
    /// family that depends on another's settings or on `[llm]`.
    fn withheld(&self, _settings: &Self::Settings, _config: &Config) -> Option<String> {
        None
    }
    /// Builds the family. Called only when at least one of its tools is offered.
    fn build(&self, settings: &Self::Settings, env: &FamilyEnv<'_>) -> Result<Family, String>;
}

/// A [`FamilyPlug`] with its settings type erased, for the [`FAMILIES`] list.
pub trait Plug: Sync {
    fn info(&self) -> &'static FamilyInfo;
    fn section(&self) -> Option<&'static str>;
    fn env_vars(&self) -> &'static [&'static str];
    fn resolve(&self, input: &SectionInput<'_>) -> Result<Arc<dyn Any + Send + Sync>, ConfigError>;
    fn withheld(&self, config: &Config) -> Option<String>;
    fn build(&self, env: &FamilyEnv<'_>) -> Result<Family, String>;
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
    fn resolve(&self, input: &SectionInput<'_>) -> Result<Arc<dyn Any + Send + Sync>, ConfigError> {
        Ok(Arc::new(self.settings(input)?))
    }
    fn withheld(&self, config: &Config) -> Option<String> {
        let name = FamilyPlug::info(self).name;
        FamilyPlug::withheld(self, config.families.get::<P::Settings>(name), config)
    }
    fn build(&self, env: &FamilyEnv<'_>) -> Result<Family, String> {
        let name = FamilyPlug::info(self).name;
        FamilyPlug::build(self, env.config.families.get::<P::Settings>(name), env)
    }
}

/// Opens a database file of the data directory with `open`, making its directory (0700)
/// first if missing; `what` names it in errors.
pub fn open_private_db<T, E: std::fmt::Display>(
    path: &std::path::Path,
    what: &str,
    open: impl FnOnce(&std::path::Path) -> Result<T, E>,
) -> Result<Arc<T>, String> {
    if let Some(dir) = path.parent() {
        ringfence_fs::create_private_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    open(path)
        .map(Arc::new)
        .map_err(|e| format!("cannot open the {what} database: {e}"))
}

/// Every family, in listing order.
pub const FAMILIES: &[&dyn Plug] = &[
    &files::FilesPlug,
    &memory::MemoryPlug,
    &followups::FollowupsPlug,
    &calendar::CalendarPlug,
    &web::WebPlug,
    &images::ImagesPlug,
    &shell::ShellPlug,
    &delegate::DelegatePlug,
];

/// Whether `name` is a `RINGFENCE_*` variable the core or a family reads.
pub fn known_env_var(name: &str) -> bool {
    crate::env_vars::ALL.contains(&name) || FAMILIES.iter().any(|p| p.env_vars().contains(&name))
}

/// The catalogue of every family's tools, known before anything is built.
pub fn catalogue() -> Catalogue {
    Catalogue::new(FAMILIES.iter().map(|p| p.info()))
}

/// The families withheld under `config`: (family name, its tool names, why).
pub fn withheld(config: &Config) -> Vec<(&'static str, &'static [&'static str], String)> {
    FAMILIES
        .iter()
        .filter_map(|p| {
            p.withheld(config)
                .map(|why| (p.info().name, p.info().tools, why))
        })
        .collect()
}

/// Builds the families that offer at least one of `selected`.
pub fn build(env: &FamilyEnv<'_>, selected: &[&str]) -> Result<Vec<Family>, String> {
    FAMILIES
        .iter()
        .filter(|p| p.info().tools.iter().any(|t| selected.contains(t)))
        .map(|p| p.build(env))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every plug builds exactly the tools its catalogue entry lists, in that order, and
    /// no tool name is used twice.
    #[test]
    fn families_build_what_the_catalogue_lists() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::for_tests(dir.path());
        let supervisor = Supervisor::new();
        let shared = Shared::default();
        let env = FamilyEnv {
            config: &config,
            supervisor: &supervisor,
            background: false,
            shared: &shared,
        };
        let mut seen = std::collections::HashSet::new();
        for plug in FAMILIES {
            let family = plug.build(&env).unwrap();
            let names: Vec<&str> = family.tools().iter().map(|t| t.name()).collect();
            assert_eq!(names, plug.info().tools, "{}", plug.info().name);
            for tool in family.tools() {
                assert_eq!(tool.family(), plug.info().name);
                assert!(seen.insert(tool.name()), "{} twice", tool.name());
            }
        }
        supervisor.shutdown(std::time::Duration::from_secs(1));
    }
}
