//! `cloud-resource-operator validate` run as a user runs it: on the fixture
//! set of planted mistakes (each declared by an `# expect:` line in its
//! file) and on the shipped samples. Needs no cluster.

use std::{path::Path, process::Command};

fn validate(paths: &[&str]) -> anyhow::Result<(i32, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(env!("CARGO_BIN_EXE_cloud-resource-operator"))
        .arg("validate")
        .args(paths.iter().map(|p| root.join(p)))
        .output()?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ))
}

/// `(file, object, key, message part)` from the fixtures' `# expect:` lines.
fn expectations(dir: &Path) -> anyhow::Result<Vec<(String, String, String, String)>> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let text = std::fs::read_to_string(&path)?;
        for line in text.lines() {
            if let Some(e) = line.strip_prefix("# expect: ") {
                let parts: Vec<&str> = e.split(" | ").collect();
                anyhow::ensure!(parts.len() == 3, "malformed expectation {line:?}");
                all.push((
                    path.file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    parts[0].to_string(),
                    parts[1].to_string(),
                    parts[2].to_string(),
                ));
            }
        }
    }
    Ok(all)
}

#[test]
fn every_planted_mistake_is_found_and_nothing_else() -> anyhow::Result<()> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/validate");
    let expected = expectations(&dir)?;
    assert!(expected.len() >= 15, "fixture set shrank: {expected:?}");
    let (code, out) = validate(&["tests/fixtures/validate"])?;
    assert_eq!(code, 1, "validate must fail on the fixtures:\n{out}");
    let findings: Vec<&str> = out.lines().collect();
    for (file, object, key, part) in &expected {
        let prefix = format!("/{file}: {object}: {key}: ");
        let hits: Vec<_> = findings
            .iter()
            .filter(|f| f.contains(&prefix) && f.contains(part.as_str()))
            .collect();
        assert_eq!(
            hits.len(),
            1,
            "expected one finding {prefix}…{part}, got {hits:?}; all findings:\n{out}"
        );
    }
    assert_eq!(
        findings.len(),
        expected.len(),
        "findings nobody planted:\n{out}"
    );
    Ok(())
}

#[test]
fn the_shipped_configuration_and_samples_pass() -> anyhow::Result<()> {
    let (code, out) = validate(&["config"])?;
    assert_eq!(code, 0, "{out}");
    assert!(out.is_empty(), "{out}");
    Ok(())
}
