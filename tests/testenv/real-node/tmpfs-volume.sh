#!/bin/bash
# A FlexVolume driver (kubelet's exec plugin protocol) for the real node:
# a volume is a tmpfs of the PersistentVolume's `size` option (bytes), so
# a database on it really runs out of space, and really grows when its
# claim does: the API server admits the larger request (the StorageClass
# allows expansion), the expand controller records it on the volume, and
# kubelet calls `expandfs` with the new size, as a CSI driver's node
# plugin is called on a cluster. Its PersistentVolume options:
#   {"dir": "<a-z0-9->", "size": "<bytes>"}
# The tmpfs lives in the node's mount namespace under tmpfs-volumes/<dir>
# while a pod uses it, and goes when the last pod using it does.
set -u
base=$(cd "$(dirname "$0")/../.." && pwd)/tmpfs-volumes

ok() {
  printf '{"status":"Success"%s}\n' "${1:-}"
  exit 0
}
fail() {
  printf '{"status":"Failure","message":"%s"}\n' "$1"
  exit 1
}
# One string option of the JSON kubelet passes (Go's encoding: no spaces).
option() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p" <<<"$2"; }

case ${1:-} in
init)
  ok ',"capabilities":{"attach":false,"requiresFSResize":true,"fsGroup":false,"selinuxRelabel":false}'
  ;;
mount) # <mount dir> <json options>
  name=$(option dir "$3")
  size=$(option size "$3")
  [[ $name =~ ^[a-z0-9-]+$ && $size =~ ^[0-9]+$ ]] || fail "options need dir (a-z, 0-9, -) and size (bytes): $3"
  src=$base/$name
  mkdir -p "$src" "$2" || fail "making $src and $2"
  mountpoint -q "$src" || mount -t tmpfs -o "size=$size,mode=0777" "cro-$name" "$src" ||
    fail "mounting a tmpfs on $src"
  mount --bind "$src" "$2" || fail "binding $src to $2"
  ok
  ;;
unmount) # <mount dir>
  source=$(findmnt -rn -o SOURCE -M "$2" | sed 's/\[.*//')
  umount "$2" || fail "unmounting $2"
  rmdir "$2" 2>/dev/null
  # The last user gone: the tmpfs goes too.
  if [[ $source == cro-* ]] && [ "$(findmnt -rn -S "$source" | wc -l)" -le 1 ]; then
    umount "$base/${source#cro-}" && rmdir "$base/${source#cro-}"
  fi
  ok
  ;;
expandfs) # <json options> <device path> <device mount path> <new size> <old size>
  name=$(option dir "$2")
  [[ $name =~ ^[a-z0-9-]+$ && ${5:-} =~ ^[0-9]+$ ]] || fail "expandfs needs dir and a new size: $*"
  mount -o "remount,size=$5" "$base/$name" || fail "growing $base/$name to $5 bytes"
  ok
  ;;
*)
  printf '{"status":"Not supported"}\n'
  exit 1
  ;;
esac
