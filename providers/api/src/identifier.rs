//! Cloud resource identifiers, computed exactly as the Go operator does so
//! that resources it created are found again.

use data_encoding::BASE32;
use sha2::{Digest, Sha256};

/// The Go operator's default identifier length (`DefaultAwsIdentifierLength`).
pub const DEFAULT_IDENTIFIER_LENGTH: usize = 40;

/// `<clusterID>-<namespace>-<name>`, shortened to 40 characters.
pub fn cloud_identifier(cluster_id: &str, namespace: &str, name: &str) -> String {
    shorten(
        &format!("{cluster_id}-{namespace}-{name}"),
        DEFAULT_IDENTIFIER_LENGTH,
    )
}

/// Keeps only `[A-Za-z0-9]`; a result of `n` characters or more becomes its
/// first `n - 5` characters, `-`, and the first 4 characters of the base32
/// SHA-256 of the stripped string. Lowercased (AWS identifiers are
/// case-insensitive and S3 names must be lowercase).
pub fn shorten(s: &str, n: usize) -> String {
    const HASH_LEN: usize = 4;
    let stripped: String = s.chars().filter(char::is_ascii_alphanumeric).collect();
    if stripped.len() < n {
        return stripped.to_ascii_lowercase();
    }
    // The Go code keeps the whole string when n leaves no room for the hash.
    let cut = if n < HASH_LEN + 1 {
        stripped.len()
    } else {
        n - HASH_LEN - 1
    };
    let hash = BASE32.encode(&Sha256::digest(stripped.as_bytes()));
    format!("{}-{}", &stripped[..cut], &hash[..HASH_LEN]).to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_input_is_stripped_and_lowercased() {
        assert_eq!(cloud_identifier("Abc", "ns-1", "my_db"), "abcns1mydb");
    }

    #[test]
    fn thirty_nine_characters_are_kept() {
        let s = "a".repeat(39);
        assert_eq!(shorten(&s, 40), s);
    }

    #[test]
    fn forty_characters_get_the_hash_suffix() {
        let s = "b".repeat(40);
        let out = shorten(&s, 40);
        assert_eq!(out.len(), 40);
        assert!(out.starts_with(&"b".repeat(35)));
        assert_eq!(&out[35..36], "-");
    }

    #[test]
    fn long_identifier_matches_independently_computed_vector() {
        // stripped = "myclusterid1234productionnamespaceexampledatabase"; the
        // suffix is the first 4 chars of base32(sha256(stripped)), computed
        // with Python's hashlib + base64.b32encode.
        let out = cloud_identifier(
            "mycluster-id1234",
            "production-namespace",
            "example-database",
        );
        assert_eq!(&out[..35], "myclusterid1234productionnamespacee");
        assert_eq!(out, format!("{}-{}", &out[..35], EXPECTED_SUFFIX));
    }

    const EXPECTED_SUFFIX: &str = "r5v4";
}
