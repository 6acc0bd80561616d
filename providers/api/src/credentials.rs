//! Credentials that exist only once (an RDS master password, an IAM secret
//! key, an ElastiCache AUTH token), kept in Secrets beside the CR so they
//! are generated once and never lost. The operator keeps them: it holds
//! the Kubernetes client and the watches. Providers ask through this
//! trait, so they hold no client and can be tested with a store in memory.
//! Values are never logged or put in errors.

use std::collections::BTreeMap;

use crate::{ProviderError, ResourceRequest};

#[async_trait::async_trait]
pub trait CredentialsStore: Send + Sync {
    /// The data of the Secret `name` in the request's namespace (`None`:
    /// there is none); an error when it exists and was not made for the
    /// request's CR, whose values are then never read.
    async fn read(
        &self,
        req: &ResourceRequest,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, ProviderError>;

    /// Writes `data` to the Secret `name`, owned by the request's CR.
    async fn write(
        &self,
        req: &ResourceRequest,
        name: &str,
        data: &BTreeMap<String, String>,
    ) -> Result<(), ProviderError>;

    /// Deletes the Secret `name` if it is the request's; one made for
    /// anything else stays.
    async fn delete(&self, req: &ResourceRequest, name: &str) -> Result<(), ProviderError>;

    /// Deletes the Cloud Credential Operator's CredentialsRequest `name` in
    /// the request's namespace (CCO then removes the IAM user and the
    /// Secret it minted); where no CCO runs, the Secret `name` itself.
    async fn delete_credentials_request(
        &self,
        req: &ResourceRequest,
        name: &str,
    ) -> Result<(), ProviderError>;

    /// Whether the Cloud Credential Operator was asked for an AWS key by
    /// the CredentialsRequest `name` in the request's namespace, whose
    /// Secret of the same name CCO fills with `aws_access_key_id` and
    /// `aws_secret_access_key`, as the Go operator asked for a bucket's
    /// key. With `ask`, first applies it granting `statement_entries` (IAM
    /// policy statements); `false` then means no CCO runs (its
    /// CredentialsRequest API is not served). Without, only looks.
    async fn request_credentials(
        &self,
        req: &ResourceRequest,
        name: &str,
        (statement_entries, ask): (&serde_json::Value, bool),
    ) -> Result<bool, ProviderError>;
}

/// Makes a missing credential value.
pub type Generator = fn() -> String;

/// `defaults`' keys from the Secret `name`, each missing one generated and
/// stored before it is returned.
pub async fn ensure(
    store: &dyn CredentialsStore,
    req: &ResourceRequest,
    name: &str,
    defaults: &[(&str, Generator)],
) -> Result<BTreeMap<String, String>, ProviderError> {
    let mut data = store.read(req, name).await?.unwrap_or_default();
    let missing: Vec<_> = defaults
        .iter()
        .filter(|(k, _)| data.get(*k).is_none_or(String::is_empty))
        .collect();
    if !missing.is_empty() {
        for (k, make) in missing {
            data.insert(k.to_string(), make());
        }
        store.write(req, name, &data).await?;
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::ResourceKind;

    /// Secrets by name.
    type Secrets = BTreeMap<String, BTreeMap<String, String>>;

    /// Secrets in memory, counting writes.
    #[derive(Default)]
    struct Memory(Mutex<(Secrets, usize)>);

    #[async_trait::async_trait]
    impl CredentialsStore for Memory {
        async fn read(
            &self,
            _: &ResourceRequest,
            name: &str,
        ) -> Result<Option<BTreeMap<String, String>>, ProviderError> {
            Ok(self
                .0
                .lock()
                .map_err(|_| ProviderError::transient("poisoned"))?
                .0
                .get(name)
                .cloned())
        }
        async fn write(
            &self,
            _: &ResourceRequest,
            name: &str,
            data: &BTreeMap<String, String>,
        ) -> Result<(), ProviderError> {
            let mut held = self
                .0
                .lock()
                .map_err(|_| ProviderError::transient("poisoned"))?;
            held.0.insert(name.into(), data.clone());
            held.1 += 1;
            Ok(())
        }
        async fn delete(&self, _: &ResourceRequest, name: &str) -> Result<(), ProviderError> {
            self.0
                .lock()
                .map_err(|_| ProviderError::transient("poisoned"))?
                .0
                .remove(name);
            Ok(())
        }
        async fn delete_credentials_request(
            &self,
            req: &ResourceRequest,
            name: &str,
        ) -> Result<(), ProviderError> {
            self.delete(req, name).await
        }
        async fn request_credentials(
            &self,
            _: &ResourceRequest,
            _: &str,
            _: (&serde_json::Value, bool),
        ) -> Result<bool, ProviderError> {
            Ok(false)
        }
    }

    #[tokio::test]
    async fn a_credential_is_generated_once_and_kept() {
        let (store, req) = (
            Memory::default(),
            ResourceRequest::offline(ResourceKind::Postgres, serde_json::json!({})),
        );
        let defaults: [(&str, Generator); 2] = [
            ("user", || "postgres".into()),
            ("password", crate::random_password),
        ];
        let first = ensure(&store, &req, "db-creds", &defaults)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let again = ensure(&store, &req, "db-creds", &defaults)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(first, again, "the password was generated again");
        assert_eq!(first["user"], "postgres");
        assert_eq!(
            store.0.lock().map(|h| h.1).unwrap_or_default(),
            1,
            "written once"
        );
        // A value someone emptied is made again; the others are kept.
        let mut emptied = first.clone();
        emptied.insert("password".into(), String::new());
        store
            .write(&req, "db-creds", &emptied)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let healed = ensure(&store, &req, "db-creds", &defaults)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!healed["password"].is_empty() && healed["password"] != first["password"]);
        assert_eq!(healed["user"], "postgres");
    }
}
