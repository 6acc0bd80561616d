//! Tests that change what every test would see — a CRD's schema, the API
//! server process itself — so they run in their own test binary (cargo
//! runs test binaries one after another) and, within it, one at a time.

#[path = "../support/mod.rs"]
mod support;

mod fairness;
mod faults;
mod openshift;
mod poison;
mod relist;
mod restore;
mod rollout;

/// Runs `tests/testenv/testenv.sh` with `args` (restart a process,
/// compact etcd), failing the test if it fails.
fn testenv(args: &[&str]) {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testenv/testenv.sh");
    let status = std::process::Command::new("bash")
        .arg(script)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("running testenv.sh: {e}"));
    assert!(status.success(), "testenv.sh {args:?} failed");
}

/// Held for the whole of each test: no two of these run at once.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
