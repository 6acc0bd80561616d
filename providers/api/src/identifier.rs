//! Cloud resource identifiers, computed exactly as the Go operator does so
//! that resources it created are found again, then made valid for each AWS
//! service's own rules (which the Go operator did not check: a cluster ID
//! starting with a digit gave RDS and ElastiCache identifiers AWS refuses).

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

/// The identifier of a CR whose [`cloud_identifier`] names another CR's
/// resource: the Go operator's naming drops separators, so `team-a/db` and
/// `teama/db` share one. Its stripped `<clusterID><namespace><name>` cut
/// to 31 characters, `-`, and 8 characters of the base32 SHA-256 of
/// `<clusterID>/<namespace>/<name>`, whose separators keep the two apart:
/// at most 40 characters, never equal to a `cloud_identifier` (which has
/// no `-` before its 36th character).
pub fn separate_identifier(cluster_id: &str, namespace: &str, name: &str) -> String {
    const KEPT: usize = 31;
    const HASH_LEN: usize = 8;
    let stripped: String = format!("{cluster_id}{namespace}{name}")
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    let cut = stripped.len().min(KEPT);
    let hash = BASE32.encode(&Sha256::digest(
        format!("{cluster_id}/{namespace}/{name}").as_bytes(),
    ));
    format!("{}-{}", &stripped[..cut], &hash[..HASH_LEN]).to_ascii_lowercase()
}

/// `<clusterID>-<namespace>-<name>-<suffix>`, shortened to 40 characters:
/// the Go operator's `BuildTimestampedInfraNameFromObject` (suffix: unix
/// seconds, for final snapshots) and `...FromObjectCreation` (suffix: the
/// creation time as Go prints it, for snapshots).
pub fn timestamped_identifier(
    cluster_id: &str,
    namespace: &str,
    name: &str,
    suffix: &str,
) -> String {
    shorten(
        &format!("{cluster_id}-{namespace}-{name}-{suffix}"),
        DEFAULT_IDENTIFIER_LENGTH,
    )
}

/// The identifier of a snapshot this operator names: the Go operator's
/// [`timestamped_identifier`] of the snapshot CR (readable, and what a
/// person searching by the Go naming finds first), `-`, and 8 characters
/// of the base32 SHA-256 of the CR's UID. The Go form drops separators and
/// counts seconds, so `app/staging-db-s` and `app-staging/db-s` created in
/// one second share it; the UID never repeats, not even for a CR created
/// again under the same name. At most 49 characters.
pub fn snapshot_identifier(timestamped: &str, uid: &str) -> String {
    const HASH_LEN: usize = 8;
    let hash = BASE32.encode(&Sha256::digest(uid.as_bytes()));
    format!("{timestamped}-{}", &hash[..HASH_LEN]).to_ascii_lowercase()
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

/// The identifier rules of each kind of AWS resource the operator names,
/// from the API references (CreateDBInstance, CreateDBSnapshot,
/// CreateReplicationGroup, CreateSnapshot, S3 bucket naming rules,
/// CreateUser).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdentifierRules {
    /// 1–63 letters, digits, hyphens; a letter first; no `--`, no trailing `-`.
    RdsInstance,
    /// As an instance, up to 255 characters (manual and final snapshots).
    RdsSnapshot,
    /// As an RDS instance, up to 40 characters.
    ElastiCacheReplicationGroup,
    /// Held to the RDS snapshot rules (ElastiCache documents only a 255
    /// character limit for snapshot names; these rules are always accepted).
    ElastiCacheSnapshot,
    /// 3–63 lowercase letters, digits, dots, hyphens; a letter or digit at
    /// both ends; not an IP address; reserved prefixes and suffixes avoided.
    S3Bucket,
    /// 1–64 of `[A-Za-z0-9+=,.@_-]`.
    IamUser,
}

impl IdentifierRules {
    pub const ALL: [IdentifierRules; 6] = [
        IdentifierRules::RdsInstance,
        IdentifierRules::RdsSnapshot,
        IdentifierRules::ElastiCacheReplicationGroup,
        IdentifierRules::ElastiCacheSnapshot,
        IdentifierRules::S3Bucket,
        IdentifierRules::IamUser,
    ];

    pub fn max_len(self) -> usize {
        match self {
            IdentifierRules::RdsInstance | IdentifierRules::S3Bucket => 63,
            IdentifierRules::RdsSnapshot | IdentifierRules::ElastiCacheSnapshot => 255,
            IdentifierRules::ElastiCacheReplicationGroup => 40,
            IdentifierRules::IamUser => 64,
        }
    }

    fn min_len(self) -> usize {
        match self {
            IdentifierRules::S3Bucket => 3,
            _ => 1,
        }
    }

    fn letter_first(self) -> bool {
        !matches!(self, IdentifierRules::S3Bucket | IdentifierRules::IamUser)
    }

    fn allowed(self, c: char) -> bool {
        match self {
            IdentifierRules::S3Bucket => {
                c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.'
            }
            IdentifierRules::IamUser => c.is_ascii_alphanumeric() || "+=,.@_-".contains(c),
            _ => c.is_ascii_alphanumeric() || c == '-',
        }
    }

    /// Whether AWS accepts `id` as this kind of identifier; the error says
    /// which rule it breaks.
    pub fn check(self, id: &str) -> Result<(), Broken> {
        let len = id.chars().count();
        if len < self.min_len() || len > self.max_len() {
            let (min, max) = (self.min_len(), self.max_len());
            return Err(Broken::Length { min, max, len });
        }
        if let Some(c) = id.chars().find(|c| !self.allowed(*c)) {
            return Err(Broken::Character(c));
        }
        if self.letter_first() && !id.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return Err(Broken::LetterFirst);
        }
        match self {
            IdentifierRules::IamUser => Ok(()),
            IdentifierRules::S3Bucket => check_bucket(id),
            _ if id.ends_with('-') || id.contains("--") => Err(Broken::Hyphens),
            _ => Ok(()),
        }
    }

    /// `id` made valid for these rules: unchanged when it already is (so
    /// identifiers the Go operator used are found again), otherwise the
    /// same characters with `c` in front where a letter must come first,
    /// shortened with the Go operator's hash when too long.
    pub fn conform(self, id: &str) -> String {
        if self.check(id).is_ok() {
            return id.to_string();
        }
        let mut s: String = id
            .to_ascii_lowercase()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        while s.contains("--") {
            s = s.replace("--", "-");
        }
        let s = s.trim_matches('-');
        let mut s = if s.starts_with(|c: char| c.is_ascii_alphabetic()) {
            s.to_string()
        } else {
            format!("c{s}")
        };
        if s.len() > self.max_len() {
            s = shorten(&s, self.max_len());
        }
        while s.len() < self.min_len() {
            s.push('0');
        }
        s
    }
}

/// The rule of AWS's an identifier breaks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Broken {
    #[error("must be {min} to {max} characters long, not {len}")]
    Length { min: usize, max: usize, len: usize },
    #[error("must not contain {0:?}")]
    Character(char),
    #[error("must start with a letter")]
    LetterFirst,
    #[error("must not end with a hyphen or contain two hyphens in a row")]
    Hyphens,
    #[error("must start and end with a letter or digit")]
    BucketEdges,
    #[error("must not have a dot next to a dot or hyphen")]
    BucketDots,
    #[error("must not look like an IP address")]
    BucketIpAddress,
    #[error("must not start with {0:?} (reserved by S3)")]
    ReservedPrefix(&'static str),
    #[error("must not end with {0:?} (reserved by S3)")]
    ReservedSuffix(&'static str),
}

fn check_bucket(id: &str) -> Result<(), Broken> {
    let edge_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !edge_ok(id.chars().next()) || !edge_ok(id.chars().last()) {
        return Err(Broken::BucketEdges);
    }
    if id.contains("..") || id.contains(".-") || id.contains("-.") {
        return Err(Broken::BucketDots);
    }
    if id.split('.').count() == 4 && id.split('.').all(|p| p.parse::<u8>().is_ok()) {
        return Err(Broken::BucketIpAddress);
    }
    const PREFIXES: [&str; 3] = ["xn--", "sthree-", "amzn-s3-demo-"];
    const SUFFIXES: [&str; 5] = ["-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"];
    if let Some(p) = PREFIXES.iter().find(|p| id.starts_with(*p)) {
        return Err(Broken::ReservedPrefix(p));
    }
    if let Some(p) = SUFFIXES.iter().find(|p| id.ends_with(*p)) {
        return Err(Broken::ReservedSuffix(p));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separate_identifiers_keep_colliding_crs_apart_and_follow_every_rule() {
        let crs = [("team-a", "db"), ("teama", "db"), ("team", "adb")];
        let shared = cloud_identifier("k61ac4a43", "team-a", "db");
        let mut seen = std::collections::BTreeSet::new();
        for (ns, name) in crs {
            assert_eq!(cloud_identifier("k61ac4a43", ns, name), shared);
            let own = separate_identifier("k61ac4a43", ns, name);
            assert_ne!(own, shared);
            assert!(own.len() <= DEFAULT_IDENTIFIER_LENGTH, "{own}");
            assert!(seen.insert(own.clone()), "{own} twice");
            for rules in [
                IdentifierRules::RdsInstance,
                IdentifierRules::ElastiCacheReplicationGroup,
                IdentifierRules::S3Bucket,
                IdentifierRules::IamUser,
            ] {
                assert_eq!(rules.conform(&own), own, "{rules:?}");
            }
        }
        // Long names too: never a `cloud_identifier`, still 40 at most.
        let long = separate_identifier("k61ac4a43", &"n".repeat(60), &"x".repeat(60));
        assert_eq!(long.len(), 40);
        assert_ne!(
            long,
            cloud_identifier("k61ac4a43", &"n".repeat(60), &"x".repeat(60))
        );
    }

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

    #[test]
    fn snapshot_identifiers_differ_for_crs_the_go_naming_confuses() {
        let at = "2026-11-26 19:00:00 +0000 UTC";
        let a = timestamped_identifier("k61ac4a43", "app", "staging-db-s", at);
        let b = timestamped_identifier("k61ac4a43", "app-staging", "db-s", at);
        assert_eq!(a, b, "the Go naming confuses them");
        let (a, b) = (
            snapshot_identifier(&a, "uid-1"),
            snapshot_identifier(&b, "uid-2"),
        );
        assert_ne!(a, b);
        for id in [&a, &b] {
            assert!(id.starts_with("k61ac4a43appstagingdbs"), "{id}");
            for rules in [
                IdentifierRules::RdsSnapshot,
                IdentifierRules::ElastiCacheSnapshot,
            ] {
                assert_eq!(rules.conform(id), *id, "{rules:?}");
            }
        }
        let long = timestamped_identifier("k61ac4a43", &"n".repeat(60), "s", at);
        assert_eq!(snapshot_identifier(&long, "uid").len(), 49);
    }

    #[test]
    fn timestamped_identifiers_match_the_go_operators() {
        // Vectors computed with the Go operator's ShortenString
        // (pkg/resources/strings.go) on the strings its
        // BuildTimestampedInfraNameFromObjectCreation and
        // BuildTimestampedInfraNameFromObject build (pkg/resources/config.go).
        assert_eq!(
            timestamped_identifier(
                "mycluster-x7k2p",
                "ns1",
                "snap1",
                "2024-05-01 10:00:00 +0000 UTC"
            ),
            "myclusterx7k2pns1snap12024050110000-ljzo"
        );
        assert_eq!(
            timestamped_identifier("mycluster-x7k2p", "ns1", "example-postgres", "1714557600"),
            "myclusterx7k2pns1examplepostgres171-j2zh"
        );
    }

    #[test]
    fn valid_go_identifiers_are_kept_for_every_service() {
        let id = cloud_identifier(
            "mycluster-x7k2p",
            "production-namespace",
            "example-database",
        );
        for rules in IdentifierRules::ALL {
            assert_eq!(rules.conform(&id), id, "{rules:?}");
        }
    }

    #[test]
    fn a_digit_first_identifier_gets_a_letter_where_aws_needs_one() {
        // A kube-system UID or infrastructure name starting with a digit.
        let id = cloud_identifier("61ac4a43-22c4-48e0-b099-0e2c4768ee7a", "demo", "db");
        assert!(id.starts_with('6'));
        for rules in IdentifierRules::ALL {
            let conformed = rules.conform(&id);
            assert_eq!(rules.check(&conformed), Ok(()), "{rules:?}: {conformed}");
            if rules.letter_first() {
                assert!(conformed.starts_with('c'), "{conformed}");
            } else {
                // S3 and IAM took the Go operator's name: keep it.
                assert_eq!(conformed, id);
            }
        }
        let group = IdentifierRules::ElastiCacheReplicationGroup.conform(&id);
        assert!(group.len() <= 40, "{group}");
    }

    #[test]
    fn rules_are_aws_rules() {
        use IdentifierRules::*;
        assert!(RdsInstance.check("a").is_ok());
        assert!(RdsInstance.check("1db").is_err());
        assert!(RdsInstance.check("db-").is_err());
        assert!(RdsInstance.check("d--b").is_err());
        assert!(RdsInstance.check(&"a".repeat(64)).is_err());
        assert!(ElastiCacheReplicationGroup.check(&"a".repeat(41)).is_err());
        assert!(RdsSnapshot.check(&"a".repeat(255)).is_ok());
        assert!(S3Bucket.check("ab").is_err());
        assert!(S3Bucket.check("1bucket").is_ok());
        assert!(S3Bucket.check("Bucket").is_err());
        assert!(S3Bucket.check("192.168.1.1").is_err());
        assert!(S3Bucket.check("xn--bucket").is_err());
        assert!(S3Bucket.check("bucket-s3alias").is_err());
        assert!(IamUser.check("user@example.com").is_ok());
        assert!(IamUser.check("a/b").is_err());
    }
}
