//! The command line: `run` and the tools beside it (`plan`, `status`,
//! `validate`, `crd`). The binary only parses and dispatches to here.

pub mod args;
mod connect;
pub mod flag_error;
mod go_compatible;
pub mod offline;
pub mod plan;
pub mod read;
pub mod run;
mod signal;
pub mod status;
mod sts;
pub mod validate;

pub use args::{Cli, Command};
