#!/usr/bin/env bash
# Provisions one tool the integration tests run and the repository does not hold, once per
# machine:   bash tests/provision/provision.sh control-plane|openssl|prometheus|kopf|oracle
#
# The tests call it on first use (tests/integration/support/provision.rs): `cargo test --locked`
# needs nothing installed beforehand. What each tool is:
#   control-plane  etcd, kubectl and openssl from Debian; kube-apiserver and agnhost v1.20.2
#                  built by tests/control-plane/build.sh (a first build takes 4-6 minutes)
#   openssl        Debian's openssl (the real `openssl req -x509` of tests/integration/upstream_tls.rs)
#   prometheus     Debian's prometheus (tests/integration/prometheus.rs)
#   kopf           kopf 1.45.2 from PyPI (tests/integration/differential.rs), in a virtualenv of
#                  its own under the cache: Debian's python3 refuses `pip install` outside one
#                  (PEP 668), and a virtualenv leaves the user's Python alone
#
# Cache: ${ADMISSION_GATEWAY_CACHE:-$HOME/.cache/admission-gateway} (the control plane's
# binaries and kopf's virtualenv; Debian packages are installed system-wide with apt-get, which
# needs root or sudo). One exclusive lock per tool (flock on $CACHE/locks/TOOL.lock), so test
# threads and processes that need a tool at the same time provision it once: the others wait,
# then find it there. apt-get runs under a lock of its own ($CACHE/locks/apt.lock), so tools
# provisioned at the same time do not collide on dpkg's lock.
#
# Everything it prints goes to standard error. Exit status 0: the tool is there.
set -euo pipefail
exec 1>&2

tool="${1:-}"
here="$(cd "$(dirname "$0")" && pwd)"
CACHE="${ADMISSION_GATEWAY_CACHE:-$HOME/.cache/admission-gateway}"
export ADMISSION_GATEWAY_CACHE="$CACHE"
LOCKS="$CACHE/locks"
export ADMISSION_GATEWAY_APT_LOCK="$LOCKS/apt.lock"
KOPF_VERSION=1.45.2
KOPF_VENV="$CACHE/kopf-$KOPF_VERSION"

say() { echo "provision $tool: $*"; }
die() {
    say "error: $*"
    exit 1
}
trap 'say "error: failed (exit $?): $BASH_COMMAND"' ERR

case "$tool" in
control-plane | openssl | prometheus | kopf | oracle) ;;
*) die "usage: bash tests/provision/provision.sh control-plane|openssl|prometheus|kopf|oracle" ;;
esac

as_root() {
    if [ "$(id -u)" = 0 ]; then
        "$@"
    elif command -v sudo >/dev/null; then
        sudo "$@"
    else
        die "'$*' needs root (no sudo available)"
    fi
}

# apt-get under the shared apt lock, non-interactive.
apt_get() {
    command -v apt-get >/dev/null || die "apt-get not found: install $tool yourself (this script knows Debian only)"
    as_root env DEBIAN_FRONTEND=noninteractive flock "$ADMISSION_GATEWAY_APT_LOCK" apt-get "$@"
}

# Installs Debian packages, refreshing the package lists once if the first attempt fails.
apt_install() {
    apt_get install -y -q --no-install-recommends "$@" || {
        apt_get update -q
        apt_get install -y -q --no-install-recommends "$@"
    }
}

# Whether the tool is already there (the same checks as support/provision.rs makes).
present() {
    case "$tool" in
    control-plane)
        local bin="$CACHE/kubernetes-v1.20.2/bin"
        [ -x "$bin/kube-apiserver" ] && [ -x "$bin/agnhost" ] \
            && { command -v etcd >/dev/null || [ -x /usr/bin/etcd ]; } \
            && command -v kubectl >/dev/null && command -v openssl >/dev/null
        ;;
    openssl) command -v openssl >/dev/null ;;
    prometheus) command -v prometheus >/dev/null || [ -x /usr/bin/prometheus ] ;;
    kopf) [ -f "$KOPF_VENV/.provisioned" ] && "$KOPF_VENV/bin/python" -c 'import kopf' 2>/dev/null ;;
    oracle)
        # A build of this tree's tests/oracle/*.go, provision.sh and packages (one directory
        # per hash of them); found, it becomes oracle-current.
        local hash bin
        [ -f "$CACHE/oracle-sysroot/.packages" ] || return 1
        hash="$(cat "$here"/../oracle/*.go "$here/../oracle/provision.sh" "$CACHE/oracle-sysroot/.packages" | sha256sum | cut -c1-16)"
        for bin in "$CACHE"/oracle-*/"$hash"/oracle; do
            [ -x "$bin" ] && echo "$bin" >"$CACHE/oracle-current" && return 0
        done
        return 1
        ;;
    esac
}

command -v flock >/dev/null || die "flock (Debian package util-linux) is missing: it guards the cache"
mkdir -p "$LOCKS"
exec 9>"$LOCKS/$tool.lock"
if ! flock -n 9; then
    say "waiting for another process provisioning $tool (lock $LOCKS/$tool.lock)"
    flock 9
fi
if present; then
    say "already provisioned"
    exit 0
fi

started=$(date +%s)
if [ "$tool" = oracle ] && [ -f "$CACHE/oracle-current" ]; then
    say "rebuilding the oracle (tests/oracle/*.go, its provision.sh or its packages changed)…"
else
    say "provisioning $tool (first use, cached afterwards)…"
fi
case "$tool" in
control-plane)
    bash "$here/../control-plane/build.sh"
    ;;
openssl)
    apt_install openssl
    ;;
prometheus)
    apt_install prometheus
    ;;
oracle)
    bash "$here/../oracle/provision.sh"
    ;;
kopf)
    command -v python3 >/dev/null || apt_install python3 python3-venv
    rm -rf "$KOPF_VENV"
    if ! python3 -m venv "$KOPF_VENV"; then
        rm -rf "$KOPF_VENV"
        say "python3 -m venv failed: installing Debian's python3-venv"
        apt_install python3-venv
        python3 -m venv "$KOPF_VENV"
    fi
    "$KOPF_VENV/bin/python" -m pip install -q --disable-pip-version-check "kopf==$KOPF_VERSION"
    touch "$KOPF_VENV/.provisioned"
    ;;
esac
present || die "$tool is still missing after provisioning it"
say "provisioned $tool in $(($(date +%s) - started)) s"
