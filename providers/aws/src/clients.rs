//! The SDK clients for one tier's account and region, built once and
//! cached: every client counts its calls through the same interceptor.

use aws_config::SdkConfig;
use cro_provider_api::Fence;

use crate::{
    budget::{Budget, limited_client},
    calls::Calls,
    cloud_metrics::Watched,
};

pub struct Clients {
    pub region: String,
    pub rds: aws_sdk_rds::Client,
    pub elasticache: aws_sdk_elasticache::Client,
    pub s3: aws_sdk_s3::Client,
    pub iam: aws_sdk_iam::Client,
    pub ses: aws_sdk_sesv2::Client,
    pub tagging: aws_sdk_resourcegroupstagging::Client,
    pub ec2: aws_sdk_ec2::Client,
    pub cloudwatch: aws_sdk_cloudwatch::Client,
    /// The call accounting these clients report to.
    pub calls: Calls,
    /// Held while the cluster's database network is made or removed, so
    /// two reconciles never make two of it.
    pub network: tokio::sync::Mutex<()>,
    /// Network creates whose answer was lost (see `lost_creates`).
    pub lost_creates: crate::lost_creates::LostCreates,
    /// The databases whose CloudWatch metrics are scraped.
    pub watched: Watched,
    /// The reads this identity is refused, and falls back from.
    pub refused: crate::permissions::Refused,
}

/// A client of `sdk` for `config`, counting its calls, within its own
/// budget (each service is throttled on its own), behind the fence.
///
/// Its retries draw on no SDK retry quota: the standard one is 500 tokens
/// per service for the whole process (every account), a lost answer costs
/// 5 or 10 and a success gives 1 back, so after some hundred lost answers
/// no call was retried and every lost answer failed its reconcile into a
/// backoff of up to five minutes. What the quota guards against, retries
/// piling onto a struggling service, the call budget already bounds: it
/// counts every attempt, retries included.
macro_rules! client {
    ($sdk:ident, $config:expr, $calls:expr, $budget:expr) => {{
        use $sdk::config::retry::{RetryPartition, TokenBucket};
        let partition = RetryPartition::custom(stringify!($sdk))
            .token_bucket(TokenBucket::unlimited())
            .build();
        $sdk::config::Builder::from($config)
            .interceptor($calls.interceptor())
            .http_client(limited_client($budget.0, $budget.1.clone()))
            .retry_partition(partition)
    }};
}

impl Clients {
    pub fn new(
        config: &SdkConfig,
        calls: &Calls,
        budget: (Budget, &Fence),
        memory: &std::sync::Arc<cro_provider_api::Memory>,
    ) -> Self {
        let s3 = client!(aws_sdk_s3, config, calls, budget)
            // With an endpoint override, path-style addressing: emulators
            // and private endpoints do not resolve `<bucket>.<host>`.
            .force_path_style(config.endpoint_url().is_some());
        Clients {
            region: config.region().map(|r| r.to_string()).unwrap_or_default(),
            rds: aws_sdk_rds::Client::from_conf(
                client!(aws_sdk_rds, config, calls, budget).build(),
            ),
            elasticache: aws_sdk_elasticache::Client::from_conf(
                client!(aws_sdk_elasticache, config, calls, budget).build(),
            ),
            s3: aws_sdk_s3::Client::from_conf(s3.build()),
            iam: aws_sdk_iam::Client::from_conf(
                client!(aws_sdk_iam, config, calls, budget).build(),
            ),
            ses: aws_sdk_sesv2::Client::from_conf(
                client!(aws_sdk_sesv2, config, calls, budget).build(),
            ),
            tagging: aws_sdk_resourcegroupstagging::Client::from_conf(
                client!(aws_sdk_resourcegroupstagging, config, calls, budget).build(),
            ),
            ec2: aws_sdk_ec2::Client::from_conf(
                client!(aws_sdk_ec2, config, calls, budget).build(),
            ),
            cloudwatch: aws_sdk_cloudwatch::Client::from_conf(
                client!(aws_sdk_cloudwatch, config, calls, budget).build(),
            ),
            calls: calls.clone(),
            network: tokio::sync::Mutex::new(()),
            lost_creates: crate::lost_creates::LostCreates::new(memory),
            watched: Watched::default(),
            refused: Default::default(),
        }
    }
}
