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

/// A failed call to the API server as a person reads it: the API
/// server's own message with its HTTP code and reason (kube's Display
/// adds the whole Status again, debug-printed); a refusal by an admission
/// webhook says where to look.
pub fn described(e: &kube::Error) -> String {
    let kube::Error::Api(s) = e else {
        return e.to_string();
    };
    let mut text = format!("{} (HTTP {} {})", s.message, s.code, s.reason);
    if s.message.contains("failed calling webhook") || s.message.contains("admission webhook") {
        text.push_str(
            "; an admission webhook of another component refused the write or did not answer: \
             see kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations",
        );
    }
    text
}

/// A failed call to the API server, as a provider error of the right kind
/// (read from the error, never from its text): `action`, then what the
/// API server said ([`described`]).
pub fn provider_error(action: impl std::fmt::Display, e: &kube::Error) -> ProviderError {
    let message = format!("{action}: {}", described(e));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// As the API server answers a write an admission webhook timed out on
    /// (kube-apiserver 1.3x, `failurePolicy: Fail`).
    fn webhook_timeout() -> kube::Error {
        let message = r#"Internal error occurred: failed calling webhook "hung.example.com": failed to call webhook: Post "https://127.0.0.1:36093/validate?timeout=2s": context deadline exceeded"#;
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": 500, "reason": "InternalError", "message": message,
            "details": {"causes": [{"message": message}]}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn an_api_refusal_reads_as_the_api_servers_message_once_with_its_code() {
        let text = provider_error("writing Secret ns/s", &webhook_timeout()).to_string();
        assert!(text.starts_with("writing Secret ns/s: Internal error occurred: failed calling webhook \"hung.example.com\""), "{text}");
        assert!(text.contains("(HTTP 500 InternalError)"), "{text}");
        assert!(
            text.contains("kubectl get validatingwebhookconfigurations"),
            "{text}"
        );
        // kube's own Display repeats the message in the debug-printed Status.
        assert!(
            !text.contains("Status {") && text.matches("context deadline exceeded").count() == 1,
            "{text}"
        );
    }
}
