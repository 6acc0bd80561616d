//! The shape every AWS decide step shares: the gate a CR's spec sets for
//! disruptive changes, how changes split into what to apply now and what
//! stays pending, and the "created once, now gone" report.

use std::collections::BTreeMap;

use cro_provider_api::{
    Adoption, Change, ChangePolicy, ResourceRequest, Timing, cloud_identifier, plan_hash,
};

/// What the CR allows for disruptive changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gate {
    /// `spec.maintenanceWindow`: request them now, for the cloud to apply
    /// in its next maintenance window (unless `apply_immediately`).
    pub maintenance_window: bool,
    /// `spec.applyImmediately`: apply requested changes at once.
    pub apply_immediately: bool,
    /// The tier's `changePolicy`.
    pub policy: ChangePolicy,
    /// Under `Plan`: the plan hash a person approved.
    pub approved: Option<String>,
    /// The resource changed: the plan hash is bound to it.
    pub identifier: String,
}

impl Gate {
    /// The gate the request's options (the CR's spec) set.
    pub fn of(req: &cro_provider_api::ResourceRequest) -> Self {
        let options = &req.options;
        Gate {
            maintenance_window: options.maintenance_window,
            apply_immediately: options.apply_immediately,
            policy: options.change_policy,
            approved: options.approved_plan.clone(),
            identifier: req.identifier.clone(),
        }
    }
}

/// A field a service compares with the tier and changes, by its AWS API
/// name: the request that changes it is chosen by an exhaustive match on
/// the field, never by parsing the name back.
pub trait Field: Copy + std::fmt::Debug + PartialEq {
    /// Its AWS API name, as `status.pendingChanges` shows it.
    fn name(self) -> &'static str;
}

/// A difference in one of a service's fields: what status shows of it
/// and the field that requests it.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference<F> {
    pub field: F,
    pub change: Change,
}

/// A difference in `field` from `current` to `desired`.
pub fn difference<F: Field>(
    field: F,
    current: impl ToString,
    desired: impl ToString,
    timing: Timing,
    restarts: bool,
) -> Difference<F> {
    let change = change(field.name(), current, desired, timing, restarts);
    Difference { field, change }
}

/// What status shows of `differences`.
pub fn changes<F>(differences: &[Difference<F>]) -> Vec<Change> {
    differences.iter().map(|d| d.change.clone()).collect()
}

/// Differences split by what happens to them.
#[derive(Clone, Debug, PartialEq)]
pub struct Split<F> {
    /// Request these now.
    pub apply: Vec<Difference<F>>,
    /// With the cloud's `ApplyImmediately`: only when the CR asked for it.
    /// AWS then applies *every* modification pending on the resource at
    /// once, including ones queued earlier for the maintenance window.
    pub immediately: bool,
    /// Reported, not requested (gated, scheduled, or never).
    pub pending: Vec<Change>,
}

impl<F> Default for Split<F> {
    fn default() -> Self {
        Split {
            apply: Vec::new(),
            immediately: false,
            pending: Vec::new(),
        }
    }
}

impl<F: Field> Split<F> {
    /// `call` with each field to request now set on it by `set`, the
    /// service's setter for each of its fields (an exhaustive match).
    pub fn set_on<C>(&self, call: C, set: impl Fn(C, F) -> C) -> C {
        self.apply.iter().fold(call, |call, d| set(call, d.field))
    }
}

/// Under the `Automatic` policy, the Go operator's gate
/// (`if maintenanceWindow { buildRDSUpdateStrategy … }` in
/// provider_postgres.go, `buildElasticacheUpdateStrategy`): nothing is
/// modified without `spec.maintenanceWindow`; disruptive changes are then
/// requested for the cloud's maintenance window, and `spec.applyImmediately`
/// (read only with it) sends `ApplyImmediately`. Changes AWS makes online
/// whatever `ApplyImmediately` says (`Timing::Online`) are requested
/// without it, so nothing queued is pulled forward; under `Online` they
/// are requested at once, window or not. Under `Plan`, nothing is applied
/// until a person approves exactly these changes by their hash; then every
/// change that can be made is made at once.
pub fn split<F: Field>(differences: Vec<Difference<F>>, gate: &Gate) -> Split<F> {
    if gate.policy == ChangePolicy::Plan {
        let hash = plan_hash(&gate.identifier, &changes(&differences));
        let approved = gate.approved.as_deref() == Some(hash.as_str());
        let (apply, pending): (Vec<_>, Vec<_>) = differences
            .into_iter()
            .partition(|d| approved && !matches!(d.change.timing, Timing::Never(_)));
        return Split {
            immediately: !apply.is_empty(),
            apply: apply.into_iter().map(made_online).collect(),
            pending: pending.into_iter().map(|d| d.change).collect(),
        };
    }
    let mut out = Split::default();
    for d in differences {
        match d.change.timing {
            Timing::Now => out.apply.push(d),
            Timing::Online if gate.maintenance_window || gate.policy == ChangePolicy::Online => {
                out.apply.push(made_online(d))
            }
            Timing::MaintenanceWindow if gate.maintenance_window => {
                out.immediately |= gate.apply_immediately;
                out.apply.push(d);
            }
            _ => out.pending.push(d.change),
        }
    }
    out
}

/// A change requested now that AWS makes at once: the resource modifies.
fn made_online<F>(mut d: Difference<F>) -> Difference<F> {
    if d.change.timing == Timing::Online {
        d.change.timing = Timing::Now;
    }
    d
}

/// Where a resource stands once the changes of `split` were requested.
#[derive(Debug, PartialEq)]
pub enum Settled {
    /// Being applied now (online changes, or `ApplyImmediately`): the
    /// resource is modifying; these are the changes.
    Modifying(String),
    /// Usable; what still differs (requested ones now scheduled for the
    /// maintenance window).
    Usable(Vec<Change>),
}

pub fn settle<F>(split: Split<F>) -> Settled {
    let now = |c: &Change| split.immediately || c.timing == Timing::Now;
    let applied: Vec<Change> = split.apply.into_iter().map(|d| d.change).collect();
    if applied.iter().any(now) {
        let list: Vec<String> = (applied.iter().filter(|c| now(c)))
            .map(|c| format!("{} {} -> {}", c.field, c.current, c.desired))
            .collect();
        return Settled::Modifying(list.join(", "));
    }
    let mut pending = split.pending;
    pending.extend(applied.into_iter().map(|c| Change {
        timing: Timing::Scheduled,
        ..c
    }));
    Settled::Usable(pending)
}

/// Whether a resource found under the CR's identifier is this CR's, and
/// not another CR's by its tags (see [`another_crs`]): it carries this
/// cluster's owner tag, or it carries no owner tag at all (the Go operator
/// tags after creating, and its IAM policy may not let the tags be read)
/// and its identifier is both the one recorded on the CR and the one the
/// Go operator computes for this CR in this cluster. That identifier names
/// the CR's namespace and name, so an annotation (which a tenant writes)
/// cannot reach another's resource with it. A resource another cluster
/// tagged is never ours without a person's approval.
pub fn ours(req: &ResourceRequest, live_tags: &BTreeMap<String, String>) -> bool {
    let (key, cluster) = &req.owner_tag;
    if another_crs(req, live_tags).is_some() {
        return false;
    }
    match live_tags.get(key) {
        Some(tagged) => tagged == cluster,
        None => {
            let recorded = req.recorded_identifier.as_deref() == Some(req.identifier.as_str());
            // AWS keeps identifiers lowercase.
            let computed = cloud_identifier(cluster, &req.namespace, &req.name);
            recorded && req.identifier.eq_ignore_ascii_case(&computed)
        }
    }
}

/// Which other CR of this cluster a resource was made for, by its tags: a
/// namespace binding (written on everything this operator makes) naming
/// another namespace, or, on a resource made before that tag (by the Go
/// operator or an earlier release), a `resource-name` naming another CR.
/// The Go operator's identifiers drop separators, so `team-a/db` and
/// `teama/db` share one; neither the identifier nor the annotation (which
/// a tenant can write) proves whose a resource is, the tags do.
pub fn another_crs(req: &ResourceRequest, live_tags: &BTreeMap<String, String>) -> Option<String> {
    let (owner_key, cluster) = &req.owner_tag;
    if live_tags.get(owner_key) != Some(cluster) {
        return None;
    }
    let (namespace_key, namespace) = &req.namespace_tag;
    if let Some(other) = live_tags.get(namespace_key) {
        // Never named: the message reaches a tenant who may not know it.
        return (other != namespace).then(|| "a CR of another namespace".to_string());
    }
    let name_key = &req.tag_keys.name;
    let name = req.tags.get(name_key)?;
    let other = live_tags.get(name_key)?;
    (other != name).then(|| "another CR (its resource-name tag names another)".to_string())
}

/// The message of a CR whose identifier names another CR's resource.
pub fn another_crs_message(what: &str, id: &str, owner: &str) -> String {
    format!(
        "{what} {id} was made for {owner} (its tags say so), so this CR neither uses, changes nor deletes it: remove this CR's resourceIdentifier annotation if it names {id} (the CR then gets an identifier of its own), or, if its tier pins the identifier (DBInstanceIdentifier, ReplicationGroupId, Bucket), use a tier that does not"
    )
}

/// For a resource someone else made: what adopting it would change (its
/// tags, then the tier's differences) and the hash a person approves it
/// with; `None` once it is this cluster's or the approval matches.
pub fn adoption(
    req: &ResourceRequest,
    live_tags: &BTreeMap<String, String>,
    drift: &[Change],
) -> Option<Adoption> {
    if ours(req, live_tags) {
        return None;
    }
    // Adopting binds it to this CR's namespace.
    let mut changes = tag_changes(&req.creation_tags(), live_tags);
    changes.extend(drift.iter().cloned());
    let hash = plan_hash(&req.identifier, &changes);
    (req.options.approved_adoption.as_deref() != Some(hash.as_str()))
        .then_some(Adoption { changes, hash })
}

/// The message of a CR whose resource someone else made.
pub fn unadopted_message(what: &str, id: &str) -> String {
    format!(
        "{what} {id} already exists and was not made by this cluster (it lacks this cluster's owner tag): it is neither changed nor deleted; see the Adopted condition for what adopting it would change, and annotate the CR with integreatly.org/adopt set to its hash to adopt it"
    )
}

/// The tags a resource lacks (or holds with another value), as changes.
pub fn tag_changes(
    want: &BTreeMap<String, String>,
    have: &BTreeMap<String, String>,
) -> Vec<Change> {
    (crate::tags::missing(want, have).iter())
        .map(|(k, v)| tag_change(k, v, have))
        .collect()
}

/// Setting tag `key` to `value` on a resource tagged `have`.
pub fn tag_change(key: &str, value: &str, have: &BTreeMap<String, String>) -> Change {
    let current = have.get(key).map_or("absent", String::as_str);
    change(&format!("tag {key}"), current, value, Timing::Now, false)
}

/// What `plan` shows for someone else's resource `what` `id`: what
/// adopting it would change, none of it made without the approval.
pub fn awaiting_adoption(what: &str, id: &str, adoption: &Adoption) -> Vec<Change> {
    (adoption.changes.iter())
        .map(|c| Change {
            timing: Timing::Never(unadopted_message(what, id)),
            ..c.clone()
        })
        .collect()
}

/// What `plan` shows for a resource that needs a person: `why`, reported.
pub fn reported(field: &str, current: &str, why: &str) -> Change {
    change(
        field,
        current,
        "reported",
        Timing::Never(why.to_string()),
        false,
    )
}

/// What `plan` shows for a resource that is not there: created, or (when
/// it was recorded) reported, never created again.
pub fn missing_resource(what: &str, recorded: Option<&str>) -> Change {
    match recorded {
        Some(_) => change(
            what,
            "vanished",
            "reported, not re-created",
            Timing::Never("it was created once and deleted outside the operator".into()),
            false,
        ),
        None => change(what, "absent", "created", Timing::Now, false),
    }
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

    /// Three fields of a service, for the tests.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum F {
        DeletionProtection,
        DBInstanceClass,
        EngineVersion,
    }

    impl Field for F {
        fn name(self) -> &'static str {
            match self {
                F::DeletionProtection => "DeletionProtection",
                F::DBInstanceClass => "DBInstanceClass",
                F::EngineVersion => "EngineVersion",
            }
        }
    }

    fn differences() -> Vec<Difference<F>> {
        vec![
            difference(F::DeletionProtection, false, true, Timing::Online, false),
            difference(
                F::DBInstanceClass,
                "db.t3.small",
                "db.m5.large",
                Timing::MaintenanceWindow,
                true,
            ),
            difference(
                F::EngineVersion,
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

    /// The fields `s` requests now, by name.
    fn applied(s: &Split<F>) -> Vec<&'static str> {
        s.apply.iter().map(|d| d.field.name()).collect()
    }

    /// The gate of a CR with `spec.maintenanceWindow` and `spec.applyImmediately`.
    fn gate(maintenance_window: bool, apply_immediately: bool) -> Gate {
        Gate {
            maintenance_window,
            apply_immediately,
            ..Gate::default()
        }
    }

    /// The request of CR `ns/name` in cluster `c1`, with the recorded identifier.
    fn request(ns: &str, name: &str, recorded: Option<&str>) -> ResourceRequest {
        let mut req =
            ResourceRequest::offline(cro_provider_api::ResourceKind::Postgres, Default::default());
        req.identifier = "c1teamadb".into();
        req.recorded_identifier = recorded.map(str::to_string);
        req.owner_tag = ("p/clusterID".into(), "c1".into());
        req.namespace_tag = ("p/resource-namespace".into(), ns.into());
        req.tag_keys = cro_provider_api::TagKeys::new("p/");
        req.namespace = ns.into();
        req.name = name.into();
        req.tags = crate::tags::map(&[("p/clusterID", "c1"), ("p/resource-name", name)])
            .into_iter()
            .collect();
        req
    }

    #[test]
    fn only_the_prefixed_name_tag_names_the_cr() {
        // An Infrastructure tag ending like the identity tag, sorted first.
        let mut req = request("teama", "db", None);
        req.tags.insert("a/resource-name".into(), "other".into());
        let live = crate::tags::map(&[
            ("p/clusterID", "c1"),
            ("p/resource-name", "db"),
            ("a/resource-name", "x"),
        ]);
        assert_eq!(another_crs(&req, &live), None);
        let theirs = crate::tags::map(&[("p/clusterID", "c1"), ("p/resource-name", "db2")]);
        assert!(another_crs(&req, &theirs).is_some());
    }

    #[test]
    fn a_resource_is_a_crs_own_only_when_its_tags_do_not_name_another() {
        let tags = |pairs: &[(&str, &str)]| crate::tags::map(pairs);
        let bound = tags(&[
            ("p/clusterID", "c1"),
            ("p/resource-name", "db"),
            ("p/resource-namespace", "teama"),
        ]);
        // `team-a/db` and `teama/db` share the identifier; the binding tells them apart,
        // and an annotation (anyone may write it) changes nothing.
        for recorded in [None, Some("c1teamadb")] {
            assert!(ours(&request("teama", "db", recorded), &bound));
            let thief = request("team-a", "db", recorded);
            assert!(!ours(&thief, &bound));
            assert_eq!(
                another_crs(&thief, &bound).as_deref(),
                Some("a CR of another namespace")
            );
        }
        // Made before the binding (the Go operator): its resource-name tells
        // `team/adb` from `teama/db`, nothing tells `team-a/db`.
        let go = tags(&[("p/clusterID", "c1"), ("p/resource-name", "db")]);
        assert!(ours(&request("teama", "db", Some("c1teamadb")), &go));
        assert_eq!(
            another_crs(&request("team", "adb", None), &go).as_deref(),
            Some("another CR (its resource-name tag names another)")
        );
        // Another cluster's resource is not another CR's: it is adopted or
        // not, whatever the annotation says.
        let foreign = tags(&[("p/clusterID", "c2"), ("p/resource-namespace", "x")]);
        assert_eq!(another_crs(&request("teama", "db", None), &foreign), None);
        assert!(!ours(&request("teama", "db", None), &foreign));
        assert!(!ours(&request("teama", "db", Some("c1teamadb")), &foreign));
        // Untagged (tags not written yet, or not readable): only when the
        // recorded identifier is the CR's own computed one.
        let untagged = BTreeMap::new();
        assert!(ours(&request("teama", "db", Some("c1teamadb")), &untagged));
        assert!(!ours(&request("teama", "db", None), &untagged));
        let mut pinned = request("teama", "db", Some("someone-elses-db"));
        pinned.identifier = "someone-elses-db".into();
        assert!(
            !ours(&pinned, &untagged),
            "an annotation reached an untagged resource"
        );
        // Adopting binds the resource to the CR's namespace.
        let adoption = adoption(&request("teama", "db", None), &foreign, &[]);
        let fields: Vec<String> = adoption
            .map(|a| a.changes.into_iter().map(|c| c.field).collect())
            .unwrap_or_default();
        assert!(
            fields.iter().any(|f| f.contains("p/resource-namespace")),
            "{fields:?}"
        );
    }

    #[test]
    fn the_gate_is_the_go_operators() {
        let (safe, disruptive, never) = ("DeletionProtection", "DBInstanceClass", "EngineVersion");
        // Row: gate (maintenanceWindow, applyImmediately) -> (applied,
        // ApplyImmediately sent, pending). Nothing is modified without the
        // window, online or not; applyImmediately alone is ignored, as the
        // Go operator reads it only with the window; online changes never
        // carry ApplyImmediately on their own.
        let online = |maintenance_window| Gate {
            policy: ChangePolicy::Online,
            ..gate(maintenance_window, false)
        };
        let rows = [
            (
                gate(false, false),
                vec![],
                false,
                vec![safe, disruptive, never],
            ),
            (
                gate(false, true),
                vec![],
                false,
                vec![safe, disruptive, never],
            ),
            (online(false), vec![safe], false, vec![disruptive, never]),
            (online(true), vec![safe, disruptive], false, vec![never]),
            (
                gate(true, false),
                vec![safe, disruptive],
                false,
                vec![never],
            ),
            (gate(true, true), vec![safe, disruptive], true, vec![never]),
        ];
        for (gate, applied, immediately, pending) in rows {
            let s = split(differences(), &gate);
            assert_eq!(self::applied(&s), applied, "{gate:?}");
            assert_eq!(s.immediately, immediately, "{gate:?}");
            assert_eq!(fields(&s.pending), pending, "{gate:?}");
        }
        let online_only = vec![differences().remove(0)];
        assert!(!split(online_only.clone(), &gate(true, false)).immediately);
        // Made at once, so the resource reads as modifying.
        assert_eq!(
            split(online_only, &online(false)).apply[0].change.timing,
            Timing::Now
        );
        // A change safe at any time is no modification: it never waits.
        let now = difference(F::DeletionProtection, false, true, Timing::Now, false);
        assert_eq!(split(vec![now], &gate(false, false)).apply.len(), 1);
    }

    #[test]
    fn requested_changes_settle_as_modifying_or_scheduled() {
        let window_only: Vec<_> = differences().into_iter().skip(1).collect();
        let Settled::Usable(pending) = settle(split(window_only, &gate(true, false))) else {
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
                ("DBInstanceClass", Timing::Scheduled)
            ]
        );
        // Online changes are made at once, ApplyImmediately or not.
        assert!(
            matches!(settle(split(differences(), &gate(true, false))), Settled::Modifying(m) if m == "DeletionProtection false -> true")
        );
        assert!(
            matches!(settle(split(differences(), &gate(true, true))), Settled::Modifying(m) if m.contains("DBInstanceClass db.t3.small -> db.m5.large"))
        );
        assert_eq!(
            settle(split::<F>(Vec::new(), &Gate::default())),
            Settled::Usable(Vec::new())
        );
    }

    #[test]
    fn a_plan_tier_applies_nothing_until_its_hash_is_approved() {
        let hash = plan_hash("db", &changes(&differences()));
        let plan = |approved: Option<&str>, window: bool| Gate {
            policy: ChangePolicy::Plan,
            approved: approved.map(str::to_string),
            maintenance_window: window,
            identifier: "db".into(),
            ..Gate::default()
        };
        // Another resource's approval of the same changes approves nothing.
        let elsewhere = plan_hash("another-db", &changes(&differences()));
        assert!(
            split(differences(), &plan(Some(&elsewhere), false))
                .apply
                .is_empty()
        );
        // Not approved, or approved with a stale hash: nothing, whatever
        // the CR's maintenance flags say.
        for gate in [plan(None, true), plan(Some("0123456789"), false)] {
            let s = split(differences(), &gate);
            assert!(s.apply.is_empty(), "{gate:?}");
            assert_eq!(
                fields(&s.pending),
                ["DeletionProtection", "DBInstanceClass", "EngineVersion"]
            );
        }
        let s = split(differences(), &plan(Some(&hash), false));
        assert_eq!(applied(&s), ["DeletionProtection", "DBInstanceClass"]);
        // The call carries exactly the fields requested, in their order.
        let call = s.set_on(Vec::new(), |mut call, field| {
            call.push(field);
            call
        });
        assert_eq!(call, [F::DeletionProtection, F::DBInstanceClass]);
        assert!(s.immediately);
        assert_eq!(
            fields(&s.pending),
            ["EngineVersion"],
            "never is never, approved or not"
        );
    }

    #[test]
    fn nothing_to_change_splits_to_nothing() {
        assert_eq!(split::<F>(Vec::new(), &Gate::default()), Split::default());
    }
}
