//! The command line: `run` and the tools beside it (`plan`, `status`,
//! `validate`, `crd`). The binary only parses and dispatches to here.

pub mod args;
mod connect;
mod go_compatible;
pub mod offline;
pub mod read;
pub mod run;
mod signal;
mod sts;

pub use args::{Cli, Command};
