//! The SDK clients for one tier's account and region, built once and
//! cached: every client counts its calls through the same interceptor.

use aws_config::SdkConfig;

use crate::calls::Calls;

#[derive(Clone, Debug)]
pub struct Clients {
    pub region: String,
    pub rds: aws_sdk_rds::Client,
    pub elasticache: aws_sdk_elasticache::Client,
    pub s3: aws_sdk_s3::Client,
    pub iam: aws_sdk_iam::Client,
    pub ses: aws_sdk_sesv2::Client,
}

/// A client of `sdk` for `config`, counting its calls.
macro_rules! client {
    ($sdk:ident, $config:expr, $calls:expr) => {
        $sdk::Client::from_conf(
            $sdk::config::Builder::from($config)
                .interceptor($calls.interceptor())
                .build(),
        )
    };
}

impl Clients {
    pub fn new(config: &SdkConfig, calls: &Calls) -> Self {
        Clients {
            region: config.region().map(|r| r.to_string()).unwrap_or_default(),
            rds: client!(aws_sdk_rds, config, calls),
            elasticache: client!(aws_sdk_elasticache, config, calls),
            // With an endpoint override, path-style addressing: emulators
            // and private endpoints do not resolve `<bucket>.<host>`.
            s3: aws_sdk_s3::Client::from_conf(
                aws_sdk_s3::config::Builder::from(config)
                    .force_path_style(config.endpoint_url().is_some())
                    .interceptor(calls.interceptor())
                    .build(),
            ),
            iam: client!(aws_sdk_iam, config, calls),
            ses: client!(aws_sdk_sesv2, config, calls),
        }
    }
}
