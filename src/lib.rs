//! cloud-resource-operator: provisions application backing services
//! (Postgres, Redis, blob storage, SMTP credentials, snapshots) described by
//! `integreatly.org/v1alpha1` custom resources, on AWS or in-cluster.

pub mod api;
pub mod aws_identity;
pub mod cache;
pub mod cli;
pub mod cluster_id;
pub mod config;
pub mod connectivity;
pub mod controllers;
pub mod credentials;
pub mod fenced_client;
pub mod flag_error;
pub mod leader;
pub mod metrics;
pub mod plan;
pub mod providers;
pub mod reconcile;
pub mod shard;
pub mod status;
pub mod terminal;
pub mod validate;
pub mod watch;
