//! Kubernetes helpers the operator and the in-cluster provider share, so
//! that the provider API (`cro-provider-api`) names no Kubernetes type: how
//! an API-server error reads (by its kind, never its text), a Secret's
//! values, and the interface of the operator's owned-object cache.

use std::collections::BTreeMap;

use cro_provider_api::{ErrorKind, ProviderError};

mod owned;

pub use owned::{Owned, OwnedObjects, owned};

/// A Secret's values that are UTF-8 text, by key (credentials Secrets
/// hold nothing else; other values are left out).
pub fn secret_strings(secret: &k8s_openapi::api::core::v1::Secret) -> BTreeMap<String, String> {
    (secret.data.iter().flatten())
        .filter_map(|(k, v)| Some((k.clone(), String::from_utf8(v.0.clone()).ok()?)))
        .collect()
}

/// A failed call to the API server, as a provider error of the right kind
/// (read from the error, never from its text).
pub fn provider_error(message: impl Into<String>, e: &kube::Error) -> ProviderError {
    let kind = if namespace_terminating(e) {
        ErrorKind::NamespaceTerminating
    } else if api_server_unavailable(e) || api_server_busy(e).is_some() {
        // A busy API server is waited for as a down one is: briefly,
        // every object alike.
        ErrorKind::ApiServerUnavailable
    } else {
        ErrorKind::Transient
    };
    ProviderError::new(kind, message)
}

/// The cause the API server gives when a namespace being deleted refuses
/// new objects (its NamespaceLifecycle admission).
pub fn namespace_terminating(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.details.as_ref().is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating")))
}

/// The API server could not be reached or could not serve the request
/// (it is restarting, or its etcd is): transport errors and 500/503/504.
pub fn api_server_unavailable(e: &kube::Error) -> bool {
    match e {
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => true,
        kube::Error::Api(s) => matches!(s.code, 500 | 503 | 504),
        _ => false,
    }
}

/// The API server asked for fewer requests (429: API Priority and
/// Fairness, or a max-in-flight limit): how long it asked to wait, from
/// its Status `details.retryAfterSeconds` (what its Retry-After header
/// says), at least a second.
pub fn api_server_busy(e: &kube::Error) -> Option<std::time::Duration> {
    match e {
        kube::Error::Api(s) if s.code == 429 => {
            let asked = s.details.as_ref().map_or(0, |d| d.retry_after_seconds);
            Some(std::time::Duration::from_secs(u64::from(asked.max(1))))
        }
        _ => None,
    }
}
