#!/usr/bin/env python3
"""Writes an OCI archive (image layout, tarred) of images that share one
layer and differ in their configuration, and prints each name with its
image's digest, the digest of its manifest ("NAME sha256:..."):

    oci_archive.py OUT LAYER_TAR CONFIG_JSON=NAME[,NAME...]...

LAYER_TAR is an uncompressed tar of the root filesystem, each CONFIG_JSON
an image's `config` (Entrypoint, Cmd, User, Env, ExposedPorts), tagged
with each NAME: what `ctr images import` and `skopeo copy oci-archive:`
call it (registry/repository:tag). `make image` writes the operator's
image with it (deploy/image/build.sh), the test environment its real
node's images (tests/testenv/real-node/build-images.sh); IMAGE_CREATED_BY
names the builder in the images' history.

Why OCI and not `docker save`: a registry keeps the manifest's bytes as
pushed (`skopeo copy --preserve-digests`), so the digest printed here is
the one the registry serves and a chart can pin before the push. Nothing
in the blobs depends on the time of the build (the layer's tar has fixed
owners and times, gzip no timestamp, the config no `created`), so the same
binary gives the same digest.
"""
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile

OCI = "application/vnd.oci.image."


def blob(tar, data, media_type):
    """Adds `data` under blobs/sha256/ and returns its descriptor."""
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}


def add_json(tar, name, doc):
    data = json.dumps(doc, sort_keys=True).encode()
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def normalized(name):
    """The full name Docker and the kubelet read a short one as
    (redis is docker.io/library/redis:latest): containerd keeps an OCI
    archive's names as written, and a pod's short name must find them."""
    if ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    first, _, rest = name.partition("/")
    if not rest:
        return f"docker.io/library/{name}"
    if "." in first or ":" in first or first == "localhost":
        return name
    return f"docker.io/{name}"


def main(out, layer_path, *images):
    if not images or any("=" not in i for i in images):
        raise SystemExit("usage: oci_archive.py OUT LAYER_TAR CONFIG_JSON=NAME[,NAME...]...")
    with open(layer_path, "rb") as f:
        layer = f.read()
    diff_id = f"sha256:{hashlib.sha256(layer).hexdigest()}"
    created_by = os.environ.get("IMAGE_CREATED_BY", "deploy/image/oci_archive.py")
    named = []
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        layer_desc = blob(tar, gzip.compress(layer, compresslevel=6, mtime=0), OCI + "layer.v1.tar+gzip")
        for spec in images:
            config_path, names = spec.split("=", 1)
            with open(config_path) as f:
                config = json.load(f)
            image = {"architecture": "amd64", "os": "linux", "config": config,
                     "rootfs": {"type": "layers", "diff_ids": [diff_id]},
                     "history": [{"created_by": created_by}]}
            config_desc = blob(tar, json.dumps(image, sort_keys=True).encode(), OCI + "config.v1+json")
            manifest = {"schemaVersion": 2, "mediaType": OCI + "manifest.v1+json",
                        "config": config_desc, "layers": [layer_desc]}
            manifest_desc = blob(tar, json.dumps(manifest, sort_keys=True).encode(), OCI + "manifest.v1+json")
            for name in map(normalized, names.split(",")):
                tag = name.rsplit(":", 1)[1]
                named.append(dict(manifest_desc, platform={"architecture": "amd64", "os": "linux"},
                                  annotations={"io.containerd.image.name": name,
                                               "org.opencontainers.image.ref.name": tag}))
        add_json(tar, "oci-layout", {"imageLayoutVersion": "1.0.0"})
        add_json(tar, "index.json", {"schemaVersion": 2, "mediaType": OCI + "index.v1+json", "manifests": named})
    for desc in named:
        print(desc["annotations"]["io.containerd.image.name"], desc["digest"])


if __name__ == "__main__":
    main(*sys.argv[1:])
