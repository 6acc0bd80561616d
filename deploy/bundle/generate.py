#!/usr/bin/env python3
"""Generates the OLM bundle (registry+v1) from the same sources as the
Helm chart, so that OLM installs what Helm and kustomize install:

    generate.py HELM OUTDIR [KEY=VALUE...]

HELM renders deploy/helm (defaults, and each KEY=VALUE as `--set`: a
release pins its image with image.repository=... image.digest=sha256:...,
which the CSV's Deployment, containerImage and relatedImages then name,
as mirroring for a disconnected cluster needs, and the in-cluster images
with operator.postgresImage / redisImage, RELATED_IMAGE_* in the
Deployment and also listed in relatedImages); its Deployment, ServiceAccount,
ClusterRole, leader-election Role and metrics Service become the
ClusterServiceVersion's install strategy and the bundle's manifests; the
six CRDs are crds/; the examples are config/samples/. OUTDIR gets
manifests/ and metadata/. The configuration ConfigMaps are left out on
purpose: OLM would own them and put the samples back over a platform's
edited tiers on every upgrade (create them with config/install-missing.sh).

CHART names another copy of the chart (a release's, its version set);
the CSV's version is the chart's appVersion.

OLM passes the namespaces it targets in the pod's `olm.targetNamespaces`
annotation; WATCH_NAMESPACE reads it (empty: all namespaces).
`make bundle` runs this; deploy::the_olm_bundle_* checks the checked-in
bundle/ equals its output and passes the operator framework's validator.
"""
import json
import os
import subprocess
import sys

import yaml

PACKAGE = "cloud-resource-operator"
CHANNEL = "alpha"


def repo():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_all(text):
    return [d for d in yaml.safe_load_all(text) if d]


def dump(path, doc):
    with open(path, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=True, default_flow_style=False, width=1000)


def crd_description(crd):
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema.get("properties", {}).get("spec", {}).get("description", "") or schema.get("description", "")


def main(helm, out, *values):
    root = repo()
    chart_dir = os.environ.get("CHART") or os.path.join(root, "deploy/helm")
    chart = yaml.safe_load(open(os.path.join(chart_dir, "Chart.yaml")))
    version = chart["appVersion"]
    def render(*more):
        rendered = subprocess.run(
            [helm, "template", "cro", chart_dir, "--namespace", PACKAGE,
             "--set", "installConfiguration=false", "--set", "monitoring.prometheusRule.enabled=false"]
            + [arg for value in values + more for arg in ("--set", value)],
            check=True, capture_output=True, text=True).stdout
        by_kind = {}
        for d in load_all(rendered):
            by_kind.setdefault(d["kind"], []).append(d)
        return by_kind

    by_kind = render()
    # The chart as it renders for watched namespaces splits its rules: what
    # is cluster-scoped (clusterPermissions), and what touches objects in
    # namespaces (permissions, which OLM grants in each target namespace,
    # and cluster-wide only where the OperatorGroup targets all).
    scoped = {r["metadata"]["name"]: r["rules"] for r in render("operator.watchNamespaces={olm-targets}")["ClusterRole"]}

    deployment = by_kind["Deployment"][0]
    spec = deployment["spec"]
    container = spec["template"]["spec"]["containers"][0]
    for env in container["env"]:
        if env["name"] == "WATCH_NAMESPACE":
            env.pop("value", None)
            env["valueFrom"] = {"fieldRef": {"fieldPath": "metadata.annotations['olm.targetNamespaces']"}}
    name = by_kind["ClusterRole"][0]["metadata"]["name"]
    cluster_rules = scoped[name]
    role_rules = scoped[f"{name}-namespaced"] + by_kind["Role"][0]["rules"]
    account = by_kind["ServiceAccount"][0]["metadata"]["name"]

    crd_dir = os.path.join(root, "crds")
    crds = []
    for name in sorted(os.listdir(crd_dir)):
        if name.endswith(".yaml") and name != "kustomization.yaml":
            crds.append((name, yaml.safe_load(open(os.path.join(crd_dir, name)))))
    owned = [{
        "name": crd["metadata"]["name"],
        "version": crd["spec"]["versions"][0]["name"],
        "kind": crd["spec"]["names"]["kind"],
        "displayName": crd["spec"]["names"]["kind"],
        "description": crd_description(crd),
    } for _, crd in crds]

    samples = []
    for d in ("config/samples", "config/samples/aws"):
        for name in sorted(os.listdir(os.path.join(root, d))):
            if name.endswith(".yaml"):
                samples.extend(load_all(open(os.path.join(root, d, name)).read()))

    csv = {
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": f"{PACKAGE}.v{version}",
            "annotations": {
                "alm-examples": json.dumps(samples),
                "capabilities": "Basic Install",
                "categories": "Database,Cloud Provider",
                "containerImage": container["image"],
                "description": chart["description"],
                "operatorframework.io/suggested-namespace": PACKAGE,
            },
        },
        "spec": {
            "displayName": "Cloud Resource Operator",
            "description": (
                "Provisions PostgreSQL, Redis, object storage buckets and SMTP credentials, "
                "on AWS or in the cluster, from small custom resources whose `type` and `tier` a "
                "platform team defines in ConfigMaps; each gets a connection Secret. A compatible "
                "re-implementation of integr8ly's cloud-resource-operator: its CRs, ConfigMaps and "
                "cloud resources work unchanged.\n\n"
                "Create the configuration ConfigMaps (`cloud-resource-config`, "
                "`cloud-resources-aws-strategies`, `cloud-resources-openshift-strategies`) in the "
                "operator's namespace; this bundle does not ship them, so that an upgrade never "
                "replaces your tiers."
            ),
            "version": version,
            "maturity": CHANNEL,
            "minKubeVersion": "1.30.0",
            "keywords": ["postgres", "redis", "s3", "ses", "rds", "elasticache", "aws"],
            "provider": {"name": "cloud-resource-operator contributors"},
            "maintainers": [{"name": "cloud-resource-operator contributors", "email": "maintainers@cloud-resource-operator.invalid"}],
            "installModes": [
                {"type": "OwnNamespace", "supported": True},
                {"type": "SingleNamespace", "supported": True},
                {"type": "MultiNamespace", "supported": True},
                {"type": "AllNamespaces", "supported": True},
            ],
            "customresourcedefinitions": {"owned": owned},
            "relatedImages": [{"name": PACKAGE, "image": container["image"]}] + [
                {"name": env["name"][len("RELATED_IMAGE_"):].lower(), "image": env["value"]}
                for env in container["env"] if env["name"].startswith("RELATED_IMAGE_") and "value" in env],
            "install": {
                "strategy": "deployment",
                "spec": {
                    "deployments": [{"name": deployment["metadata"]["name"], "spec": spec}],
                    "clusterPermissions": [{"serviceAccountName": account, "rules": cluster_rules}],
                    "permissions": [{"serviceAccountName": account, "rules": role_rules}],
                },
            },
        },
    }

    manifests = os.path.join(out, "manifests")
    metadata = os.path.join(out, "metadata")
    os.makedirs(manifests, exist_ok=True)
    os.makedirs(metadata, exist_ok=True)
    dump(os.path.join(manifests, f"{PACKAGE}.clusterserviceversion.yaml"), csv)
    for name, crd in crds:
        dump(os.path.join(manifests, name), crd)
    for service in by_kind.get("Service", []):
        service["metadata"].pop("namespace", None)
        dump(os.path.join(manifests, f"{service['metadata']['name']}_v1_service.yaml"), service)
    dump(os.path.join(metadata, "annotations.yaml"), {"annotations": {
        "operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
        "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
        "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
        "operators.operatorframework.io.bundle.package.v1": PACKAGE,
        "operators.operatorframework.io.bundle.channels.v1": CHANNEL,
        "operators.operatorframework.io.bundle.channel.default.v1": CHANNEL,
    }})


if __name__ == "__main__":
    if len(sys.argv) < 3 or any("=" not in v for v in sys.argv[3:]):
        raise SystemExit("usage: generate.py HELM OUTDIR [KEY=VALUE...] (chart values, e.g. image.digest=sha256:...)")
    main(*sys.argv[1:])
