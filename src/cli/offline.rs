//! Subcommands that need no cluster: `validate` and `crd`.

use std::path::PathBuf;

use anyhow::Context as _;

use super::args::ValidateArgs;
use crate::{api, cli::validate as check};

pub fn validate(args: ValidateArgs) -> anyhow::Result<()> {
    let (docs, mut findings) = check::load(&args.paths);
    let options = check::Options {
        operator_namespace: args.operator_namespace,
    };
    findings.extend(check::validate(&docs, &options));
    for finding in &findings {
        println!("{finding}");
    }
    eprintln!("{}", check::summary(&docs, &findings));
    if !findings.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}

pub fn print_crds(output_dir: Option<PathBuf>, reference: Option<PathBuf>) -> anyhow::Result<()> {
    if let Some(path) = reference {
        std::fs::write(&path, api::reference::markdown(&api::crds()))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    for crd in api::crds() {
        let yaml = api::crd_yaml(&crd)
            .with_context(|| format!("serialising CRD {}", crd.spec.names.kind))?;
        match &output_dir {
            Some(dir) => {
                let path = dir.join(api::crd_file_name(&crd));
                std::fs::write(&path, yaml)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            None => print!("---\n{yaml}"),
        }
    }
    Ok(())
}

/// Writes `shell`'s completion script for every subcommand and flag.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn std::io::Write) {
    use clap::CommandFactory;
    let mut cli = super::Cli::command();
    clap_complete::generate(shell, &mut cli, "cloud-resource-operator", out);
}
