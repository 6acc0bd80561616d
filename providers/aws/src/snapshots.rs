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
    errors::{Answer, Created, created, not_yet_visible, taken},
    tags::{self, Tagging},
};

/// A snapshot as found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Found {
    pub arn: String,
    pub status: String,
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
pub fn outcome(id: &str, found: Option<&Found>) -> Option<Outcome<String>> {
    Some(match found?.status.as_str() {
        "available" => Outcome::Ready(id.to_string()),
        "failed" => Outcome::Failed(format!(
            "snapshot {id} failed; delete this resource and create a new one to retry"
        )),
        other => Outcome::InProgress(format!("snapshot {id} is {other}")),
    })
}

/// Takes the snapshot `req.identifier` of `req.resource_identifier` once,
/// and reports its state.
pub async fn take<S: Snapshots>(
    svc: &S,
    what: &str,
    req: &SnapshotRequest,
) -> Result<Snapshotted, ProviderError> {
    let id = req.identifier.as_str();
    let found = svc.find_snapshot(id).await?;
    let outcome = match outcome(id, found.as_ref()) {
        Some(outcome) => outcome,
        None => {
            let tags: Vec<(String, String)> = req.tags.clone().into_iter().collect();
            match svc
                .create_snapshot(&req.resource_identifier, id, &tags)
                .await?
            {
                Some(Created::Now) => Outcome::InProgress(format!("creating snapshot {id}")),
                Some(Created::Already) => {
                    made_for_it(svc, req).await?;
                    Outcome::InProgress(format!("creating snapshot {id}"))
                }
                // Its CR is complete, so the resource is coming back
                // (restored) or its CR reports it vanished: wait either way.
                None => Outcome::InProgress(format!(
                    "waiting for {what} {} to exist; the snapshot {} is taken then",
                    req.resource_identifier, req.name
                )),
            }
        }
    };
    Ok(Snapshotted { outcome })
}

/// After a create met a snapshot of its name (a retry whose first
/// attempt's answer was lost): whether a fresh look finds it made for
/// this snapshot CR; an error says what else.
async fn made_for_it<S: Snapshots>(svc: &S, req: &SnapshotRequest) -> Result<(), ProviderError> {
    let id = req.identifier.as_str();
    let Some(found) = svc.find_snapshot(id).await? else {
        return Err(not_yet_visible("snapshot", id));
    };
    match tags::made_for(&req.tags, &svc.tags(&found.arn).await?) {
        true => Ok(()),
        false => Err(taken("snapshot", id)),
    }
}

/// Deletes the snapshot, unless its tags bind it to another namespace:
/// whatever identifier led here, another team's snapshot is never deleted
/// for this CR.
pub async fn remove<S: Snapshots>(
    svc: &S,
    req: &SnapshotRequest,
) -> Result<Deletion, ProviderError> {
    let Some(found) = svc.find_snapshot(&req.identifier).await? else {
        return Ok(Deletion::Done);
    };
    if tags::bound_elsewhere(&req.tags, &svc.tags(&found.arn).await?) {
        return Ok(Deletion::Done);
    }
    svc.delete_snapshot(&req.identifier).await?;
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
pub async fn tag_final<S: Snapshots>(
    svc: &S,
    id: &str,
    want: &BTreeMap<String, String>,
) -> Result<(), ProviderError> {
    match svc.find_snapshot(id).await? {
        Some(found) => tags::ensure(svc, &found.arn, want).await,
        None => Ok(()),
    }
}

// RDS and ElastiCache find, take and delete snapshots with the same three
// calls under their own names.

#[async_trait::async_trait]
impl Snapshots for aws_sdk_rds::Client {
    async fn find_snapshot(&self, id: &str) -> Result<Option<Found>, ProviderError> {
        use aws_sdk_rds::operation::describe_db_snapshots::DescribeDBSnapshotsError as E;
        let out = self
            .describe_db_snapshots()
            .db_snapshot_identifier(id)
            .send()
            .await;
        let gone = |e: &E| e.is_db_snapshot_not_found_fault();
        let out = out.unless_missing(gone, "rds:DescribeDBSnapshots", id)?;
        Ok(out.and_then(|o| {
            o.db_snapshots().first().map(|s| Found {
                arn: s.db_snapshot_arn().unwrap_or_default().into(),
                status: s.status().unwrap_or("creating").into(),
            })
        }))
    }

    async fn create_snapshot(
        &self,
        resource: &str,
        id: &str,
        tags: &[(String, String)],
    ) -> Result<Option<Created>, ProviderError> {
        let call = self.create_db_snapshot().db_instance_identifier(resource);
        let call = call
            .db_snapshot_identifier(id)
            .set_tags(Some(tags::sdk(tags)));
        match call.send().await {
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_db_instance_not_found_fault()) =>
            {
                Ok(None)
            }
            out => created(out, "rds:CreateDBSnapshot", id).map(Some),
        }
    }

    async fn delete_snapshot(&self, id: &str) -> Result<(), ProviderError> {
        use aws_sdk_rds::operation::delete_db_snapshot::DeleteDBSnapshotError as E;
        let out = self
            .delete_db_snapshot()
            .db_snapshot_identifier(id)
            .send()
            .await;
        let gone = |e: &E| e.is_db_snapshot_not_found_fault();
        out.unless_missing(gone, "rds:DeleteDBSnapshot", id)?;
        Ok(())
    }
}

#[async_trait::async_trait]
impl Snapshots for aws_sdk_elasticache::Client {
    async fn find_snapshot(&self, id: &str) -> Result<Option<Found>, ProviderError> {
        use aws_sdk_elasticache::operation::describe_snapshots::DescribeSnapshotsError as E;
        let out = self.describe_snapshots().snapshot_name(id).send().await;
        let gone = |e: &E| e.is_snapshot_not_found_fault();
        let out = out.unless_missing(gone, "elasticache:DescribeSnapshots", id)?;
        Ok(out.and_then(|o| {
            o.snapshots().first().map(|s| Found {
                arn: s.arn().unwrap_or_default().into(),
                status: s.snapshot_status().unwrap_or("creating").into(),
            })
        }))
    }

    async fn create_snapshot(
        &self,
        resource: &str,
        id: &str,
        tags: &[(String, String)],
    ) -> Result<Option<Created>, ProviderError> {
        let call = self.create_snapshot().replication_group_id(resource);
        let call = call.snapshot_name(id).set_tags(Some(tags::sdk(tags)));
        match call.send().await {
            Err(e)
                if (e.as_service_error())
                    .is_some_and(|e| e.is_replication_group_not_found_fault()) =>
            {
                Ok(None)
            }
            out => created(out, "elasticache:CreateSnapshot", id).map(Some),
        }
    }

    async fn delete_snapshot(&self, id: &str) -> Result<(), ProviderError> {
        use aws_sdk_elasticache::operation::delete_snapshot::DeleteSnapshotError as E;
        let out = self.delete_snapshot().snapshot_name(id).send().await;
        let gone = |e: &E| e.is_snapshot_not_found_fault();
        out.unless_missing(gone, "elasticache:DeleteSnapshot", id)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_state_maps_to_an_outcome() {
        let found = |status: &str| Found {
            arn: "a".into(),
            status: status.into(),
        };
        assert_eq!(outcome("s", None), None, "not found: take it");
        assert_eq!(
            outcome("s", Some(&found("available"))),
            Some(Outcome::Ready("s".into()))
        );
        assert!(
            matches!(outcome("s", Some(&found("creating"))), Some(Outcome::InProgress(m)) if m.contains("creating"))
        );
        assert!(matches!(
            outcome("s", Some(&found("failed"))),
            Some(Outcome::Failed(_))
        ));
    }
}
