//! The GCP provider (name `gcp`), as the Go operator's pkg/providers/gcp
//! has it, being built. Here so far: a tier of
//! `cloud-resources-gcp-strategies`, the operator's tags as GCP labels,
//! what Google APIs' error answers mean, the Cloud SQL instance the Go
//! operator makes and keeps, the Cloud SQL Admin calls over the fenced
//! client, access tokens from a service account's key file (the one
//! the Cloud Credential Operator writes), the cluster's private services
//! access (the reserved range and Service Networking connection), and the
//! Memorystore for Redis instance the Go operator makes and keeps, with its
//! API calls. Every body is sent, in the tests, to the test environment's
//! Cloud SQL stand-in (tests/testenv/gcp_server.py), which holds it to
//! Google's discovery document.
//! Not yet served: the operator answers a `gcp` CR as before (see
//! docs/migration.md).

pub mod cloud_sql;
pub mod errors;
pub mod labels;
pub mod memorystore;
pub mod network;
pub mod redis_api;
pub mod rest;
pub mod service_account;
pub mod sqladmin;
pub mod strategy;
