//! Credentials that exist only once (an RDS master password, an IAM secret
//! key) are kept in Secrets beside the CR by the operator's
//! [`CredentialsStore`]; this module has what the provider adds to it.
//! Values are never logged or put in errors.

pub use cro_provider_api::{
    AccessKey, CredentialsStore, credentials::Generator, credentials::ensure, random_password,
};
