//! The `aws` provider: Postgres as RDS, Redis as ElastiCache, BlobStorage
//! as S3, SMTP credentials through IAM + SES, and manual snapshots. Every
//! AWS call attempt is counted (an interceptor on each client); errors name
//! the operation, the resource and AWS's reason, and carry their kind.

mod budget;
mod calls;
mod cco;
mod clients;
mod credentials;
mod database;
mod elasticache;
mod errors;
mod iam_user;
mod listing;
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
use strategy::Fields;
use tokio::sync::Mutex;

pub use budget::Budget;
pub use credentials::SecretCache;
pub use sdk::{AwsSettings, Sts, sdk_config};

pub const NAME: &str = "aws";

/// How often a complete AWS resource is looked at again for out-of-band
/// changes (AWS sends no events): a few calls per resource per hour.
pub const RECHECK: Duration = Duration::from_secs(3600);

pub struct AwsProvider {
    credentials: credentials::Store,
    settings: AwsSettings,
    calls: Calls,
    configs: Mutex<HashMap<Account, Arc<Clients>>>,
}

/// Where a tier's calls go and as whom.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Account {
    region: Option<String>,
    role_arn: Option<String>,
    external_id: Option<String>,
}

impl AwsProvider {
    pub fn new(kube: kube::Client, settings: AwsSettings) -> Self {
        AwsProvider {
            credentials: credentials::Store::new(kube, None),
            settings,
            calls: Calls::default(),
            configs: Mutex::default(),
        }
    }

    /// Reads its credentials Secrets from the operator's watch of them.
    pub fn with_cache(mut self, cache: Arc<dyn SecretCache>) -> Self {
        self.credentials = credentials::Store::new(self.credentials.client().clone(), Some(cache));
        self
    }

    /// The clients for the tier: its region (or the operator's default),
    /// under its role when it names one. Cached per region and role; a
    /// role that cannot be assumed is not cached, so fixing its trust
    /// policy heals the CR at the next reconcile.
    async fn clients(&self, tier: &strategy::Tier) -> Result<Arc<Clients>, ProviderError> {
        let account = Account {
            region: tier.region.clone().or_else(|| self.settings.region.clone()),
            role_arn: tier.role_arn.clone(),
            external_id: tier.external_id.clone(),
        };
        let mut configs = self.configs.lock().await;
        if let Some(c) = configs.get(&account) {
            return Ok(c.clone());
        }
        let base = sdk_config(account.region.as_deref(), self.settings.sts.as_ref()).await;
        if base.region().is_none() {
            return Err(ProviderError::invalid_strategy(
                "no AWS region: set \"region\" in the tier of cloud-resources-aws-strategies, or give the operator a default region (--aws-region / AWS_REGION, or the OpenShift Infrastructure's)",
            ));
        }
        let config = match &account.role_arn {
            Some(role) => sdk::assume_role(&base, role, account.external_id.as_deref()).await?,
            None => base,
        };
        let clients = Arc::new(Clients::new(&config, &self.calls, self.settings.budget));
        configs.insert(account, clients.clone());
        Ok(clients)
    }

    /// A request's tier and the clients its calls go through.
    async fn tier_clients(
        &self,
        strategy: &Value,
    ) -> Result<(strategy::Tier, Arc<Clients>), ProviderError> {
        let tier = strategy::parse(strategy)?;
        let c = self.clients(&tier).await?;
        Ok((tier, c))
    }
}

/// Checks a tier's strategy for `kind` without calling AWS: every section
/// key and field name and type. Reconcile runs it first, and
/// `cloud-resource-operator validate` runs it offline.
pub fn validate_strategy(kind: ResourceKind, strategy: &Value) -> Result<(), ProviderError> {
    let tier = strategy::parse(strategy)?;
    let (create, delete) = match kind {
        ResourceKind::Postgres => (Some(&rds::CREATE_STRATEGY), Some(&rds::DELETE_STRATEGY)),
        ResourceKind::Redis => (
            Some(&elasticache::CREATE_STRATEGY),
            Some(&elasticache::DELETE_STRATEGY),
        ),
        // The bucket is created with fixed, safe settings; the Go
        // operator's createStrategy for it is accepted and ignored.
        ResourceKind::BlobStorage => (None, Some(&s3::DELETE_STRATEGY)),
        ResourceKind::Smtp => (Some(&smtp::CREATE_STRATEGY), None),
    };
    if let Some(section) = create {
        Fields::new(section, &tier.create)?;
    }
    if let Some(section) = delete {
        Fields::new(section, &tier.delete)?;
    }
    Ok(())
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

/// The request with identifiers AWS accepts (unchanged when they already
/// are, as every identifier the Go operator used successfully is).
fn conformed(req: &ResourceRequest) -> ResourceRequest {
    ResourceRequest {
        identifier: rules(req.kind).conform(&req.identifier),
        ..req.clone()
    }
}

/// `req` for a database the tier names itself (`DBInstanceIdentifier`,
/// `ReplicationGroupId`) while the CR records no identifier yet: under that
/// name, as the Go operator used it.
fn pinned<D: Database>(
    req: &ResourceRequest,
    tier: &strategy::Tier,
    deleting: bool,
) -> Result<ResourceRequest, ProviderError> {
    let mut req = req.clone();
    if req.recorded_identifier.is_none()
        && let Some(id) = database::named_by_tier::<D>(tier, deleting)?
    {
        req.identifier = rules(req.kind).conform(&id);
    }
    Ok(req)
}

fn conformed_snapshot(req: &SnapshotRequest) -> SnapshotRequest {
    let snapshot_rules = match req.kind {
        ResourceKind::Redis => IdentifierRules::ElastiCacheSnapshot,
        _ => IdentifierRules::RdsSnapshot,
    };
    SnapshotRequest {
        identifier: snapshot_rules.conform(&req.identifier),
        resource_identifier: rules(req.kind).conform(&req.resource_identifier),
        ..req.clone()
    }
}

#[async_trait::async_trait]
impl Provider for AwsProvider {
    fn name(&self) -> &'static str {
        NAME
    }

    fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.calls.register(registry);
    }

    async fn reconcile(&self, req: &ResourceRequest) -> Result<Provisioned, ProviderError> {
        validate_strategy(req.kind, &req.strategy)?;
        let req = &conformed(req);
        let (tier, c) = self.tier_clients(&req.strategy).await?;
        match req.kind {
            ResourceKind::Postgres => {
                let req = &pinned::<Rds>(req, &tier, false)?;
                rds::reconcile(&self.credentials, &c, req, &tier).await
            }
            ResourceKind::BlobStorage => s3::reconcile(self, &c, req).await,
            ResourceKind::Redis => {
                let req = &pinned::<ElastiCache>(req, &tier, false)?;
                elasticache::reconcile(&c, req, &tier).await
            }
            ResourceKind::Smtp => smtp::reconcile(self, &c, req, &tier).await,
        }
    }

    async fn delete(&self, req: &ResourceRequest) -> Result<Deletion, ProviderError> {
        let req = &conformed(req);
        let (tier, c) = self.tier_clients(&req.strategy).await?;
        match req.kind {
            ResourceKind::Postgres => {
                let req = &pinned::<Rds>(req, &tier, true)?;
                database::delete::<Rds>(&self.credentials, &c, req, &tier).await
            }
            ResourceKind::BlobStorage => s3::delete(self, &c.s3, &c.iam, req, &tier).await,
            ResourceKind::Redis => {
                let req = &pinned::<ElastiCache>(req, &tier, true)?;
                database::delete::<ElastiCache>(&self.credentials, &c, req, &tier).await
            }
            ResourceKind::Smtp => smtp::delete(self, &c.iam, req).await,
        }
    }

    async fn plan(&self, req: &ResourceRequest) -> Result<Vec<Change>, ProviderError> {
        validate_strategy(req.kind, &req.strategy)?;
        let req = &conformed(req);
        let (tier, c) = self.tier_clients(&req.strategy).await?;
        match req.kind {
            ResourceKind::Postgres => {
                database::plan::<Rds>(&c, &pinned::<Rds>(req, &tier, false)?, &tier).await
            }
            ResourceKind::Redis => {
                let req = &pinned::<ElastiCache>(req, &tier, false)?;
                database::plan::<ElastiCache>(&c, req, &tier).await
            }
            ResourceKind::BlobStorage => s3::plan(&c, req).await,
            ResourceKind::Smtp => smtp::plan(&c.iam, req).await,
        }
    }

    async fn snapshot(&self, req: &SnapshotRequest) -> Result<Snapshotted, ProviderError> {
        let req = &conformed_snapshot(req);
        // Snapshots live where their resource does: its tier's region.
        let (_, c) = self.tier_clients(&req.strategy).await?;
        match req.kind {
            ResourceKind::Redis => {
                snapshots::take(&c.elasticache, ElastiCache::SERVICE.what, req).await
            }
            _ => snapshots::take(&c.rds, Rds::SERVICE.what, req).await,
        }
    }

    async fn delete_snapshot(&self, req: &SnapshotRequest) -> Result<Deletion, ProviderError> {
        let req = &conformed_snapshot(req);
        let tier = strategy::parse(&req.strategy).unwrap_or_default();
        let c = self.clients(&tier).await?;
        match req.kind {
            ResourceKind::Redis => snapshots::remove(&c.elasticache, req).await,
            _ => snapshots::remove(&c.rds, req).await,
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
            (named, Some("computed"), false, "computed"),
        ];
        for (tier, recorded, deleting, want) in rows {
            req.recorded_identifier = recorded.map(str::to_string);
            let got = pinned::<Rds>(&req, &tier, deleting).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(got.identifier, want, "{tier:?} {recorded:?} {deleting}");
        }
        let redis = tier(
            json!({"createStrategy": {"ReplicationGroupId": "pinned-cache"},
            "deleteStrategy": {"RetainPrimaryCluster": false, "FinalSnapshotIdentifier": "last"}}),
        );
        let mut req = ResourceRequest::offline(ResourceKind::Redis, json!({}));
        req.identifier = "computed".into();
        let got = pinned::<ElastiCache>(&req, &redis, true).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got.identifier, "pinned-cache");
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
