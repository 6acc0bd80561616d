//! Engine versions only move up.

/// Whether `wanted` is a newer version than `have` (dotted numbers).
pub fn is_upgrade(have: &str, wanted: &str) -> bool {
    let parse = |v: &str| -> Vec<u64> {
        v.split('.')
            .map(|p| {
                p.trim_start_matches(|c: char| !c.is_ascii_digit())
                    .parse()
                    .unwrap_or(0)
            })
            .collect()
    };
    parse(wanted) > parse(have)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_newer_versions_are_upgrades() {
        assert!(is_upgrade("15.4", "16.1"));
        assert!(is_upgrade("16.1", "16.10"));
        assert!(!is_upgrade("16.4", "15.8"));
        assert!(!is_upgrade("16.4", "16.4"));
        assert!(is_upgrade("6.2", "7.0"));
    }
}
