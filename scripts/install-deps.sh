#!/usr/bin/env bash
# Installs what ecstore's tests need on a fresh Debian machine: the real
# XRootD client and server, the Python bindings, unzip, GNU time
# (/usr/bin/time -v measures peak memory in test/), openssl (its rehash
# makes the CA directory the XRootD client trusts), the S3 clients the
# interop tests drive (awscli, python3-boto3, rclone, s3cmd, curl), the
# WebDAV client davix (davix-ls, davix-get, davix-put, ...), XRootD's
# HTTP client plug-in (the Python bindings read http:// URLs through
# davix, as ROOT does), bindfs
# (a FUSE mount whose server test/ stops, to freeze a node directory),
# attr (setfattr and getfattr, for the xrdcp --xattr tests), iproute2
# and nftables (the fault suite puts nodes on hosts of their own, network
# namespaces, and cuts one off the network) and staticcheck.
# Idempotent: does nothing when everything is already there.
set -euo pipefail

pkgs=(unzip time attr openssl xrootd-client xrootd-server python3-xrootd libxrootd-dev awscli python3-boto3 rclone s3cmd curl davix xrootd-client-http-plugins bindfs fuse3 iproute2 nftables)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

gobin="$(go env GOPATH)/bin"
if [ ! -x "$gobin/staticcheck" ]; then
  echo "install-deps: installing staticcheck"
  GOFLAGS= go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
fi
