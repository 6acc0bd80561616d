//! Credentials that exist only once (an RDS master password, an IAM secret
//! key) are kept in Secrets beside the CR by the operator's
//! [`CredentialsStore`]; this module has what the provider adds to it.
//! Values are never logged or put in errors.

pub use cro_provider_api::{
    CredentialsStore, credentials::Generator, credentials::ensure, random_password,
};

/// An IAM access key; its secret never shows in logs.
#[derive(Clone)]
pub struct AccessKey {
    pub id: String,
    pub secret: String,
}

impl std::fmt::Debug for AccessKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
