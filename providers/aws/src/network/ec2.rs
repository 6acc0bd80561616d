//! EC2 request pieces the network steps share: filters, tags, and reading
//! tags back.

use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};

pub fn filter(name: &str, values: &[&str]) -> Filter {
    Filter::builder()
        .name(name)
        .set_values(Some(values.iter().map(|v| v.to_string()).collect()))
        .build()
}

pub fn tags(pairs: &[(String, String)]) -> Vec<Tag> {
    pairs
        .iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

/// Tags put on at creation: what is made is found by them even when the
/// create's answer is lost.
pub fn at_creation(kind: ResourceType, pairs: &[(String, String)]) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(kind)
        .set_tags(Some(tags(pairs)))
        .build()
}

/// Whether `have` carries every one of `want`.
pub fn has_all(have: &[Tag], want: &[(String, String)]) -> bool {
    want.iter().all(|(k, v)| {
        have.iter()
            .any(|t| t.key() == Some(k.as_str()) && t.value() == Some(v.as_str()))
    })
}
