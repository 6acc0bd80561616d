//! Credential rotation: a person asks with the annotation
//! `integreatly.org/rotate-credentials: <any new value>`, or a tier sets
//! `rotateCredentialsEvery`. Which rotation is due is computed from the
//! CR's status (the last rotation and the request it answered), never
//! from timers, so restarts and leader changes neither lose nor repeat
//! one. The provider rotates once per token and says when it is done.

use k8s_openapi::jiff::Timestamp;

use crate::api::CredentialsRotation;

/// Annotation a person sets to a new value to rotate a CR's credentials.
pub const ROTATE_ANNOTATION: &str = "integreatly.org/rotate-credentials";

/// The rotation due, as a token for the provider: a person's request until
/// it is answered, else the schedule's once `every` seconds have passed
/// since the last rotation (or the CR's creation). Pure.
pub fn due(
    requested: Option<&str>,
    last: Option<&CredentialsRotation>,
    created: Option<Timestamp>,
    every: Option<u64>,
    now: Timestamp,
) -> Option<String> {
    if let Some(value) = requested.filter(|v| !v.is_empty())
        && last.and_then(|l| l.requested.as_deref()) != Some(value)
    {
        return Some(format!("requested:{value}"));
    }
    let every = i64::try_from(every?).ok()?;
    let since = last
        .and_then(|l| l.rotated_at.parse::<Timestamp>().ok())
        .or(created)?;
    let due = since.as_second().saturating_add(every);
    (now.as_second() >= due).then(|| format!("scheduled:{due}"))
}

/// The status record of a completed rotation `token`.
pub fn completed(
    token: &str,
    last: Option<&CredentialsRotation>,
    now: Timestamp,
) -> CredentialsRotation {
    CredentialsRotation {
        rotated_at: now.to_string(),
        requested: token
            .strip_prefix("requested:")
            .map(str::to_string)
            .or_else(|| last.and_then(|l| l.requested.clone())),
    }
}

/// The condition of a CR whose provider cannot rotate its credentials
/// (in-cluster workloads keep the passwords they were initialised with).
pub fn unsupported() -> cro_provider_api::Condition {
    cro_provider_api::Condition {
        type_: cro_provider_api::ConditionType::CredentialsRotated,
        status: false,
        reason: "Unsupported".into(),
        message: format!(
            "a credential rotation is asked for (annotation {ROTATE_ANNOTATION} or the tier's rotateCredentialsEvery), but this resource's provider keeps the credentials it generated (its type maps to an in-cluster provider in cloud-resource-config): remove the annotation, or rotateCredentialsEvery from the tier"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn last(rotated_at: &str, requested: Option<&str>) -> CredentialsRotation {
        CredentialsRotation {
            rotated_at: rotated_at.into(),
            requested: requested.map(str::to_string),
        }
    }

    /// (requested, last rotation, every, now, due)
    type Row<'a> = (
        Option<&'a str>,
        Option<CredentialsRotation>,
        Option<u64>,
        Timestamp,
        Option<&'a str>,
    );

    #[test]
    fn a_request_is_due_until_answered_and_the_schedule_counts_from_the_last_rotation() {
        let created = Some(at("2026-01-01T00:00:00Z"));
        let day = Some(86_400);
        let now = at("2026-01-01T12:00:00Z");
        let rows: Vec<Row> = vec![
            (None, None, None, now, None),
            (Some(""), None, None, now, None),
            (Some("1"), None, None, now, Some("requested:1")),
            (
                Some("1"),
                Some(last("2026-01-01T01:00:00Z", Some("1"))),
                None,
                now,
                None,
            ),
            (
                Some("2"),
                Some(last("2026-01-01T01:00:00Z", Some("1"))),
                None,
                now,
                Some("requested:2"),
            ),
            // Scheduled: a day after creation, then a day after the last.
            (None, None, day, now, None),
            (
                None,
                None,
                day,
                at("2026-01-02T00:00:00Z"),
                Some("scheduled:1767312000"),
            ),
            (
                None,
                Some(last("2026-01-02T00:00:05Z", None)),
                day,
                at("2026-01-02T12:00:00Z"),
                None,
            ),
            (
                None,
                Some(last("2026-01-02T00:00:05Z", None)),
                day,
                at("2026-01-03T00:00:05Z"),
                Some("scheduled:1767398405"),
            ),
            // A request answered before does not hold the schedule back.
            (
                Some("1"),
                Some(last("2026-01-01T00:00:00Z", Some("1"))),
                day,
                at("2026-01-02T00:00:00Z"),
                Some("scheduled:1767312000"),
            ),
        ];
        for (requested, last, every, now, want) in rows {
            assert_eq!(
                due(requested, last.as_ref(), created, every, now).as_deref(),
                want,
                "{requested:?} {last:?} {every:?} {now}"
            );
        }
    }

    #[test]
    fn a_completed_rotation_remembers_the_request_it_answered() {
        let now = at("2026-01-05T00:00:00Z");
        assert_eq!(
            completed("requested:7", None, now).requested.as_deref(),
            Some("7")
        );
        let before = last("2026-01-01T00:00:00Z", Some("7"));
        let scheduled = completed("scheduled:1", Some(&before), now);
        assert_eq!(
            (
                scheduled.requested.as_deref(),
                scheduled.rotated_at.as_str()
            ),
            (Some("7"), "2026-01-05T00:00:00Z")
        );
    }
}
