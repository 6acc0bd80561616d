use anyhow::Context as _;
use clap::Parser;
use cloud_resource_operator::cli::{Cli, Command, offline, read, run};

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Crd {
            output_dir,
            reference,
        } => offline::print_crds(output_dir, reference),
        Command::Validate(args) => offline::validate(args),
        Command::Run(args) => runtime()?.block_on(run::run(*args)),
        Command::Plan(args) => {
            let code = runtime()?.block_on(read::plan(*args))?;
            std::process::exit(code)
        }
        Command::Status(args) => runtime()?.block_on(read::status(*args)),
        Command::Completions { shell } => {
            offline::completions(shell, &mut std::io::stdout());
            Ok(())
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}
