//! Snapshots, written once for RDS and ElastiCache: a small
//! [`Snapshots`] trait per service finds, takes and deletes them, and
//! the steps over it are shared — manual snapshots (PostgresSnapshot,
//! RedisSnapshot), the final snapshot a deletion leaves, and tagging.

use std::collections::BTreeMap;

use cro_provider_api::{
    Deletion, IdentifierRules, Outcome, ProviderError, ResourceRequest, SnapshotRequest,
    Snapshotted,
};

use crate::{
    clients::Clients,
    errors::{Answer, Created, created_from, not_yet_visible, taken},
    tags::{self, Tagging},
};

/// A snapshot as found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Found {
    pub arn: String,
    pub status: String,
}

/// A service's snapshots: their calls among an account's clients, what
/// they are called in messages, and the rules of their identifiers (known
/// before any account is set up).
pub struct SnapshotsOf {
    pub calls: fn(&Clients) -> &dyn Snapshots,
    pub what: &'static str,
    pub rules: IdentifierRules,
}

/// What a service offers the shared steps.
#[async_trait::async_trait]
pub trait Snapshots: Tagging {
    async fn find_snapshot(&self, id: &str) -> Result<Option<Found>, ProviderError>;
    /// `Ok(None)`: the resource to snapshot does not exist.
    async fn create_snapshot(
        &self,
        resource: &str,
        id: &str,
        tags: &[(String, String)],
    ) -> Result<Option<Created>, ProviderError>;
    /// Succeeds when the snapshot is already gone.
    async fn delete_snapshot(&self, id: &str) -> Result<(), ProviderError>;
}

/// What a snapshot's state means (pure).
pub fn outcome(id: &str, found: &Found) -> Outcome<String> {
    match found.status.as_str() {
        "available" => Outcome::Ready(id.to_string()),
        "failed" => Outcome::Failed(format!(
            "snapshot {id} failed; delete this resource and create a new one to retry"
        )),
        other => Outcome::InProgress(format!("snapshot {id} is {other}")),
    }
}

/// Why the tags `live` do not show a resource made by this cluster for the
/// CR the namespace tag and `name` of `req` describe, if they do not: the
/// owner tag must be this cluster's, the namespace tag (which the Go
/// operator never wrote) absent or this CR's, and the `resource-name` tag
/// `name`. The message never names another namespace.
fn not_made_for(
    req: &SnapshotRequest,
    name: &str,
    live: &BTreeMap<String, String>,
) -> Option<String> {
    let keys = &req.tag_keys;
    let (owner_key, ns_key, name_key) = (&keys.owner, &keys.namespace, &keys.name);
    let (Some(cluster), Some(ns), true) = (
        req.tags.get(owner_key),
        req.tags.get(ns_key),
        req.tags.contains_key(name_key),
    ) else {
        return Some("the request carries no owner, namespace and name tags to check".into());
    };
    if live.get(owner_key) != Some(cluster) {
        return Some(format!(
            "it lacks this cluster's owner tag {owner_key}={cluster}"
        ));
    }
    if live.get(ns_key).is_some_and(|other| other != ns) {
        return Some(format!("its tag {ns_key} binds it to another namespace"));
    }
    match live.get(name_key) {
        Some(have) if have == name => None,
        _ => Some(format!("its tag {name_key} is not {name:?}")),
    }
}

/// Why the database `live` tags describe is not the parent of the snapshot
/// CR of `req`, if it is not (see [`not_made_for`]; the parent's name). A
/// database with no tags (the Go operator tags one only once it is
/// available, and its policy may not let the tags be read) is the parent's
/// under the identifier the parent recorded when that is also the one
/// computed for the parent, as [`crate::plan::ours`] takes it.
pub fn not_the_parents(req: &SnapshotRequest, live: &BTreeMap<String, String>) -> Option<String> {
    let recorded = req.resource_identifier.as_deref();
    if live.is_empty()
        && recorded.is_some_and(|id| id.eq_ignore_ascii_case(&req.resource_default_identifier))
    {
        return None;
    }
    not_made_for(req, &req.resource_name, live)
}

/// Why the snapshot `live` tags describe was not taken for the snapshot CR
/// of `req`, if it was not. This operator tags a snapshot with its CR's
/// name; the Go operator with the snapshot's own identifier
/// (`GetDefaultResourceTags(..., snapshotName, ...)` in
/// createPostgresSnapshot and createRedisSnapshot,
/// pkg/providers/aws/provider_postgressnapshot.go and
/// provider_redissnapshot.go), and never with a namespace. A Go snapshot
/// of an ElastiCache group may have gained the group's namespace tag since
/// (the group's tags go to its snapshots, see `snapshot_tags`): its
/// identifier as resource-name still makes it this CR's, in that
/// namespace only. And the Go operator re-tags every snapshot of an
/// instance or group with the parent's tags on each of its passes
/// (`TagRDSPostgres`, provider_postgres.go; `TagElasticacheNode`,
/// provider_redis.go), so after months its snapshots carry the parent CR's
/// name: found under the identifier this CR records, with this cluster's
/// tag and the parent's name, the snapshot is this CR's too.
pub fn not_this_snapshots(
    req: &SnapshotRequest,
    live: &BTreeMap<String, String>,
) -> Option<String> {
    let theirs = |name: &str| not_made_for(req, name, live);
    let own = match live.contains_key(&req.tag_keys.namespace) {
        true => theirs(&req.name).and_then(|why| theirs(&req.identifier).map(|_| why)),
        false => theirs(&req.identifier),
    };
    own.and_then(|why| theirs(&req.resource_name).map(|_| why))
}

/// Takes the snapshot `req.identifier` once, and reports its state. A
/// snapshot found under that identifier counts only when its tags say it
/// was taken for this CR. Otherwise the resource `source` (the identifier
/// the parent recorded, and its tags if it exists) is snapshotted, only
/// when its tags say it is the parent's: neither an identifier nor an
/// annotation, which a tenant may write, proves whose a resource is.
pub async fn take<S: Snapshots + ?Sized>(
    svc: &S,
    what: &str,
    req: &SnapshotRequest,
    source: Option<(&str, Option<BTreeMap<String, String>>)>,
) -> Result<Snapshotted, ProviderError> {
    let id = req.identifier.as_str();
    let waiting = |why: String| {
        Ok(Snapshotted {
            outcome: Outcome::InProgress(why),
        })
    };
    if let Some(found) = svc.find_snapshot(id).await? {
        // Tags that may not be read prove nothing either way: the
        // identifier is this CR's own (its status, which only an operator
        // writes, or one made from its UID).
        let live = svc.readable(&found.arn).await?;
        if let Some(why) = live.and_then(|live| not_this_snapshots(req, &live)) {
            return Err(ProviderError::permanent(format!(
                "snapshot {id} exists but was not taken for this resource ({why}): it is neither used nor deleted, nor deleted with this resource; delete this resource and create it again (a new one gets an identifier of its own)"
            )));
        }
        return Ok(Snapshotted {
            outcome: outcome(id, &found),
        });
    }
    let parent = &req.resource_name;
    let Some((source, source_tags)) = source else {
        return waiting(format!(
            "waiting for {parent:?} to record its cloud identifier (annotation resourceIdentifier, which the operator writes); the snapshot is taken then"
        ));
    };
    // Its CR is complete, so the resource is coming back (restored) or its
    // CR reports it vanished: wait either way.
    let absent = || {
        format!(
            "waiting for {what} {source} to exist; the snapshot {} is taken then",
            req.name
        )
    };
    let Some(source_tags) = source_tags else {
        return waiting(absent());
    };
    // The parent's own reconcile fails on such an annotation and says
    // what to do; the snapshot waits for the parent's own identifier.
    if let Some(why) = not_the_parents(req, &source_tags) {
        return waiting(format!(
            "{what} {source}, which {parent:?} records as its identifier, is not that resource's ({why}): nothing is snapshotted until {parent:?} records its own identifier (remove its annotation resourceIdentifier; the operator records its own again)"
        ));
    }
    let tags: Vec<(String, String)> = req.tags.clone().into_iter().collect();
    let outcome = match svc.create_snapshot(source, id, &tags).await? {
        Some(Created::Now) => Outcome::InProgress(format!("creating snapshot {id}")),
        Some(Created::Already) => {
            made_for_it(svc, req).await?;
            Outcome::InProgress(format!("creating snapshot {id}"))
        }
        None => Outcome::InProgress(absent()),
    };
    Ok(Snapshotted { outcome })
}

/// After a create met a snapshot of its name (a retry whose first
/// attempt's answer was lost): whether a fresh look finds it made for
/// this snapshot CR; an error says what else.
async fn made_for_it<S: Snapshots + ?Sized>(
    svc: &S,
    req: &SnapshotRequest,
) -> Result<(), ProviderError> {
    let id = req.identifier.as_str();
    let Some(found) = svc.find_snapshot(id).await? else {
        return Err(not_yet_visible("snapshot", id));
    };
    let live = svc.readable(&found.arn).await?;
    match live.and_then(|live| not_this_snapshots(req, &live)) {
        None => Ok(()),
        Some(_) => Err(taken("snapshot", id)),
    }
}

/// Refuses to restore `req` from the snapshot `id` unless its tags carry
/// this cluster's owner tag and bind it to no other namespace (the Go
/// operator's snapshots bind none; the snapshot CR that names them is in
/// this namespace, and only the operator writes its `status.snapshotID`).
/// A snapshot not found is left to the restore call, which says so.
pub async fn check_restorable<S: Snapshots + ?Sized>(
    svc: &S,
    req: &ResourceRequest,
    id: &str,
) -> Result<(), ProviderError> {
    let Some(found) = svc.find_snapshot(id).await? else {
        return Ok(());
    };
    let live = svc.tags(&found.arn).await?;
    let ((owner_key, cluster), (ns_key, ns)) = (&req.owner_tag, &req.namespace_tag);
    let foreign = live.get(owner_key) != Some(cluster);
    if foreign || live.get(ns_key).is_some_and(|have| have != ns) {
        return Err(ProviderError::permanent(format!(
            "snapshot {id} (spec.restoreFromSnapshot) was not taken by this cluster for this namespace (its tags {owner_key} and {ns_key} say so): nothing is restored from it; name a snapshot of this namespace"
        )));
    }
    Ok(())
}

/// Deletes the snapshot, unless its tags say it was not taken for this CR
/// (as [`take`] reads them): whatever identifier led here, a snapshot this
/// CR refused as another's (another cluster's, another namespace's or
/// another snapshot's) is kept, as the refusal promised.
pub async fn remove<S: Snapshots + ?Sized>(
    svc: &S,
    req: &SnapshotRequest,
) -> Result<Deletion, ProviderError> {
    let id = &req.identifier;
    let Some(found) = svc.find_snapshot(id).await? else {
        return Ok(Deletion::Done);
    };
    let live = svc.readable(&found.arn).await?;
    if let Some(why) = live.and_then(|live| not_this_snapshots(req, &live)) {
        return Ok(Deletion::Keep(format!(
            "snapshot {id} was not taken for this resource ({why}): it is left as it is"
        )));
    }
    svc.delete_snapshot(id).await?;
    Ok(Deletion::Done)
}

/// The final snapshot's identifier: the one the operator chose for this
/// deletion (unique to it), valid for the service's `rules`.
pub fn final_id(req: &ResourceRequest, rules: IdentifierRules) -> String {
    let id = req
        .final_snapshot_identifier
        .clone()
        .unwrap_or_else(|| format!("{}-final", req.identifier));
    rules.conform(&id)
}

/// The final snapshot a deletion left carries the resource's tags (copied
/// by AWS where it can; this covers the rest).
pub async fn tag_final<S: Snapshots + ?Sized>(
    svc: &S,
    id: &str,
    want: &BTreeMap<String, String>,
) -> Result<(), ProviderError> {
    match svc.find_snapshot(id).await? {
        Some(found) => tags::ensure(svc, &found.arn, want).await,
        None => Ok(()),
    }
}

/// `Snapshots` for a database SDK: RDS and ElastiCache find, take and
/// delete snapshots with the same three calls under their own names. A
/// table names them: the snapshot identifier's setter and the test of the
/// snapshot's not-found error (shared by the three calls); each call's
/// operation and SDK method; for `find`, the output's list and the
/// snapshot's ARN and status getters; for `create`, the source's setter and
/// the test of its not-found error.
macro_rules! snapshot_calls {
    ($client:ty {
        id: $id:ident, gone: $gone:ident,
        find: $find_op:literal $find:ident $items:ident => ($arn:ident, $status:ident),
        create: $create_op:literal $create:ident($source:ident), $no_source:ident,
        delete: $delete_op:literal $delete:ident,
    }) => {
        #[async_trait::async_trait]
        impl Snapshots for $client {
            async fn find_snapshot(&self, id: &str) -> Result<Option<Found>, ProviderError> {
                let sent = self.$find().$id(id).send().await;
                let out = sent.unless_missing(|e| e.$gone(), $find_op, id)?;
                Ok(out.and_then(|o| {
                    o.$items().first().map(|s| Found {
                        arn: s.$arn().unwrap_or_default().into(),
                        status: s.$status().unwrap_or("creating").into(),
                    })
                }))
            }

            async fn create_snapshot(
                &self,
                resource: &str,
                id: &str,
                tags: &[(String, String)],
            ) -> Result<Option<Created>, ProviderError> {
                let call = self.$create().$source(resource).$id(id);
                let sent = call.set_tags(Some(tags::sdk(tags))).send().await;
                created_from(sent, |e| e.$no_source(), $create_op, id)
            }

            async fn delete_snapshot(&self, id: &str) -> Result<(), ProviderError> {
                let sent = self.$delete().$id(id).send().await;
                sent.unless_missing(|e| e.$gone(), $delete_op, id)?;
                Ok(())
            }
        }
    };
}

snapshot_calls!(aws_sdk_rds::Client {
    id: db_snapshot_identifier, gone: is_db_snapshot_not_found_fault,
    find: "rds:DescribeDBSnapshots" describe_db_snapshots db_snapshots => (db_snapshot_arn, status),
    create: "rds:CreateDBSnapshot" create_db_snapshot(db_instance_identifier),
        is_db_instance_not_found_fault,
    delete: "rds:DeleteDBSnapshot" delete_db_snapshot,
});

snapshot_calls!(aws_sdk_elasticache::Client {
    id: snapshot_name, gone: is_snapshot_not_found_fault,
    find: "elasticache:DescribeSnapshots" describe_snapshots snapshots => (arn, snapshot_status),
    create: "elasticache:CreateSnapshot" create_snapshot(replication_group_id),
        is_replication_group_not_found_fault,
    delete: "elasticache:DeleteSnapshot" delete_snapshot,
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_state_maps_to_an_outcome() {
        let found = |status: &str| Found {
            arn: "a".into(),
            status: status.into(),
        };
        assert_eq!(
            outcome("s", &found("available")),
            Outcome::Ready("s".into())
        );
        assert!(
            matches!(outcome("s", &found("creating")), Outcome::InProgress(m) if m.contains("creating"))
        );
        assert!(matches!(outcome("s", &found("failed")), Outcome::Failed(_)));
    }

    fn request() -> SnapshotRequest {
        let tags = [
            ("integreatly.org/clusterID", "testcluster"),
            ("integreatly.org/resource-name", "snap"),
            ("integreatly.org/resource-namespace", "app"),
            ("integreatly.org/resource-type", "managed"),
        ];
        SnapshotRequest {
            tag_keys: cro_provider_api::TagKeys::new("integreatly.org/"),
            kind: cro_provider_api::ResourceKind::Postgres,
            namespace: "app".into(),
            name: "snap".into(),
            owner: cro_provider_api::Owner {
                api_version: "integreatly.org/v1alpha1".into(),
                kind: "PostgresSnapshot".into(),
                name: "snap".into(),
                uid: "uid".into(),
            },
            resource_name: "staging-db".into(),
            resource_identifier: Some("testclusterappstagingdb".into()),
            resource_default_identifier: "testclusterappstagingdb".into(),
            resource_separate_identifier: "testclusterappstagingdb-abcdefgh".into(),
            identifier: "testclusterappsnap2026112619000000000-abcd1234".into(),
            strategy: serde_json::Value::Null,
            tags: tags.map(|(k, v)| (k.to_string(), v.to_string())).into(),
        }
    }

    fn tagged(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        (pairs.iter())
            .map(|(k, v)| (format!("integreatly.org/{k}"), v.to_string()))
            .collect()
    }

    #[test]
    fn only_the_parents_own_database_is_snapshotted() {
        let req = request();
        // Made by this operator for app/staging-db.
        let own = tagged(&[
            ("clusterID", "testcluster"),
            ("resource-namespace", "app"),
            ("resource-name", "staging-db"),
        ]);
        assert_eq!(not_the_parents(&req, &own), None);
        // app-staging/db shares the Go naming's identifier: its tags say whose.
        let other = tagged(&[
            ("clusterID", "testcluster"),
            ("resource-namespace", "app-staging"),
            ("resource-name", "db"),
        ]);
        let why = not_the_parents(&req, &other).unwrap_or_default();
        assert!(
            why.contains("another namespace") && !why.contains("app-staging"),
            "{why}"
        );
        // The Go operator's (no namespace tag): by the CR's name.
        let go = tagged(&[
            ("clusterID", "testcluster"),
            ("resource-name", "staging-db"),
        ]);
        assert_eq!(not_the_parents(&req, &go), None);
        let go_other = tagged(&[("clusterID", "testcluster"), ("resource-name", "db")]);
        assert!(not_the_parents(&req, &go_other).is_some());
        // Another cluster's, or nobody's.
        let foreign = tagged(&[
            ("clusterID", "other"),
            ("resource-namespace", "app"),
            ("resource-name", "staging-db"),
        ]);
        assert!(not_the_parents(&req, &foreign).is_some());
        // Untagged, or its tags may not be read (the Go operator's policy):
        // the parent's only under the identifier it recorded when that is
        // also the one computed for it, as `plan::ours` takes it.
        assert_eq!(not_the_parents(&req, &BTreeMap::new()), None);
        let annotated = SnapshotRequest {
            resource_identifier: Some("testclusterteamsdb".into()),
            ..request()
        };
        assert!(not_the_parents(&annotated, &BTreeMap::new()).is_some());
        let unrecorded = SnapshotRequest {
            resource_identifier: None,
            ..request()
        };
        assert!(not_the_parents(&unrecorded, &BTreeMap::new()).is_some());
    }

    #[test]
    fn a_found_snapshot_counts_only_when_taken_for_this_cr() {
        let req = request();
        let own = tagged(&[
            ("clusterID", "testcluster"),
            ("resource-namespace", "app"),
            ("resource-name", "snap"),
        ]);
        assert_eq!(not_this_snapshots(&req, &own), None);
        let other = tagged(&[
            ("clusterID", "testcluster"),
            ("resource-namespace", "app-x"),
            ("resource-name", "snap"),
        ]);
        assert!(not_this_snapshots(&req, &other).is_some());
        let other_cr = tagged(&[
            ("clusterID", "testcluster"),
            ("resource-namespace", "app"),
            ("resource-name", "snap2"),
        ]);
        assert!(not_this_snapshots(&req, &other_cr).is_some());
        // The Go operator's: resource-name is the snapshot's identifier.
        let go = tagged(&[
            ("clusterID", "testcluster"),
            ("resource-name", &req.identifier),
            ("resource-type", "managed"),
        ]);
        assert_eq!(not_this_snapshots(&req, &go), None);
        // ... and once its group's tags (the namespace's) reached it.
        let go_then_grouped = tagged(&[
            ("clusterID", "testcluster"),
            ("resource-name", &req.identifier),
            ("resource-namespace", "app"),
        ]);
        assert_eq!(not_this_snapshots(&req, &go_then_grouped), None);
        let go_elsewhere = tagged(&[
            ("clusterID", "testcluster"),
            ("resource-name", &req.identifier),
            ("resource-namespace", "app-x"),
        ]);
        assert!(not_this_snapshots(&req, &go_elsewhere).is_some());
        let go_by_name = tagged(&[("clusterID", "testcluster"), ("resource-name", "snap")]);
        assert!(not_this_snapshots(&req, &go_by_name).is_some());
        // Re-tagged by the Go operator with its instance's tags.
        let go_retagged = tagged(&[
            ("clusterID", "testcluster"),
            ("resource-name", &req.resource_name),
            ("resource-type", "managed"),
        ]);
        assert_eq!(not_this_snapshots(&req, &go_retagged), None);
        let retagged_elsewhere = tagged(&[
            ("clusterID", "testcluster"),
            ("resource-name", &req.resource_name),
            ("resource-namespace", "app-x"),
        ]);
        assert!(not_this_snapshots(&req, &retagged_elsewhere).is_some());
        let other_clusters = tagged(&[
            ("clusterID", "other"),
            ("resource-name", &req.resource_name),
        ]);
        assert!(not_this_snapshots(&req, &other_clusters).is_some());
        assert!(not_this_snapshots(&req, &BTreeMap::new()).is_some());
    }
}
