//! An IAM user as the operator observes it. A leaf: the account's clients
//! hold listings of it without knowing the rest of the service.

use std::collections::BTreeMap;

/// A live user, as far as decisions need it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct User {
    pub tags: BTreeMap<String, String>,
    /// Inline policies by name: their documents as IAM returns them.
    pub policies: BTreeMap<String, String>,
}
