//! Why a workload's Deployment is not available, in the words a person
//! acts on: the pod that cannot be scheduled (a drained or full node, a
//! volume bound to a node that is gone), the image that cannot be pulled,
//! the container that keeps crashing, or the pod the API server refuses
//! to create (Pod Security, a quota). "Waiting for the Deployment" alone
//! sends a person to `kubectl describe` for each of these.

use k8s_openapi::{
    api::{apps::v1::Deployment, core::v1::Pod},
    apimachinery::pkg::apis::meta::v1::Time,
    jiff::{SignedDuration, Timestamp},
};

/// Waiting reasons that are only a pod starting, not a fault.
const STARTING: [&str; 2] = ["ContainerCreating", "PodInitializing"];

/// How long a problem must last before it is named: a new pod passes
/// through some on its way up (a volume claim binding as it is
/// scheduled), and each message shown is a status write.
const SETTLED: SignedDuration = SignedDuration::from_secs(10);

/// What keeps `deployment` from being available, judged from it and its
/// `pods` at `now`; none when nothing has been wrong for long (a pod
/// still starting).
pub fn why(deployment: &Deployment, pods: &[Pod], now: Timestamp) -> Option<String> {
    let settled = |since: Option<&Time>| since.is_some_and(|t| now.duration_since(t.0) >= SETTLED);
    let status = deployment.status.as_ref();
    let conditions = status.and_then(|s| s.conditions.as_ref());
    // The ReplicaSet could not create a pod (forbidden, over quota).
    if let Some(failure) = (conditions.into_iter().flatten()).find(|c| {
        c.type_ == "ReplicaFailure"
            && c.status == "True"
            && settled(c.last_transition_time.as_ref())
    }) {
        let message = failure.message.as_deref().unwrap_or_default();
        return Some(cut(format!("its pods are not created: {message}")));
    }
    let live = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none());
    live.filter_map(|p| pod_problem(p, &settled))
        .next()
        .map(cut)
}

fn pod_problem(pod: &Pod, settled: &dyn Fn(Option<&Time>) -> bool) -> Option<String> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let status = pod.status.as_ref()?;
    if let Some(unscheduled) = (status.conditions.iter().flatten()).find(|c| {
        c.type_ == "PodScheduled" && c.status == "False" && settled(c.last_transition_time.as_ref())
    }) {
        let message = unscheduled.message.as_deref().unwrap_or("no reason given");
        return Some(format!("pod {name} cannot be scheduled: {message}"));
    }
    // A container's waiting has no start time of its own: the pod's age.
    if !settled(pod.metadata.creation_timestamp.as_ref()) {
        return None;
    }
    let containers = (status.init_container_statuses.iter().flatten())
        .chain(status.container_statuses.iter().flatten());
    containers.into_iter().find_map(|c| {
        let waiting = c.state.as_ref()?.waiting.as_ref()?;
        let reason = waiting.reason.as_deref().unwrap_or_default();
        if reason.is_empty() || STARTING.contains(&reason) {
            return None;
        }
        let message = waiting.message.as_deref().unwrap_or_default();
        let last = c.last_state.as_ref().and_then(|s| s.terminated.as_ref());
        let exit = last
            .map(|t| format!(", last exit code {}", t.exit_code))
            .unwrap_or_default();
        let restarts = match c.restart_count {
            0 => String::new(),
            n => format!(" after {n} restarts{exit}"),
        };
        let detail = if message.is_empty() {
            String::new()
        } else {
            format!(": {message}")
        };
        // Why it exits is only in its log, which the operator does not
        // read (a database's log is its users').
        let log = match reason {
            "CrashLoopBackOff" => format!(
                " (its log says why: kubectl logs -n {} {name} -c {} --previous; \"No space left on device\" there means its volume is full: raise the tier's pvcSpec storage, or the request of a PVC the Go operator made)",
                pod.metadata.namespace.as_deref().unwrap_or_default(),
                c.name
            ),
            _ => String::new(),
        };
        Some(format!(
            "container {} of pod {name} is waiting: {reason}{restarts}{log}{detail}",
            c.name
        ))
    })
}

/// Long enough for a scheduler's or kubelet's message, short enough for a
/// status line.
fn cut(mut text: String) -> String {
    if let Some((at, _)) = text.char_indices().nth(400) {
        text.truncate(at);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CREATED: &str = "2026-11-30T10:00:00Z";

    /// A minute after `CREATED`, when every problem has settled.
    fn later() -> Timestamp {
        "2026-11-30T10:01:00Z"
            .parse()
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn pod(status: serde_json::Value) -> Pod {
        let metadata = json!({"name": "db-1", "namespace": "ns", "creationTimestamp": CREATED});
        serde_json::from_value(json!({"metadata": metadata, "status": status}))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn deployment(conditions: serde_json::Value) -> Deployment {
        serde_json::from_value(json!({"status": {"conditions": conditions}}))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn an_unschedulable_pod_is_named_with_the_schedulers_words() {
        let message = "0/1 nodes are available: 1 node(s) were unschedulable.";
        let p = pod(json!({"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message, "lastTransitionTime": CREATED}]}));
        let said = super::why(&deployment(json!([])), &[p], later());
        assert_eq!(
            said,
            Some(format!("pod db-1 cannot be scheduled: {message}"))
        );
    }

    #[test]
    fn a_crashing_or_unpullable_container_is_named() {
        let p = pod(
            json!({"containerStatuses": [{"name": "postgres", "image": "postgres:17", "imageID": "", "ready": false,
            "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
            "lastState": {"terminated": {"exitCode": 1}}}]}),
        );
        let said = super::why(&deployment(json!([])), &[p], later()).unwrap_or_default();
        assert_eq!(
            said,
            "container postgres of pod db-1 is waiting: CrashLoopBackOff after 4 restarts, last exit code 1 (its log says why: kubectl logs -n ns db-1 -c postgres --previous; \"No space left on device\" there means its volume is full: raise the tier's pvcSpec storage, or the request of a PVC the Go operator made): back-off 40s"
        );
        let p = pod(
            json!({"containerStatuses": [{"name": "postgres", "image": "postgres:17", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff", "message": "pull access denied"}}}]}),
        );
        let said = super::why(&deployment(json!([])), &[p], later()).unwrap_or_default();
        assert!(
            said.ends_with("is waiting: ImagePullBackOff: pull access denied"),
            "{said}"
        );
    }

    #[test]
    fn a_starting_pod_is_no_fault() {
        let p = pod(
            json!({"conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "postgres", "image": "postgres:17", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}]}),
        );
        assert_eq!(super::why(&deployment(json!([])), &[p], later()), None);
    }

    #[test]
    fn a_problem_is_named_only_once_it_lasted() {
        let message = "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.";
        let p = pod(json!({"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message, "lastTransitionTime": CREATED}]}));
        let soon: Timestamp = "2026-11-30T10:00:05Z"
            .parse()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            super::why(&deployment(json!([])), std::slice::from_ref(&p), soon),
            None
        );
        assert!(super::why(&deployment(json!([])), &[p], later()).is_some());
    }

    #[test]
    fn a_refused_pod_is_named_from_the_deployment() {
        let d = deployment(
            json!([{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
            "message": "pods \"db-1\" is forbidden: exceeded quota: pods", "lastTransitionTime": CREATED}]),
        );
        let said = super::why(&d, &[], later()).unwrap_or_default();
        assert!(
            said.starts_with("its pods are not created: pods \"db-1\" is forbidden"),
            "{said}"
        );
    }
}
