//! `cloud-resource-operator validate PATH...`: the configuration ConfigMaps
//! and the CRs in YAML files, checked offline with the same resolution and
//! strategy code the operator runs, so CI can refuse a broken ConfigMap
//! before it reaches a cluster.

use std::{
    collections::BTreeMap,
    fmt,
    path::{Path, PathBuf},
};

use cro_provider_api::ResourceKind;
use serde_json::Value;

use crate::{
    api::{PostgresSnapshotSpec, ResourceTypeSpec},
    config::{
        Located, NETWORK_KEY, TYPES_CONFIG_MAP, known_provider, provider_of_strategies_map,
        resolve_provider, resolve_tier, split_tier, tier_mapping, type_mapping,
    },
};

/// One problem: where it is and what to change.
#[derive(Debug, PartialEq)]
pub struct Finding {
    pub file: PathBuf,
    /// `Kind namespace/name`, or `document N` when there is no object.
    pub object: String,
    /// The ConfigMap key or CR field concerned.
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.object)?;
        if let Some(key) = &self.key {
            write!(f, ": {key}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// A parsed YAML document and where it came from.
#[derive(Debug)]
pub struct Document {
    pub file: PathBuf,
    /// 1-based position in the file.
    pub index: usize,
    pub value: Value,
}

impl Document {
    fn str_at(&self, pointer: &str) -> Option<&str> {
        self.value.pointer(pointer).and_then(Value::as_str)
    }

    pub fn kind(&self) -> Option<&str> {
        self.str_at("/kind")
    }

    fn name(&self) -> &str {
        self.str_at("/metadata/name").unwrap_or("")
    }

    fn namespace(&self) -> Option<&str> {
        self.str_at("/metadata/namespace")
    }

    fn object(&self) -> String {
        match (self.kind(), self.namespace()) {
            (Some(kind), Some(ns)) => format!("{kind} {ns}/{}", self.name()),
            (Some(kind), None) => format!("{kind} {}", self.name()),
            (None, _) => format!("document {}", self.index),
        }
    }

    fn finding(&self, key: Option<String>, message: impl Into<String>) -> Finding {
        Finding {
            file: self.file.clone(),
            object: self.object(),
            key,
            message: message.into(),
        }
    }

    pub fn config_map(&self) -> Located {
        let data = self
            .value
            .get("data")
            .and_then(Value::as_object)
            .map(|data| {
                data.iter()
                    .map(|(k, v)| {
                        let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                        (k.clone(), v)
                    })
                    .collect()
            })
            .unwrap_or_default();
        Located {
            namespace: self.namespace().unwrap_or_default().to_string(),
            name: self.name().to_string(),
            data,
        }
    }
}

/// Reads every `.yaml`, `.yml` and `.json` file under `paths` (files or
/// directories, recursively), one document per YAML document. Unreadable
/// files and YAML syntax errors are findings.
pub fn load(paths: &[PathBuf]) -> (Vec<Document>, Vec<Finding>) {
    let mut files = Vec::new();
    let mut findings = Vec::new();
    for path in paths {
        collect_files(path, &mut files, &mut findings);
    }
    let mut docs = Vec::new();
    for file in files {
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            Err(e) => {
                findings.push(file_finding(&file, format!("cannot read: {e}")));
                continue;
            }
        };
        // One result per document that holds something (empty ones are
        // skipped, so `index` counts those): a document that does not
        // parse is named, and the others are still checked.
        let mut bytes = text.as_bytes();
        for (i, doc) in serde_saphyr::read::<_, Value>(&mut bytes).enumerate() {
            match doc {
                Ok(Value::Null) => {}
                Ok(value) => docs.push(Document {
                    file: file.clone(),
                    index: i + 1,
                    value,
                }),
                Err(e) => findings.push(Finding {
                    file: file.clone(),
                    object: format!("document {}", i + 1),
                    key: None,
                    message: format!("not valid YAML: {e}"),
                }),
            }
        }
    }
    (docs, findings)
}

fn file_finding(file: &Path, message: String) -> Finding {
    Finding {
        file: file.to_path_buf(),
        object: "file".into(),
        key: None,
        message,
    }
}

fn collect_files(path: &Path, files: &mut Vec<PathBuf>, findings: &mut Vec<Finding>) {
    if path.is_file() {
        files.push(path.to_path_buf());
        return;
    }
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(e) => {
            findings.push(file_finding(path, format!("cannot read: {e}")));
            return;
        }
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        let yaml = p
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"));
        // kustomize's own files are not Kubernetes objects.
        let kustomization = p
            .file_stem()
            .is_some_and(|s| s.eq_ignore_ascii_case("kustomization"));
        if p.is_dir() || (yaml && !kustomization) {
            collect_files(&p, files, findings);
        }
    }
}

/// Options of a validation run.
#[derive(Debug, Default)]
pub struct Options {
    /// The operator's namespace: its `cloud-resource-config` is every CR's
    /// fallback. Unset, a ConfigMap without a namespace plays that role.
    pub operator_namespace: Option<String>,
}

/// Every problem in `docs`, in document order.
pub fn validate(docs: &[Document], options: &Options) -> Vec<Finding> {
    let mut findings = Vec::new();
    for doc in docs {
        match (
            doc.value.get("apiVersion").and_then(Value::as_str),
            doc.kind(),
        ) {
            (Some("v1"), Some("ConfigMap")) => {
                if doc.name() == TYPES_CONFIG_MAP {
                    check_types(doc, &mut findings);
                } else if let Some(provider) = provider_of_strategies_map(doc.name()) {
                    check_strategies(doc, provider, &mut findings);
                }
            }
            (Some(api), Some(kind)) if api.starts_with("integreatly.org/") => {
                check_cr(doc, api, kind, docs, options, &mut findings);
            }
            (_, None) => findings.push(doc.finding(
                None,
                "not a Kubernetes object: it has no kind; give it apiVersion and kind",
            )),
            // Other objects are not this operator's to judge.
            _ => {}
        }
    }
    findings
}

fn known_resource_keys() -> String {
    ResourceKind::ALL.map(ResourceKind::config_key).join(", ")
}

fn check_types(doc: &Document, findings: &mut Vec<Finding>) {
    let cm = doc.config_map();
    for key in cm.data.keys() {
        let at = Some(format!("key {key}"));
        let mapping = match type_mapping(&cm, key) {
            Some(Ok(mapping)) => mapping,
            Some(Err(e)) => {
                findings.push(doc.finding(at, e.to_string()));
                continue;
            }
            None => continue,
        };
        for (resource, provider) in &mapping {
            if ResourceKind::from_config_key(resource).is_none() {
                findings.push(doc.finding(
                    at.clone(),
                    format!(
                        "{resource:?} is not a resource type; use one of: {}",
                        known_resource_keys()
                    ),
                ));
            } else if let Err(e) = known_provider(&cm, key, resource, provider) {
                findings.push(doc.finding(at.clone(), e.to_string()));
            }
        }
    }
}

fn check_strategies(doc: &Document, provider: &str, findings: &mut Vec<Finding>) {
    if !crate::providers::is_known(provider) {
        findings.push(doc.finding(
            Some("metadata.name".into()),
            format!(
                "{provider:?} is not a provider; strategies ConfigMaps are named cloud-resources-<provider>-strategies with provider one of: {}",
                crate::providers::names().collect::<Vec<_>>().join(", ")
            ),
        ));
        return;
    }
    let cm = doc.config_map();
    // The Go operator's `_network` key: per tier, the CIDR block of the
    // network AWS databases are placed in.
    if let Some(raw) = cm.data.get(NETWORK_KEY).filter(|_| provider == "aws") {
        let at = format!("key {NETWORK_KEY}");
        match serde_json::from_str::<std::collections::BTreeMap<String, serde_json::Value>>(raw) {
            Err(e) => findings.push(doc.finding(Some(at), format!("not a JSON map of tiers: {e}"))),
            Ok(tiers) => {
                for (tier, value) in &tiers {
                    if let Err(e) = cro_provider_aws::validate_network_strategy(value) {
                        findings
                            .push(doc.finding(Some(format!("{at}, tier {tier}")), e.to_string()));
                    }
                }
            }
        }
    }
    for key in cm.data.keys().filter(|k| *k != NETWORK_KEY) {
        let at = format!("key {key}");
        let Some(kind) = ResourceKind::from_config_key(key) else {
            findings.push(doc.finding(
                Some(at),
                format!(
                    "{key:?} is not a resource type; use one of: {}",
                    known_resource_keys()
                ),
            ));
            continue;
        };
        let tiers = match tier_mapping(&cm, kind) {
            Some(Ok(tiers)) => tiers,
            Some(Err(e)) => {
                findings.push(doc.finding(Some(at), e.to_string()));
                continue;
            }
            None => continue,
        };
        for (tier, value) in &tiers {
            let at = Some(format!("{at}, tier {tier}"));
            match split_tier(value.clone()) {
                Ok(t) => {
                    if let Err(e) = crate::providers::validate_strategy(provider, kind, &t.strategy)
                    {
                        findings.push(doc.finding(at, e.to_string()));
                    }
                }
                Err(e) => findings.push(doc.finding(at, e.to_string())),
            }
        }
    }
}

/// The `cloud-resource-config` a CR in `namespace` resolves with: its own
/// namespace's, else the operator's.
fn types_for<'d>(
    docs: &'d [Document],
    namespace: Option<&str>,
    options: &Options,
) -> Option<&'d Document> {
    let named = |ns: Option<&str>| {
        docs.iter().find(|d| {
            d.kind() == Some("ConfigMap") && d.name() == TYPES_CONFIG_MAP && d.namespace() == ns
        })
    };
    namespace
        .and_then(|ns| named(Some(ns)))
        .or_else(|| named(options.operator_namespace.as_deref()))
        .or_else(|| named(None))
}

fn strategies_for<'d>(
    docs: &'d [Document],
    provider: &str,
    options: &Options,
) -> Option<&'d Document> {
    let name = crate::config::strategies_config_map(provider);
    let mut candidates = docs
        .iter()
        .filter(|d| d.kind() == Some("ConfigMap") && d.name() == name);
    match &options.operator_namespace {
        Some(ns) => candidates.find(|d| d.namespace().is_none_or(|n| n == ns)),
        None => candidates.next(),
    }
}

const RESOURCE_KINDS: [(&str, ResourceKind); 4] = [
    ("Postgres", ResourceKind::Postgres),
    ("Redis", ResourceKind::Redis),
    ("BlobStorage", ResourceKind::BlobStorage),
    ("SMTPCredentialSet", ResourceKind::Smtp),
];

fn check_cr(
    doc: &Document,
    api: &str,
    kind: &str,
    docs: &[Document],
    options: &Options,
    findings: &mut Vec<Finding>,
) {
    if api != "integreatly.org/v1alpha1" {
        findings.push(doc.finding(
            Some("apiVersion".into()),
            format!("{api} is not served; use integreatly.org/v1alpha1"),
        ));
        return;
    }
    let spec = doc.value.get("spec").cloned().unwrap_or(Value::Null);
    if matches!(kind, "PostgresSnapshot" | "RedisSnapshot") {
        if let Err(e) = typed::<PostgresSnapshotSpec>(spec) {
            findings.push(doc.finding(Some(e.0), e.1));
        }
        return;
    }
    let Some((_, resource_kind)) = RESOURCE_KINDS.iter().find(|(k, _)| *k == kind) else {
        findings.push(doc.finding(
            Some("kind".into()),
            format!(
                "{kind} is not a kind of this operator; use Postgres, Redis, BlobStorage, SMTPCredentialSet, PostgresSnapshot or RedisSnapshot"
            ),
        ));
        return;
    };
    if let Some(field) = unknown_spec_field(kind, &spec) {
        findings.push(doc.finding(
            Some(format!("spec.{field}")),
            format!("not a field of {kind}; the API server would drop it (check the spelling against crds/)"),
        ));
    }
    let spec: ResourceTypeSpec = match typed(spec) {
        Ok(spec) => spec,
        Err((key, message)) => {
            findings.push(doc.finding(Some(key), message));
            return;
        }
    };
    check_configuration(doc, &spec, *resource_kind, docs, options, findings);
}

/// The CR's type and tier, resolved against the ConfigMaps among `docs`.
fn check_configuration(
    doc: &Document,
    spec: &ResourceTypeSpec,
    resource_kind: ResourceKind,
    docs: &[Document],
    options: &Options,
    findings: &mut Vec<Finding>,
) {
    let types = types_for(docs, doc.namespace(), options).map(Document::config_map);
    let provider = match resolve_provider(types.as_ref(), &spec.r#type, resource_kind) {
        Ok(provider) => provider,
        Err(e) => {
            findings.push(doc.finding(Some("spec.type".into()), e.to_string()));
            return;
        }
    };
    // Without the provider's strategies ConfigMap among the inputs, the
    // tier cannot be judged offline (the cluster may have one).
    if let Some(strategies) = strategies_for(docs, &provider, options) {
        let operator_ns = options.operator_namespace.as_deref().unwrap_or_default();
        if let Err(e) = resolve_tier(
            Some(&strategies.config_map()),
            operator_ns,
            &provider,
            resource_kind,
            &spec.tier,
        ) {
            findings.push(doc.finding(Some("spec.tier".into()), e.to_string()));
        }
    }
}

/// A top-level spec field the kind's CRD schema does not have.
fn unknown_spec_field(kind: &str, spec: &Value) -> Option<String> {
    let crd = crate::api::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == kind)?;
    let schema = crd.spec.versions.first()?.schema.as_ref()?;
    let known = schema
        .open_api_v3_schema
        .as_ref()?
        .properties
        .as_ref()?
        .get("spec")?
        .properties
        .as_ref()?;
    spec.as_object()?
        .keys()
        .find(|k| !known.contains_key(*k))
        .cloned()
}

/// Deserialises a CR spec, naming the field path on error.
fn typed<T: serde::de::DeserializeOwned>(spec: Value) -> Result<T, (String, String)> {
    if spec.is_null() {
        return Err(("spec".into(), "missing; every CR needs a spec".into()));
    }
    serde_path_to_error::deserialize(spec).map_err(|e| {
        let path = e.path().to_string();
        let key = if path == "." {
            "spec".to_string()
        } else {
            format!("spec.{path}")
        };
        (key, e.inner().to_string())
    })
}

/// Counts of what a run looked at, for the summary line.
pub fn summary(docs: &[Document], findings: &[Finding]) -> String {
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for doc in docs {
        *by_kind.entry(doc.kind().unwrap_or("unknown")).or_default() += 1;
    }
    let kinds: Vec<String> = by_kind.iter().map(|(k, n)| format!("{n} {k}")).collect();
    format!(
        "checked {} documents ({}): {} problem(s)",
        docs.len(),
        kinds.join(", "),
        findings.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_that_does_not_parse_is_named_and_the_others_are_still_read() {
        let file = std::env::temp_dir().join(format!("cro-validate-{}.yaml", std::process::id()));
        let text =
            "kind: ConfigMap\nmetadata: {name: a}\n---\n---\nkind: Secret\nmetadata: {name: [b\n";
        std::fs::write(&file, text).unwrap_or_else(|e| panic!("{e}"));
        let (docs, findings) = load(std::slice::from_ref(&file));
        let _ = std::fs::remove_file(&file);
        let names: Vec<String> = docs
            .iter()
            .map(|d| d.value["metadata"]["name"].to_string())
            .collect();
        assert_eq!(
            names,
            ["\"a\""],
            "the document before the broken one: {findings:?}"
        );
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert!(
            findings[0].object == "document 2" && findings[0].message.starts_with("not valid YAML"),
            "{findings:?}"
        );
    }
}
