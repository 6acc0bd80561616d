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
    /// A bug in the operator (e.g. a patch it built does not serialise).
    #[error("internal error: {0}")]
    Internal(String),
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
            Error::Internal(_) => "internal",
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
            Error::Internal(_) => true,
        }
    }
}
