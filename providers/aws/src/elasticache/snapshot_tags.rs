//! The snapshots of an ElastiCache group carry the group's tags, as the Go
//! operator puts them there (`TagElasticacheNode`,
//! pkg/providers/aws/provider_redis.go): ElastiCache does not copy a
//! group's tags to its automated snapshots, and cost reports go by tags.
//! Its gauge `cro_redis_snapshot_not_found_<name>` says, per snapshot,
//! whether AWS could not find it to tag (1: `SnapshotNotFoundFault`, a
//! snapshot not available yet) or it carries the tags (0).
//!
//! The Go operator describes the first node's snapshots and tags every one
//! of them on every reconcile. Here one listing of the account's snapshots
//! and of their tags serves every group, taken at most once per recheck
//! interval (automated snapshots come once a day) and only on rechecks;
//! only a snapshot that lacks a tag is written to.

use std::collections::BTreeMap;

use aws_sdk_elasticache::Client;
use cro_provider_api::{ProviderError, Series};

use super::observed::Snapshot;
use crate::{
    clients::Clients,
    describe,
    listing::Listing,
    tags::{self, Tagging},
};

impl Snapshot {
    /// The Go operator's labels of its series but `clusterID`
    /// (`buildCacheSnapshotNotFoundLabels`): `cacheArn` is the ARN of the
    /// node it was taken of, the group's `first_node` when AWS names none
    /// (a snapshot of the whole group).
    fn labels(&self, first_node: &str) -> Vec<(String, String)> {
        let (prefix, _) = self.arn.rsplit_once(":snapshot:").unwrap_or_default();
        let node = if self.node.is_empty() {
            first_node
        } else {
            &self.node
        };
        [
            ("arn", self.arn.clone()),
            ("cacheClusterId", node.to_string()),
            ("snapshotName", self.name.clone()),
            ("cacheArn", format!("{prefix}:cluster:{node}")),
        ]
        .map(|(k, v)| (k.to_string(), v))
        .to_vec()
    }
}

/// Every snapshot of the account and region, by replication group, with
/// the tags of the tagged ones (tag:GetResources): one page per fifty
/// snapshots and one per hundred tagged ElastiCache resources.
pub async fn list(c: &Clients) -> Result<BTreeMap<String, Vec<Snapshot>>, ProviderError> {
    // The filter is the service alone, narrowed by ARN (as the groups'
    // listing does, see `elasticache::Client::list`).
    let mut tagged = tags::readable_tags(c, "elasticache", |arn| {
        arn.contains(":snapshot:").then(|| arn.to_string())
    })
    .await?;
    let call = c.elasticache.describe_snapshots().max_records(50);
    let op = "elasticache:DescribeSnapshots";
    let all = describe::every_item(call.into_paginator().send(), op, |p| p.snapshots()).await?;
    let mut out: BTreeMap<String, Vec<Snapshot>> = BTreeMap::new();
    for s in all {
        let (Some(group), Some(arn)) = (s.replication_group_id(), s.arn()) else {
            continue;
        };
        (out.entry(group.to_string()).or_default()).push(Snapshot {
            name: s.snapshot_name().unwrap_or_default().to_string(),
            arn: arn.to_string(),
            node: s.cache_cluster_id().unwrap_or_default().to_string(),
            tags: (tagged.as_mut()).map(|t| t.remove(arn).unwrap_or_default()),
        });
    }
    Ok(out)
}

/// Tags the snapshots of group `id` with the tags of `want` they lack, on a recheck
/// (`observed_within`), and says how each went; `None` when not looked at
/// (not a recheck, or tagged since the last listing) or the listing failed
/// (logged: tags for cost reports never stop a database's reconcile).
pub async fn ensure(
    (c, listing): (&Clients, &Listing<Vec<Snapshot>>),
    id: &str,
    first_node: &str,
    want: &BTreeMap<String, String>,
    recheck: Option<std::time::Duration>,
) -> Option<Vec<Series>> {
    let snapshots = match listing.get(id, recheck?, || list(c)).await {
        Ok(found) => found?,
        Err(e) => {
            tracing::warn!(resource = id, error = %e, "listing ElastiCache snapshots to tag them");
            return None;
        }
    };
    let mut series = Vec::new();
    for snapshot in snapshots {
        let Some(missing) = missing_tags(&snapshot, want) else {
            continue;
        };
        let value = if missing.is_empty() {
            0
        } else {
            match listing
                .writing(id, tag(&c.elasticache, &snapshot, &missing))
                .await
            {
                Ok(value) => value,
                Err(e) => {
                    tracing::warn!(resource = id, snapshot = %snapshot.name, error = %e, "tagging an ElastiCache snapshot");
                    continue;
                }
            }
        };
        let labels = snapshot.labels(first_node);
        series.push(Series { labels, value });
    }
    Some(series)
}

/// The tags of `want` to add to `snapshot`; `None` when unknown and not
/// to be written. Only tags it lacks: a snapshot a RedisSnapshot or a
/// deletion made carries its own values (its own `resource-name`), kept.
/// Where its tags cannot be read (the Go operator's IAM policy has no
/// tag:GetResources), AddTagsToResource would overwrite those values, so
/// only an automated snapshot, which is never a RedisSnapshot's or a final
/// one, is given the group's tags.
fn missing_tags(
    snapshot: &Snapshot,
    want: &BTreeMap<String, String>,
) -> Option<Vec<(String, String)>> {
    let lacking =
        |(k, _): &(&String, &String)| snapshot.tags.as_ref().is_none_or(|t| !t.contains_key(*k));
    let known = snapshot.tags.is_some() || snapshot.name.starts_with(AUTOMATED_PREFIX);
    known.then(|| {
        (want.iter().filter(lacking))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    })
}

/// How ElastiCache names the snapshots it takes on its own.
const AUTOMATED_PREFIX: &str = "automatic.";

/// Adds `missing` to `snapshot`: 0 when done, 1 when AWS cannot find it
/// (as the Go operator counts it).
async fn tag(
    ec: &Client,
    snapshot: &Snapshot,
    missing: &[(String, String)],
) -> Result<i64, ProviderError> {
    match ec.add_tags(&snapshot.arn, missing).await {
        Ok(()) => Ok(0),
        Err(e) if e.code() == Some("SnapshotNotFoundFault") => Ok(1),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshots_own_tags_are_never_overwritten_even_unread() {
        let want: BTreeMap<String, String> = [("resource-name", "cache"), ("clusterID", "c1")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into();
        let snapshot = |name: &str, tags: Option<&[(&str, &str)]>| Snapshot {
            name: name.into(),
            arn: format!("arn:aws:elasticache:eu-west-1:1:snapshot:{name}"),
            node: "g1-001".into(),
            tags: tags.map(|t| {
                t.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
        };
        let keys = |m: Option<Vec<(String, String)>>| {
            m.map(|m| m.into_iter().map(|(k, _)| k).collect::<Vec<_>>())
        };
        // Read: only what it lacks; a RedisSnapshot's own resource-name stays.
        let own = snapshot("cache-snap", Some(&[("resource-name", "cache-snap")]));
        assert_eq!(
            keys(missing_tags(&own, &want)),
            Some(vec!["clusterID".to_string()])
        );
        // Unread: a manual snapshot (a RedisSnapshot's, a final one) is left
        // alone; an automated one gets the group's tags.
        assert_eq!(missing_tags(&snapshot("cache-snap", None), &want), None);
        let automated = snapshot("automatic.g1-2026-11-25-03-00", None);
        assert_eq!(
            keys(missing_tags(&automated, &want)).map(|k| k.len()),
            Some(2)
        );
    }

    #[test]
    fn a_snapshot_is_labelled_as_the_go_operator_labels_it() {
        let snapshot = Snapshot {
            name: "automatic.g1-2026-11-25-03-00".into(),
            arn:
                "arn:aws:elasticache:eu-west-1:123456789012:snapshot:automatic.g1-2026-11-25-03-00"
                    .into(),
            node: "g1-002".into(),
            tags: Some(BTreeMap::new()),
        };
        let labels: BTreeMap<_, _> = snapshot.labels("g1-001").into_iter().collect();
        assert_eq!(labels["cacheClusterId"], "g1-002");
        assert_eq!(labels["snapshotName"], "automatic.g1-2026-11-25-03-00");
        assert_eq!(labels["arn"], snapshot.arn);
        assert_eq!(
            labels["cacheArn"],
            "arn:aws:elasticache:eu-west-1:123456789012:cluster:g1-002"
        );
        // A snapshot of the whole group: its first node, as in Go.
        let group = Snapshot {
            node: String::new(),
            ..snapshot
        };
        let labels: BTreeMap<_, _> = group.labels("g1-001").into_iter().collect();
        assert_eq!(labels["cacheClusterId"], "g1-001");
        assert!(labels["cacheArn"].ends_with(":cluster:g1-001"));
    }
}
