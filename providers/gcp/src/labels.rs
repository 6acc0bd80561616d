//! The operator's tags as GCP labels. The Go operator lowercases each key
//! and value and replaces `.` with `-` and `/` with `_`
//! (pkg/providers/gcp/tags.go, `buildDefaultPostgresTags`), so
//! `integreatly.org/clusterID` is `integreatly-org_clusterid`: a label the
//! Go operator wrote is written the same here, and found again.
//!
//! GCP allows more than that mapping guarantees (Resource Manager,
//! "Requirements for labels"): keys and values at most 63 characters of
//! lowercase letters, digits, `_` and `-`, a key starting with a letter,
//! at most 64 labels. Where the Go form breaks a rule (a long CR name, a
//! `+` in a product name) GCP would refuse the whole request, so that one
//! label is made valid instead: other characters become `_`, a key gets
//! `l` in front when it does not start with a letter, and both are cut to
//! 63 characters.

use std::collections::BTreeMap;

/// The most characters GCP allows in a label key or value.
pub const MAX_LEN: usize = 63;

/// The Go operator's form of a tag key or value.
pub fn go_form(s: &str) -> String {
    s.replace('.', "-").replace('/', "_").to_lowercase()
}

/// Each tag as the label the Go operator writes, made valid where that
/// breaks GCP's rules.
pub fn labels(tags: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    tags.iter()
        .map(|(k, v)| (key(&go_form(k)), value(&go_form(v))))
        .collect()
}

fn allowed(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-'
}

fn value(s: &str) -> String {
    s.chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .take(MAX_LEN)
        .collect()
}

fn key(s: &str) -> String {
    let v = value(s);
    if v.starts_with(|c: char| c.is_ascii_lowercase()) {
        v
    } else {
        value(&format!("l{v}"))
    }
}

/// Whether GCP accepts `(key, value)` as a label.
pub fn valid(key: &str, value: &str) -> bool {
    key.len() <= MAX_LEN
        && value.len() <= MAX_LEN
        && key.starts_with(|c: char| c.is_ascii_lowercase())
        && key.chars().chain(value.chars()).all(allowed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// What the Go operator writes for the tags of
    /// `resources.GetDefaultResourceTags` (pkg/resources/tags.go) through
    /// pkg/providers/gcp/tags.go's replacer.
    #[test]
    fn go_s_labels_are_written_unchanged() {
        let got = labels(&tags(&[
            ("integreatly.org/clusterID", "mycluster-x7k2p"),
            ("integreatly.org/resource-type", "managed"),
            ("integreatly.org/resource-name", "example-postgres"),
            ("red-hat-managed", "true"),
            ("integreatly.org/product-name", "3scale"),
        ]));
        assert_eq!(
            got,
            tags(&[
                ("integreatly-org_clusterid", "mycluster-x7k2p"),
                ("integreatly-org_resource-type", "managed"),
                ("integreatly-org_resource-name", "example-postgres"),
                ("red-hat-managed", "true"),
                ("integreatly-org_product-name", "3scale"),
            ])
        );
        assert!(got.iter().all(|(k, v)| valid(k, v)));
    }

    #[test]
    fn what_gcp_would_refuse_is_made_valid() {
        let long = "a".repeat(100);
        let got = labels(&tags(&[("9lives", "a+b C"), ("name", &long)]));
        assert_eq!(got["l9lives"], "a_b_c");
        assert_eq!(got["name"].len(), MAX_LEN);
        assert!(got.iter().all(|(k, v)| valid(k, v)), "{got:?}");
        assert!(!valid("9lives", "x") && !valid("k", "a+b") && !valid("k", &long));
    }
}
