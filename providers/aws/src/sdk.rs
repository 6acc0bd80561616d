//! Building AWS SDK clients: the standard credential chain (env, web
//! identity/IRSA, profile), the region, and an endpoint override
//! (`AWS_ENDPOINT_URL`) so tests run against a local emulator.

use aws_config::{BehaviorVersion, Region, SdkConfig};

/// Where and how to reach AWS.
#[derive(Clone, Debug, Default)]
pub struct AwsSettings {
    /// Region for calls; when `None`, the standard chain (`AWS_REGION`,
    /// profile) decides.
    pub region: Option<String>,
    /// Endpoint override; when `None`, `AWS_ENDPOINT_URL` (if set) applies.
    pub endpoint_url: Option<String>,
}

/// The SDK configuration from the standard chain plus `settings`.
pub async fn sdk_config(settings: &AwsSettings) -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if let Some(region) = &settings.region {
        loader = loader.region(Region::new(region.clone()));
    }
    if let Some(url) = &settings.endpoint_url {
        loader = loader.endpoint_url(url.clone());
    }
    loader.load().await
}

/// An S3 client. With an endpoint override, path-style addressing is used:
/// emulators and private endpoints do not resolve `<bucket>.<host>` names.
pub fn s3_client(config: &SdkConfig) -> aws_sdk_s3::Client {
    let s3 = aws_sdk_s3::config::Builder::from(config)
        .force_path_style(config.endpoint_url().is_some())
        .build();
    aws_sdk_s3::Client::from_conf(s3)
}
