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
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    service: String,
    operation: String,
    outcome: String,
}

/// The Go operator's `cro_vpc_action` labels (`SetVpcAction`,
/// pkg/resources/custom_metrics.go).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VpcActionLabels {
    action: String,
    status: String,
    error: String,
}

/// `cro_aws_api_calls_total{service, operation, outcome}`; outcome is
/// `success`, `throttled` or `error`. Also the Go operator's
/// `cro_vpc_action`: 1 for a failed creation of the database network's
/// VPC, labelled with AWS's error code, cleared once one is created.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabels {
    action: String,
}

#[derive(Clone, Debug, Default)]
pub struct Calls {
    calls: Family<CallLabels, Counter>,
    vpc_actions: Family<VpcActionLabels, Gauge>,
    refused: Family<ActionLabels, Gauge>,
}

impl Calls {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "cro_aws_api_calls",
            "AWS API call attempts, by service, operation and outcome",
            self.calls.clone(),
        );
        registry.register(
            "cro_vpc_action",
            "1 after a failed creation of the database network's VPC, by AWS's error code; cleared once one is created",
            self.vpc_actions.clone(),
        );
        registry.register(
            "cro_aws_permission_refused",
            "1 while the operator's AWS identity is refused a read it falls back from (see the AWSPermissions condition), by action",
            self.refused.clone(),
        );
    }

    /// Whether the identity is refused `action` (see `permissions`).
    pub fn refused(&self, action: &str, refused: bool) {
        let labels = ActionLabels {
            action: action.to_string(),
        };
        if refused {
            self.refused.get_or_create(&labels).set(1);
        } else {
            self.refused.remove(&labels);
        }
    }

    /// The actions shown as refused.
    #[cfg(test)]
    pub fn refused_now(&self) -> Vec<String> {
        let mut registry = Registry::default();
        registry.register("r", "", self.refused.clone());
        let mut text = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
        (text.lines())
            .filter(|l| l.starts_with("r{") && l.ends_with(" 1"))
            .filter_map(|l| Some(l.split('"').nth(1)?.to_string()))
            .collect()
    }

    /// What creating the database network's VPC came to, as the Go
    /// operator reports it (`createNetwork`, cluster_network_provider.go).
    pub fn vpc_created(&self, error_code: Option<&str>) {
        match error_code {
            Some(code) => {
                let labels = VpcActionLabels {
                    action: "create".into(),
                    status: "failed".into(),
                    error: code.into(),
                };
                self.vpc_actions.get_or_create(&labels).set(1);
            }
            None => self.vpc_actions.clear(),
        }
    }

    fn record(&self, service: &str, operation: &str, outcome: &str) {
        self.calls
            .get_or_create(&CallLabels {
                service: service.to_ascii_lowercase(),
                operation: operation.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
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
