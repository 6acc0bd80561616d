//! Reconcile errors. Each variant has a short stable label (metrics,
//! Events) and says whether a retry without a change can help.

use cro_provider_api::ProviderError;

use crate::config::ConfigError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{action}: {}", cro_kube::described(source))]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The CR itself asks for something impossible; the message says what
    /// to change.
    #[error("{0}")]
    Invalid(String),
    /// The same inputs failed a moment ago for a reason that needs a
    /// person; not tried again until they change (see `unless_parked`).
    #[error("{message}")]
    Parked {
        label: &'static str,
        message: String,
    },
    /// A watch-backed cache could not answer (it never finished listing).
    #[error("{0}")]
    Cache(#[from] cro_runtime::cache::NotListed),
    /// A bug in the operator (e.g. a patch it built does not serialise).
    #[error("internal error: {0}")]
    Internal(String),
}

pub use cro_kube::namespace_terminating;

/// How soon a resource AWS created and does not show yet is looked at
/// again (AWS documents no bound; its reads catch up in seconds).
const NOT_VISIBLE_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

impl Error {
    pub fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
        let action = action.into();
        move |source| Error::Kube { action, source }
    }

    pub fn label(&self) -> &'static str {
        match self {
            Error::Kube { source, .. } if cro_kube::api_server_unavailable(source) => {
                "kube_unavailable"
            }
            Error::Kube { .. } => "kube_api",
            Error::Config(e) => e.label(),
            Error::Provider(e) => e.label(),
            Error::Invalid(_) => "invalid_spec",
            Error::Parked { label, .. } => label,
            Error::Cache(_) => "cache",
            Error::Internal(_) => "internal",
        }
    }

    /// The object's namespace is being deleted and refuses new objects: the
    /// CR's own deletion follows, and is what to wait for. Read from the
    /// API server's status cause (or the provider's error kind), never
    /// from message text.
    pub fn namespace_terminating(&self) -> bool {
        match self {
            Error::Kube { source, .. } => namespace_terminating(source),
            Error::Provider(e) => e.kind() == cro_provider_api::ErrorKind::NamespaceTerminating,
            _ => false,
        }
    }

    /// The API server could not be reached or could not serve: the whole
    /// cluster waits for it, so the retry is not backed off as far as for
    /// a failure of this object's own.
    pub fn api_server_unavailable(&self) -> bool {
        match self {
            Error::Kube { source, .. } => cro_kube::api_server_unavailable(source),
            Error::Provider(e) => e.kind() == cro_provider_api::ErrorKind::ApiServerUnavailable,
            // A watch that never finished listing: the API server is down.
            Error::Cache(_) => true,
            _ => false,
        }
    }

    /// AWS (or another API) asked for fewer calls: retried quietly.
    pub fn is_throttled(&self) -> bool {
        match self {
            Error::Provider(e) => e.kind() == cro_provider_api::ErrorKind::Throttled,
            Error::Kube { source, .. } => cro_kube::api_server_busy(source).is_some(),
            _ => false,
        }
    }

    /// The API server asked for fewer requests (429) and said when to come
    /// back: retried then, not after this object's failure backoff (which
    /// grows to minutes for what is a cluster-wide, passing condition).
    /// So is a resource AWS created and does not show yet: looked at again
    /// in seconds (`NOT_VISIBLE_RETRY`), as its reads catch up; and a
    /// provider error that says when retrying can help.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            Error::Kube { source, .. } => cro_kube::api_server_busy(source),
            Error::Provider(e) if e.kind() == cro_provider_api::ErrorKind::NotVisibleYet => {
                Some(NOT_VISIBLE_RETRY)
            }
            Error::Provider(e) if e.retry_wait().is_some() => e.retry_wait(),
            _ => None,
        }
    }

    /// Transient errors are retried with backoff; the others wait for a
    /// change to the CR or its configuration (or a long delay).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Kube { .. } => true,
            Error::Config(e) => e.is_transient(),
            Error::Provider(e) => e.is_transient(),
            Error::Invalid(_) => false,
            Error::Parked { .. } => false,
            Error::Cache(_) | Error::Internal(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resource_not_visible_yet_is_looked_at_again_in_seconds_not_backed_off() {
        let lag = Error::Provider(ProviderError::new(
            cro_provider_api::ErrorKind::NotVisibleYet,
            "RDS instance x exists by AWS's answer to its create but is not visible yet",
        ));
        assert_eq!(lag.retry_after(), Some(NOT_VISIBLE_RETRY));
        assert!(lag.is_transient());
        let other = Error::Provider(ProviderError::transient("connection reset"));
        assert_eq!(other.retry_after(), None);
    }

    fn api_error(causes: serde_json::Value) -> kube::Error {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": 403, "reason": "Forbidden",
            "message": "secrets \"x\" is forbidden: unable to create new content in namespace app because it is being terminated",
            "details": {"name": "x", "kind": "secrets", "causes": causes}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn a_terminating_namespace_is_read_from_the_status_cause_not_the_text() {
        let terminating = Error::kube("writing")(api_error(serde_json::json!([
            {"reason": "NamespaceTerminating", "message": "namespace app is being terminated", "field": "metadata.namespace"}
        ])));
        assert!(terminating.namespace_terminating());
        // The same words without the cause: an ordinary refusal.
        let other = Error::kube("writing")(api_error(serde_json::json!([])));
        assert!(!other.namespace_terminating());
        let provider = Error::Provider(ProviderError::new(
            cro_provider_api::ErrorKind::NamespaceTerminating,
            "applying Service",
        ));
        assert!(provider.namespace_terminating() && !provider.is_transient());
    }

    fn status(code: u16) -> kube::Error {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": code, "message": "m"
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn an_api_server_that_does_not_answer_is_told_from_a_refusal() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let down = [
            kube::Error::Service(Box::new(refused)),
            status(503),
            status(504),
        ];
        for e in down {
            let shown = e.to_string();
            assert!(
                Error::kube("reading")(e).api_server_unavailable(),
                "{shown}"
            );
        }
        for code in [404, 409, 403, 422, 429] {
            assert!(
                !Error::kube("reading")(status(code)).api_server_unavailable(),
                "{code}"
            );
        }
        // 429: retried when the API server asked, quietly.
        let busy: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": 429, "reason": "TooManyRequests", "message": "m",
            "details": {"retryAfterSeconds": 7}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let busy = Error::kube("writing")(kube::Error::Api(Box::new(busy)));
        assert_eq!(busy.retry_after(), Some(std::time::Duration::from_secs(7)));
        assert!(busy.is_throttled() && busy.is_transient());
        let unsaid = Error::kube("writing")(status(429));
        assert_eq!(
            unsaid.retry_after(),
            Some(std::time::Duration::from_secs(1))
        );
        assert_eq!(Error::kube("reading")(status(503)).retry_after(), None);
        let provider = cro_kube::provider_error("writing Secret s", &status(429));
        assert!(Error::Provider(provider).api_server_unavailable());
        // From a provider, by kind: the providers classify with the same rule.
        let provider = cro_kube::provider_error("reading Secret s", &status(503));
        assert!(Error::Provider(provider).api_server_unavailable());
        let provider = cro_kube::provider_error("reading Secret s", &status(409));
        assert!(!Error::Provider(provider).api_server_unavailable());
    }
}
