//! The shape every AWS decide step shares: the gate a CR's spec sets for
//! disruptive changes, how changes split into what to apply now and what
//! stays pending, and the "created once, now gone" report.

use cro_provider_api::{Change, Timing};

/// What the CR allows for disruptive changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gate {
    /// `spec.maintenanceWindow`: request them now, for the cloud to apply
    /// in its next maintenance window (unless `apply_immediately`).
    pub maintenance_window: bool,
    /// `spec.applyImmediately`: apply requested changes at once.
    pub apply_immediately: bool,
}

impl Gate {
    /// The gate `options` (the CR's spec) set.
    pub fn of(options: &cro_provider_api::Options) -> Self {
        Gate {
            maintenance_window: options.maintenance_window,
            apply_immediately: options.apply_immediately,
        }
    }
}

/// Changes split by what happens to them.
#[derive(Debug, Default, PartialEq)]
pub struct Split {
    /// Request these now.
    pub apply: Vec<Change>,
    /// With the cloud's `ApplyImmediately`.
    pub immediately: bool,
    /// Reported, not requested (gated, scheduled, or never).
    pub pending: Vec<Change>,
    /// The maintenance window allowed a disruptive change.
    pub window_used: bool,
}

/// Safe changes are applied at once; disruptive ones when the gate allows
/// (the Go operator's rule: with `maintenanceWindow`, applied in the
/// cloud's window unless `applyImmediately`; `applyImmediately` alone
/// applies them at once, which the Go operator did not do).
pub fn split(changes: Vec<Change>, gate: Gate) -> Split {
    let mut out = Split {
        immediately: true,
        ..Split::default()
    };
    let disruptive_allowed = gate.maintenance_window || gate.apply_immediately;
    for change in changes {
        match change.timing {
            Timing::Now => out.apply.push(change),
            Timing::MaintenanceWindow if disruptive_allowed => {
                out.window_used |= gate.maintenance_window;
                out.immediately &= gate.apply_immediately;
                out.apply.push(change);
            }
            _ => out.pending.push(change),
        }
    }
    out
}

/// Where a resource stands once the changes of `split` were requested.
#[derive(Debug, PartialEq)]
pub enum Settled {
    /// Applied at once: the resource is modifying; these are the changes.
    Modifying(String),
    /// Usable; what still differs (requested ones now scheduled).
    Usable(Vec<Change>),
}

pub fn settle(split: Split) -> Settled {
    if !split.apply.is_empty() && split.immediately {
        let list: Vec<String> = split
            .apply
            .iter()
            .map(|c| format!("{} {} -> {}", c.field, c.current, c.desired))
            .collect();
        return Settled::Modifying(list.join(", "));
    }
    let mut pending = split.pending;
    pending.extend(split.apply.into_iter().map(|c| Change {
        timing: Timing::Scheduled,
        ..c
    }));
    Settled::Usable(pending)
}

/// The message for a resource that was created for the CR (its
/// identifier is recorded) and no longer exists: it is not re-created.
pub fn vanished(what: &str, identifier: &str, restore: &str) -> String {
    format!(
        "{what} {identifier} was created for this resource but no longer exists (deleted outside the operator?); it is not re-created automatically: {restore}, or delete the resourceIdentifier annotation to create a new, empty one"
    )
}

/// A change of `field` from `current` to `desired`.
pub fn change(
    field: &str,
    current: impl ToString,
    desired: impl ToString,
    timing: Timing,
    restarts: bool,
) -> Change {
    Change {
        field: field.to_string(),
        current: current.to_string(),
        desired: desired.to_string(),
        timing,
        restarts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes() -> Vec<Change> {
        vec![
            change("DeletionProtection", false, true, Timing::Now, false),
            change(
                "DBInstanceClass",
                "db.t3.small",
                "db.m5.large",
                Timing::MaintenanceWindow,
                true,
            ),
            change(
                "EngineVersion",
                "16.4",
                "15.8",
                Timing::Never("downgrade".into()),
                false,
            ),
        ]
    }

    fn fields(v: &[Change]) -> Vec<&str> {
        v.iter().map(|c| c.field.as_str()).collect()
    }

    #[test]
    fn the_gate_decides_disruptive_changes_only() {
        // Row: gate -> (applied, immediately, pending, window used)
        let rows = [
            (
                Gate::default(),
                vec!["DeletionProtection"],
                true,
                vec!["DBInstanceClass", "EngineVersion"],
                false,
            ),
            (
                Gate {
                    maintenance_window: true,
                    apply_immediately: false,
                },
                vec!["DeletionProtection", "DBInstanceClass"],
                false,
                vec!["EngineVersion"],
                true,
            ),
            (
                Gate {
                    maintenance_window: false,
                    apply_immediately: true,
                },
                vec!["DeletionProtection", "DBInstanceClass"],
                true,
                vec!["EngineVersion"],
                false,
            ),
            (
                Gate {
                    maintenance_window: true,
                    apply_immediately: true,
                },
                vec!["DeletionProtection", "DBInstanceClass"],
                true,
                vec!["EngineVersion"],
                true,
            ),
        ];
        for (gate, applied, immediately, pending, used) in rows {
            let s = split(changes(), gate);
            assert_eq!(fields(&s.apply), applied, "{gate:?}");
            assert_eq!(s.immediately, immediately, "{gate:?}");
            assert_eq!(fields(&s.pending), pending, "{gate:?}");
            assert_eq!(s.window_used, used, "{gate:?}");
        }
    }

    #[test]
    fn requested_changes_settle_as_modifying_or_scheduled() {
        let window = Gate {
            maintenance_window: true,
            apply_immediately: false,
        };
        let Settled::Usable(pending) = settle(split(changes(), window)) else {
            panic!("for the window, the resource stays usable")
        };
        let timings: Vec<_> = pending
            .iter()
            .map(|c| (c.field.as_str(), c.timing.clone()))
            .collect();
        assert_eq!(
            timings,
            [
                ("EngineVersion", Timing::Never("downgrade".into())),
                ("DeletionProtection", Timing::Scheduled),
                ("DBInstanceClass", Timing::Scheduled)
            ]
        );
        let now = Gate {
            maintenance_window: false,
            apply_immediately: true,
        };
        assert!(
            matches!(settle(split(changes(), now)), Settled::Modifying(m) if m.contains("DBInstanceClass db.t3.small -> db.m5.large"))
        );
        assert_eq!(
            settle(split(Vec::new(), Gate::default())),
            Settled::Usable(Vec::new())
        );
    }

    #[test]
    fn nothing_to_change_splits_to_nothing() {
        assert_eq!(
            split(Vec::new(), Gate::default()).apply,
            Vec::<Change>::new()
        );
    }
}
