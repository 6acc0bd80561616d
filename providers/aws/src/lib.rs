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
mod elasticache;
mod errors;
mod iam_user;
mod identity;
mod keys;
mod listing;
mod lost_creates;
mod maintenance;
mod network;
mod permissions;
mod plan;
mod rds;
mod s3;
mod sdk;
mod service_updates;
mod smtp;
pub mod smtp_password;
mod snapshots;
mod strategy;
mod tags;
mod versions;

use std::{collections::HashMap, sync::Arc, time::Duration};

use aws_sdk_elasticache::Client as ElastiCache;
use aws_sdk_rds::Client as Rds;
use calls::Calls;
use clients::Clients;
use cro_provider_api::{
    Change, Deletion, IdentifierRules, Provider, ProviderError, Provisioned, ResourceKind,
    ResourceRequest, SnapshotRequest, Snapshotted,
};
use database::Database;
use serde_json::Value;
use tokio::sync::Mutex;

pub use budget::Budget;
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
}

/// One account and region: its clients and what each service last saw
/// there. Composed here, above the services, so each service sees only
/// the clients and its own listings.
struct InAccount {
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
        }
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
        let clients = Clients::new(&config, &self.calls, budget);
        let in_account = Arc::new(InAccount {
            clients,
            rds: rds::AccountCache::default(),
            elasticache: elasticache::AccountCache::default(),
            s3: s3::AccountCache::default(),
            iam: iam_user::AccountCache::default(),
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

/// Checks a tier's strategy for `kind` without calling AWS: every section
/// key and field name and type. Reconcile runs it first, and
/// `cloud-resource-operator validate` runs it offline.
pub fn validate_strategy(kind: ResourceKind, strategy: &Value) -> Result<(), ProviderError> {
    use strategy::parse_section;
    let tier = strategy::parse(strategy)?;
    match kind {
        ResourceKind::Postgres => {
            parse_section::<rds::CreateStrategy>(&tier.create)?;
            parse_section::<rds::DeleteStrategy>(&tier.delete)?;
        }
        ResourceKind::Redis => {
            parse_section::<elasticache::CreateStrategy>(&tier.create)?;
            parse_section::<elasticache::DeleteStrategy>(&tier.delete)?;
        }
        // The bucket is created with fixed, safe settings; of the Go
        // operator's createStrategy only the pinned Bucket is read.
        ResourceKind::BlobStorage => {
            s3::pinned_bucket(&tier)?;
            parse_section::<s3::DeleteStrategy>(&tier.delete)?;
        }
        ResourceKind::Smtp => {
            parse_section::<smtp::CreateStrategy>(&tier.create)?;
        }
    }
    Ok(())
}

/// Checks a tier of the `_network` key (its `createStrategy.CidrBlock`)
/// without calling AWS.
pub fn validate_network_strategy(strategy: &Value) -> Result<(), ProviderError> {
    network::requested_block(Some(strategy)).map(|_| ())
}

/// The identifier rules of the resource `kind` is provisioned as.
fn rules(kind: ResourceKind) -> IdentifierRules {
    match kind {
        ResourceKind::Postgres => IdentifierRules::RdsInstance,
        ResourceKind::Redis => IdentifierRules::ElastiCacheReplicationGroup,
        // The bucket's IAM user has the same name; a valid bucket name is a
        // valid user name.
        ResourceKind::BlobStorage => IdentifierRules::S3Bucket,
        ResourceKind::Smtp => IdentifierRules::IamUser,
    }
}

/// The identifiers this CR's own request gives, conformed to AWS's rules:
/// the one its tier pins (`DBInstanceIdentifier`, `ReplicationGroupId`, as
/// the Go operator used them), else the default for its namespace and name
/// (`default`, computed by the operator).
fn own_identifiers(
    kind: ResourceKind,
    default: &str,
    tier: &strategy::Tier,
    deleting: bool,
) -> Result<(String, Option<String>), ProviderError> {
    let pinned = match kind {
        ResourceKind::Postgres => database::named_by_tier::<Rds>(tier, deleting)?,
        ResourceKind::Redis => database::named_by_tier::<ElastiCache>(tier, deleting)?,
        ResourceKind::BlobStorage => s3::pinned_bucket(tier)?,
        ResourceKind::Smtp => None,
    };
    let rules = rules(kind);
    Ok((rules.conform(default), pinned.map(|p| rules.conform(&p))))
}

/// The request with the identifier it may act on. The CR's
/// `resourceIdentifier` annotation (`recorded_identifier`) is written by
/// the operator but can be written by anyone who may edit the CR, so it is
/// accepted only when it is one of the CR's own identifiers; another would
/// let a CR reset, rotate, snapshot or delete a resource that is not its
/// own. A delete ignores such an annotation (it removes only what is the
/// CR's own), so the CR can still go.
fn claimed(
    req: &ResourceRequest,
    tier: &strategy::Tier,
    deleting: bool,
) -> Result<ResourceRequest, ProviderError> {
    let (default, pinned) = own_identifiers(req.kind, &req.identifier, tier, deleting)?;
    let separate = identity::own_separate(req);
    let mut req = req.clone();
    let own = pinned.clone().unwrap_or_else(|| default.clone());
    match req
        .recorded_identifier
        .as_deref()
        .map(|r| rules(req.kind).conform(r))
    {
        None => req.identifier = own,
        Some(r) if r == default || r == separate || Some(&r) == pinned.as_ref() => {
            req.identifier = r
        }
        Some(_) if deleting => {
            req.recorded_identifier = None;
            req.identifier = own;
        }
        Some(r) => return Err(foreign_annotation(&r, &own)),
    }
    Ok(req)
}

/// [`claimed`], then, for a CR that recorded no identifier and whose tier
/// pins none, its separate identifier when the shared one is another
/// CR's (see `identity`).
async fn resolved(
    c: &Clients,
    req: &ResourceRequest,
    tier: &strategy::Tier,
    deleting: bool,
) -> Result<ResourceRequest, ProviderError> {
    let (_, pinned) = own_identifiers(req.kind, &req.identifier, tier, deleting)?;
    let mut req = claimed(req, tier, deleting)?;
    if req.recorded_identifier.is_none()
        && pinned.is_none()
        && let Some(own) = identity::separate(c, &req).await?
    {
        req.identifier = own;
    }
    Ok(req)
}

fn foreign_annotation(recorded: &str, own: &str) -> ProviderError {
    ProviderError::permanent(format!(
        "annotation resourceIdentifier {recorded:?} is not this resource's identifier ({own:?}): the operator records it, and a resource may not name another one; remove the annotation (the operator records {own:?} again)"
    ))
}

/// The request with identifiers AWS accepts, for the resource's own
/// identifier only (see [`claimed`]).
fn conformed_snapshot(req: &SnapshotRequest) -> Result<SnapshotRequest, ProviderError> {
    let snapshot_rules = match req.kind {
        ResourceKind::Redis => IdentifierRules::ElastiCacheSnapshot,
        _ => IdentifierRules::RdsSnapshot,
    };
    let tier = strategy::parse(&req.strategy).unwrap_or_default();
    let (default, pinned) =
        own_identifiers(req.kind, &req.resource_default_identifier, &tier, false)?;
    let identifier = snapshot_rules.conform(&req.identifier);
    // None recorded: only a snapshot already taken can be found.
    let Some(recorded) = &req.resource_identifier else {
        return Ok(SnapshotRequest {
            identifier,
            ..req.clone()
        });
    };
    let resource = rules(req.kind).conform(recorded);
    let separate = rules(req.kind).conform(&req.resource_separate_identifier);
    if resource != default && resource != separate && Some(&resource) != pinned.as_ref() {
        return Err(foreign_annotation(
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

#[async_trait::async_trait]
impl Provider for AwsProvider {
    fn name(&self) -> &'static str {
        NAME
    }

    fn metrics(&self) -> Vec<cro_provider_api::MetricFamily> {
        self.calls.families()
    }

    async fn reconcile(&self, req: &ResourceRequest) -> Result<Provisioned, ProviderError> {
        validate_strategy(req.kind, &req.strategy)?;
        let (tier, a) = self.tier_clients(&req.strategy).await?;
        let c = &a.clients;
        let req = &resolved(c, req, &tier, false).await?;
        let (store, hint) = (self.credentials.as_ref(), &self.settings.vpc);
        let mut provisioned = match req.kind {
            ResourceKind::Postgres => rds::reconcile(store, (c, &a.rds), hint, req, &tier).await,
            ResourceKind::BlobStorage => s3::reconcile(&self.keys(&a), (c, &a.s3), req).await,
            ResourceKind::Redis => {
                elasticache::reconcile(store, (c, &a.elasticache), hint, req, &tier).await
            }
            ResourceKind::Smtp => smtp::reconcile(&self.keys(&a), c, req, &tier).await,
        }?;
        provisioned.conditions.extend(c.refused.condition());
        Ok(provisioned)
    }

    async fn delete(&self, req: &ResourceRequest) -> Result<Deletion, ProviderError> {
        let (tier, a) = self.tier_clients(&req.strategy).await?;
        let c = &a.clients;
        let req = &resolved(c, req, &tier, true).await?;
        let deleted = match req.kind {
            ResourceKind::Postgres => {
                database::delete::<Rds>(self.credentials.as_ref(), c, req, &tier).await?
            }
            ResourceKind::Redis => {
                database::delete::<ElastiCache>(self.credentials.as_ref(), c, req, &tier).await?
            }
            ResourceKind::BlobStorage => {
                return s3::delete(&self.keys(&a), &c.s3, &c.iam, req, &tier).await;
            }
            ResourceKind::Smtp => return smtp::delete(&self.keys(&a), &c.iam, req).await,
        };
        if deleted == Deletion::Done {
            c.watched.forget(&req.identifier);
            network::released(c, req, &self.settings.vpc).await?;
        }
        Ok(deleted)
    }

    async fn plan(&self, req: &ResourceRequest) -> Result<Vec<Change>, ProviderError> {
        validate_strategy(req.kind, &req.strategy)?;
        let (tier, a) = self.tier_clients(&req.strategy).await?;
        let c = &a.clients;
        let req = &resolved(c, req, &tier, false).await?;
        match req.kind {
            ResourceKind::Postgres => {
                database::plan::<Rds>((c, &a.rds.instances), req, &tier).await
            }
            ResourceKind::Redis => {
                database::plan::<ElastiCache>((c, &a.elasticache.groups), req, &tier).await
            }
            ResourceKind::BlobStorage => s3::plan((c, &a.s3), req).await,
            ResourceKind::Smtp => smtp::plan(&self.keys(&a), c, req, &tier).await,
        }
    }

    async fn cloud_state(&self, req: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        validate_strategy(req.kind, &req.strategy)?;
        let (tier, a) = self.tier_clients(&req.strategy).await?;
        let c = &a.clients;
        let req = &resolved(c, req, &tier, false).await?;
        let id = req.identifier.as_str();
        let state = match req.kind {
            ResourceKind::Postgres => database::state::<Rds>(c, id).await?,
            ResourceKind::Redis => database::state::<ElastiCache>(c, id).await?,
            ResourceKind::BlobStorage => match s3::describe(&c.s3, id).await? {
                Some(_) => format!("S3 bucket {id} exists in {}", c.region),
                None => format!("S3 bucket {id} does not exist in {}", c.region),
            },
            ResourceKind::Smtp => {
                let user = smtp::user_name(id);
                match iam_user::user_exists(&c.iam, &user).await? {
                    true => format!("IAM user {user} (SES, {}) exists", c.region),
                    false => format!("IAM user {user} does not exist"),
                }
            }
        };
        Ok(Some(state))
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
        let req = &conformed_snapshot(req)?;
        // Snapshots live where their resource does: its tier's region.
        let (_, a) = self.tier_clients(&req.strategy).await?;
        let c = &a.clients;
        // Whose the resource is, by its tags, before anything is taken.
        let source = match &req.resource_identifier {
            Some(id) => Some((id.as_str(), identity::tags_of(c, req.kind, id).await?)),
            None => None,
        };
        match req.kind {
            ResourceKind::Redis => {
                let what = ElastiCache::SERVICE.what;
                snapshots::take(&c.elasticache, what, req, source).await
            }
            ResourceKind::Postgres => snapshots::take(&c.rds, Rds::SERVICE.what, req, source).await,
            kind @ (ResourceKind::BlobStorage | ResourceKind::Smtp) => Err(
                ProviderError::permanent(format!("a {kind:?} has no snapshots")),
            ),
        }
    }

    async fn delete_snapshot(&self, req: &SnapshotRequest) -> Result<Deletion, ProviderError> {
        // A snapshot is deleted by its own identifier; which resource it
        // was of does not matter.
        let snapshot_rules = match req.kind {
            ResourceKind::Redis => IdentifierRules::ElastiCacheSnapshot,
            _ => IdentifierRules::RdsSnapshot,
        };
        let req = &SnapshotRequest {
            identifier: snapshot_rules.conform(&req.identifier),
            ..req.clone()
        };
        let tier = strategy::parse(&req.strategy).unwrap_or_default();
        let a = self.in_account(&tier).await?;
        let c = &a.clients;
        match req.kind {
            ResourceKind::Redis => snapshots::remove(&c.elasticache, req).await,
            ResourceKind::Postgres => snapshots::remove(&c.rds, req).await,
            ResourceKind::BlobStorage | ResourceKind::Smtp => Ok(Deletion::Done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
            req.recorded_identifier = Some(identity::own_separate(&req));
            assert!(claimed(&req, &tier, false).is_ok(), "{kind:?}");
            let other = ResourceRequest {
                name: "other".into(),
                ..req.clone()
            };
            req.recorded_identifier = Some(identity::own_separate(&other));
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
            };
            assert!(conformed_snapshot(&snap).is_err(), "{kind:?}");
            snap.resource_identifier = Some(snap.resource_default_identifier.clone());
            assert!(conformed_snapshot(&snap).is_ok(), "{kind:?}");
            snap.resource_identifier = Some(snap.resource_separate_identifier.clone());
            assert!(conformed_snapshot(&snap).is_ok(), "{kind:?}");
            snap.resource_identifier = None;
            assert!(conformed_snapshot(&snap).is_ok(), "{kind:?}: none recorded");
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
