//! The text of a [`Report`], and what a person does next (pure).

use std::fmt::Write as _;

use k8s_openapi::jiff::Timestamp;

use super::Report;
use crate::{
    api::{ADOPT_ANNOTATION, APPROVE_PLAN_ANNOTATION},
    reconcile::conditions::ConditionType,
};
use cro_runtime::printable::one_line;

/// `5s`, `12m`, `3h`, `4d`: how long ago, as kubectl shows ages.
pub fn age(at: Option<Timestamp>) -> String {
    let Some(at) = at else {
        return "?".into();
    };
    let secs = Timestamp::now()
        .as_second()
        .saturating_sub(at.as_second())
        .max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7_200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3_600),
        s => format!("{}d", s / 86_400),
    }
}

/// What to do about the CR, from what the report shows; empty when
/// nothing is asked of a person.
pub fn next_steps(r: &Report) -> Vec<String> {
    let mut steps = Vec::new();
    let phase = r.phase.as_deref();
    if r.deleting {
        steps.push(format!(
            "being deleted: the finalizer stays until the {} is gone; the message says what it waits for",
            if r.cloud_identifier.is_some() { "cloud resource" } else { "resource" }
        ));
    }
    if r.skip_create {
        steps.push("spec.skipCreate is true: the operator makes no provider calls for it; set it to false to resume".into());
    }
    if phase.is_none() && !r.deleting {
        steps.push(
            "no status yet: is the operator running and watching this namespace? Read the leader's logs (the holder of the Lease cloud-resource-operator in the operator's namespace)".into(),
        );
    }
    if phase == Some("failed") {
        let why = r.message.as_deref().unwrap_or("no message");
        steps.push(format!("failed: {why}"));
    }
    if let Some(ready) = r
        .conditions
        .iter()
        .find(|c| c.is(ConditionType::Ready, false))
        && phase != Some("failed")
        && !ready.message.is_empty()
        && r.message.as_deref() != Some(ready.message.as_str())
    {
        steps.push(format!("not ready ({}): {}", ready.reason, ready.message));
    }
    if let Some(hash) = &r.adoption_hash {
        steps.push(format!(
            "a cloud resource someone else made exists under this CR's identifier: to adopt it, annotate the CR with {ADOPT_ANNOTATION}={hash}; otherwise rename the CR"
        ));
    }
    let asks_a_person = r
        .pending_changes
        .iter()
        .any(|c| c.when.contains(APPROVE_PLAN_ANNOTATION) || c.when == "maintenanceWindow");
    if let Some(hash) = r.plan_hash.as_ref()
        && asks_a_person
    {
        steps.push(format!(
            "pending changes: apply them in a maintenance window with spec.maintenanceWindow: true (and spec.applyImmediately: true for at once), or, under a Plan tier, annotate {APPROVE_PLAN_ANNOTATION}={hash}"
        ));
    }
    if let Some(s) = &r.secret
        && !s.exists
        && phase == Some("complete")
    {
        steps.push(format!(
            "the Secret {}/{} is missing although the CR is complete: the operator writes it again at its next look; check who deletes it",
            s.namespace, s.name
        ));
    }
    if let Some(c) = r
        .conditions
        .iter()
        .find(|c| c.is(ConditionType::Connectable, false))
    {
        steps.push(format!(
            "the operator could not log in with the Secret ({}): {}",
            c.reason, c.message
        ));
    }
    steps
}

/// The report as a person reads it (control characters escaped, see
/// [`cro_runtime::printable`]).
pub fn text(r: &Report) -> String {
    let mut out = String::new();
    for (label, value) in labelled(r) {
        let _ = writeln!(out, "{label:<18}{}", one_line(&value));
    }
    conditions(&mut out, r);
    if !r.owned.is_empty() {
        let owned: Vec<String> = r.owned.iter().map(|o| one_line(o)).collect();
        let _ = writeln!(out, "Owned objects:\n  {}", owned.join("\n  "));
    }
    pending_changes(&mut out, r);
    events(&mut out, r);
    if !r.next_steps.is_empty() {
        let _ = writeln!(out, "Next:");
        for s in &r.next_steps {
            let _ = writeln!(out, "  - {}", one_line(s));
        }
    }
    cro_runtime::printable::printable(&out)
}

/// The report's one-line facts, each with its label, in the order shown.
fn labelled(r: &Report) -> Vec<(String, String)> {
    let mut lines = vec![(
        format!("{}:", r.kind),
        format!("{}/{}", r.namespace, r.name),
    )];
    let mut line = |label: &str, value: String| lines.push((label.to_string(), value));
    if let (Some(t), Some(tier)) = (&r.r#type, &r.tier) {
        line("Type / tier:", format!("{t} / {tier}"));
    }
    if let Some(source) = &r.resource_name {
        line("Snapshot of:", source.clone());
    }
    let phase = r.phase.as_deref().unwrap_or("(none yet)");
    let generation = match (r.observed_generation, r.generation) {
        (Some(seen), Some(g)) if seen < g => format!(" (describes generation {seen} of {g})"),
        _ => String::new(),
    };
    line("Phase:", format!("{phase}{generation}"));
    if let Some(m) = r.message.as_deref().filter(|m| !m.is_empty()) {
        line("Message:", m.to_string());
    }
    let provider = match (&r.strategy, &r.provider) {
        (Some(s), Some(p)) => format!("{s} ({p})"),
        (Some(s), None) => s.clone(),
        (None, Some(p)) => p.clone(),
        (None, None) => "(not chosen yet)".into(),
    };
    line("Provider:", provider);
    let identifier = r.cloud_identifier.as_deref().unwrap_or("(none recorded)");
    line("Cloud identifier:", identifier.to_string());
    if let Some(cloud) = &r.cloud {
        line("Cloud:", cloud.clone());
    }
    if let Some(s) = &r.secret {
        let keys = match s.exists {
            true => format!("keys {}", s.keys.join(", ")),
            false => "missing".into(),
        };
        line("Secret:", format!("{}/{} ({keys})", s.namespace, s.name));
    }
    if r.deleting {
        line(
            "Deleting:",
            format!("finalizers {}", r.finalizers.join(", ")),
        );
    }
    lines
}

fn conditions(out: &mut String, r: &Report) {
    let _ = writeln!(out, "Conditions:");
    if r.conditions.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for c in &r.conditions {
        let row = format!(
            "  {:<14}{:<8}{:<24}{:<6}{}",
            c.r#type, c.status, c.reason, c.age, c.message
        );
        let _ = writeln!(out, "{}", one_line(&row));
    }
}

fn pending_changes(out: &mut String, r: &Report) {
    if r.pending_changes.is_empty() {
        return;
    }
    let hash = one_line(r.plan_hash.as_deref().unwrap_or("-"));
    let _ = writeln!(out, "Pending changes (plan hash {hash}):");
    for c in &r.pending_changes {
        let restarts = if c.restarts { ", restarts" } else { "" };
        let row = format!(
            "  {}: {} -> {} ({}{restarts})",
            c.field, c.current, c.desired, c.when
        );
        let _ = writeln!(out, "{}", one_line(&row));
    }
}

fn events(out: &mut String, r: &Report) {
    let _ = writeln!(out, "Events:");
    if r.events.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for e in &r.events {
        let count = match e.count > 1 {
            true => format!(" (x{})", e.count),
            false => String::new(),
        };
        let row = format!(
            "  {:<6}{:<9}{:<22}{}{count}",
            e.age, e.r#type, e.reason, e.message
        );
        let _ = writeln!(out, "{}", one_line(&row));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::status::{ConditionLine, SecretLine};

    fn failed() -> Report {
        Report {
            kind: "Postgres".into(),
            namespace: "app".into(),
            name: "db".into(),
            phase: Some("failed".into()),
            message: Some(
                "tier \"gold\" not found in ConfigMap cloud-resources-aws-strategies".into(),
            ),
            conditions: vec![ConditionLine {
                r#type: "Ready".into(),
                status: "False".into(),
                reason: "Failed".into(),
                message: "tier \"gold\" not found".into(),
                age: "1m".into(),
            }],
            secret: Some(SecretLine {
                namespace: "app".into(),
                name: "db-credentials".into(),
                exists: false,
                keys: vec![],
            }),
            ..Report::default()
        }
    }

    #[test]
    fn a_failed_cr_says_what_to_change_once() {
        let r = failed();
        let steps = next_steps(&r);
        assert_eq!(steps.len(), 1, "{steps:?}");
        assert!(steps[0].starts_with("failed: tier \"gold\""));
        let shown = text(&Report {
            next_steps: steps,
            ..r
        });
        assert!(shown.contains("Phase:            failed\n"), "{shown}");
        assert!(shown.contains("Secret:           app/db-credentials (missing)"));
        assert!(shown.contains("Next:\n  - failed: tier"));
    }

    #[test]
    fn a_complete_cr_asks_nothing_and_lists_keys_only() {
        let r = Report {
            phase: Some("complete".into()),
            message: None,
            conditions: vec![],
            secret: Some(SecretLine {
                namespace: "app".into(),
                name: "db-credentials".into(),
                exists: true,
                keys: vec!["host".into(), "password".into()],
            }),
            ..failed()
        };
        assert!(next_steps(&r).is_empty());
        assert!(text(&r).contains("(keys host, password)"));
    }

    #[test]
    fn ages_read_like_kubectls() {
        let ago = |s: i64| Some(Timestamp::from_second(Timestamp::now().as_second() - s).unwrap());
        assert_eq!(age(ago(5)), "5s");
        assert_eq!(age(ago(600)), "10m");
        assert_eq!(age(ago(3 * 3_600)), "3h");
        assert_eq!(age(ago(5 * 86_400)), "5d");
        assert_eq!(age(None), "?");
    }
}
