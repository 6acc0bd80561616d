//! A Kubernetes API server in memory, for controllers' tests (feature
//! `testing`): it holds objects by path, applies the patches the operator sends (JSON
//! patch; server-side apply of `status`, taken as its replacement), creates
//! and deletes objects (Secrets, Events), removes an object whose deletion
//! waits on no finalizer any more, and records every request. No test
//! environment, no network.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};

/// One request as the operator sent it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: Method,
    /// The path, without the query.
    pub path: String,
    pub body: Value,
}

impl Recorded {
    /// Whether it writes a status subresource.
    pub fn is_status_write(&self) -> bool {
        self.method == Method::PATCH && self.path.ends_with("/status")
    }

    /// Whether it creates or patches an Event.
    pub fn is_event(&self) -> bool {
        self.path.contains("/events")
    }
}

#[derive(Default)]
struct State {
    objects: BTreeMap<String, Value>,
    version: u64,
    requests: Vec<Recorded>,
    /// The next write is made, and its answer lost.
    lose_next_answer: bool,
}

impl State {
    /// POST `body` to the collection at `path`.
    fn create(&mut self, path: &str, body: Value) -> Response<Body> {
        let name = body["metadata"]["name"].as_str().unwrap_or_default();
        let at = format!("{path}/{name}");
        if self.objects.contains_key(&at) {
            return failure(
                StatusCode::CONFLICT,
                "AlreadyExists",
                &format!("{at} exists"),
            );
        }
        let mut object = body;
        self.version += 1;
        object["metadata"]["resourceVersion"] = json!(self.version.to_string());
        self.objects.insert(at, object.clone());
        respond(StatusCode::CREATED, object)
    }

    /// PATCH the object (or its status) at `path`; an object deleted and
    /// left without finalizers goes.
    fn patch(&mut self, path: &str, content_type: &str, body: Value) -> Response<Body> {
        let (at, status) = match path.strip_suffix("/status") {
            Some(at) => (at.to_string(), true),
            None => (path.to_string(), false),
        };
        let Some(mut object) = self.objects.get(&at).cloned() else {
            return not_found(path);
        };
        if let Err((code, reason, message)) = patch(&mut object, content_type, status, body) {
            return failure(code, reason, &message);
        }
        self.version += 1;
        object["metadata"]["resourceVersion"] = json!(self.version.to_string());
        let deleting = !object["metadata"]["deletionTimestamp"].is_null();
        let finalizers = object["metadata"]["finalizers"].as_array();
        if deleting && finalizers.is_none_or(|f| f.is_empty()) {
            self.objects.remove(&at);
        } else {
            self.objects.insert(at, object.clone());
        }
        if std::mem::take(&mut self.lose_next_answer) {
            return failure(
                StatusCode::GATEWAY_TIMEOUT,
                "Timeout",
                "the answer was lost",
            );
        }
        respond(StatusCode::OK, object)
    }
}

#[derive(Clone, Default)]
pub struct MockApi {
    state: Arc<Mutex<State>>,
}

impl MockApi {
    /// The server, and a client whose every request it answers.
    pub fn start() -> (MockApi, kube::Client) {
        let api = MockApi::default();
        let server = api.clone();
        let service = tower::service_fn(move |request: Request<Body>| {
            let server = server.clone();
            async move { Ok::<_, std::convert::Infallible>(server.answer(request).await) }
        });
        (api, kube::Client::new(service, "default"))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores `object` (a namespaced custom resource) with a new
    /// resourceVersion, as a client's create would; returns it as stored.
    pub fn put(&self, mut object: Value) -> Value {
        let path = path_of(&object);
        let mut state = self.state();
        state.version += 1;
        object["metadata"]["resourceVersion"] = json!(state.version.to_string());
        state.objects.insert(path, object.clone());
        object
    }

    /// The object stored at the path of `like` (same kind, namespace and
    /// name), if any.
    pub fn stored(&self, like: &Value) -> Option<Value> {
        self.state().objects.get(&path_of(like)).cloned()
    }

    /// The object stored at `path` (e.g. `/api/v1/namespaces/ns/secrets/s`).
    pub fn stored_at(&self, path: &str) -> Option<Value> {
        self.state().objects.get(path).cloned()
    }

    /// The next write is made, but answered 504 Gateway Timeout, as when
    /// the answer was lost on its way back.
    pub fn lose_next_answer(&self) {
        self.state().lose_next_answer = true;
    }

    /// Every request since the last [`MockApi::take`], and forgets them.
    pub fn take(&self) -> Vec<Recorded> {
        std::mem::take(&mut self.state().requests)
    }

    async fn answer(&self, request: Request<Body>) -> Response<Body> {
        let (parts, body) = request.into_parts();
        let bytes = body.collect_bytes().await.unwrap_or_default();
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let path = parts.uri.path().to_string();
        let content_type = (parts.headers.get(http::header::CONTENT_TYPE))
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let mut state = self.state();
        state.requests.push(Recorded {
            method: parts.method.clone(),
            path: path.clone(),
            body: body.clone(),
        });
        match parts.method {
            Method::POST if path.ends_with("/events") => respond(StatusCode::CREATED, body),
            Method::PATCH if path.contains("/events/") => respond(StatusCode::OK, body),
            Method::POST => state.create(&path, body),
            Method::DELETE => match state.objects.remove(&path) {
                Some(object) => respond(StatusCode::OK, object),
                None => not_found(&path),
            },
            Method::GET => match state.objects.get(&path) {
                Some(object) => respond(StatusCode::OK, object.clone()),
                None => not_found(&path),
            },
            Method::PATCH => state.patch(&path, &content_type, body),
            _ => not_found(&path),
        }
    }
}

/// The API server's refusal: its code, reason and message.
type Refusal = (StatusCode, &'static str, String);

/// Applies a patch as the API server would, or its refusal.
fn patch(object: &mut Value, content_type: &str, status: bool, body: Value) -> Result<(), Refusal> {
    match content_type {
        "application/json-patch+json" => {
            let ops: json_patch::Patch = serde_json::from_value(body)
                .map_err(|e| (StatusCode::BAD_REQUEST, "BadRequest", e.to_string()))?;
            // A failed `test` is the API server's 422: the object changed.
            json_patch::patch(object, &ops)
                .map_err(|e| (StatusCode::UNPROCESSABLE_ENTITY, "Invalid", e.to_string()))
        }
        "application/apply-patch+yaml" if status => {
            object["status"] = body["status"].clone();
            Ok(())
        }
        "application/merge-patch+json" => {
            json_patch::merge(object, &body);
            Ok(())
        }
        other => Err((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!("the mock API server does not apply {other:?}"),
        )),
    }
}

/// `/apis/<group>/<version>/namespaces/<ns>/<plural>/<name>`, the plural
/// being the lower-case kind, with an "s" unless it ends in one (as a
/// CRD's plural may be: `widgets`, `gas`).
fn path_of(object: &Value) -> String {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let kind = text(&object["kind"]).to_lowercase();
    let plural = if kind.ends_with('s') {
        kind
    } else {
        kind + "s"
    };
    format!(
        "/apis/{}/namespaces/{}/{plural}/{}",
        text(&object["apiVersion"]),
        text(&object["metadata"]["namespace"]),
        text(&object["metadata"]["name"]),
    )
}

fn respond(code: StatusCode, body: Value) -> Response<Body> {
    let mut response = Response::new(Body::from(body.to_string().into_bytes()));
    *response.status_mut() = code;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn failure(code: StatusCode, reason: &str, message: &str) -> Response<Body> {
    let status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "reason": reason, "message": message, "code": code.as_u16(),
    });
    respond(code, status)
}

fn not_found(path: &str) -> Response<Body> {
    failure(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("{path} not found"),
    )
}
