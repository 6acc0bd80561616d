//! Reads this operator makes that the Go operator did not, which an
//! identity granted only the Go operator's policy (a switched installation)
//! is refused. Each has a fallback the Go policy allows, so a refusal
//! costs calls, never a CR: it is logged once, shown as 1 in
//! `cro_aws_permission_refused{action}` and as the `AWSPermissions`
//! condition of the CRs served with that identity, until the read is
//! allowed again.

use std::{collections::BTreeSet, sync::Mutex};

use aws_sdk_rds::{
    config::http::HttpResponse,
    error::{ProvideErrorMetadata, SdkError},
};
use cro_provider_api::{Condition, ConditionType};
use tracing::warn;

use crate::calls::Calls;

/// The refused reads of one identity (one account, role and region).
#[derive(Default)]
pub struct Refused {
    actions: Mutex<BTreeSet<&'static str>>,
}

impl Refused {
    /// `action` was refused; `fallback` says what is done instead.
    pub fn note(&self, calls: &Calls, action: &'static str, fallback: &str) {
        let mut actions = self.actions.lock().unwrap_or_else(|e| e.into_inner());
        if actions.insert(action) {
            warn!(
                action,
                "the operator's AWS identity may not call {action}: {fallback}; grant it (docs/operations.md, AWS permissions)"
            );
        }
        calls.refused(action, true);
    }

    /// `action` was allowed.
    pub fn allowed(&self, calls: &Calls, action: &'static str) {
        let mut actions = self.actions.lock().unwrap_or_else(|e| e.into_inner());
        if actions.remove(action) {
            calls.refused(action, false);
        }
    }

    /// The condition naming the refused reads, when there are any.
    pub fn condition(&self) -> Option<Condition> {
        let actions = self.actions.lock().unwrap_or_else(|e| e.into_inner());
        (!actions.is_empty()).then(|| Condition {
            type_: ConditionType::AwsPermissions,
            status: false,
            reason: "ReadRefused".into(),
            message: format!(
                "the operator's AWS identity may not call {}: it falls back to calls its policy allows (more of them); grant the actions listed in docs/operations.md (AWS permissions), or the CredentialsRequest in deploy/openshift-migration/",
                actions.iter().copied().collect::<Vec<_>>().join(", ")
            ),
        })
    }
}

/// Whether an AWS error is a refusal of the identity's permissions: its
/// code, or HTTP 403 when the answer's code could not be read (AWS's JSON
/// services answer 403 `AccessDeniedException`; an emulator or proxy may
/// answer 403 in another format).
pub fn is_refusal<E: ProvideErrorMetadata>(e: &SdkError<E, HttpResponse>) -> bool {
    let status = e.raw_response().map(|r| r.status().as_u16());
    matches!(
        e.code(),
        Some("AccessDenied" | "AccessDeniedException" | "UnauthorizedOperation")
    ) || (e.code().is_none() && status == Some(403))
}

/// Whether a provider error is the identity's refusal, as [`is_refusal`]
/// reads the answer it came from.
pub fn refused(e: &cro_provider_api::ProviderError) -> bool {
    matches!(
        e.code(),
        Some("AccessDenied" | "AccessDeniedException" | "UnauthorizedOperation" | "HTTP 403")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_read_is_a_condition_until_it_is_allowed() {
        let (refused, calls) = (Refused::default(), Calls::default());
        assert!(refused.condition().is_none());
        refused.note(&calls, "tag:GetResources", "one describe per resource");
        refused.note(&calls, "tag:GetResources", "one describe per resource");
        let c = refused
            .condition()
            .unwrap_or_else(|| panic!("no condition"));
        assert_eq!((c.type_, c.status), (ConditionType::AwsPermissions, false));
        assert!(c.message.contains("tag:GetResources"), "{}", c.message);
        assert_eq!(calls.refused_now(), vec!["tag:GetResources".to_string()]);
        refused.allowed(&calls, "tag:GetResources");
        assert!(refused.condition().is_none());
        assert!(calls.refused_now().is_empty());
    }
}
