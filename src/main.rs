use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use cloud_resource_operator::api;

#[derive(Parser)]
#[command(name = "cloud-resource-operator", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print every CustomResourceDefinition as multi-document YAML, or
    /// write one file per CRD into a directory.
    Crd {
        /// Write `<group>_<plural>.yaml` files here instead of printing.
        #[arg(long, env = "CRD_OUTPUT_DIR")]
        output_dir: Option<PathBuf>,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Crd { output_dir } => print_crds(output_dir),
    }
}
fn print_crds(output_dir: Option<PathBuf>) -> anyhow::Result<()> {
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
