//! Changes between a live resource and its tier, how a tier lets them
//! through (`changePolicy`), and what a person approves: a plan (by its
//! hash) or adopting a resource someone else made.

use sha2::{Digest, Sha256};

/// When a difference between a live resource and its tier is applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Timing {
    /// Safe at any time: applied at once (creating what is missing, tags).
    Now,
    /// A modification the cloud makes online, without a restart: under
    /// the default policy it waits for `maintenanceWindow` like every
    /// modification (the Go operator modified nothing without it); a tier
    /// with `changePolicy: Online` has it made at once.
    Online,
    /// Disruptive: applied when the CR sets `maintenanceWindow` (then in
    /// the cloud's next maintenance window) or `applyImmediately`.
    MaintenanceWindow,
    /// Requested, waiting for the cloud's maintenance window.
    Scheduled,
    /// Never applied; the reason says why (e.g. an engine downgrade).
    Never(String),
}

impl Timing {
    /// How status shows it.
    pub fn describe(&self) -> String {
        match self {
            Timing::Now => "now".into(),
            // Shown while it waits, so what lets it through.
            Timing::Online => "maintenanceWindow".into(),
            Timing::MaintenanceWindow => "maintenanceWindow".into(),
            Timing::Scheduled => "scheduled for the next maintenance window".into(),
            Timing::Never(reason) => format!("never: {reason}"),
        }
    }
}

/// One field of a live resource that differs from its tier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The cloud API's name (e.g. `DBInstanceClass`) or the in-cluster
    /// object's spec path.
    pub field: String,
    pub current: String,
    pub desired: String,
    pub timing: Timing,
    /// Applying it restarts the resource (a short outage).
    pub restarts: bool,
}

/// How a tier's changes reach its resources (the tier's `changePolicy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ChangePolicy {
    /// As the Go operator: an existing resource is modified only while
    /// the CR sets `maintenanceWindow` (disruptive changes for the cloud's
    /// next maintenance window, at once with `applyImmediately` too).
    #[default]
    Automatic,
    /// As `Automatic`, but what the cloud changes online (backup and
    /// maintenance windows, retention, deletion protection, ...) at once.
    Online,
    /// Nothing is changed until a person approves the CR's plan by its hash.
    Plan,
}

/// A live resource that exists under the CR's identifier but was made by
/// someone else: what adopting it would change, and the hash a person
/// approves it with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Adoption {
    pub changes: Vec<Change>,
    pub hash: String,
}

/// A short, stable hash of a list of changes to the cloud resource
/// `identifier` (what a person approves): the same changes give the same
/// hash in any order, in any process; an approval of one resource's
/// changes approves nothing on another.
pub fn plan_hash(identifier: &str, changes: &[Change]) -> String {
    // Every part length-prefixed: no value (a tag, an annotation a tenant
    // wrote) can end one change and begin another, so two different plans
    // never share a hash.
    let framed =
        |parts: &[&str]| -> String { parts.iter().map(|p| format!("{}:{p}", p.len())).collect() };
    let mut changes: Vec<String> = changes
        .iter()
        .map(|c| framed(&[&c.field, &c.current, &c.desired]))
        .collect();
    changes.sort();
    let input = framed(&[identifier]) + &changes.concat();
    let digest = Sha256::digest(input.as_bytes());
    digest.iter().take(5).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(field: &str, current: &str, desired: &str) -> Change {
        Change {
            field: field.into(),
            current: current.into(),
            desired: desired.into(),
            timing: Timing::Now,
            restarts: false,
        }
    }

    #[test]
    fn the_hash_names_the_changes_not_their_order() {
        let a = [change("A", "1", "2"), change("B", "x", "y")];
        let b = [change("B", "x", "y"), change("A", "1", "2")];
        assert_eq!(plan_hash("db", &a), plan_hash("db", &b));
        assert_eq!(plan_hash("db", &a).len(), 10);
        assert_ne!(plan_hash("db", &a), plan_hash("other-db", &a));
        assert_ne!(
            plan_hash("db", &a),
            plan_hash("db", &[change("A", "1", "3"), change("B", "x", "y")])
        );
        // A value holding what separates changes forges no other plan.
        let forged = [change("A", "1", "2\nB=x->y")];
        assert_ne!(plan_hash("db", &a), plan_hash("db", &forged));
        let joined = [change("A", "1", "2B"), change("", "x", "y")];
        assert_ne!(
            plan_hash("db", &joined),
            plan_hash("db", &[change("A", "1", "2"), change("B", "x", "y")])
        );
    }
}
