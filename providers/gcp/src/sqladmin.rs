//! The Cloud SQL Admin API calls the provider makes (sqladmin v1beta4, as
//! the Go operator's gcpiface/sqladmin_api.go): each answers what the
//! caller decides on. A create whose name exists and a delete of what is
//! gone are answers, not failures: after a lost answer, the retry finds
//! its own work done.

use http::Method;
use serde_json::Value;

use cro_provider_api::ProviderError;

use crate::errors::{GoogleError, Meaning};
use crate::rest::{Rest, segment};

/// The production endpoint (the discovery document's `rootUrl`).
pub const ENDPOINT: &str = "https://sqladmin.googleapis.com/";

/// What a create or delete started.
#[derive(Clone, Debug, PartialEq)]
pub enum Started {
    /// The long-running operation (`sql#operation`).
    Operation(Value),
    /// Create: the name is taken, by an instance (perhaps the one a call
    /// whose answer was lost made) or by one deleted within the week Cloud
    /// SQL keeps its name; [`get`] tells which. Delete: there is none.
    AlreadyDone,
}

fn instances(project: &str) -> String {
    format!("sql/v1beta4/projects/{}/instances", segment(project))
}

fn instance(project: &str, name: &str) -> String {
    format!("{}/{}", instances(project), segment(name))
}

fn failed(e: GoogleError, doing: String) -> ProviderError {
    e.into_provider_error(&doing)
}

/// `instances.get`; `None` when there is no such instance.
pub async fn get(rest: &Rest, project: &str, name: &str) -> Result<Option<Value>, ProviderError> {
    match rest.call(Method::GET, &instance(project, name), None).await {
        Ok(found) => Ok(Some(found)),
        Err(e) if e.meaning() == Meaning::NotFound => Ok(None),
        Err(e) => Err(failed(
            e,
            format!("reading Cloud SQL instance {project}/{name}"),
        )),
    }
}

/// `instances.insert` of `body` (its `name` the instance's).
pub async fn insert(rest: &Rest, project: &str, body: &Value) -> Result<Started, ProviderError> {
    let name = body["name"].as_str().unwrap_or_default();
    match rest
        .call(Method::POST, &instances(project), Some(body))
        .await
    {
        Ok(op) => Ok(Started::Operation(op)),
        Err(e) if e.meaning() == Meaning::AlreadyExists => Ok(Started::AlreadyDone),
        Err(e) => Err(failed(
            e,
            format!("creating Cloud SQL instance {project}/{name}"),
        )),
    }
}

/// `instances.patch` with `body` (only the fields to change).
pub async fn patch(
    rest: &Rest,
    project: &str,
    name: &str,
    body: &Value,
) -> Result<Value, ProviderError> {
    rest.call(Method::PATCH, &instance(project, name), Some(body))
        .await
        .map_err(|e| failed(e, format!("changing Cloud SQL instance {project}/{name}")))
}

/// `instances.delete`.
pub async fn delete(rest: &Rest, project: &str, name: &str) -> Result<Started, ProviderError> {
    match rest
        .call(Method::DELETE, &instance(project, name), None)
        .await
    {
        Ok(op) => Ok(Started::Operation(op)),
        Err(e) if e.meaning() == Meaning::NotFound => Ok(Started::AlreadyDone),
        Err(e) => Err(failed(
            e,
            format!("deleting Cloud SQL instance {project}/{name}"),
        )),
    }
}

/// `operations.get`.
pub async fn operation(rest: &Rest, project: &str, name: &str) -> Result<Value, ProviderError> {
    let path = format!(
        "sql/v1beta4/projects/{}/operations/{}",
        segment(project),
        segment(name)
    );
    rest.call(Method::GET, &path, None)
        .await
        .map_err(|e| failed(e, format!("reading Cloud SQL operation {project}/{name}")))
}

/// The instance's private address, where the Go operator's applications
/// connect (`reconcileCloudSQLInstance`: the `PRIVATE` IP mapping).
pub fn private_ip(instance: &Value) -> Option<&str> {
    instance["ipAddresses"]
        .as_array()?
        .iter()
        .filter(|m| m["type"] == "PRIVATE")
        .find_map(|m| m["ipAddress"].as_str())
}
