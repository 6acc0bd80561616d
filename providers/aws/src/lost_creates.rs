//! EC2 creates that have no idempotency token (CreateVpc,
//! CreateVpcPeeringConnection: EC2's idempotency guide lists neither) and
//! whose answer was lost. Such a create is sent once, without the SDK's
//! retry; after a lost answer, what it may have made is looked for by its
//! tags, and no second create is sent until EC2's describes, which are
//! eventually consistent, have had time to show the first one's.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use aws_sdk_ec2::{
    config::{http::HttpResponse, retry::RetryConfig},
    error::SdkError,
};
use cro_provider_api::{ErrorKind, ProviderError};

/// How long a lost create's object may take to show in describes (AWS
/// documents no bound; seconds are what it shows).
const SHOWS_WITHIN: Duration = Duration::from_secs(30);

#[derive(Default)]
pub struct LostCreates(Mutex<HashMap<String, Instant>>);

impl LostCreates {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that the create of `what` may have reached EC2 and lost its
    /// answer (a timeout, a dropped connection).
    pub fn lost<E>(&self, what: &str, e: &SdkError<E, HttpResponse>) {
        if answer_lost(e) {
            self.map().insert(what.to_string(), Instant::now());
        }
    }

    /// Whether a create of `what` may be sent: not while the object of one
    /// whose answer was lost may still show up. The error says so and is
    /// looked at again in seconds.
    pub fn may_create(&self, what: &str, operation: &str) -> Result<(), ProviderError> {
        let mut lost = self.map();
        let Some(at) = lost.get(what).copied() else {
            return Ok(());
        };
        if at.elapsed() >= SHOWS_WITHIN {
            lost.remove(what);
            return Ok(());
        }
        Err(ProviderError::new(
            ErrorKind::NotVisibleYet,
            format!(
                "the answer of {operation} for {what} was lost {}s ago; waiting for EC2 to show what it made before making another",
                at.elapsed().as_secs()
            ),
        ))
    }

    /// `what` was found: a later loss starts afresh.
    pub fn found(&self, what: &str) {
        self.map().remove(what);
    }
}

/// Whether the call may have reached AWS without its answer reaching us.
fn answer_lost<E>(e: &SdkError<E, HttpResponse>) -> bool {
    matches!(
        e,
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_)
    )
}

/// The SDK configuration for a create that must not be retried blindly.
pub fn sent_once() -> aws_sdk_ec2::config::Builder {
    aws_sdk_ec2::config::Builder::default().retry_config(RetryConfig::disabled())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_create_holds_the_next_one_until_found() {
        let lost = LostCreates::default();
        assert!(lost.may_create("vpc", "ec2:CreateVpc").is_ok());
        lost.map().insert("vpc".into(), Instant::now());
        let held = lost.may_create("vpc", "ec2:CreateVpc").expect_err("held");
        assert_eq!(held.kind(), ErrorKind::NotVisibleYet);
        assert!(held.to_string().contains("ec2:CreateVpc"), "{held}");
        lost.found("vpc");
        assert!(lost.may_create("vpc", "ec2:CreateVpc").is_ok());
        let long_ago = Instant::now().checked_sub(SHOWS_WITHIN);
        if let Some(long_ago) = long_ago {
            lost.map().insert("vpc".into(), long_ago);
            assert!(lost.may_create("vpc", "ec2:CreateVpc").is_ok());
        }
    }
}
