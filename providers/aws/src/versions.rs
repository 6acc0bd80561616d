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

/// A PostgreSQL version's major: its first number from 10 on, its first
/// two before (9.6 is a major of its own).
pub fn postgres_major(version: &str) -> String {
    let mut parts = version.split('.');
    let first = parts.next().unwrap_or_default();
    match first.parse::<u64>() {
        Ok(n) if n < 10 => format!("{first}.{}", parts.next().unwrap_or("0")),
        _ => first.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_majors() {
        // Row: (version, major)
        for (v, major) in [
            ("13.13", "13"),
            ("16.4", "16"),
            ("9.6.22", "9.6"),
            ("10.1", "10"),
        ] {
            assert_eq!(postgres_major(v), major, "{v}");
        }
    }

    #[test]
    fn only_newer_versions_are_upgrades() {
        assert!(is_upgrade("15.4", "16.1"));
        assert!(is_upgrade("16.1", "16.10"));
        assert!(!is_upgrade("16.4", "15.8"));
        assert!(!is_upgrade("16.4", "16.4"));
        assert!(is_upgrade("6.2", "7.0"));
    }
}
