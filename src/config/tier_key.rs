//! A key of a tier that the operator reads (not the provider's strategy)
//! and that holds what it cannot use: each error names the key and what
//! to write instead.

use crate::api::DurationError;

use super::{
    access::{ALLOWED_NAMESPACE_SELECTOR_KEY, ALLOWED_NAMESPACES_KEY},
    deletion_policy::TIER_KEY as DELETION_POLICY_KEY,
    limits::ALLOWED_SIZES_KEY,
    resolve::CHANGE_POLICY_KEY,
};

#[derive(Debug, PartialEq, thiserror::Error)]
pub enum TierKeyError {
    #[error(
        "{key} {value} is not a duration; use days, hours and minutes such as \"30d\" or \"12h\""
    )]
    NotText { key: &'static str, value: String },
    #[error("{key} {error}; use days, hours and minutes such as \"30d\" or \"12h\"")]
    Duration {
        key: &'static str,
        error: DurationError,
    },
    /// A limit: a duration longer than zero.
    #[error(
        "{key} {value} is not a duration; use days, hours and minutes such as \"1d\" or \"12h\""
    )]
    Limit { key: &'static str, value: String },
    #[error("{key} {value} is not a count; use a whole number such as 10")]
    Count { key: &'static str, value: String },
    #[error(
        "{CHANGE_POLICY_KEY} {0} is not a change policy; use \"Automatic\" (the default), \"Online\" or \"Plan\""
    )]
    ChangePolicy(String),
    #[error(
        "{DELETION_POLICY_KEY} {0} is not a deletion policy; use \"delete\" (the default) or \"retain\""
    )]
    DeletionPolicy(String),
    #[error("{ALLOWED_NAMESPACES_KEY} must be a list of namespace names")]
    AllowedNamespaces,
    #[error(
        "{ALLOWED_NAMESPACE_SELECTOR_KEY} is not a label selector ({0}); use {{\"matchLabels\": {{\"team\": \"a\"}}}}"
    )]
    Selector(String),
    #[error(
        "{ALLOWED_NAMESPACE_SELECTOR_KEY}: operator {operator:?} of key {key:?} is not one of In, NotIn, Exists, DoesNotExist"
    )]
    SelectorOperator { operator: String, key: String },
    #[error("{ALLOWED_SIZES_KEY} must be a list of sizes such as [\"cache.t3.micro\"]")]
    AllowedSizes,
}
