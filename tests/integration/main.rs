//! Integration tests against the local test environment (`make test` starts
//! it): a real kube-apiserver with kwok nodes, and the moto AWS emulator.

#[path = "../support/mod.rs"]
mod support;

mod aws;
mod bench;
mod cco;
mod connectivity;
mod deploy;
mod disk_full;
mod first_contact;
mod flow_control;
mod foundation;
mod gitops;
mod helm_upgrade;
mod iam_policy;
mod in_cluster;
mod install;
mod leader;
mod lifecycle;
mod lost_answers;
mod migration;
mod monitoring;
mod network;
mod observability;
mod plan;
mod real_node;
mod scale;
mod status;
mod tenants;
mod validate;
