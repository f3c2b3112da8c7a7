//! `tools`: the offered tools' definitions, in the MCP, OpenAI or Anthropic shape.

use std::process::ExitCode;

use std::io::Write;

use clap::ValueEnum;

use ringfence_core::DefinitionFormat;

use super::print_out;
use crate::app::App;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(super) enum Format {
    Mcp,
    Openai,
    Anthropic,
}

pub(super) fn run(app: &App, format: Format) -> ExitCode {
    let f = match format {
        Format::Mcp => DefinitionFormat::Mcp,
        Format::Openai => DefinitionFormat::OpenAi,
        Format::Anthropic => DefinitionFormat::Anthropic,
    };
    let defs = app.toolbox.definitions(f);
    print_out(&serde_json::to_string_pretty(&defs).unwrap_or_default());
    // Beside the definitions (stdout stays pure JSON): what is off and how to turn it on.
    for (family, why) in &app.withheld {
        let _ = writeln!(
            std::io::stderr(),
            "note: the {family} tools are not offered: {why}"
        );
    }
    ExitCode::SUCCESS
}
