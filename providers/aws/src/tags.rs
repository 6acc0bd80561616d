//! Tags, written once for every AWS service: a [`Tagging`] implementation
//! per service reads and adds them, and [`ensure`] writes only the tags a
//! resource lacks or holds with another value — never the ones already
//! right, and never removing tags others added.

use std::collections::BTreeMap;

use cro_provider_api::ProviderError;

use aws_sdk_s3::{
    error::ProvideErrorMetadata, operation::get_bucket_tagging::GetBucketTaggingError,
};

use crate::errors::Answer;

/// Reading and adding one resource's tags (an ARN, a bucket or a user).
#[async_trait::async_trait]
pub trait Tagging: Send + Sync {
    /// The resource's tags; `None` when the identity may not read them
    /// (the Go operator's policy lacks the read; see [`or_refused`]).
    async fn readable(
        &self,
        resource: &str,
    ) -> Result<Option<BTreeMap<String, String>>, ProviderError>;
    /// The action [`Tagging::readable`] calls.
    fn read_action(&self) -> &'static str;
    /// The resource's tags; a refused read is an error.
    async fn tags(&self, resource: &str) -> Result<BTreeMap<String, String>, ProviderError> {
        self.readable(resource).await?.ok_or_else(|| {
            ProviderError::permanent(format!(
                "{} {resource}: AccessDenied; the operator's AWS identity is not allowed to do this: grant it the permissions listed in docs/operations.md (AWS permissions)",
                self.read_action()
            ))
        })
    }
    /// Adds or updates `tags`, keeping the resource's others.
    async fn add_tags(
        &self,
        resource: &str,
        tags: &[(String, String)],
    ) -> Result<(), ProviderError>;
}

/// The wanted tags that `have` lacks or holds with another value.
pub fn missing(
    want: &BTreeMap<String, String>,
    have: &BTreeMap<String, String>,
) -> Vec<(String, String)> {
    want.iter()
        .filter(|(k, v)| have.get(*k) != Some(v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Whether a resource found under the name a create asked for was made
/// for the same CR: it carries the request's cluster, resource-name and
/// namespace tags (`keys`, those of them `want` has). What a retry after a
/// lost answer finds is the operator's own; anything else is a conflict.
pub fn made_for(
    keys: &cro_provider_api::TagKeys,
    want: &BTreeMap<String, String>,
    have: &BTreeMap<String, String>,
) -> bool {
    let mut identity = keys
        .all()
        .into_iter()
        .filter_map(|k| want.get_key_value(k))
        .peekable();
    identity.peek().is_some() && identity.all(|(k, v)| have.get(k) == Some(v))
}

/// The tags of `resource`, or none when the identity may not read them:
/// the Go operator's policy (`operatorEntries`, pkg/providers/aws/
/// credentials.go) has no `elasticache:ListTagsForResource` and no
/// `s3:GetBucketTagging`, and a switched installation may run under it.
/// Read as untagged, the resource is then this CR's only by the identifier
/// proof of `plan::ours`, as one the Go operator never tagged;
/// the refusal is shown (condition `AWSPermissions`,
/// `cro_aws_permission_refused`) until the read is allowed.
pub async fn or_refused<T: Tagging + ?Sized>(
    c: &crate::clients::Clients,
    svc: &T,
    resource: &str,
) -> Result<BTreeMap<String, String>, ProviderError> {
    let action = svc.read_action();
    match svc.readable(resource).await? {
        Some(tags) => {
            c.refused.allowed(&c.calls, action);
            Ok(tags)
        }
        None => {
            let fallback = "a resource is then this CR's only under the identifier recorded on the CR and computed from its namespace and name (as one the Go operator never tagged), and its tags are added, never read";
            c.refused.note(&c.calls, action, fallback);
            Ok(BTreeMap::new())
        }
    }
}

/// Adds what `resource` lacks of `want`; all of `want` where its tags may
/// not be read (adding a tag keeps the others: not for S3, see
/// [`Tagging::add_tags`]).
pub async fn ensure<T: Tagging + ?Sized>(
    svc: &T,
    resource: &str,
    want: &BTreeMap<String, String>,
) -> Result<(), ProviderError> {
    let have = svc.readable(resource).await?.unwrap_or_default();
    let missing = missing(want, &have);
    if missing.is_empty() {
        return Ok(());
    }
    svc.add_tags(resource, &missing).await
}

/// The tags of every tagged resource of `service` (tag:GetResources, one
/// call per hundred resources), keyed by `key_of` their ARN; resources
/// it gives no key are left out. An identity refused tag:GetResources (the
/// Go operator's policy lacks it) gets none: every resource is then read
/// on its own, with the calls that policy allows.
pub async fn tagged(
    c: &crate::clients::Clients,
    service: &str,
    key_of: impl Fn(&str) -> Option<String>,
) -> Result<BTreeMap<String, BTreeMap<String, String>>, ProviderError> {
    Ok(readable_tags(c, service, key_of).await?.unwrap_or_default())
}

/// As [`tagged`], but `None` when the identity may not read them: a
/// resource missing from the map then is not known to be untagged.
pub async fn readable_tags(
    c: &crate::clients::Clients,
    service: &str,
    key_of: impl Fn(&str) -> Option<String>,
) -> Result<Option<BTreeMap<String, BTreeMap<String, String>>>, ProviderError> {
    const ACTION: &str = "tag:GetResources";
    let mut pages = c
        .tagging
        .get_resources()
        .resource_type_filters(service)
        .resources_per_page(100)
        .into_paginator()
        .send();
    let mut all = BTreeMap::new();
    while let Some(page) = pages.next().await {
        if let Err(e) = &page
            && crate::permissions::is_refusal(e)
        {
            let fallback = "each resource's tags are read on its own";
            c.refused.note(&c.calls, ACTION, fallback);
            return Ok(None);
        }
        let page = page.named(ACTION, service)?;
        for r in page.resource_tag_mapping_list() {
            let Some(key) = r.resource_arn().and_then(&key_of) else {
                continue;
            };
            let tags = r.tags().iter().map(|t| (Some(t.key()), Some(t.value())));
            all.insert(key, collect(tags));
        }
    }
    c.refused.allowed(&c.calls, ACTION);
    Ok(Some(all))
}

/// A service's own tag type (RDS and ElastiCache build theirs alike).
pub trait SdkTag {
    fn new(key: &str, value: &str) -> Self;
}

/// Tags in a service's own type.
pub fn sdk<T: SdkTag>(tags: &[(String, String)]) -> Vec<T> {
    tags.iter().map(|(k, v)| T::new(k, v)).collect()
}

fn collect<'a>(
    pairs: impl Iterator<Item = (Option<&'a str>, Option<&'a str>)>,
) -> BTreeMap<String, String> {
    pairs
        .filter_map(|(k, v)| Some((k?.to_string(), v.unwrap_or_default().to_string())))
        .collect()
}

/// RDS and ElastiCache tag by ARN with the same two calls.
macro_rules! arn_tagging {
    ($sdk:ident, $service:literal) => {
        impl SdkTag for $sdk::types::Tag {
            fn new(key: &str, value: &str) -> Self {
                Self::builder().key(key).value(value).build()
            }
        }

        #[async_trait::async_trait]
        impl Tagging for $sdk::Client {
            async fn readable(
                &self,
                arn: &str,
            ) -> Result<Option<BTreeMap<String, String>>, ProviderError> {
                let call = self.list_tags_for_resource().resource_name(arn);
                let out = call.send().await;
                if let Err(e) = &out
                    && crate::permissions::is_refusal(e)
                {
                    return Ok(None);
                }
                let out = out.named(concat!($service, ":ListTagsForResource"), arn)?;
                Ok(Some(collect(
                    out.tag_list().iter().map(|t| (t.key(), t.value())),
                )))
            }

            fn read_action(&self) -> &'static str {
                concat!($service, ":ListTagsForResource")
            }

            async fn add_tags(
                &self,
                arn: &str,
                tags: &[(String, String)],
            ) -> Result<(), ProviderError> {
                let call = self.add_tags_to_resource().resource_name(arn);
                let out = call.set_tags(Some(sdk(tags))).send().await;
                out.named(concat!($service, ":AddTagsToResource"), arn)?;
                Ok(())
            }
        }
    };
}

arn_tagging!(aws_sdk_rds, "rds");
arn_tagging!(aws_sdk_elasticache, "elasticache");

#[async_trait::async_trait]
impl Tagging for aws_sdk_s3::Client {
    async fn readable(
        &self,
        bucket: &str,
    ) -> Result<Option<BTreeMap<String, String>>, ProviderError> {
        let out = self.get_bucket_tagging().bucket(bucket).send().await;
        if let Err(e) = &out
            && crate::permissions::is_refusal(e)
        {
            return Ok(None);
        }
        // A bucket never tagged has no tag set (an error, not an empty one).
        let no_tag_set = |e: &GetBucketTaggingError| e.code() == Some("NoSuchTagSet");
        let out = out.unless_missing(no_tag_set, "s3:GetBucketTagging", bucket)?;
        Ok(Some(collect(
            (out.iter().flat_map(|o| o.tag_set())).map(|t| (Some(t.key()), Some(t.value()))),
        )))
    }

    fn read_action(&self) -> &'static str {
        "s3:GetBucketTagging"
    }

    /// PutBucketTagging replaces the whole set: the others are read first,
    /// and a bucket whose tags may not be read is not tagged (that would
    /// drop tags others gave it).
    async fn add_tags(&self, bucket: &str, tags: &[(String, String)]) -> Result<(), ProviderError> {
        let Some(mut all) = self.readable(bucket).await? else {
            // Shown once as the refusal of the read (see `or_refused`).
            tracing::debug!(
                bucket,
                "the bucket's tags may not be read (s3:GetBucketTagging), so it is not tagged: writing them would drop the tags others gave it"
            );
            return Ok(());
        };
        all.extend(tags.iter().cloned());
        let build = |e: aws_sdk_s3::error::BuildError| {
            ProviderError::transient(format!("building S3 tags: {e}"))
        };
        let set = s3_tags(&all)?;
        let tagging = aws_sdk_s3::types::Tagging::builder()
            .set_tag_set(Some(set))
            .build()
            .map_err(build)?;
        let out = self
            .put_bucket_tagging()
            .bucket(bucket)
            .tagging(tagging)
            .send()
            .await;
        out.named("s3:PutBucketTagging", bucket)?;
        Ok(())
    }
}

#[async_trait::async_trait]
impl Tagging for aws_sdk_iam::Client {
    /// A refused IAM read is an error: the operator's users are its own.
    async fn readable(
        &self,
        user: &str,
    ) -> Result<Option<BTreeMap<String, String>>, ProviderError> {
        let out = self
            .list_user_tags()
            .user_name(user)
            .send()
            .await
            .named("iam:ListUserTags", user)?;
        Ok(Some(of_iam(out.tags())))
    }

    fn read_action(&self) -> &'static str {
        "iam:ListUserTags"
    }

    async fn add_tags(&self, user: &str, tags: &[(String, String)]) -> Result<(), ProviderError> {
        let tags = iam_tags(tags)?;
        self.tag_user()
            .user_name(user)
            .set_tags(Some(tags))
            .send()
            .await
            .named("iam:TagUser", user)?;
        Ok(())
    }
}

/// IAM's tags as a map.
pub fn of_iam(tags: &[aws_sdk_iam::types::Tag]) -> BTreeMap<String, String> {
    collect(tags.iter().map(|t| (Some(t.key()), Some(t.value()))))
}

/// Tags as S3 takes them.
pub fn s3_tags(
    tags: &BTreeMap<String, String>,
) -> Result<Vec<aws_sdk_s3::types::Tag>, ProviderError> {
    tags.iter()
        .map(|(k, v)| aws_sdk_s3::types::Tag::builder().key(k).value(v).build())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ProviderError::transient(format!("building S3 tags: {e}")))
}

/// Tags as IAM takes them.
pub fn iam_tags(tags: &[(String, String)]) -> Result<Vec<aws_sdk_iam::types::Tag>, ProviderError> {
    tags.iter()
        .map(|(k, v)| aws_sdk_iam::types::Tag::builder().key(k).value(v).build())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ProviderError::transient(format!("building IAM tags: {e}")))
}

/// A map of tags, for tests.
#[cfg(test)]
pub fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resource_is_made_for_a_cr_when_its_cluster_and_name_tags_match() {
        let keys = cro_provider_api::TagKeys::new("integreatly.org/");
        let want = map(&[
            ("integreatly.org/clusterID", "c1"),
            ("integreatly.org/resource-name", "db"),
            ("integreatly.org/resource-type", "managed"),
        ]);
        // Row: (live tags, made for the CR)
        let rows = [
            (want.clone(), true),
            (
                map(&[
                    ("integreatly.org/clusterID", "c1"),
                    ("integreatly.org/resource-name", "db"),
                    ("other", "x"),
                ]),
                true,
            ),
            (map(&[("integreatly.org/clusterID", "c1")]), false),
            (
                map(&[
                    ("integreatly.org/clusterID", "c2"),
                    ("integreatly.org/resource-name", "db"),
                ]),
                false,
            ),
            (map(&[]), false),
        ];
        for (have, made) in rows {
            assert_eq!(made_for(&keys, &want, &have), made, "{have:?}");
        }
        // A request with no identity tags recognises nothing.
        assert!(!made_for(&keys, &map(&[("k", "v")]), &map(&[("k", "v")])));
        // Another tag ending like an identity tag is not one.
        let lookalike = map(&[("team/resource-name", "x"), ("k", "v")]);
        assert!(!made_for(&keys, &lookalike, &lookalike));
    }

    #[test]
    fn only_missing_or_changed_tags_differ() {
        let want = map(&[("a", "1"), ("b", "2"), ("c", "3")]);
        let have = map(&[("a", "1"), ("b", "changed"), ("other", "x")]);
        let keys: Vec<_> = missing(&want, &have).into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["b", "c"]);
        assert!(
            missing(
                &want,
                &map(&[("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")])
            )
            .is_empty()
        );
    }
}
