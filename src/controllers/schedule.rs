//! Scheduled snapshots (`spec.snapshotFrequency`, `spec.snapshotRetention`):
//! a complete Postgres or Redis gets a PostgresSnapshot / RedisSnapshot CR
//! each period, and the CRs of periods past the retention are deleted (their
//! cloud snapshots with them, unless `skipDelete`).
//!
//! The schedule is computed from the snapshot CRs that exist, never from
//! timers: periods are aligned to the Unix epoch and a snapshot CR is named
//! after its period, so a restart, a leader change or two reconciles at once
//! can never take two snapshots for one period. A new snapshot waits until
//! the expired ones are gone, so the count never exceeds the retention.

use std::time::Duration;

use cro_provider_api::ResourceKind;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, PostParams},
};

use super::kinds::{ResourceCr, SnapshotCr};
use crate::{
    api::{PostgresSnapshot, RedisSnapshot, SnapshotSpec},
    reconcile::{Context, Error},
};

/// Labels of a scheduled snapshot CR: whose schedule (by UID, as names can
/// outgrow a label value) and which period (its start, Unix seconds).
pub const SCHEDULED_FOR_LABEL: &str = "integreatly.org/scheduled-for-uid";
pub const PERIOD_LABEL: &str = "integreatly.org/snapshot-period";
/// The parent's name, when it fits in a label value (63 characters).
pub const PARENT_LABEL: &str = "integreatly.org/snapshot-of";

/// How long to wait for expired snapshots to be gone before the next.
const DELETION_POLL: Duration = Duration::from_secs(5);

/// A scheduled snapshot CR as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Existing {
    pub name: String,
    /// Start of its period, Unix seconds.
    pub period: i64,
    /// Being deleted (its cloud snapshot goes first).
    pub terminating: bool,
}

/// What to do now, and when to look again.
#[derive(Debug, PartialEq, Eq)]
pub struct Decision {
    pub delete: Vec<String>,
    /// The period (start, Unix seconds) to take a snapshot for now.
    pub create: Option<i64>,
    pub again_in: Duration,
}

/// The schedule's next step at `now` (Unix seconds) for a snapshot every
/// `every` seconds, keeping those of the last `keep` seconds (all when
/// `None`).
pub fn decide(now: i64, every: u64, keep: Option<u64>, existing: &[Existing]) -> Decision {
    let every = every.max(1) as i64;
    let current = now.div_euclid(every) * every;
    // Periods kept, the current one included; at least the current one.
    let kept = keep.map(|k| (k as i64).div_euclid(every).max(1));
    let expired = |period: i64| kept.is_some_and(|n| period <= current - n * every);
    let delete = existing
        .iter()
        .filter(|e| expired(e.period) && !e.terminating)
        .map(|e| e.name.clone())
        .collect();
    let taken = existing.iter().any(|e| e.period == current);
    let expiring = existing.iter().any(|e| expired(e.period));
    let next_period = Duration::from_secs((current + every - now).max(1) as u64);
    match (taken, expiring) {
        (true, _) => Decision {
            delete,
            create: None,
            again_in: next_period,
        },
        (false, true) => Decision {
            delete,
            create: None,
            again_in: DELETION_POLL,
        },
        (false, false) => Decision {
            delete,
            create: Some(current),
            again_in: next_period,
        },
    }
}

/// Seconds between `cr`'s scheduled snapshots; `None` without a schedule
/// (or for a kind that has no snapshots).
pub fn frequency<K: ResourceCr>(cr: &K) -> Result<Option<u64>, Error> {
    if !matches!(K::KIND, ResourceKind::Postgres | ResourceKind::Redis) {
        return Ok(None);
    }
    Ok((cr.spec().snapshot_frequency.as_ref()).and_then(crate::api::Duration::seconds))
}

/// Takes and prunes `cr`'s scheduled snapshots, one every `every` seconds;
/// when to look again.
pub async fn run<K: ResourceCr>(cr: &K, ctx: &Context, every: u64) -> Result<Duration, Error> {
    match K::KIND {
        ResourceKind::Postgres => run_as::<K, PostgresSnapshot>(cr, ctx, every).await,
        ResourceKind::Redis => run_as::<K, RedisSnapshot>(cr, ctx, every).await,
        ResourceKind::BlobStorage | ResourceKind::Smtp => Err(Error::Internal(format!(
            "{} has no snapshot kind to schedule",
            K::kind(&())
        ))),
    }
}

/// [`run`] with `S`, the snapshot kind of `K`.
async fn run_as<K: ResourceCr, S: SnapshotCr>(
    cr: &K,
    ctx: &Context,
    every: u64,
) -> Result<Duration, Error> {
    let kind = S::kind(&());
    let keep = (cr.spec().snapshot_retention.as_ref()).and_then(crate::api::Duration::seconds);
    let ns = cr.namespace().unwrap_or_default();
    let uid = cr.meta().uid.clone().unwrap_or_default();
    let api: Api<S> = Api::namespaced(ctx.client.clone(), &ns);
    let existing = existing(&api, &uid, &ns).await?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let decision = decide(now, every, keep, &existing);
    for name in &decision.delete {
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                return Err(Error::kube(format!("deleting expired {kind} {ns}/{name}"))(
                    e,
                ));
            }
        }
    }
    if let Some(period) = decision.create {
        let object: S = snapshot_object(cr, period);
        match api.create(&PostParams::default(), &object).await {
            Ok(_) => {}
            // Another reconcile took this period's snapshot: one it is.
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => {
                return Err(Error::kube(format!(
                    "creating the scheduled {kind} of {ns}/{}",
                    cr.name_any()
                ))(e));
            }
        }
    }
    Ok(decision.again_in)
}

/// The scheduled snapshots of the CR `uid` that exist in `ns`.
async fn existing<S: SnapshotCr>(
    api: &Api<S>,
    uid: &str,
    ns: &str,
) -> Result<Vec<Existing>, Error> {
    let scheduled = ListParams::default().labels(&format!("{SCHEDULED_FOR_LABEL}={uid}"));
    let listed = api.list(&scheduled).await.map_err(Error::kube(format!(
        "listing the scheduled {}s in {ns}",
        S::kind(&())
    )))?;
    let existing = listed.items.iter().filter_map(|o| {
        Some(Existing {
            name: o.name_any(),
            period: o.labels().get(PERIOD_LABEL)?.parse().ok()?,
            terminating: o.meta().deletion_timestamp.is_some(),
        })
    });
    Ok(existing.collect())
}

/// How far the API server's clock may be behind the operator's when it
/// stamps a scheduled snapshot's creation.
const CLOCK_SKEW: i64 = 60;

/// Whether `snap` is the snapshot `parent`'s schedule made for a period:
/// the scheduler's labels with the parent's UID, the name it gives that
/// period, and made during it. Labels and names are anyone's to write, so
/// all three are checked: a copy of them counts as scheduled only at one
/// per period at the schedule's pace, which the tier already bounds
/// (`minSnapshotFrequency`), never as a way past `maxManualSnapshots`.
pub fn made_by_schedule<K: ResourceCr, S: SnapshotCr>(snap: &S, parent: &K) -> bool {
    let Ok(Some(every)) = frequency(parent) else {
        return false;
    };
    let labels = snap.labels();
    let parent_uid = parent.meta().uid.as_deref().unwrap_or_default();
    let created = (snap.meta().creation_timestamp.as_ref()).map(|t| t.0.as_second());
    let period = labels.get(PERIOD_LABEL).and_then(|p| p.parse::<i64>().ok());
    let (Some(created), Some(period)) = (created, period) else {
        return false;
    };
    let every = every.max(1) as i64;
    labels.get(SCHEDULED_FOR_LABEL).map(String::as_str) == Some(parent_uid)
        && period.rem_euclid(every) == 0
        && snap.name_any() == scheduled_name(&parent.name_any(), period)
        && (period - CLOCK_SKEW..period + every + CLOCK_SKEW).contains(&created)
}

/// The name of the scheduled snapshot of `parent` for `period`. Names may
/// be 253 characters; the suffix takes at most 21.
fn scheduled_name(parent: &str, period: i64) -> String {
    let stem: String = parent.chars().take(230).collect();
    format!("{stem}-{period}")
}

/// The snapshot CR of `period`, owned by `cr` (not as controller, so it is
/// deleted with `cr` and its cloud snapshot follows its own finalizer).
fn snapshot_object<K: ResourceCr, S: SnapshotCr>(cr: &K, period: i64) -> S {
    let parent = cr.name_any();
    let mut labels = std::collections::BTreeMap::from([
        (
            SCHEDULED_FOR_LABEL.to_string(),
            cr.meta().uid.clone().unwrap_or_default(),
        ),
        (PERIOD_LABEL.to_string(), period.to_string()),
    ]);
    if parent.len() <= 63 {
        labels.insert(PARENT_LABEL.to_string(), parent.clone());
    }
    let owner = cr.controller_owner_ref(&()).map(|mut o| {
        o.controller = None;
        o.block_owner_deletion = None;
        o
    });
    let name = scheduled_name(&parent, period);
    let spec = SnapshotSpec {
        resource_name: parent,
        skip_delete: false,
    };
    let mut object = S::new(&name, spec);
    object.meta_mut().labels = Some(labels);
    object.meta_mut().owner_references = owner.map(|o| vec![o]);
    object
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Postgres;
    use serde_json::json;

    fn parent(frequency: Option<&str>) -> Postgres {
        serde_json::from_value(json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres",
            "metadata": {"name": "db", "namespace": "app", "uid": "p1"},
            "spec": {"type": "managed", "tier": "development", "secretRef": {"name": "s"}, "snapshotFrequency": frequency}}))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A snapshot CR labelled for `uid` and `period`, created at `created`.
    fn labelled(name: &str, uid: &str, period: i64, created: &str) -> PostgresSnapshot {
        serde_json::from_value(
            json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "PostgresSnapshot",
            "metadata": {"name": name, "namespace": "app", "creationTimestamp": created,
                "labels": {SCHEDULED_FOR_LABEL: uid, PERIOD_LABEL: period.to_string()}},
            "spec": {"resourceName": "db"}}),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_copy_of_the_schedules_labels_counts_only_as_the_schedule_would_take_it() {
        let hourly = parent(Some("1h"));
        // 01:01:40, in the period that starts at 01:00 (3600).
        let during = "1970-01-01T01:01:40Z";
        assert!(made_by_schedule(
            &labelled("db-3600", "p1", 3600, during),
            &hourly
        ));
        // Another parent's UID, another name, a period not yet begun or
        // long past, a period off the schedule, or no schedule at all.
        assert!(!made_by_schedule(
            &labelled("db-3600", "p2", 3600, during),
            &hourly
        ));
        assert!(!made_by_schedule(
            &labelled("mine", "p1", 3600, during),
            &hourly
        ));
        assert!(!made_by_schedule(
            &labelled("db-7200", "p1", 7200, during),
            &hourly
        ));
        assert!(!made_by_schedule(
            &labelled("db-0", "p1", 0, during),
            &hourly
        ));
        assert!(!made_by_schedule(
            &labelled("db-3660", "p1", 3660, during),
            &hourly
        ));
        let unscheduled = parent(None);
        assert!(!made_by_schedule(
            &labelled("db-3600", "p1", 3600, during),
            &unscheduled
        ));
    }

    fn at(name: &str, period: i64) -> Existing {
        Existing {
            name: name.into(),
            period,
            terminating: false,
        }
    }

    #[test]
    fn the_first_snapshot_is_taken_at_once_and_the_next_at_the_period() {
        let d = decide(130, 60, None, &[]);
        assert_eq!(d.create, Some(120));
        assert_eq!(d.again_in, Duration::from_secs(50));
        let d = decide(150, 60, None, &[at("s-120", 120)]);
        assert_eq!((d.create, d.again_in), (None, Duration::from_secs(30)));
        assert_eq!(decide(180, 60, None, &[at("s-120", 120)]).create, Some(180));
    }

    #[test]
    fn retention_keeps_that_many_periods_and_deletes_before_it_takes() {
        // One-minute frequency, three-minute retention: at most three.
        let existing = [at("a", 0), at("b", 60), at("c", 120)];
        let d = decide(185, 60, Some(180), &existing);
        assert_eq!(d.delete, ["a"]);
        assert_eq!(d.create, None, "the new one waits for the expired one");
        assert_eq!(d.again_in, DELETION_POLL);
        let gone = [at("b", 60), at("c", 120)];
        let d = decide(186, 60, Some(180), &gone);
        assert_eq!((d.delete.len(), d.create), (0, Some(180)));
    }

    #[test]
    fn a_terminating_snapshot_is_not_deleted_again_but_still_waited_for() {
        let mut old = at("a", 0);
        old.terminating = true;
        let d = decide(185, 60, Some(180), &[old, at("b", 60), at("c", 120)]);
        assert!(d.delete.is_empty());
        assert_eq!((d.create, d.again_in), (None, DELETION_POLL));
    }

    #[test]
    fn a_retention_shorter_than_the_frequency_keeps_the_current_one() {
        let d = decide(125, 60, Some(30), &[at("a", 60)]);
        assert_eq!(d.delete, ["a"]);
        assert_eq!(decide(125, 60, Some(30), &[at("b", 120)]).delete.len(), 0);
    }
}
