#!/usr/bin/env python3
"""Writes a `docker save`-format archive for `ctr images import`: images
that share one layer and differ in their configuration.

    image_archive.py OUT LAYER_TAR CONFIG_JSON=NAME[,NAME...]...

LAYER_TAR is an uncompressed tar of a root filesystem; each CONFIG_JSON is
an image's `config` (Entrypoint, Cmd, Env, WorkingDir), tagged with each
NAME. No registry is involved: the test environment builds its images from
the system's packages (see build-images.sh). The operator's image is an
OCI archive instead (deploy/image/oci_archive.py), for its digest.
"""
import hashlib
import io
import json
import os
import sys
import tarfile


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def add_bytes(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def main(out, layer, *images):
    if not images or any("=" not in i for i in images):
        raise SystemExit("usage: image_archive.py OUT LAYER_TAR CONFIG_JSON=NAME[,NAME...]...")
    diff_id = sha256_of(layer)
    manifest = []
    with tarfile.open(out, "w") as tar:
        tar.add(layer, arcname=f"{diff_id}/layer.tar")
        for spec in images:
            config_path, names = spec.split("=", 1)
            with open(config_path) as f:
                config = json.load(f)
            image = {
                "architecture": "amd64",
                "os": "linux",
                "config": config,
                "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
                "history": [{"created_by": "tests/testenv/real-node/build-images.sh"}],
            }
            image_json = json.dumps(image, sort_keys=True).encode()
            config_name = hashlib.sha256(image_json).hexdigest() + ".json"
            add_bytes(tar, config_name, image_json)
            manifest.append({"Config": config_name, "RepoTags": names.split(","), "Layers": [f"{diff_id}/layer.tar"]})
        add_bytes(tar, "manifest.json", json.dumps(manifest).encode())


if __name__ == "__main__":
    main(*sys.argv[1:])
