//! The Memorystore for Redis API calls the provider makes (redis v1, as the
//! Go operator's gcpiface/redis_api.go): each answers what the caller
//! decides on. A create whose instance exists and a delete of what is gone
//! are answers, not failures: after a lost answer, the retry finds its own
//! work done.

use http::Method;
use serde_json::{Value, json};

use cro_provider_api::ProviderError;

use crate::errors::Meaning;
use crate::rest::{Rest, segment};
use crate::sqladmin::Started;

/// The production endpoint (the discovery document's `rootUrl`).
pub const ENDPOINT: &str = "https://redis.googleapis.com/";

/// The instance's resource name, each part escaped.
fn path(project: &str, region: &str, id: &str) -> String {
    format!(
        "v1/projects/{}/locations/{}/instances/{}",
        segment(project),
        segment(region),
        segment(id)
    )
}

/// Where an instance is: project, region (its location) and ID.
#[derive(Clone, Copy, Debug)]
pub struct At<'a> {
    pub project: &'a str,
    pub region: &'a str,
    pub id: &'a str,
}

impl At<'_> {
    fn path(&self) -> String {
        path(self.project, self.region, self.id)
    }

    fn named(&self) -> String {
        format!(
            "Memorystore instance {}/{}/{}",
            self.project, self.region, self.id
        )
    }
}

/// `instances.get`; `None` when there is no such instance.
pub async fn get(rest: &Rest, at: At<'_>) -> Result<Option<Value>, ProviderError> {
    match rest.call(Method::GET, &at.path(), None).await {
        Ok(found) => Ok(Some(found)),
        Err(e) if e.meaning() == Meaning::NotFound => Ok(None),
        Err(e) => Err(e.into_provider_error(&format!("reading {}", at.named()))),
    }
}

/// `instances.create` of `instance`.
pub async fn create(rest: &Rest, at: At<'_>, instance: &Value) -> Result<Started, ProviderError> {
    let parent = format!(
        "v1/projects/{}/locations/{}/instances?instanceId={}",
        segment(at.project),
        segment(at.region),
        segment(at.id)
    );
    match rest.call(Method::POST, &parent, Some(instance)).await {
        Ok(op) => Ok(Started::Operation(op)),
        Err(e) if e.meaning() == Meaning::AlreadyExists => Ok(Started::AlreadyDone),
        Err(e) => Err(e.into_provider_error(&format!("creating {}", at.named()))),
    }
}

/// `instances.patch` of the fields `mask` names (snake_case, as Go's).
pub async fn patch(
    rest: &Rest,
    at: At<'_>,
    body: &Value,
    mask: &str,
) -> Result<Value, ProviderError> {
    let path = format!("{}?updateMask={}", at.path(), segment(mask));
    (rest.call(Method::PATCH, &path, Some(body)).await)
        .map_err(|e| e.into_provider_error(&format!("updating {} ({mask})", at.named())))
}

/// `instances.upgrade` to `version`.
pub async fn upgrade(rest: &Rest, at: At<'_>, version: &str) -> Result<Value, ProviderError> {
    let body = json!({ "redisVersion": version });
    (rest
        .call(Method::POST, &format!("{}:upgrade", at.path()), Some(&body))
        .await)
        .map_err(|e| e.into_provider_error(&format!("upgrading {} to {version}", at.named())))
}

/// `instances.delete`.
pub async fn delete(rest: &Rest, at: At<'_>) -> Result<Started, ProviderError> {
    match rest.call(Method::DELETE, &at.path(), None).await {
        Ok(op) => Ok(Started::Operation(op)),
        Err(e) if e.meaning() == Meaning::NotFound => Ok(Started::AlreadyDone),
        Err(e) => Err(e.into_provider_error(&format!("deleting {}", at.named()))),
    }
}

/// `operations.get` of an operation's `name` (`projects/…/operations/…`).
pub async fn operation(rest: &Rest, name: &str) -> Result<Value, ProviderError> {
    let parts: Vec<String> = name.split('/').map(segment).collect();
    (rest
        .call(Method::GET, &format!("v1/{}", parts.join("/")), None)
        .await)
        .map_err(|e| e.into_provider_error(&format!("reading the operation {name}")))
}
