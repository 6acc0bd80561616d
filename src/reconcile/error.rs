//! Reconcile errors. Each variant has a short stable label (metrics,
//! Events) and says whether a retry without a change can help.

use cro_provider_api::ProviderError;

use crate::config::ConfigError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{action}: {source}")]
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
    Cache(String),
    /// A bug in the operator (e.g. a patch it built does not serialise).
    #[error("internal error: {0}")]
    Internal(String),
}

/// The cause the API server gives when a namespace being deleted refuses
/// new objects (its NamespaceLifecycle admission).
pub fn namespace_terminating(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.details.as_ref().is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating")))
}

impl Error {
    pub fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
        let action = action.into();
        move |source| Error::Kube { action, source }
    }

    pub fn label(&self) -> &'static str {
        match self {
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

    /// AWS (or another API) asked for fewer calls: retried quietly.
    pub fn is_throttled(&self) -> bool {
        matches!(self, Error::Provider(e) if e.kind() == cro_provider_api::ErrorKind::Throttled)
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
}
