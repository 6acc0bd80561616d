//! Whether new resources are made as the Go operator made them: while a
//! switch from it may still be rolled back, what this operator makes
//! meanwhile must keep working when the Go operator takes it back
//! (docs/migration.md, rolling back). Its trace is the Lease it leaves in
//! the namespace it ran in (controller-runtime does not delete it, and
//! this operator is installed there): only there, and in the one watched
//! namespace, whose CRs are the only ones it could change. A Lease in any
//! other namespace is not looked at: a tenant's must not take TLS away
//! from other tenants' new Redis.

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use tracing::{info, warn};

use super::args::GoCompatible;
use crate::leader::GO_LEASE;

/// The flag's answer; for `auto`, whether the Go operator's Lease is in
/// the operator's namespace or the one watched namespace. Said in the log
/// either way.
pub(super) async fn decide(
    client: &kube::Client,
    flag: GoCompatible,
    operator_namespace: &str,
    watched: &[String],
) -> bool {
    let why = match flag {
        GoCompatible::True => Some("--go-compatible-resources=true".to_string()),
        GoCompatible::False => None,
        GoCompatible::Auto => go_lease(client, operator_namespace, watched).await,
    };
    match &why {
        Some(why) => info!(
            "new ElastiCache Redis, S3 BlobStorage and in-cluster Postgres and Redis are made as the Go operator made them ({why}), so rolling back to it keeps them working: a Redis without TLS and AUTH unless its tier sets TransitEncryptionEnabled, a bucket key from the Cloud Credential Operator where it runs, in-cluster databases in its layout and images; once the switch is final, set --go-compatible-resources=false (docs/migration.md)"
        ),
        None => info!("new resources are made this operator's way (--go-compatible-resources)"),
    }
    why.is_some()
}

/// Where the Go operator's Lease is, said as the reason; a Lease that
/// cannot be read is said in the log and counts as none.
async fn go_lease(
    client: &kube::Client,
    operator_namespace: &str,
    watched: &[String],
) -> Option<String> {
    let mut namespaces = vec![operator_namespace];
    if let [one] = watched {
        namespaces.push(one);
    }
    for ns in namespaces {
        match Api::<Lease>::namespaced(client.clone(), ns)
            .get_opt(GO_LEASE)
            .await
        {
            Ok(Some(_)) => return Some(format!("the Go operator's Lease {ns}/{GO_LEASE} is here")),
            Ok(None) => {}
            Err(e) => warn!(
                error = %cro_kube::described(&e),
                "could not read Lease {ns}/{GO_LEASE}, the Go operator's: new resources are made this operator's way; if the Go operator may come back, set --go-compatible-resources=true"
            ),
        }
    }
    None
}
