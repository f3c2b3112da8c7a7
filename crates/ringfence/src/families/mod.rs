//! The families this binary offers, and how each is built from the configuration.
//!
//! Each family has a plug (`ringfence_core::plug::FamilyPlug`): it resolves its configuration
//! section (its table of the file and its `RINGFENCE_*` variables) into its settings, makes
//! its services (lazily: building a family opens nothing), registers its background jobs and
//! exit steps with the [`Supervisor`], and calls the family's constructor. Adding a family is
//! its crate and one line in [`FAMILIES`]; see "Adding a tool family" in ARCHITECTURE.md.

use std::sync::Arc;

use ringfence_core::plug::{BuildError, FamilyEnv, Offer, Plug, Shared};
use ringfence_core::supervisor::Supervisor;
use ringfence_core::{Catalogue, Family};

use crate::config::Config;

/// Every family, in listing order.
pub const FAMILIES: &[&dyn Plug] = &[
    &ringfence_files::FilesPlug,
    &ringfence_memory::MemoryPlug,
    &ringfence_followups::FollowupsPlug,
    &ringfence_calendar::CalendarPlug,
    &ringfence_web::WebPlug,
    &ringfence_images::ImagesPlug,
    &ringfence_shell::ShellPlug,
    &ringfence_delegate::DelegatePlug,
];

/// Whether `name` is a `RINGFENCE_*` variable the core or a family reads.
pub fn known_env_var(name: &str) -> bool {
    crate::env_vars::ALL.contains(&name) || FAMILIES.iter().any(|p| p.env_vars().contains(&name))
}

/// The catalogue of every family's tools, known before anything is built.
pub fn catalogue() -> Catalogue {
    Catalogue::new(FAMILIES.iter().map(|p| p.info()))
}

/// Why the family of `tool` is withheld under `config`, if it is.
fn withheld_tool(config: &Config, selected: Option<&[&'static str]>, tool: &str) -> Option<String> {
    let plug = FAMILIES.iter().find(|p| p.info().tools.contains(&tool))?;
    let offer = Offer {
        llm: config.llm.as_ref(),
        selected,
        withheld: &|_| None,
    };
    plug.withheld(&config.families, &offer)
}

/// The families withheld under `config`: (family name, its tool names, why).
pub fn withheld(config: &Config) -> Vec<(&'static str, &'static [&'static str], String)> {
    let selected = catalogue().select(&config.tools).ok();
    let offer = Offer {
        llm: config.llm.as_ref(),
        selected: selected.as_deref(),
        withheld: &|tool| withheld_tool(config, selected.as_deref(), tool),
    };
    FAMILIES
        .iter()
        .filter_map(|p| {
            p.withheld(&config.families, &offer)
                .map(|why| (p.info().name, p.info().tools, why))
        })
        .collect()
}

/// What no tool may expose, each with what it is: the data directory (stores, credentials,
/// saved outputs, users' default workspaces), the configuration file (tokens, secrets), and
/// where roots made per user live (other users' workspaces).
pub fn private_paths(config: &Config) -> Vec<(std::path::PathBuf, String)> {
    let mut private = vec![(
        config.data_dir.clone(),
        "ringfence's data directory".to_owned(),
    )];
    if let Some(file) = &config.config_file {
        private.push((file.clone(), "ringfence's configuration file".to_owned()));
    }
    for spec in config.roots.iter().filter(|s| s.is_template()) {
        let fixed: std::path::PathBuf = spec
            .path
            .components()
            .take_while(|c| c.as_os_str() != ringfence_fs::USER_PLACEHOLDER)
            .collect();
        private.push((fixed, "the directory of the users' own roots".to_owned()));
    }
    private
}

/// Builds the families that offer at least one of `selected`; the process's state store and
/// every value plugs share are kept in `shared`.
pub fn build(
    config: &Config,
    supervisor: &Arc<Supervisor>,
    background: bool,
    shared: &Shared,
    selected: &[&str],
) -> Result<Vec<Family>, BuildError> {
    let private = private_paths(config);
    let store = shared.get_or_init(|| config.store.shared_store());
    let env = FamilyEnv {
        settings: &config.families,
        data_dir: &config.data_dir,
        config_file: config.config_file.as_deref(),
        private: &private,
        store: &store,
        llm: config.llm.as_ref(),
        supervisor,
        background,
        shared,
    };
    FAMILIES
        .iter()
        .filter(|p| p.info().tools.iter().any(|t| selected.contains(t)))
        .map(|p| p.build(&env))
        .collect()
}

/// The state every family keeps in the store under `config`, for `store migrate`.
pub fn state(config: &Config) -> Vec<ringfence_store::pg::copy::Family> {
    FAMILIES
        .iter()
        .flat_map(|p| p.state(&config.families, &config.data_dir))
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
        let mut seen = std::collections::HashSet::new();
        for plug in FAMILIES {
            let built = build(&config, &supervisor, false, &shared, plug.info().tools).unwrap();
            let [family] = &built[..] else {
                panic!("{} built {} families", plug.info().name, built.len())
            };
            let names: Vec<&str> = family.tools().iter().map(|t| t.name()).collect();
            assert_eq!(names, plug.info().tools, "{}", plug.info().name);
            for tool in family.tools() {
                assert_eq!(tool.family(), plug.info().name);
                assert!(seen.insert(tool.name()), "{} twice", tool.name());
            }
        }
        supervisor.shutdown(std::time::Duration::from_secs(1));
    }

    /// Families name each other's tools, never import them: the names must be right.
    #[test]
    fn the_tools_one_family_names_are_the_other_familys() {
        let c = catalogue();
        assert_eq!(
            c.family_of(ringfence_delegate::SHELL_TOOL).map(|f| f.name),
            Some(ringfence_shell::FAMILY)
        );
        for family in ringfence_delegate::SUB_AGENT_FAMILIES {
            assert!(c.families().iter().any(|f| f.name == family), "{family}");
        }
    }

    #[test]
    fn the_family_variables_are_known_to_the_typo_check() {
        assert!(known_env_var(
            ringfence_memory::settings::RINGFENCE_EMBEDDINGS
        ));
        assert!(known_env_var(
            ringfence_memory::settings::RINGFENCE_MODEL_DIR
        ));
        assert!(known_env_var("RINGFENCE_ROOTS"));
        assert!(!known_env_var("RINGFENCE_EMBEDING"));
    }

    #[test]
    fn withheld_until_delegation_the_shell_and_a_model_are_all_configured() {
        let why = |toml: &str, env: &[(&str, &str)]| {
            let c = crate::config::tests::load_file(toml, env).unwrap();
            withheld(&c)
                .into_iter()
                .find(|(family, _, _)| *family == "delegate")
                .map(|(_, _, why)| why)
        };
        let all = why("log = \"info\"\n", &[]).unwrap();
        assert!(all.contains("[delegate] enabled = true"), "{all}");
        assert!(all.contains("[shell] enabled = true"), "{all}");
        assert!(all.contains("[llm]"), "{all}");
        let no_llm = why("[delegate]\nenabled = true\n[shell]\nenabled = true\n", &[]).unwrap();
        assert!(!no_llm.contains("[delegate] enabled"), "{no_llm}");
        assert!(!no_llm.contains("[shell]"), "{no_llm}");
        assert!(no_llm.contains("[llm]"), "{no_llm}");
        let no_shell = why(
            "[delegate]\nenabled = true\n[llm]\nprovider = \"sampling\"\n",
            &[],
        )
        .unwrap();
        assert!(no_shell.contains("RINGFENCE_SHELL_ENABLED"), "{no_shell}");
        assert!(!no_shell.contains("[llm]"), "{no_shell}");
        assert_eq!(
            why(
                "[llm]\nprovider = \"openai\"\nmodel = \"m\"\n",
                &[
                    ("RINGFENCE_DELEGATE_ENABLED", "true"),
                    ("RINGFENCE_SHELL_ENABLED", "1")
                ]
            ),
            None
        );
    }
}
