//! cloud-resource-operator: provisions application backing services
//! (Postgres, Redis, blob storage, SMTP credentials, snapshots) described by
//! `integreatly.org/v1alpha1` custom resources, on AWS or in-cluster.

pub mod api;
pub mod cli;
pub mod config;
pub mod connectivity;
pub mod controllers;
pub mod leader;
pub mod metrics;
pub mod providers;
pub mod reconcile;
