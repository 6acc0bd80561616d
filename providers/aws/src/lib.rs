//! The `aws` provider: Postgres as RDS, Redis as ElastiCache, BlobStorage
//! as S3, SMTP credentials through IAM + SES, and manual snapshots. Every
//! AWS call attempt is counted (an interceptor on each client); errors name
//! the operation, the resource and AWS's reason, and carry their kind.

mod budget;
mod calls;
mod cco;
mod clients;
mod cloud_metrics;
mod credentials;
mod database;
mod describe;
mod elasticache;
mod errors;
mod fenced_https;
mod iam_user;
mod keys;
mod listing;
mod lost_creates;
mod maintenance;
mod network;
mod object_store;
mod permissions;
mod plan;
#[cfg(test)]
mod proxy_tests;
mod rds;
mod s3;
mod sdk;
mod service;
mod service_updates;
mod smtp;
pub mod smtp_password;
mod snapshots;
mod strategy;
mod tags;
mod versions;

use std::{collections::HashMap, sync::Arc, time::Duration};

use calls::Calls;
use clients::Clients;
use cro_provider_api::{
    Change, Deletion, IdentifierRules, Provider, ProviderError, Provisioned, ResourceKind,
    ResourceRequest, SnapshotRequest, Snapshotted,
};
use serde_json::Value;
use service::{DatabaseService, Kind};
use tokio::sync::Mutex;

pub use budget::Budget;
pub use object_store::CompatibleStores;
pub use sdk::{
    AccessKeys, AwsSettings, DEFAULT_IAM_PATH, IamUsers, ReadKeys, Sts, VpcHint,
    instance_of_provider_id, sdk_config,
};

pub const NAME: &str = "aws";

/// How often a complete AWS resource is looked at again for out-of-band
/// changes (AWS sends no events): a few calls per resource per hour.
pub const RECHECK: Duration = Duration::from_secs(3600);

pub struct AwsProvider {
    credentials: Arc<dyn cro_provider_api::CredentialsStore>,
    settings: AwsSettings,
    calls: Calls,
    configs: Mutex<HashMap<Account, Arc<InAccount>>>,
    /// What this process remembers of each resource (shared with the
    /// other providers, see [`with_memory`](Self::with_memory)).
    memory: Arc<cro_provider_api::Memory>,
}

/// What a service's steps work with: one account's clients and what each
/// service last saw there, and the provider's settings.
pub(crate) struct At<'a> {
    pub c: &'a Clients,
    pub account: &'a InAccount,
    pub store: &'a dyn cro_provider_api::CredentialsStore,
    pub keys: keys::KeySource<'a>,
    pub vpc: &'a VpcHint,
    /// New resources as the Go operator made them (`AwsSettings`).
    pub go_compatible: bool,
}

/// One account and region: its clients and what each service last saw
/// there. Composed here, above the services, so each service sees only
/// the clients and its own listings.
pub(crate) struct InAccount {
    clients: Clients,
    rds: rds::AccountCache,
    elasticache: elasticache::AccountCache,
    s3: s3::AccountCache,
    iam: iam_user::AccountCache,
}

/// Where a tier's calls go and as whom.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Account {
    region: Option<String>,
    role_arn: Option<String>,
    external_id: Option<String>,
}

impl AwsProvider {
    /// `credentials` keeps the Secrets of credentials that exist only once
    /// (the operator's, over its client and watches).
    pub fn new(
        credentials: Arc<dyn cro_provider_api::CredentialsStore>,
        settings: AwsSettings,
    ) -> Self {
        AwsProvider {
            credentials,
            settings,
            calls: Calls::default(),
            configs: Mutex::default(),
            memory: Arc::default(),
        }
    }

    /// Keeps what it remembers of each resource in `memory`, the one
    /// table of every provider.
    pub fn with_memory(mut self, memory: &Arc<cro_provider_api::Memory>) -> Self {
        self.memory = memory.clone();
        self
    }

    /// The clients for the tier: its region (or the operator's default),
    /// under its role when it names one. Cached per region and role; a
    /// role that cannot be assumed is not cached, so fixing its trust
    /// policy heals the CR at the next reconcile.
    async fn in_account(&self, tier: &strategy::Tier) -> Result<Arc<InAccount>, ProviderError> {
        let account = Account {
            region: tier.region.clone().or_else(|| self.settings.region.clone()),
            role_arn: tier.role_arn.clone(),
            external_id: tier.external_id.clone(),
        };
        let mut configs = self.configs.lock().await;
        if let Some(c) = configs.get(&account) {
            return Ok(c.clone());
        }
        let base = sdk_config(
            account.region.as_deref(),
            self.settings.sts.as_ref(),
            self.settings.keys.as_ref(),
        )
        .await;
        if base.region().is_none() {
            return Err(ProviderError::invalid_strategy(
                "no AWS region: set \"region\" in the tier of cloud-resources-aws-strategies, or give the operator a default region (--aws-region / AWS_REGION, or the OpenShift Infrastructure's)",
            ));
        }
        let config = match &account.role_arn {
            Some(role) => sdk::assume_role(&base, role, account.external_id.as_deref()).await?,
            None => base,
        };
        let budget = (self.settings.budget, &self.settings.fence);
        let clients = Clients::new(&config, &self.calls, budget, &self.memory);
        let in_account = Arc::new(InAccount {
            clients,
            rds: rds::AccountCache::new(&self.memory),
            elasticache: elasticache::AccountCache::new(&self.memory),
            s3: s3::AccountCache::new(&self.memory),
            iam: iam_user::AccountCache::new(&self.memory),
        });
        configs.insert(account, in_account.clone());
        Ok(in_account)
    }

    /// Where BlobStorage and SMTPCredentialSet keys come from, in `a`.
    fn keys<'a>(&'a self, a: &'a InAccount) -> keys::KeySource<'a> {
        keys::KeySource {
            store: self.credentials.as_ref(),
            iam_users: &self.settings.iam_users,
            sts: self.settings.sts.is_some(),
            users: &a.iam,
            go_compatible: self.settings.go_compatible,
        }
    }

    /// What the services' steps work with in `a`.
    fn at<'a>(&'a self, a: &'a InAccount) -> At<'a> {
        At {
            c: &a.clients,
            account: a,
            store: self.credentials.as_ref(),
            keys: self.keys(a),
            vpc: &self.settings.vpc,
            go_compatible: self.settings.go_compatible,
        }
    }

    /// A request's tier and the clients its calls go through.
    async fn tier_clients(
        &self,
        strategy: &Value,
    ) -> Result<(strategy::Tier, Arc<InAccount>), ProviderError> {
        let tier = strategy::parse(strategy)?;
        let a = self.in_account(&tier).await?;
        Ok((tier, a))
    }
}

static POSTGRES: DatabaseService<aws_sdk_rds::Client> = DatabaseService::NEW;
static REDIS: DatabaseService<aws_sdk_elasticache::Client> = DatabaseService::NEW;

/// The service each resource kind is provisioned as.
fn service(kind: ResourceKind) -> &'static dyn Kind {
    match kind {
        ResourceKind::Postgres => &POSTGRES,
        ResourceKind::Redis => &REDIS,
        ResourceKind::BlobStorage => &s3::Bucket,
        ResourceKind::Smtp => &smtp::Ses,
    }
}

/// Checks a tier's strategy for `kind` without calling AWS: every section
/// key and field name and type. Reconcile runs it first, and
/// `cloud-resource-operator validate` runs it offline.
pub fn validate_strategy(kind: ResourceKind, strategy: &Value) -> Result<(), ProviderError> {
    service(kind).validate(&strategy::parse(strategy)?)
}

/// `roleArn` or `externalId` when `strategy` sets one: the role a tier's
/// calls run as is the operator namespace's to name, never a watched
/// namespace's (the Go operator had no such keys, so its tiers never need
/// them).
pub fn operator_only_key(strategy: &Value) -> Option<String> {
    strategy::operator_only_key(strategy)
}

/// Checks a tier of the `_network` key (its `createStrategy.CidrBlock`)
/// without calling AWS.
pub fn validate_network_strategy(strategy: &Value) -> Result<(), ProviderError> {
    network::requested_block(Some(strategy)).map(|_| ())
}

/// The request with identifiers AWS accepts (its snapshots' `rules`), for
/// the resource's own identifier only (see
/// [`service::identity::claimed`]).
fn conformed_snapshot(
    req: &SnapshotRequest,
    tier: &strategy::Tier,
    snapshot_rules: IdentifierRules,
) -> Result<SnapshotRequest, ProviderError> {
    let kind = service(req.kind);
    let rules = kind.rules();
    let default = rules.conform(&req.resource_default_identifier);
    let pinned = kind.pinned(tier, false)?;
    let identifier = snapshot_rules.conform(&req.identifier);
    // None recorded: only a snapshot already taken can be found.
    let Some(recorded) = &req.resource_identifier else {
        return Ok(SnapshotRequest {
            identifier,
            ..req.clone()
        });
    };
    let resource = rules.conform(recorded);
    let separate = rules.conform(&req.resource_separate_identifier);
    if resource != default && resource != separate && Some(&resource) != pinned.as_ref() {
        return Err(service::identity::foreign_annotation(
            &resource,
            pinned.as_ref().unwrap_or(&default),
        ));
    }
    Ok(SnapshotRequest {
        identifier,
        resource_identifier: Some(resource),
        ..req.clone()
    })
}

fn no_snapshots(kind: ResourceKind) -> ProviderError {
    ProviderError::permanent(format!("a {kind:?} has no snapshots"))
}

#[async_trait::async_trait]
impl Provider for AwsProvider {
    fn name(&self) -> &'static str {
        NAME
    }

    fn metrics(&self) -> Vec<cro_provider_api::MetricFamily> {
        self.calls.families()
    }

    async fn reconcile(&self, req: &ResourceRequest) -> Result<Provisioned, ProviderError> {
        let tier = strategy::parse(&req.strategy)?;
        service(req.kind).reconcile(self, req, &tier).await
    }

    async fn delete(&self, req: &ResourceRequest) -> Result<Deletion, ProviderError> {
        let tier = strategy::parse(&req.strategy)?;
        service(req.kind).delete(self, req, &tier).await
    }

    async fn plan(&self, req: &ResourceRequest) -> Result<Vec<Change>, ProviderError> {
        let tier = strategy::parse(&req.strategy)?;
        service(req.kind).plan(self, req, &tier).await
    }

    async fn cloud_state(&self, req: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        let (tier, a) = self.tier_clients(&req.strategy).await?;
        let (kind, c) = (service(req.kind), &a.clients);
        let pinned = kind.pinned(&tier, false)?;
        let req = service::identity::resolved(kind, c, req, pinned, false).await?;
        Ok(Some(kind.cloud_state(c, &req.identifier).await?))
    }

    async fn cloud_metrics(&self, period: Duration) -> Vec<cro_provider_api::CloudSample> {
        let accounts: Vec<Arc<InAccount>> = self.configs.lock().await.values().cloned().collect();
        let mut samples = Vec::new();
        for a in accounts {
            let c = &a.clients;
            match cloud_metrics::scrape(&c.cloudwatch, &c.watched, period).await {
                Ok(read) => samples.extend(read),
                Err(e) => {
                    tracing::warn!(region = %c.region, error = %e, "reading CloudWatch metrics")
                }
            }
        }
        samples
    }

    async fn snapshot(&self, req: &SnapshotRequest) -> Result<Snapshotted, ProviderError> {
        let kind = service(req.kind);
        let snapshots = kind.snapshots().ok_or_else(|| no_snapshots(req.kind))?;
        // A tier that does not parse, or a resource that is not the CR's,
        // is refused before any call, an STS one included.
        let tier = strategy::parse(&req.strategy)?;
        let req = &conformed_snapshot(req, &tier, snapshots.rules)?;
        // Snapshots live where their resource does: its tier's region.
        let a = self.in_account(&tier).await?;
        let c = &a.clients;
        // Whose the resource is, by its tags, before anything is taken.
        let source = match &req.resource_identifier {
            Some(id) => Some((id.as_str(), kind.tags_of(c, id).await?)),
            None => None,
        };
        snapshots::take((snapshots.calls)(c), snapshots.what, req, source).await
    }

    async fn delete_snapshot(&self, req: &SnapshotRequest) -> Result<Deletion, ProviderError> {
        let Some(snapshots) = service(req.kind).snapshots() else {
            return Ok(Deletion::Done);
        };
        let tier = strategy::parse(&req.strategy).unwrap_or_default();
        let a = self.in_account(&tier).await?;
        // A snapshot is deleted by its own identifier; which resource it
        // was of does not matter.
        let req = &SnapshotRequest {
            identifier: snapshots.rules.conform(&req.identifier),
            ..req.clone()
        };
        snapshots::remove((snapshots.calls)(&a.clients), req).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The identifier `req` may act on under `tier`.
    fn claimed(
        req: &ResourceRequest,
        tier: &strategy::Tier,
        deleting: bool,
    ) -> Result<ResourceRequest, ProviderError> {
        let kind = service(req.kind);
        service::identity::claimed(kind, req, kind.pinned(tier, deleting)?, deleting)
    }

    fn own_separate(req: &ResourceRequest) -> String {
        service::identity::own_separate(service(req.kind), req)
    }

    fn error(kind: ResourceKind, strategy: Value) -> String {
        validate_strategy(kind, &strategy)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn a_typo_in_any_section_is_found() {
        let e = error(
            ResourceKind::Postgres,
            json!({"createStrategy": {"DBInstanceClas": "db.t3.micro"}}),
        );
        assert!(e.contains("did you mean DBInstanceClass?"), "{e}");
        let e = error(
            ResourceKind::Redis,
            json!({"deleteStrategy": {"SkipFinalSnapshots": true}}),
        );
        assert!(e.contains("deleteStrategy.SkipFinalSnapshots"), "{e}");
    }

    #[test]
    fn a_wrong_type_is_found_before_any_call() {
        let e = error(
            ResourceKind::BlobStorage,
            json!({"deleteStrategy": {"forceBucketDeletion": "yes"}}),
        );
        assert!(
            e.contains("deleteStrategy.forceBucketDeletion must be true or false"),
            "{e}"
        );
        let e = error(
            ResourceKind::Postgres,
            json!({"createStrategy": {"VpcSecurityGroupIds": ["sg-1", 2]}}),
        );
        assert!(e.contains("must be a list of strings"), "{e}");
    }

    #[test]
    fn a_database_the_tier_names_is_looked_for_under_that_name() {
        let mut req = ResourceRequest::offline(ResourceKind::Postgres, json!({}));
        req.identifier = "computed".into();
        let tier = |v: Value| strategy::parse(&v).unwrap_or_else(|e| panic!("{e}"));
        let named = tier(
            json!({"createStrategy": {"DBInstanceIdentifier": "pinned-db"},
            "deleteStrategy": {"DBInstanceIdentifier": "other-db", "FinalDBSnapshotIdentifier": "last"}}),
        );
        // Row: (tier, recorded identifier, deleting, identifier used)
        let rows = [
            (tier(json!({})), None, false, "computed"),
            (named.clone(), None, false, "pinned-db"),
            (named.clone(), None, true, "other-db"),
            (
                tier(json!({"createStrategy": {"DBInstanceIdentifier": "pinned-db"}})),
                None,
                true,
                "pinned-db",
            ),
            // What the CR records wins: the Go operator recorded the name it used.
            (named.clone(), Some("computed"), false, "computed"),
            (named.clone(), Some("pinned-db"), false, "pinned-db"),
            // A delete ignores a recorded identifier that is not the CR's own.
            (named, Some("someone-elses-db"), true, "other-db"),
        ];
        for (tier, recorded, deleting, want) in rows {
            req.recorded_identifier = recorded.map(str::to_string);
            let got = claimed(&req, &tier, deleting).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(got.identifier, want, "{tier:?} {recorded:?} {deleting}");
        }
        let redis = tier(
            json!({"createStrategy": {"ReplicationGroupId": "pinned-cache"},
            "deleteStrategy": {"RetainPrimaryCluster": false, "FinalSnapshotIdentifier": "last"}}),
        );
        let mut req = ResourceRequest::offline(ResourceKind::Redis, json!({}));
        req.identifier = "computed".into();
        let got = claimed(&req, &redis, true).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got.identifier, "pinned-cache");
        // The Go operator's S3 createStrategy: its Bucket pins the bucket
        // (any spelling of the key; the exact one wins), the rest is ignored.
        let mut req = ResourceRequest::offline(ResourceKind::BlobStorage, json!({}));
        req.identifier = "computed".into();
        for (create, want) in [
            (
                json!({"Bucket": "team-assets", "ACL": null, "ObjectLockEnabledForBucket": null}),
                "team-assets",
            ),
            (json!({"bucket": "lower", "Bucket": "exact"}), "exact"),
            (json!({"Bucket": null}), "computed"),
        ] {
            let pinned = tier(json!({"createStrategy": create}));
            let got = claimed(&req, &pinned, false).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(got.identifier, want, "{create}");
        }
        let e = validate_strategy(
            ResourceKind::BlobStorage,
            &json!({"createStrategy": {"Bucket": 5}}),
        );
        let e = e.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            e.contains("createStrategy.Bucket must be a bucket name"),
            "{e}"
        );
    }

    #[test]
    fn a_recorded_identifier_that_is_not_the_crs_own_is_refused() {
        let tier = strategy::parse(&json!({})).unwrap_or_else(|e| panic!("{e}"));
        for kind in ResourceKind::ALL {
            let mut req = ResourceRequest::offline(kind, json!({}));
            req.identifier = "testcluster-team-a-db".into();
            req.recorded_identifier = Some("testclusterteambdb".into());
            let e = claimed(&req, &tier, false).map(|r| r.identifier);
            let e = e.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(
                e.contains("annotation resourceIdentifier \"testclusterteambdb\""),
                "{kind:?}: {e}"
            );
            // Its separate identifier is its own; another CR's is not.
            req.recorded_identifier = Some(own_separate(&req));
            assert!(claimed(&req, &tier, false).is_ok(), "{kind:?}");
            let other = ResourceRequest {
                name: "other".into(),
                ..req.clone()
            };
            req.recorded_identifier = Some(own_separate(&other));
            assert!(claimed(&req, &tier, false).is_err(), "{kind:?}");
            let mut snap = SnapshotRequest {
                kind,
                namespace: "team-a".into(),
                name: "snap".into(),
                owner: req.owner.clone(),
                resource_name: "db".into(),
                resource_identifier: Some("testclusterteambdb".into()),
                resource_default_identifier: req.identifier.clone(),
                resource_separate_identifier: "testclusterteamadb-abcdefgh".into(),
                identifier: "snap-1".into(),
                strategy: json!({}),
                tags: Default::default(),
                tag_keys: Default::default(),
            };
            let rules = match kind {
                ResourceKind::Postgres => IdentifierRules::RdsSnapshot,
                ResourceKind::Redis => IdentifierRules::ElastiCacheSnapshot,
                ResourceKind::BlobStorage | ResourceKind::Smtp => continue,
            };
            assert!(
                conformed_snapshot(&snap, &Default::default(), rules).is_err(),
                "{kind:?}"
            );
            snap.resource_identifier = Some(snap.resource_default_identifier.clone());
            assert!(
                conformed_snapshot(&snap, &Default::default(), rules).is_ok(),
                "{kind:?}"
            );
            snap.resource_identifier = Some(snap.resource_separate_identifier.clone());
            assert!(
                conformed_snapshot(&snap, &Default::default(), rules).is_ok(),
                "{kind:?}"
            );
            snap.resource_identifier = None;
            assert!(
                conformed_snapshot(&snap, &Default::default(), rules).is_ok(),
                "{kind:?}: none recorded"
            );
        }
    }

    #[test]
    fn valid_tiers_pass() {
        let ok = |kind, v: Value| validate_strategy(kind, &v).is_ok();
        assert!(ok(
            ResourceKind::Postgres,
            json!({"region": "eu-west-1", "createStrategy": {"dbinstanceclass": "db.t3.micro", "AllocatedStorage": 20}, "deleteStrategy": {"SkipFinalSnapshot": false}})
        ));
        assert!(ok(
            ResourceKind::BlobStorage,
            json!({"createStrategy": {"ACL": "private"}})
        ));
        assert!(ok(ResourceKind::Smtp, json!({})));
    }
}
