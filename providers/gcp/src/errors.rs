//! Google APIs' error answers (the error model of Google's API design
//! guide, "Errors": `{"error": {"code", "message", "status", "details"}}`,
//! where the older JSON APIs — Cloud SQL Admin, Compute, Storage — also
//! list `errors: [{"domain", "reason", "message"}]`), and what each needs
//! before a call can succeed.
//!
//! "Not found" and "already exists" are not failures here: the caller
//! answers them by looking (a create whose answer was lost finds its
//! resource on the retry).

use std::time::Duration;

use cro_provider_api::{ErrorKind, ProviderError};
use serde_json::Value;

/// One error answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoogleError {
    /// The HTTP status.
    pub code: u16,
    /// The canonical code (`NOT_FOUND`, `RESOURCE_EXHAUSTED`, …), when sent.
    pub status: String,
    /// The first `reason` (`rateLimitExceeded`, `SERVICE_DISABLED`, …),
    /// from `errors[]` or an `ErrorInfo` detail.
    pub reason: String,
    pub message: String,
    /// A `RetryInfo` detail's `retryDelay`.
    pub retry_delay: Option<Duration>,
}

/// The reason of a refusal made here, not by GCP: credentials that cannot
/// be used (a key file that does not parse).
pub const CREDENTIALS_UNUSABLE: &str = "credentialsUnusable";

/// What the caller does with an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Meaning {
    /// Look: the resource is not there (or not yet).
    NotFound,
    /// Look: a resource of that name exists (perhaps the caller's own,
    /// made by a call whose answer was lost).
    AlreadyExists,
    Failed(ErrorKind),
}

/// Reasons that mean "fewer calls": the per-minute limits (Compute's and
/// Storage's 403 `rateLimitExceeded`, the newer APIs' `RATE_LIMIT_EXCEEDED`).
const RATE_REASONS: [&str; 3] = [
    "rateLimitExceeded",
    "userRateLimitExceeded",
    "RATE_LIMIT_EXCEEDED",
];

impl GoogleError {
    /// Reads an error answer; a body that is not Google's error JSON (a
    /// proxy's page) keeps the HTTP status and a short part of the text.
    pub fn parse(code: u16, body: &[u8]) -> GoogleError {
        let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let e = &json["error"];
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let details = e["details"].as_array().cloned().unwrap_or_default();
        let of_type = |t: &str| {
            details
                .iter()
                .find(|d| d["@type"].as_str().is_some_and(|x| x.ends_with(t)))
                .cloned()
                .unwrap_or(Value::Null)
        };
        let reason = [
            &e["errors"][0]["reason"],
            &of_type("google.rpc.ErrorInfo")["reason"],
        ]
        .into_iter()
        .map(text)
        .find(|r| !r.is_empty())
        .unwrap_or_default();
        let message = match text(&e["message"]) {
            m if !m.is_empty() => m,
            _ => String::from_utf8_lossy(&body[..body.len().min(200)])
                .trim()
                .to_string(),
        };
        GoogleError {
            code,
            status: text(&e["status"]),
            reason,
            message,
            retry_delay: parse_duration(&text(&of_type("google.rpc.RetryInfo")["retryDelay"])),
        }
    }

    pub fn meaning(&self) -> Meaning {
        let rate = RATE_REASONS.contains(&self.reason.as_str());
        match (self.code, self.status.as_str()) {
            (404, _) | (_, "NOT_FOUND") => Meaning::NotFound,
            (409, "ALREADY_EXISTS") => Meaning::AlreadyExists,
            (409, _) if self.reason.to_ascii_lowercase().contains("alreadyexists") => {
                Meaning::AlreadyExists
            }
            (429, _) => Meaning::Failed(ErrorKind::Throttled),
            (403, _) if rate => Meaning::Failed(ErrorKind::Throttled),
            // Another operation on the resource, an etag that moved on.
            (409 | 412, _) | (_, "ABORTED") => Meaning::Failed(ErrorKind::Transient),
            (401, _) | (500..=599, _) | (0, _) => Meaning::Failed(ErrorKind::Transient),
            _ => Meaning::Failed(ErrorKind::Permanent),
        }
    }

    /// The error a provider reports, `doing` saying which call; a person's
    /// next step named where the answer implies one.
    pub fn into_provider_error(self, doing: &str) -> ProviderError {
        let kind = match self.meaning() {
            Meaning::Failed(kind) => kind,
            Meaning::NotFound | Meaning::AlreadyExists => ErrorKind::Transient,
        };
        let code = if self.reason.is_empty() {
            &self.status
        } else {
            &self.reason
        };
        let advice = advice(&self);
        let text = match self.reason.as_str() {
            // Refused here, before any call: no answer of GCP's.
            CREDENTIALS_UNUSABLE => format!("{doing}: {}", self.message),
            _ => format!(
                "{doing}: GCP answered {} {code}: {}{advice}",
                self.code, self.message
            ),
        };
        let mut err = ProviderError::new(kind, text)
            .with_code(Some(code).filter(|c| !c.is_empty()).map(String::as_str));
        if let Some(wait) = self.retry_delay {
            err = err.retry_in(wait);
        }
        err
    }
}

/// The roles the Go operator's CredentialsRequest asks for
/// (pkg/providers/gcp/credentials.go, `operatorRoles`).
pub const OPERATOR_ROLES: [&str; 6] = [
    "roles/compute.networkAdmin",
    "roles/storage.admin",
    "roles/redis.admin",
    "roles/cloudsql.admin",
    "roles/servicenetworking.networksAdmin",
    "roles/monitoring.viewer",
];

fn advice(e: &GoogleError) -> String {
    match (e.status.as_str(), e.reason.as_str()) {
        (_, "SERVICE_DISABLED" | "accessNotConfigured") => {
            "; enable the API in the project (gcloud services enable), then the operator retries"
                .into()
        }
        ("PERMISSION_DENIED", _)
        | (_, "forbidden" | "insufficientPermissions" | "IAM_PERMISSION_DENIED") => {
            format!(
                "; grant the operator's service account these roles: {}",
                OPERATOR_ROLES.join(", ")
            )
        }
        (_, "quotaExceeded" | "QUOTA_EXCEEDED") => {
            "; raise the project's quota or use a smaller tier".into()
        }
        _ => String::new(),
    }
}

/// A protobuf JSON `Duration` (`"30s"`, `"1.5s"`).
fn parse_duration(s: &str) -> Option<Duration> {
    let secs: f64 = s.strip_suffix('s')?.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(3600.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(code: u16, body: &str) -> GoogleError {
        GoogleError::parse(code, body.as_bytes())
    }

    /// A Cloud SQL Admin answer, in the older JSON API form it still sends.
    #[test]
    fn cloud_sql_s_own_form_is_read() {
        let e = answer(
            409,
            r#"{"error": {"code": 409, "message": "The Cloud SQL instance already exists.",
            "errors": [{"message": "The Cloud SQL instance already exists.", "domain": "global", "reason": "instanceAlreadyExists"}]}}"#,
        );
        assert_eq!(e.reason, "instanceAlreadyExists");
        assert_eq!(e.meaning(), Meaning::AlreadyExists);
        let e = answer(
            409,
            r#"{"error": {"code": 409, "message": "Operation failed because another operation was already in progress.",
            "errors": [{"domain": "global", "reason": "operationInProgress", "message": "..."}]}}"#,
        );
        assert_eq!(e.meaning(), Meaning::Failed(ErrorKind::Transient));
        let e = answer(
            404,
            r#"{"error": {"code": 404, "message": "The Cloud SQL instance does not exist.",
            "errors": [{"domain": "global", "reason": "instanceDoesNotExist"}]}}"#,
        );
        assert_eq!(e.meaning(), Meaning::NotFound);
    }

    /// The design guide's form, with `ErrorInfo` and `RetryInfo` details.
    #[test]
    fn rate_limits_are_throttling_and_keep_the_delay_asked_for() {
        let e = answer(
            429,
            r#"{"error": {"code": 429, "message": "Quota exceeded for quota metric 'Write requests'",
            "status": "RESOURCE_EXHAUSTED", "details": [
              {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "RATE_LIMIT_EXCEEDED", "domain": "googleapis.com"},
              {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "30s"}]}}"#,
        );
        assert_eq!(
            (e.reason.as_str(), e.meaning()),
            ("RATE_LIMIT_EXCEEDED", Meaning::Failed(ErrorKind::Throttled))
        );
        let err = e.into_provider_error("creating instance x");
        assert_eq!(err.retry_wait(), Some(Duration::from_secs(30)));
        assert_eq!(err.kind(), ErrorKind::Throttled);

        let compute = answer(
            403,
            r#"{"error": {"code": 403, "message": "Rate Limit Exceeded",
            "errors": [{"domain": "usageLimits", "reason": "rateLimitExceeded", "message": "Rate Limit Exceeded"}]}}"#,
        );
        assert_eq!(compute.meaning(), Meaning::Failed(ErrorKind::Throttled));
    }

    #[test]
    fn what_needs_a_person_says_what_to_do() {
        let e = answer(
            403,
            r#"{"error": {"code": 403, "message": "Cloud SQL Admin API has not been used in project 1 before or it is disabled.",
            "status": "PERMISSION_DENIED", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED"}]}}"#,
        );
        let err = e.into_provider_error("creating instance x");
        assert_eq!(err.kind(), ErrorKind::Permanent);
        assert!(
            err.message().contains("SERVICE_DISABLED") && err.message().contains("enable the API"),
            "{}",
            err.message()
        );
        let e = answer(
            403,
            r#"{"error": {"code": 403, "message": "The client is not authorized to make this request.",
            "errors": [{"domain": "global", "reason": "notAuthorized"}], "status": "PERMISSION_DENIED"}}"#,
        );
        assert!(
            e.into_provider_error("x")
                .message()
                .contains("grant the operator's service account")
        );
        let e = answer(
            400,
            r#"{"error": {"code": 400, "message": "Invalid request: Invalid value for tier.", "status": "INVALID_ARGUMENT"}}"#,
        );
        assert_eq!(e.meaning(), Meaning::Failed(ErrorKind::Permanent));
    }

    #[test]
    fn a_page_that_is_not_google_s_json_keeps_its_status() {
        let e = answer(502, "<html>Bad Gateway</html>");
        assert_eq!(
            (e.meaning(), e.message.as_str()),
            (
                Meaning::Failed(ErrorKind::Transient),
                "<html>Bad Gateway</html>"
            )
        );
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("soon"), None);
    }
}
