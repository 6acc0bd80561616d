//! Every AWS call attempt counted by service, operation and outcome (the
//! budget the operator is held to), by an interceptor on every SDK client
//! rather than a wrapper at each call site: it also sees the attempts the
//! SDK retries by itself.

use aws_sdk_rds::config::{
    ConfigBag, RuntimeComponents, interceptors::FinalizerInterceptorContextRef,
};
use aws_smithy_runtime_api::{
    box_error::BoxError,
    client::{interceptors::Intercept, orchestrator::Metadata},
    http::Response,
};
use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use cro_provider_api::{MetricFamily, MetricKind};

/// `cro_aws_api_calls_total{service, operation, outcome}`; outcome is
/// `success`, `throttled` or `error`. Also the Go operator's
/// `cro_vpc_action{action, status, error}` (`SetVpcAction`,
/// pkg/resources/custom_metrics.go): 1 for a failed creation of the
/// database network's VPC, labelled with AWS's error code, cleared once one
/// is created; and `cro_aws_permission_refused{action}`. Kept as plain
/// counts the operator renders (see `MetricFamily`).
#[derive(Clone, Debug, Default)]
pub struct Calls(Arc<Mutex<Counts>>);

#[derive(Debug, Default)]
struct Counts {
    /// (service, operation, outcome) → attempts.
    calls: BTreeMap<(String, String, String), u64>,
    /// The failed VPC creation's AWS error code, if the last one failed.
    vpc_failed: Option<String>,
    /// The actions refused now.
    refused: std::collections::BTreeSet<String>,
}

impl Calls {
    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every family, as the operator renders it on `/metrics`.
    pub fn families(&self) -> Vec<MetricFamily> {
        let counts = self.counts();
        let calls = (counts.calls.iter())
            .map(|((service, operation, outcome), n)| {
                let labels = vec![
                    ("service", service.clone()),
                    ("operation", operation.clone()),
                    ("outcome", outcome.clone()),
                ];
                (labels, *n)
            })
            .collect();
        let vpc = (counts.vpc_failed.iter())
            .map(|code| {
                let labels = vec![
                    ("action", "create".to_string()),
                    ("status", "failed".to_string()),
                    ("error", code.clone()),
                ];
                (labels, 1)
            })
            .collect();
        let refused = (counts.refused.iter())
            .map(|action| (vec![("action", action.clone())], 1))
            .collect();
        vec![
            MetricFamily {
                name: "cro_aws_api_calls",
                help: "AWS API call attempts, by service, operation and outcome",
                kind: MetricKind::Counter,
                series: calls,
            },
            MetricFamily {
                name: "cro_vpc_action",
                help: "1 after a failed creation of the database network's VPC, by AWS's error code; cleared once one is created",
                kind: MetricKind::Gauge,
                series: vpc,
            },
            MetricFamily {
                name: "cro_aws_permission_refused",
                help: "1 while the operator's AWS identity is refused a read it falls back from (see the AWSPermissions condition), by action",
                kind: MetricKind::Gauge,
                series: refused,
            },
        ]
    }

    /// Whether the identity is refused `action` (see `permissions`).
    pub fn refused(&self, action: &str, refused: bool) {
        let mut counts = self.counts();
        if refused {
            counts.refused.insert(action.to_string());
        } else {
            counts.refused.remove(action);
        }
    }

    /// The actions shown as refused.
    #[cfg(test)]
    pub fn refused_now(&self) -> Vec<String> {
        self.counts().refused.iter().cloned().collect()
    }

    /// What creating the database network's VPC came to, as the Go
    /// operator reports it (`createNetwork`, cluster_network_provider.go).
    pub fn vpc_created(&self, error_code: Option<&str>) {
        self.counts().vpc_failed = error_code.map(str::to_string);
    }

    fn record(&self, service: &str, operation: &str, outcome: &str) {
        let key = (
            service.to_ascii_lowercase(),
            operation.to_string(),
            outcome.to_string(),
        );
        *self.counts().calls.entry(key).or_default() += 1;
    }

    /// The interceptor to put on every client.
    pub fn interceptor(&self) -> CountCalls {
        CountCalls(self.clone())
    }
}

#[derive(Debug)]
pub struct CountCalls(Calls);

impl Intercept for CountCalls {
    fn name(&self) -> &'static str {
        "CountCalls"
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let (service, operation) = cfg
            .load::<Metadata>()
            .map(|m| (m.service().to_string(), m.name().to_string()))
            .unwrap_or_else(|| ("unknown".into(), "unknown".into()));
        let outcome = match context.response() {
            Some(r) if r.status().is_success() => "success",
            Some(r) if throttled(r) => "throttled",
            // An error response, or none at all (network, timeout).
            _ => "error",
        };
        self.0.record(&service, &operation, outcome);
        Ok(())
    }
}

/// Whether an error response asks for fewer calls: HTTP 429, or a
/// throttling code in the (buffered) body or the JSON protocols' header.
fn throttled(response: &Response) -> bool {
    if response.status().as_u16() == 429 {
        return true;
    }
    let header = response
        .headers()
        .get("x-amzn-errortype")
        .unwrap_or_default();
    let body = response
        .body()
        .bytes()
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    crate::errors::THROTTLING.iter().any(|code| {
        header.starts_with(code)
            || body.contains(&format!("<Code>{code}</Code>"))
            || body.contains(&format!("\"{code}\""))
    })
}
