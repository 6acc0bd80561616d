//! Turning SDK results into counted calls and errors a person can act on.

use std::fmt::Debug;

use aws_sdk_rds::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use cro_provider_api::ProviderError;

use crate::calls::{CallOutcome, Calls};

const THROTTLING: [&str; 5] = [
    "Throttling",
    "ThrottlingException",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "SlowDown",
];

/// Records the call and returns its result; `operation` is the API name,
/// e.g. `rds:CreateDBInstance`.
pub fn counted<T, E, R>(
    calls: &Calls,
    service: &'static str,
    operation: &'static str,
    result: Result<T, SdkError<E, R>>,
) -> Result<T, SdkError<E, R>>
where
    E: ProvideErrorMetadata,
{
    let outcome = match &result {
        Ok(_) => CallOutcome::Success,
        Err(e) if e.code().is_some_and(|c| THROTTLING.contains(&c)) => CallOutcome::Throttled,
        Err(_) => CallOutcome::Error,
    };
    calls.record(service, operation, outcome);
    result
}

/// A failed call as a retryable provider error naming the operation and
/// resource, with AWS's own code and message.
pub fn api_error<E, R>(operation: &str, resource: &str, e: SdkError<E, R>) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: Debug,
{
    let detail = match (e.code(), e.message()) {
        (Some(code), _) if THROTTLING.contains(&code) => {
            format!("AWS is throttling requests ({code}); retrying with backoff")
        }
        (Some(code), Some(msg)) => format!("{code}: {msg}"),
        _ => DisplayErrorContext(&e).to_string(),
    };
    ProviderError::Api(format!("{operation} {resource}: {detail}"))
}
