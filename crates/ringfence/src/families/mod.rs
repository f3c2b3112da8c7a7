//! The families this binary offers, and how each is built from the configuration.
//!
//! Each family has a plug here: a small module that reads its configuration section,
//! makes its services (lazily: building a family opens nothing), registers its background
//! jobs and exit steps with the [`Supervisor`], and calls the family's constructor. Adding a
//! family is its module (tools, plus a backend where it has one) and one line in
//! [`FAMILIES`]; see "Adding a tool family" in ARCHITECTURE.md.

use std::sync::Arc;

use ringfence_tools::{Catalogue, Family, FamilyInfo};

use crate::config::Config;
use crate::supervisor::Supervisor;

pub mod files;
pub mod memory;

/// What a plug may use to build its family.
pub struct FamilyEnv<'a> {
    pub config: &'a Config,
    pub supervisor: &'a Arc<Supervisor>,
    /// Start background work now (opening databases ahead of the first call, loading the
    /// model, periodic writes). Only `serve` sets it; elsewhere services open on first use.
    pub background: bool,
}

/// How the binary builds one family.
pub trait FamilyPlug: Sync {
    /// The family's catalogue entry (its name and tool names).
    fn info(&self) -> &'static FamilyInfo;
    /// Builds the family. Called only when at least one of its tools is offered.
    fn build(&self, env: &FamilyEnv<'_>) -> Result<Family, String>;
}

/// Every family, in listing order.
pub const FAMILIES: &[&dyn FamilyPlug] = &[&files::FilesPlug, &memory::MemoryPlug];

/// The catalogue of every family's tools, known before anything is built.
pub fn catalogue() -> Catalogue {
    Catalogue::new(FAMILIES.iter().map(|p| p.info()))
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
        let env = FamilyEnv {
            config: &config,
            supervisor: &supervisor,
            background: false,
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
