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
    metrics::{counter::Counter, family::Family},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    service: String,
    operation: String,
    outcome: String,
}

/// `cro_aws_api_calls_total{service, operation, outcome}`; outcome is
/// `success`, `throttled` or `error`.
#[derive(Clone, Debug, Default)]
pub struct Calls(Family<CallLabels, Counter>);

impl Calls {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "cro_aws_api_calls",
            "AWS API call attempts, by service, operation and outcome",
            self.0.clone(),
        );
    }

    fn record(&self, service: &str, operation: &str, outcome: &str) {
        self.0
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
