//! Tag comparison shared by every AWS service: tags are only written when
//! one is missing or different, never rewritten when already right.

use std::collections::BTreeMap;

/// The wanted tags that `have` lacks or holds with another value.
pub fn differing<'a>(
    want: &'a BTreeMap<String, String>,
    have: &BTreeMap<&str, &str>,
) -> Vec<(&'a String, &'a String)> {
    want.iter()
        .filter(|(k, v)| have.get(k.as_str()) != Some(&v.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_missing_or_changed_tags_differ() {
        let want = BTreeMap::from([
            ("a".to_string(), "1".to_string()),
            ("b".to_string(), "2".to_string()),
            ("c".to_string(), "3".to_string()),
        ]);
        let have = BTreeMap::from([("a", "1"), ("b", "changed"), ("other", "x")]);
        let keys: Vec<_> = differing(&want, &have)
            .into_iter()
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(keys, ["b", "c"]);
        assert!(differing(&want, &BTreeMap::from([("a", "1"), ("b", "2"), ("c", "3")])).is_empty());
    }
}
