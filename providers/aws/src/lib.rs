//! The `aws` provider: Postgres as RDS, Redis as ElastiCache, BlobStorage
//! as S3, SMTP credentials through IAM + SES, and manual snapshots. Every AWS call is
//! counted; errors name the operation, the resource and AWS's reason.

pub mod calls;
mod credentials;
mod elasticache;
mod errors;
mod iam_user;
mod rds;
mod s3;
mod sdk;
mod smtp;
pub mod smtp_password;
mod snapshots;
mod strategy;
mod tags;
mod versions;

use std::{collections::HashMap, sync::Arc, time::Duration};

use aws_config::SdkConfig;
use cro_provider_api::{
    Deletion, Provider, ProviderError, Provisioned, ResourceKind, ResourceRequest, SnapshotRequest,
    Snapshotted,
};
use serde_json::Value;
use strategy::Fields;
use tokio::sync::Mutex;

pub use calls::{CallOutcome, Calls};
pub use sdk::{AwsSettings, s3_client, sdk_config};

pub const NAME: &str = "aws";

/// How often a complete AWS resource is looked at again for out-of-band
/// changes (AWS sends no events): a few calls per resource per hour.
pub const RECHECK: Duration = Duration::from_secs(3600);

pub struct AwsProvider {
    kube: kube::Client,
    settings: AwsSettings,
    pub calls: Arc<Calls>,
    configs: Mutex<HashMap<String, SdkConfig>>,
}

impl AwsProvider {
    pub fn new(kube: kube::Client, settings: AwsSettings) -> Self {
        AwsProvider {
            kube,
            settings,
            calls: Arc::default(),
            configs: Mutex::default(),
        }
    }

    /// SDK configuration for the tier's region (or the default chain's).
    async fn config(&self, region: Option<&str>) -> Result<SdkConfig, ProviderError> {
        let key = region.unwrap_or_default().to_string();
        let mut configs = self.configs.lock().await;
        if let Some(c) = configs.get(&key) {
            return Ok(c.clone());
        }
        let settings = AwsSettings {
            region: region.map(str::to_string).or(self.settings.region.clone()),
            ..self.settings.clone()
        };
        let config = sdk_config(&settings).await;
        if config.region().is_none() {
            return Err(ProviderError::InvalidStrategy(
                "no AWS region: set \"region\" in the tier of cloud-resources-aws-strategies, or give the operator a default region (--aws-region / AWS_REGION)".into(),
            ));
        }
        configs.insert(key, config.clone());
        Ok(config)
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

#[async_trait::async_trait]
impl Provider for AwsProvider {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn reconcile(&self, req: &ResourceRequest) -> Result<Provisioned, ProviderError> {
        validate_strategy(req.kind, &req.strategy)?;
        let tier = strategy::parse(&req.strategy)?;
        match req.kind {
            ResourceKind::Postgres => {
                let config = self.config(tier.region.as_deref()).await?;
                rds::reconcile(self, &aws_sdk_rds::Client::new(&config), req, &tier).await
            }
            ResourceKind::BlobStorage => {
                let config = self.config(tier.region.as_deref()).await?;
                let region = config.region().map(|r| r.to_string()).unwrap_or_default();
                s3::reconcile(
                    self,
                    &s3_client(&config),
                    &aws_sdk_iam::Client::new(&config),
                    req,
                    &region,
                )
                .await
            }
            ResourceKind::Redis => {
                let config = self.config(tier.region.as_deref()).await?;
                elasticache::reconcile(self, &aws_sdk_elasticache::Client::new(&config), req, &tier)
                    .await
            }
            ResourceKind::Smtp => {
                let config = self.config(tier.region.as_deref()).await?;
                let region = config.region().map(|r| r.to_string()).unwrap_or_default();
                smtp::reconcile(self, &config, req, &tier, &region).await
            }
        }
    }

    async fn delete(&self, req: &ResourceRequest) -> Result<Deletion, ProviderError> {
        let tier = strategy::parse(&req.strategy)?;
        match req.kind {
            ResourceKind::Postgres => {
                let config = self.config(tier.region.as_deref()).await?;
                rds::delete(self, &aws_sdk_rds::Client::new(&config), req, &tier).await
            }
            ResourceKind::BlobStorage => {
                let config = self.config(tier.region.as_deref()).await?;
                s3::delete(
                    self,
                    &s3_client(&config),
                    &aws_sdk_iam::Client::new(&config),
                    req,
                    &tier,
                )
                .await
            }
            ResourceKind::Redis => {
                let config = self.config(tier.region.as_deref()).await?;
                elasticache::delete(self, &aws_sdk_elasticache::Client::new(&config), req, &tier)
                    .await
            }
            ResourceKind::Smtp => {
                let config = self.config(tier.region.as_deref()).await?;
                smtp::delete(self, &aws_sdk_iam::Client::new(&config), req).await
            }
        }
    }

    async fn snapshot(&self, req: &SnapshotRequest) -> Result<Snapshotted, ProviderError> {
        // Snapshots live where their resource does: its tier's region.
        let tier = strategy::parse(&req.strategy)?;
        let config = self.config(tier.region.as_deref()).await?;
        match req.kind {
            ResourceKind::Redis => {
                snapshots::elasticache(self, &aws_sdk_elasticache::Client::new(&config), req).await
            }
            _ => snapshots::rds(self, &aws_sdk_rds::Client::new(&config), req).await,
        }
    }

    async fn delete_snapshot(&self, req: &SnapshotRequest) -> Result<Deletion, ProviderError> {
        let tier = strategy::parse(&req.strategy).unwrap_or_default();
        let config = self.config(tier.region.as_deref()).await?;
        match req.kind {
            ResourceKind::Redis => {
                snapshots::delete_elasticache(self, &aws_sdk_elasticache::Client::new(&config), req)
                    .await
            }
            _ => snapshots::delete_rds(self, &aws_sdk_rds::Client::new(&config), req).await,
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
