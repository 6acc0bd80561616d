//! Turning SDK results into counted calls and errors a person can act on.
//!
//! Every AWS error is classified (see [`classify`]): throttling, server
//! errors and network failures retry with backoff; errors that need a
//! person stop the CR with a message saying what to change. The codes come
//! from AWS's documentation ("Common Errors" of each API reference, and the
//! per-operation error lists of RDS, ElastiCache, S3, IAM and SES).

use aws_sdk_rds::{
    config::http::HttpResponse,
    error::{DisplayErrorContext, ProvideErrorMetadata, SdkError},
};
use cro_provider_api::{ErrorKind, ProviderError};

/// Codes AWS uses to ask for fewer requests.
pub(crate) const THROTTLING: [&str; 8] = [
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "RequestThrottled",
    "RequestThrottledException",
    "SlowDown",
];

/// Codes of states that change by themselves (an instance still
/// modifying, a conflicting operation finishing).
const PASSING: [&str; 8] = [
    "InvalidDBInstanceState",
    "InvalidDBInstanceStateFault",
    "InvalidDBSnapshotState",
    "InvalidReplicationGroupState",
    "InvalidCacheClusterState",
    "InvalidSnapshotState",
    "OperationAborted",
    "ConcurrentModification",
];

/// Codes of keys AWS does not take (unknown, deleted, expired, signed
/// wrong). The operator's keys change under it: the Cloud Credential
/// Operator rotates its Secret and deletes the old key, a web-identity
/// token expires. Until the new ones are read (see `sdk::KEYS_REREAD`),
/// the calls are retried with backoff, so no CR fails on a rotation; keys
/// that stay wrong keep the CR retrying with this advice in its status.
const CREDENTIALS: [&str; 8] = [
    "InvalidClientTokenId",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "UnrecognizedClientException",
    "AuthFailure",
    "ExpiredToken",
    "ExpiredTokenException",
    "InvalidToken",
];

const CREDENTIALS_ADVICE: &str = "AWS does not take the operator's keys (rotated, deleted or expired): retrying, and the keys are read again; if this stays, fix the operator's credentials (docs/operations.md, AWS identity)";

/// What a person must do about an error AWS will keep returning, by code.
fn advice(code: &str) -> Option<&'static str> {
    let c = code;
    let is = |needle: &str| c.contains(needle);
    Some(
        if is("AccessDenied") || is("Unauthorized") || c == "OptInRequired" {
            "the operator's AWS identity is not allowed to do this: grant it the permissions listed in docs/operations.md (AWS permissions), or fix its credentials"
        } else if is("Quota") || is("LimitExceeded") {
            "an AWS quota is reached: raise it in Service Quotas, or delete resources you no longer need"
        } else if is("InsufficientDBInstanceCapacity") || is("InsufficientCacheClusterCapacity") {
            "AWS has no capacity for this instance class here: choose another class or availability zone in the tier's createStrategy"
        } else if is("NotSupported") || is("Unsupported") {
            "the tier asks for something this region does not offer: change the engine version, instance class or storage type in the tier's createStrategy"
        } else if c == "KMSKeyNotAccessibleFault" || c == "InvalidKMSKey" {
            "the tier's KmsKeyId cannot be used: check the key and its policy"
        } else if is("NotFound") || c == "NoSuchEntity" {
            "the tier names something that does not exist (a subnet group, security group, parameter group or key): create it or fix the name in the tier's createStrategy"
        } else if is("InvalidParameter")
            || c == "ValidationError"
            || c == "InvalidArgument"
            || c == "MalformedPolicyDocument"
            || is("InvalidVPCNetworkState")
            || c == "InvalidSubnet"
            || c == "InvalidBucketName"
        {
            "AWS refused a value: fix the tier's createStrategy (cloud-resources-aws-strategies)"
        } else if c == "BucketAlreadyExists" {
            // Bucket names are global: another account holds this one. Any
            // other "already exists" is looked at, never judged by its code
            // (see `Answer::unless_exists`).
            "the bucket name is taken in another AWS account (bucket names are global): use another cluster ID, or ask that account's owner to delete it"
        } else {
            return None;
        },
    )
}

/// The kind of an AWS error, and what to do about it when a person must.
pub fn classify<E>(e: &SdkError<E, HttpResponse>) -> (ErrorKind, Option<&'static str>)
where
    E: ProvideErrorMetadata,
{
    match e {
        SdkError::ServiceError(_) => {}
        // No answer, or an answer that was not AWS's: the network or an
        // endpoint in trouble.
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            return (ErrorKind::Transient, None);
        }
        // The request could not be built: a value the SDK refuses (e.g. an
        // empty required field) that only a configuration change fixes.
        SdkError::ConstructionFailure(_) => {
            return (
                ErrorKind::Permanent,
                Some(
                    "the request could not be built from the tier: check its createStrategy values",
                ),
            );
        }
        _ => return (ErrorKind::Transient, None),
    }
    let code = e.code().unwrap_or_default();
    let status = e.raw_response().map(|r| r.status().as_u16()).unwrap_or(0);
    if THROTTLING.contains(&code) || status == 429 {
        return (ErrorKind::Throttled, None);
    }
    if PASSING.contains(&code) || status >= 500 {
        return (ErrorKind::Transient, None);
    }
    if CREDENTIALS.contains(&code) {
        return (ErrorKind::Transient, Some(CREDENTIALS_ADVICE));
    }
    match advice(code) {
        Some(advice) => (ErrorKind::Permanent, Some(advice)),
        // A code this operator does not know: retrying with backoff is
        // the safe default (the message still reaches status and Events).
        None => (ErrorKind::Transient, None),
    }
}

/// How every call site reads an SDK call's result: as its output, or as
/// an error naming the operation and the resource ([`api_error`]).
pub trait Answer<T, E> {
    fn named(self, operation: &str, resource: &str) -> Result<T, ProviderError>;
    /// `None` when AWS answers that what the call names is not there
    /// (`missing` picks that error): every "describe, else absent" and
    /// "delete, unless already gone" reads the same way.
    fn unless_missing(
        self,
        missing: impl FnOnce(&E) -> bool,
        operation: &str,
        resource: &str,
    ) -> Result<Option<T>, ProviderError>;
    /// `None` when AWS answers with the error `code`: a retry's "already
    /// there" (a duplicate rule, a conflicting subnet), which the caller
    /// answers by looking.
    fn unless_code(
        self,
        code: &str,
        operation: &str,
        resource: &str,
    ) -> Result<Option<T>, ProviderError>;
}

/// Whether AWS answered a create that what it names exists already: the
/// answer a retry gets when the first attempt's answer was lost. Codes from
/// each API reference: RDS `DBInstanceAlreadyExists`, `DBSnapshotAlreadyExists`,
/// `DBSubnetGroupAlreadyExists`; ElastiCache `ReplicationGroupAlreadyExists`,
/// `SnapshotAlreadyExistsFault`; IAM `EntityAlreadyExists`; S3
/// `BucketAlreadyOwnedByYou` (this account's bucket).
pub fn already_exists(code: &str) -> bool {
    code.contains("AlreadyExists") && code != "BucketAlreadyExists"
        || code == "BucketAlreadyOwnedByYou"
}

/// What a create call found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Created {
    /// Made by this call.
    Now,
    /// Already there (made by an attempt whose answer was lost, or by
    /// someone else): the caller looks at it before going on.
    Already,
}

/// A create call's answer: made now, or already there (never an error,
/// whatever the code says: only a look tells whose it is).
pub fn created<T, E>(
    result: Result<T, SdkError<E, HttpResponse>>,
    operation: &str,
    resource: &str,
) -> Result<Created, ProviderError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match result {
        Ok(_) => Ok(Created::Now),
        Err(e) if e.code().is_some_and(already_exists) => Ok(Created::Already),
        Err(e) => Err(api_error(operation, resource, e)),
    }
}

/// [`created`], or `None` when AWS answers that what the create is made
/// from is not there (`missing` picks that error).
pub fn created_from<T, E>(
    result: Result<T, SdkError<E, HttpResponse>>,
    missing: impl FnOnce(&E) -> bool,
    operation: &str,
    resource: &str,
) -> Result<Option<Created>, ProviderError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match result {
        Err(e) if e.as_service_error().is_some_and(missing) => Ok(None),
        out => created(out, operation, resource).map(Some),
    }
}

/// A resource found under the name a CR asked for that was not made for
/// it: a conflict only a person can settle.
pub fn taken(what: &str, id: &str) -> ProviderError {
    ProviderError::permanent(format!(
        "{what} {id} already exists and its tags say it was not made for this resource (another cluster ID or resource name): delete or rename it, or give this cluster another cluster ID"
    ))
}

/// AWS said a create's resource exists, and a look does not find it (yet:
/// AWS's reads are eventually consistent): look again.
pub fn not_yet_visible(what: &str, id: &str) -> ProviderError {
    ProviderError::new(
        cro_provider_api::ErrorKind::NotVisibleYet,
        format!(
            "{what} {id} exists by AWS's answer to its create but is not visible yet; looking again"
        ),
    )
}

impl<T, E> Answer<T, E> for Result<T, SdkError<E, HttpResponse>>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    fn named(self, operation: &str, resource: &str) -> Result<T, ProviderError> {
        self.map_err(|e| api_error(operation, resource, e))
    }

    fn unless_missing(
        self,
        missing: impl FnOnce(&E) -> bool,
        operation: &str,
        resource: &str,
    ) -> Result<Option<T>, ProviderError> {
        match self {
            Ok(out) => Ok(Some(out)),
            Err(e) if e.as_service_error().is_some_and(missing) => Ok(None),
            Err(e) => Err(api_error(operation, resource, e)),
        }
    }

    fn unless_code(
        self,
        code: &str,
        operation: &str,
        resource: &str,
    ) -> Result<Option<T>, ProviderError> {
        self.unless_missing(|e| e.code() == Some(code), operation, resource)
    }
}

/// A failed call as a provider error naming the operation and resource,
/// with AWS's own code and message, its kind, and for errors that need a
/// person, what to change.
pub fn api_error<E>(operation: &str, resource: &str, e: SdkError<E, HttpResponse>) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let (kind, advice) = classify(&e);
    let detail = match (e.code(), e.message()) {
        _ if kind == ErrorKind::Throttled => {
            format!(
                "AWS is throttling requests ({}); retrying with backoff",
                e.code().unwrap_or("HTTP 429")
            )
        }
        (Some(code), Some(msg)) => format!("{code}: {msg}"),
        _ => DisplayErrorContext(&e).to_string(),
    };
    let message = match advice {
        Some(advice) => format!("{operation} {resource}: {detail}; {advice}"),
        None => format!("{operation} {resource}: {detail}"),
    };
    // An answer whose code could not be read keeps its HTTP status, so a
    // refusal is still known as one (see `permissions::refused`).
    let status = e.raw_response().map(|r| r.status().as_u16());
    let code = match (e.code(), status) {
        (Some(code), _) => Some(code.to_string()),
        (None, Some(403)) => Some("HTTP 403".to_string()),
        (None, _) => None,
    };
    ProviderError::new(kind, message)
        .with_code(code.as_deref())
        .with_source(e)
}

/// A role that could not be assumed, naming the role and what to check.
pub fn assume_role_error(
    role_arn: &str,
    e: aws_credential_types::provider::error::CredentialsError,
) -> ProviderError {
    use aws_credential_types::provider::error::CredentialsError;
    use aws_sdk_sts::operation::assume_role::AssumeRoleError;
    let service = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<SdkError<AssumeRoleError, HttpResponse>>());
    let (kind, detail) = match (service, &e) {
        (Some(sdk), _) => {
            let (kind, _) = classify(sdk);
            let detail = match (sdk.code(), sdk.message()) {
                (Some(code), Some(msg)) => format!("{code}: {msg}"),
                _ => DisplayErrorContext(sdk).to_string(),
            };
            (kind, detail)
        }
        (None, CredentialsError::ProviderTimedOut(_)) => {
            (ErrorKind::Transient, DisplayErrorContext(&e).to_string())
        }
        (None, _) => (ErrorKind::Permanent, DisplayErrorContext(&e).to_string()),
    };
    let message = format!(
        "cannot assume the tier's roleArn {role_arn}: {detail}; check that the role exists and that its trust policy lets the operator's AWS identity assume it (with the tier's externalId, if it sets one)"
    );
    ProviderError::new(kind, message).with_source(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_rds::error::ErrorMetadata;
    use aws_sdk_rds::operation::create_db_instance::CreateDBInstanceError;
    use aws_smithy_types::body::SdkBody;

    fn service_error(code: &str, status: u16) -> SdkError<CreateDBInstanceError, HttpResponse> {
        let meta = ErrorMetadata::builder().code(code).message("m").build();
        let response = HttpResponse::new(
            status.try_into().unwrap_or_else(|e| panic!("{e:?}")),
            SdkBody::empty(),
        );
        SdkError::service_error(CreateDBInstanceError::generic(meta), response)
    }

    #[test]
    fn each_kind_of_aws_error_is_classified() {
        use ErrorKind::{Permanent, Throttled, Transient};
        // Row: (code, HTTP status, kind)
        let rows = [
            ("Throttling", 400, Throttled),
            ("ThrottlingException", 400, Throttled),
            ("RequestLimitExceeded", 400, Throttled),
            ("SlowDown", 400, Throttled),
            ("Anything", 429, Throttled),
            ("InternalFailure", 500, Transient),
            ("ServiceUnavailable", 503, Transient),
            ("InvalidDBInstanceState", 400, Transient),
            ("InvalidParameterValue", 400, Permanent),
            ("InvalidParameterCombination", 400, Permanent),
            ("AccessDenied", 400, Permanent),
            ("AccessDeniedException", 400, Permanent),
            ("InstanceQuotaExceeded", 400, Permanent),
            ("StorageQuotaExceeded", 400, Permanent),
            ("LimitExceeded", 400, Permanent),
            ("StorageTypeNotSupported", 400, Permanent),
            ("DBSubnetGroupNotFoundFault", 400, Permanent),
            ("KMSKeyNotAccessibleFault", 400, Permanent),
            ("InsufficientDBInstanceCapacity", 400, Permanent),
            ("BucketAlreadyExists", 400, Permanent),
            // Keys rotated away or expired: retried while they are read again.
            ("InvalidClientTokenId", 403, Transient),
            ("InvalidAccessKeyId", 403, Transient),
            ("SignatureDoesNotMatch", 403, Transient),
            ("ExpiredToken", 400, Transient),
            // Looked at by the caller; unknown to the classification.
            ("DBInstanceAlreadyExists", 400, Transient),
            ("SomethingNew", 400, Transient),
        ];
        for (code, status, kind) in rows {
            let got = classify(&service_error(code, status)).0;
            assert_eq!(got, kind, "{code} {status}");
        }
    }

    #[test]
    fn a_create_meeting_its_own_name_is_already_there_never_an_error() {
        use aws_sdk_rds::operation::create_db_instance::CreateDbInstanceOutput;
        let ok: Result<_, SdkError<CreateDBInstanceError, HttpResponse>> =
            Ok(CreateDbInstanceOutput::builder().build());
        assert_eq!(created(ok, "op", "db1").ok(), Some(Created::Now));
        for code in [
            "DBInstanceAlreadyExists",
            "DBSnapshotAlreadyExists",
            "ReplicationGroupAlreadyExists",
            "SnapshotAlreadyExistsFault",
            "EntityAlreadyExists",
            "BucketAlreadyOwnedByYou",
        ] {
            let got =
                created::<CreateDbInstanceOutput, _>(Err(service_error(code, 400)), "op", "x");
            assert_eq!(got.ok(), Some(Created::Already), "{code}");
        }
        // Another account's bucket, or any other error, stays an error.
        for code in ["BucketAlreadyExists", "AccessDenied"] {
            let got =
                created::<CreateDbInstanceOutput, _>(Err(service_error(code, 400)), "op", "x");
            assert!(got.is_err(), "{code}");
        }
    }

    #[test]
    fn keys_aws_does_not_take_are_retried_saying_what_to_fix() {
        let e = api_error(
            "s3:CreateBucket",
            "b1",
            service_error("InvalidAccessKeyId", 403),
        );
        assert_eq!(e.kind(), ErrorKind::Transient);
        assert!(
            e.to_string().contains("fix the operator's credentials"),
            "{e}"
        );
    }

    #[test]
    fn permanent_errors_say_what_to_change() {
        let e = api_error(
            "rds:CreateDBInstance",
            "db1",
            service_error("AccessDenied", 403),
        );
        assert_eq!(e.kind(), ErrorKind::Permanent);
        assert!(
            e.to_string()
                .contains("rds:CreateDBInstance db1: AccessDenied: m")
                && e.to_string().contains("grant it the permissions"),
            "{e}"
        );
        let e = api_error(
            "rds:CreateDBInstance",
            "db1",
            service_error("InvalidParameterValue", 400),
        );
        assert!(
            e.to_string().contains("fix the tier's createStrategy"),
            "{e}"
        );
        let e = api_error(
            "rds:CreateDBInstance",
            "db1",
            service_error("Throttling", 400),
        );
        assert_eq!(e.kind(), ErrorKind::Throttled);
        assert!(e.to_string().contains("retrying with backoff"), "{e}");
    }
}
