//! The `aws` provider: RDS, ElastiCache, S3, IAM+SES and snapshots.

mod sdk;

pub use sdk::{AwsSettings, s3_client, sdk_config};
