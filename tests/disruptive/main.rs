//! Tests that change what every test would see — a CRD's schema, the API
//! server process itself — so they run in their own test binary (cargo
//! runs test binaries one after another) and, within it, one at a time.

#[path = "../support/mod.rs"]
mod support;

mod faults;
mod openshift;
mod poison;
mod relist;
mod rollout;

/// Held for the whole of each test: no two of these run at once.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
