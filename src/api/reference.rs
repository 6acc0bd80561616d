//! docs/reference.md, made from the CRDs: what `kubectl explain` says,
//! on one page, so the API reference cannot drift from the schema.

use std::fmt::Write as _;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, JSONSchemaProps,
    JSONSchemaPropsOrArray,
};

/// The reference page of these CRDs, as Markdown.
pub fn markdown(crds: &[CustomResourceDefinition]) -> String {
    let mut out = String::from(
        "# API reference\n\n\
         Generated from the CRDs by `make crds` (`cloud-resource-operator crd --reference`);\n\
         do not edit by hand. Every kind is in group `integreatly.org`, version `v1alpha1`,\n\
         namespaced, and in category `cloudresources` (`kubectl get cloudresources` lists\n\
         all six). `kubectl explain <kind>.spec` shows the same text.\n\n",
    );
    for crd in crds {
        let kind = &crd.spec.names.kind;
        let _ = writeln!(out, "- [{kind}](#{})", kind.to_lowercase());
    }
    for crd in crds {
        kind_section(&mut out, crd);
    }
    out
}

fn kind_section(out: &mut String, crd: &CustomResourceDefinition) {
    let names = &crd.spec.names;
    let version = &crd.spec.versions[0];
    let _ = write!(out, "\n## {}\n\n", names.kind);
    let schema = version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref());
    if let Some(description) = schema.and_then(|s| s.description.as_ref()) {
        let _ = write!(out, "{}\n\n", one_line(description));
    }
    let _ = write!(
        out,
        "`kubectl get {}` (plural `{}`)",
        names.plural, names.plural
    );
    let columns = version.additional_printer_columns.iter().flatten();
    let (wide, normal): (Vec<_>, Vec<_>) = columns.partition(|c| c.priority.unwrap_or(0) > 0);
    let list = |cols: &[&CustomResourceColumnDefinition]| {
        cols.iter()
            .map(|c| c.name.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = write!(out, " shows {}", list(&normal));
    if !wide.is_empty() {
        let _ = write!(out, "; `-o wide` adds {}", list(&wide));
    }
    out.push_str(".\n");
    let Some(schema) = schema else { return };
    for part in ["spec", "status"] {
        let Some(props) = schema.properties.as_ref().and_then(|p| p.get(part)) else {
            continue;
        };
        let _ = write!(
            out,
            "\n### {}.{part}\n\n| Field | Type | Description |\n|---|---|---|\n",
            names.kind
        );
        fields(out, part, props);
    }
}

/// One row per field under `path`, depth first, in the schema's (sorted) order.
fn fields(out: &mut String, path: &str, schema: &JSONSchemaProps) {
    let required = schema.required.clone().unwrap_or_default();
    let item = schema.items.as_ref().and_then(|i| match i {
        JSONSchemaPropsOrArray::Schema(s) => Some(s.as_ref()),
        _ => None,
    });
    let children = match item {
        Some(item) => item
            .properties
            .as_ref()
            .map(|p| (format!("{path}[]"), p, item)),
        None => schema
            .properties
            .as_ref()
            .map(|p| (path.to_string(), p, schema)),
    };
    let Some((base, props, parent)) = children else {
        return;
    };
    let required = if item.is_some() {
        parent.required.clone().unwrap_or_default()
    } else {
        required
    };
    for (name, child) in props {
        let field = format!("{base}.{name}");
        let mut text = child
            .description
            .as_deref()
            .map(one_line)
            .unwrap_or_default();
        if required.contains(name) {
            text.push_str(" Required.");
        }
        if let Some(pattern) = &child.pattern {
            let _ = write!(text, " Pattern `{pattern}`.");
        }
        let _ = writeln!(
            out,
            "| `{field}` | {} | {} |",
            type_of(child),
            text.trim().replace('|', "\\|")
        );
        // Conditions are the standard metav1.Condition: described once by type, not field by field.
        if name != "conditions" {
            fields(out, &field, child);
        }
    }
}

fn type_of(schema: &JSONSchemaProps) -> String {
    let base = schema.type_.clone().unwrap_or_else(|| "object".into());
    match (base.as_str(), schema.items.as_ref()) {
        ("array", Some(JSONSchemaPropsOrArray::Schema(item))) => {
            format!("[]{}", type_of(item))
        }
        _ => base,
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_of_every_kind_is_in_the_reference() {
        let page = markdown(&crate::api::crds());
        for field in [
            "`spec.secretRef.name`",
            "`spec.restoreFromSnapshot`",
            "`status.pendingChanges[].desired`",
            "`spec.resourceName`",
            "`status.snapshotID`",
        ] {
            assert!(page.contains(field), "{field} missing from the reference");
        }
        assert!(page.contains("`-o wide` adds Connectable, Message"));
    }
}
