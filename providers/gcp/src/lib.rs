//! The GCP provider (name `gcp`), as the Go operator's
//! pkg/providers/gcp has it. So far the pure parts: a tier of
//! `cloud-resources-gcp-strategies`, the operator's tags as GCP labels,
//! what Google APIs' error answers mean,
//! and the Cloud SQL instance the Go operator makes and keeps; held to
//! Google's discovery documents by their tests. Not yet served: the
//! operator answers a `gcp` CR as before (see docs/migration.md).

pub mod cloud_sql;
pub mod errors;
pub mod labels;
pub mod strategy;

#[cfg(test)]
mod discovery;
