//! Tag comparison shared by every AWS service: tags are only written when
//! one is missing or different, never rewritten when already right, and
//! tags others added are left alone.

use std::collections::BTreeMap;

/// The wanted tags that `have` lacks or holds with another value.
pub fn missing(
    want: &BTreeMap<String, String>,
    have: &BTreeMap<String, String>,
) -> Vec<(String, String)> {
    want.iter()
        .filter(|(k, v)| have.get(*k) != Some(v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn only_missing_or_changed_tags_differ() {
        let want = map(&[("a", "1"), ("b", "2"), ("c", "3")]);
        let have = map(&[("a", "1"), ("b", "changed"), ("other", "x")]);
        let keys: Vec<_> = missing(&want, &have).into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["b", "c"]);
        assert!(
            missing(
                &want,
                &map(&[("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")])
            )
            .is_empty()
        );
    }
}
