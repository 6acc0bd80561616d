//! EC2 creates that have no idempotency token (CreateVpc,
//! CreateVpcPeeringConnection: EC2's idempotency guide lists neither) and
//! whose answer was lost. Such a create is sent once, without the SDK's
//! retry; after a lost answer, what it may have made is looked for by its
//! tags, and no second create is sent until EC2's describes, which are
//! eventually consistent, have had time to show the first one's.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use aws_sdk_ec2::{
    config::{http::HttpResponse, retry::RetryConfig},
    error::SdkError,
};
use cro_provider_api::{ErrorKind, Memory, ProviderError};

/// How long a lost create's object may take to show in describes (AWS
/// documents no bound; seconds are what it shows).
const SHOWS_WITHIN: Duration = Duration::from_secs(30);

/// The creates whose answer was lost, marked in the providers' [`Memory`].
pub struct LostCreates {
    memory: Arc<Memory>,
    scope: u64,
}

impl LostCreates {
    pub fn new(memory: &Arc<Memory>) -> Self {
        LostCreates {
            memory: memory.clone(),
            scope: memory.scope(),
        }
    }

    fn set(&self, what: &str, at: Option<Instant>) {
        (self.memory).mark(&Memory::key(self.scope, what), |m| m.create_lost = at);
    }

    /// Records that the create of `what` may have reached EC2 and lost its
    /// answer (a timeout, a dropped connection).
    pub fn lost<E>(&self, what: &str, e: &SdkError<E, HttpResponse>) {
        if answer_lost(e) {
            self.set(what, Some(Instant::now()));
        }
    }

    /// Whether a create of `what` may be sent: not while the object of one
    /// whose answer was lost may still show up. The error says so and is
    /// looked at again in seconds.
    pub fn may_create(&self, what: &str, operation: &str) -> Result<(), ProviderError> {
        let key = Memory::key(self.scope, what);
        let Some(at) = self.memory.marks(&key).create_lost else {
            return Ok(());
        };
        if at.elapsed() >= SHOWS_WITHIN {
            self.set(what, None);
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
        self.set(what, None);
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
        let lost = LostCreates::new(&Arc::default());
        assert!(lost.may_create("vpc", "ec2:CreateVpc").is_ok());
        lost.set("vpc", Some(Instant::now()));
        let held = lost.may_create("vpc", "ec2:CreateVpc").expect_err("held");
        assert_eq!(held.kind(), ErrorKind::NotVisibleYet);
        assert!(held.to_string().contains("ec2:CreateVpc"), "{held}");
        lost.found("vpc");
        assert!(lost.may_create("vpc", "ec2:CreateVpc").is_ok());
        let long_ago = Instant::now().checked_sub(SHOWS_WITHIN);
        if let Some(long_ago) = long_ago {
            lost.set("vpc", Some(long_ago));
            assert!(lost.may_create("vpc", "ec2:CreateVpc").is_ok());
            assert!(
                lost.memory.is_empty(),
                "a create that has shown is forgotten"
            );
        }
    }
}
