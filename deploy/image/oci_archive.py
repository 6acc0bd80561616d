#!/usr/bin/env python3
"""Writes a one-image OCI archive (image layout, tarred) and prints the
image's digest, the digest of its manifest:

    oci_archive.py OUT LAYER_TAR CONFIG_JSON NAME

LAYER_TAR is an uncompressed tar of the root filesystem, CONFIG_JSON the
image's `config` (Entrypoint, Cmd, User, Env, ExposedPorts), NAME what
`ctr images import` and `skopeo copy oci-archive:` call it
(registry/repository:tag).

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


def main(out, layer_path, config_path, name):
    with open(layer_path, "rb") as f:
        layer = f.read()
    with open(config_path) as f:
        config = json.load(f)
    image = {
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(layer).hexdigest()}"]},
        "history": [{"created_by": os.environ.get("IMAGE_CREATED_BY", "deploy/image/oci_archive.py")}],
    }
    tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else "latest"
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        layer_desc = blob(tar, gzip.compress(layer, compresslevel=6, mtime=0), OCI + "layer.v1.tar+gzip")
        config_desc = blob(tar, json.dumps(image, sort_keys=True).encode(), OCI + "config.v1+json")
        manifest = {"schemaVersion": 2, "mediaType": OCI + "manifest.v1+json",
                    "config": config_desc, "layers": [layer_desc]}
        manifest_desc = blob(tar, json.dumps(manifest, sort_keys=True).encode(), OCI + "manifest.v1+json")
        manifest_desc["platform"] = {"architecture": "amd64", "os": "linux"}
        manifest_desc["annotations"] = {"io.containerd.image.name": name,
                                        "org.opencontainers.image.ref.name": tag}
        add_json(tar, "oci-layout", {"imageLayoutVersion": "1.0.0"})
        add_json(tar, "index.json", {"schemaVersion": 2, "mediaType": OCI + "index.v1+json",
                                     "manifests": [manifest_desc]})
    print(manifest_desc["digest"])


if __name__ == "__main__":
    if len(sys.argv) != 5:
        raise SystemExit("usage: oci_archive.py OUT LAYER_TAR CONFIG_JSON NAME")
    main(*sys.argv[1:])
