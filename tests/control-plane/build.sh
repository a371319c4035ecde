#!/usr/bin/env bash
# Builds what the control-plane integration tests run (tests/integration/support/control_plane.rs):
# kube-apiserver and agnhost v1.20.2 from Debian's `kubernetes` source package (upstream v1.20.2
# with vendor/), plus etcd, kubectl and openssl from Debian.
#
# The tests run it on first use, under a lock (tests/provision/provision.sh control-plane, called
# from tests/integration/support/provision.rs): there is no need to run it by hand.
# Idempotent: when the binaries are cached and etcd is installed it only prints where they are.
# Cache: ${ADMISSION_GATEWAY_CACHE:-$HOME/.cache/admission-gateway}/kubernetes-v1.20.2/
#   bin/{kube-apiserver,agnhost}   the binaries the tests use
#   src/                           the source tree (about 1.3 GB while building; never in the repository)
# A first build takes 4-6 minutes on 2 cores and needs about 1.3 GB of memory.
# Needs root (or sudo) for apt-get when packages or deb-src entries are missing.
set -euo pipefail

K8S_VERSION=v1.20.2
CACHE="${ADMISSION_GATEWAY_CACHE:-$HOME/.cache/admission-gateway}/kubernetes-$K8S_VERSION"
# apt-get runs under this lock, shared with tests/provision/provision.sh.
APT_LOCK="${ADMISSION_GATEWAY_APT_LOCK:-${ADMISSION_GATEWAY_CACHE:-$HOME/.cache/admission-gateway}/locks/apt.lock}"
BIN="$CACHE/bin"
SRC="$CACHE/src"
REFLECT2=/usr/share/gocode/src/github.com/modern-go/reflect2
DEB_SRC_LIST=/etc/apt/sources.list.d/admission-gateway-deb-src.sources

say() { echo "control-plane build: $*"; }
die() { echo "control-plane build: error: $*" >&2; exit 1; }
trap 'die "failed at line $LINENO (exit $?): $BASH_COMMAND"' ERR

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"
    elif command -v sudo > /dev/null; then sudo "$@"
    else die "'$*' needs root (no sudo available)"
    fi
}

apt_get() {
    mkdir -p "$(dirname "$APT_LOCK")"
    as_root env DEBIAN_FRONTEND=noninteractive flock "$APT_LOCK" apt-get "$@"
}

etcd_path() {
    command -v etcd 2> /dev/null || { [ -x /usr/bin/etcd ] && echo /usr/bin/etcd; } || true
}

report() {
    say "kube-apiserver: $BIN/kube-apiserver"
    say "agnhost:        $BIN/agnhost"
    say "etcd:           $(etcd_path)"
    say "kubectl:        $(command -v kubectl)"
}

# --- Debian packages --------------------------------------------------------------------------
# kubectl: any installed one will do; Debian's kubernetes-client conflicts with other packages.
if ! command -v kubectl > /dev/null; then
    say "installing kubernetes-client (kubectl is missing)"
    apt_get update -q
    apt_get install -y -q kubernetes-client
fi

if [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/agnhost" ] && [ -n "$(etcd_path)" ] \
    && command -v openssl > /dev/null; then
    say "up to date"
    report
    exit 0
fi

PACKAGES=(golang-go golang-github-modern-go-reflect2-dev dpkg-dev make rsync jq etcd-server etcd-client openssl)
missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q 'install ok installed' || missing+=("$p")
done

# deb-src entries with the URIs of the binary entries (bookworm, -updates, -security).
if ! apt-cache showsrc kubernetes 2> /dev/null | grep -q '^Package: kubernetes'; then
    say "adding deb-src entries ($DEB_SRC_LIST)"
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        sed -n 's/^Types:.*\bdeb\b.*$/Types: deb-src/; /^\(Types\|URIs\|Suites\|Components\|Signed-By\):/p; /^$/p' \
            /etc/apt/sources.list.d/debian.sources > "$DEB_SRC_LIST.tmp"
    elif [ -f /etc/apt/sources.list ] && grep -q '^deb ' /etc/apt/sources.list; then
        # One stanza per `deb URI SUITE COMPONENTS…` line.
        grep '^deb ' /etc/apt/sources.list | grep -v '\[' | while read -r _ uri suite comps; do
            printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: %s\n\n' "$uri" "$suite" "$comps"
        done > "$DEB_SRC_LIST.tmp"
    else
        die "no Debian apt sources found to copy into deb-src entries"
    fi
    for suite in bookworm bookworm-updates bookworm-security; do
        grep -Eq "^Suites: (.* )?$suite( .*)?$" "$DEB_SRC_LIST.tmp" \
            || say "warning: no apt source for suite $suite"
    done
    as_root mv "$DEB_SRC_LIST.tmp" "$DEB_SRC_LIST"
    apt_get update -q
    apt-cache showsrc kubernetes 2> /dev/null | grep -q '^Package: kubernetes' \
        || die "apt-cache showsrc kubernetes finds nothing after adding $DEB_SRC_LIST"
fi

if [ "${#missing[@]}" -gt 0 ]; then
    say "installing ${missing[*]}"
    apt_get update -q
    apt_get install -y -q --no-install-recommends "${missing[@]}"
fi
[ -n "$(etcd_path)" ] || die "etcd not found after installing etcd-server"
[ -d "$REFLECT2" ] || die "$REFLECT2 missing (package golang-github-modern-go-reflect2-dev)"
say "$(go version)"

# --- Source -------------------------------------------------------------------------------------
mkdir -p "$CACHE" "$BIN"
if [ ! -f "$SRC/.unpacked" ]; then
    say "fetching the kubernetes source package into $CACHE/download"
    rm -rf "$SRC" "$CACHE/download"
    mkdir -p "$CACHE/download"
    (cd "$CACHE/download" && apt-get source -q kubernetes)
    tree=$(find "$CACHE/download" -mindepth 1 -maxdepth 1 -type d -name 'kubernetes-*' | head -1)
    [ -n "$tree" ] || die "apt-get source kubernetes unpacked no kubernetes-* directory"
    head -1 "$tree/debian/changelog" | grep -q "really${K8S_VERSION#v}" \
        || say "warning: the source package is not upstream $K8S_VERSION: $(head -1 "$tree/debian/changelog")"
    mv "$tree" "$SRC"
    rm -rf "$CACHE/download"
    touch "$SRC/.unpacked"
fi

# Required fix: the vendored reflect2 v1.0.1 makes a Go >= 1.18 kube-apiserver segfault in
# UnsafeMapType.UnsafeIterate (e.g. on a webhook's JSONPatch); Debian's 1.0.2 does not.
if [ ! -f "$SRC/.reflect2-fixed" ]; then
    say "replacing vendor/github.com/modern-go/reflect2 with Debian's reflect2 (1.0.2)"
    v="$SRC/vendor/github.com/modern-go/reflect2"
    [ -d "$v" ] || die "$v missing in the source tree"
    find "$v" -maxdepth 1 -type f \( -name '*.go' -o -name '*.s' \) -delete
    cp "$REFLECT2"/*.go "$v"/
    cp "$REFLECT2"/*.s "$v"/ 2> /dev/null || true
    rm -f "$v"/*_test.go
    touch "$SRC/.reflect2-fixed"
fi

# --- Build (GOPATH mode, as Debian's rules do; plain `go build` fails: go.mod and vendor/
# disagree, and it skips the openapi generation) --------------------------------------------------
export GOPATH="$SRC/.go" GOFLAGS=-mod=vendor GOPROXY=off CGO_ENABLED=0
export GO111MODULE=off # GOPATH mode: .go/src/k8s.io/kubernetes -> the tree, as Debian's rules
export KUBE_GIT_VERSION="$K8S_VERSION" KUBE_GIT_TREE_STATE=clean KUBE_GIT_MAJOR=1 KUBE_GIT_MINOR=20
mkdir -p "$GOPATH/src/k8s.io"
ln -sfn "$SRC" "$GOPATH/src/k8s.io/kubernetes"
cd "$GOPATH/src/k8s.io/kubernetes"
for what in cmd/kube-apiserver test/images/agnhost; do
    name=$(basename "$what")
    if [ -x "$BIN/$name" ]; then continue; fi
    say "building $what (nice; several minutes)"
    start=$(date +%s)
    nice -n 10 make WHAT="$what"
    out=$(find _output -type f -name "$name" -perm -u+x | head -1)
    [ -n "$out" ] || die "make WHAT=$what produced no $name under _output/"
    install -m 0755 "$out" "$BIN/$name.tmp"
    mv "$BIN/$name.tmp" "$BIN/$name"
    say "built $name in $(( $(date +%s) - start )) s"
done
"$BIN/kube-apiserver" --version
say "done"
report
