#!/usr/bin/env bash
# Provisions the upstream oracle (tests/oracle/main.go, run by tests/integration/oracle.rs):
# kube-apiserver 1.36's own admission code — k8s.io/apiserver's ValidatingAdmissionPolicy plugin
# and webhook matchConditions matcher — built into one local program.
#
#   bash tests/provision/provision.sh oracle     (the tests call it; it calls this script)
#
# Debian's unstable suite packages k8s.io/apiserver 0.36.x (golang-k8s-apiserver-dev) and its
# Go 1.27 toolchain. Nothing is installed on the machine and its apt configuration is left alone:
#  1. a private apt configuration under $CACHE/oracle-apt (its own sources naming bookworm and
#     sid with the machine's Debian mirror and key, its own lists and cache, an empty dpkg
#     status), `apt-get update` with it;
#  2. the closure of golang-k8s-apiserver-dev + golang-k8s-client-go-dev as apt resolves it
#     against an empty system, keeping the -dev packages and the Go toolchain (~320 packages,
#     285 MB), downloaded at the versions pinned in tests/oracle/packages.lock (falling back to
#     what the suite offers when a pin is gone), each unpacked with `dpkg-deb -x` into the
#     sysroot $CACHE/oracle-sysroot (2.1 GB);
#  3. `go build -p 1` in GOPATH mode against the sysroot's /usr/share/gocode (~5 minutes cold on
#     2 cores; GOCACHE in $CACHE/oracle-gocache, 1.2 GB; seconds afterwards), the upstream
#     version stamped in with -ldflags -X; the mutating webhook plugin with its JSON Patch
#     library put back to upstream's v4 (below).
# The binary: $CACHE/oracle-<apiserver version>/<hash>/oracle, one per hash of main.go, this
# script and the packages, so that checkouts of different sources each keep theirs (never one
# rebuilt in place under a running test); the three newest are kept. $CACHE/oracle-current names
# the one last provisioned.
#
# Called with the oracle lock held (tests/provision/provision.sh). Prints on standard error.
set -euo pipefail
exec 1>&2

here="$(cd "$(dirname "$0")" && pwd)"
CACHE="${ADMISSION_GATEWAY_CACHE:-$HOME/.cache/admission-gateway}"
APT_DIR="$CACHE/oracle-apt"
SYSROOT="$CACHE/oracle-sysroot"
GOCACHE_DIR="$CACHE/oracle-gocache"
LOCKFILE="$here/packages.lock"
ROOTS=(golang-k8s-apiserver-dev golang-k8s-client-go-dev)

say() { echo "provision oracle: $*"; }
die() {
    say "error: $*"
    exit 1
}
trap 'say "error: failed (exit $?): $BASH_COMMAND"' ERR

for cmd in apt-get dpkg-deb sha256sum awk; do
    command -v "$cmd" >/dev/null || die "$cmd is missing (this script needs Debian's apt and dpkg)"
done

# --- 1. the private apt configuration --------------------------------------------------------
# The machine's Debian entry: its URIs and Signed-By (deb822 .sources first, then sources.list).
machine_debian() {
    local uri="" key=""
    if compgen -G "/etc/apt/sources.list.d/*.sources" >/dev/null; then
        # The first stanza whose URIs is a Debian archive and not the security one.
        read -r uri key < <(awk '
            /^[[:space:]]*$/ { if (u != "" && u !~ /security/) { print u, (k == "" ? "-" : k); exit } u = ""; k = "" }
            /^URIs:/ { u = $2 }
            /^Signed-By:/ { k = $2 }
            END { if (u != "" && u !~ /security/) print u, (k == "" ? "-" : k) }
        ' /etc/apt/sources.list.d/*.sources | head -1) || true
    fi
    if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
        read -r uri key < <(awk '
            $1 == "deb" && $0 !~ /security/ {
                k = "-"; i = 2
                if ($2 ~ /^\[/) { for (; i <= NF && $i !~ /\]$/; i++) if ($i ~ /signed-by=/) { sub(/.*signed-by=/, "", $i); k = $i }
                    if ($i ~ /signed-by=/) { s = $i; sub(/.*signed-by=/, "", s); sub(/\]$/, "", s); k = s }
                    i++ }
                print $i, k; exit
            }' /etc/apt/sources.list) || true
    fi
    [ -n "$uri" ] || die "no Debian entry found in /etc/apt/sources.list.d/*.sources nor /etc/apt/sources.list"
    [ "$key" != "-" ] || key=/usr/share/keyrings/debian-archive-keyring.gpg
    [ -f "$key" ] || die "the Debian archive key $key is missing (Debian package debian-archive-keyring)"
    echo "$uri $key"
}

export APT_CONFIG="$APT_DIR/apt.conf"
if [ ! -f "$APT_DIR/.updated" ]; then
    read -r uri key < <(machine_debian)
    say "private apt configuration in $APT_DIR (Debian mirror $uri, suites bookworm and sid)"
    mkdir -p "$APT_DIR/sources.list.d" "$APT_DIR/preferences.d" "$APT_DIR/lists/partial" \
        "$APT_DIR/cache/archives/partial" "$APT_DIR/debs"
    : >"$APT_DIR/status"
    : >"$APT_DIR/sources.list"
    cat >"$APT_DIR/sources.list.d/debian.sources" <<SOURCES
Types: deb deb-src
URIs: $uri
Suites: bookworm sid
Components: main
Signed-By: $key
SOURCES
    cat >"$APT_CONFIG" <<CONF
Dir::Etc::sourcelist "$APT_DIR/sources.list";
Dir::Etc::sourceparts "$APT_DIR/sources.list.d";
Dir::Etc::preferences "$APT_DIR/preferences";
Dir::Etc::preferencesparts "$APT_DIR/preferences.d";
Dir::State::lists "$APT_DIR/lists";
Dir::State::status "$APT_DIR/status";
Dir::Cache "$APT_DIR/cache";
APT::Sandbox::User "root";
APT::Get::AllowUnauthenticated "false";
Acquire::Languages "none";
CONF
    [ "$(id -u)" = 0 ] || echo 'Debug::NoLocking "true";' >>"$APT_CONFIG"
    say "apt-get update (private lists)"
    apt-get update -q >"$APT_DIR/update.log" 2>&1 || { cat "$APT_DIR/update.log"; die "apt-get update failed with the private configuration"; }
    touch "$APT_DIR/.updated"
fi

# --- 2. the packages, unpacked into the sysroot ----------------------------------------------
if [ ! -f "$SYSROOT/.unpacked" ]; then
    cd "$APT_DIR/debs"
    # name=version of the closure: the pins when the lock file has them, else apt's resolution.
    wanted=()
    if [ -s "$LOCKFILE" ]; then
        mapfile -t wanted < <(grep -v '^#' "$LOCKFILE" | awk 'NF { print $1 "=" $2 }')
        say "${#wanted[@]} packages pinned by tests/oracle/packages.lock"
    else
        say "resolving the closure of ${ROOTS[*]} in sid"
        mapfile -t wanted < <(apt-get install -s -o Dir::State::status="$APT_DIR/status" -t sid \
            --no-install-recommends "${ROOTS[@]}" |
            awk '$1 == "Inst" { v = $3; gsub(/[()]/, "", v); print $2 "=" v }' |
            grep -E '^(golang-1\.27-go|golang-1\.27-src|[^=]*-dev)=')
        [ "${#wanted[@]}" -gt 100 ] || die "the closure of ${ROOTS[*]} has only ${#wanted[@]} packages: is sid reachable?"
    fi
    say "downloading ${#wanted[@]} packages into $APT_DIR/debs"
    missing=()
    for spec in "${wanted[@]}"; do
        name="${spec%%=*}" version="${spec#*=}"
        ls "${name}_"*.deb >/dev/null 2>&1 && continue
        missing+=("$spec")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        if ! apt-get download -q "${missing[@]}" >"$APT_DIR/download.log" 2>&1; then
            # Some pin is gone from the suite: one at a time, falling back to the candidate.
            for spec in "${missing[@]}"; do
                name="${spec%%=*}"
                ls "${name}_"*.deb >/dev/null 2>&1 && continue
                apt-get download -q "$spec" >>"$APT_DIR/download.log" 2>&1 || {
                    say "pin $spec is gone: taking sid's $name"
                    apt-get download -q -t sid "$name" >>"$APT_DIR/download.log" 2>&1 ||
                        { tail -20 "$APT_DIR/download.log"; die "cannot download $name"; }
                }
            done
        fi
    fi
    say "unpacking into $SYSROOT"
    rm -rf "$SYSROOT.partial"
    mkdir -p "$SYSROOT.partial"
    for deb in *.deb; do
        dpkg-deb -x "$deb" "$SYSROOT.partial"
    done
    # What was unpacked, name version (the lock file's form).
    for deb in *.deb; do dpkg-deb --show --showformat='${Package} ${Version}\n' "$deb"; done | sort >"$SYSROOT.partial/.packages"
    rm -rf "$SYSROOT"
    mv "$SYSROOT.partial" "$SYSROOT"
    touch "$SYSROOT/.unpacked"
fi
[ -s "$LOCKFILE" ] || say "no tests/oracle/packages.lock: the versions unpacked are in $SYSROOT/.packages"

APISERVER_VERSION="$(awk '$1 == "golang-k8s-apiserver-dev" { print $2 }' "$SYSROOT/.packages")"
[ -n "$APISERVER_VERSION" ] || die "golang-k8s-apiserver-dev is not in the sysroot $SYSROOT"
UPSTREAM="${APISERVER_VERSION%%-*}" # 0.36.4-1 -> 0.36.4
UPSTREAM="${UPSTREAM%%+*}"
GOROOT_DIR="$(ls -d "$SYSROOT"/usr/lib/go-1.* 2>/dev/null | sort -V | tail -1)"
[ -x "$GOROOT_DIR/bin/go" ] || die "no Go toolchain in $SYSROOT/usr/lib/go-1.*"

# --- 3. the build ------------------------------------------------------------------------------
hash="$(cat "$here"/*.go "$here/provision.sh" "$SYSROOT/.packages" | sha256sum | cut -c1-16)"
OUT="$CACHE/oracle-$UPSTREAM/$hash"
if [ -x "$OUT/oracle" ]; then
    echo "$OUT/oracle" >"$CACHE/oracle-current"
    say "oracle for k8s.io/apiserver v$UPSTREAM is built ($OUT/oracle)"
    exit 0
fi
work="$OUT/gopath"
rm -rf "$work"
mkdir -p "$work/src/admission-gateway-oracle" "$GOCACHE_DIR"
cp "$here"/*.go "$work/src/admission-gateway-oracle/"
# Debian's golang-k8s-apiserver-dev switches k8s.io/apiserver's json-patch imports to the v5
# module (its changelog: "Switch json-patch imports to the v5 module path"); kube-apiserver 1.36
# applies a mutating webhook's patch with gopkg.in/evanphx/json-patch.v4 (k8s.io/apiserver's
# go.mod), whose `replace` of a missing object key adds it where v5 refuses. The mutating
# webhook plugin is built from the packaged sources with that one import put back to v4, the
# root package of golang-github-evanphx-json-patch-dev. GOPATH mode takes a directory from the
# first GOPATH entry that has it, so the first entry gets every directory on the way there with
# their other entries linked to the sysroot's.
mutating_pkg=k8s.io/apiserver/pkg/admission/plugin/webhook/mutating
gocode="$SYSROOT/usr/share/gocode/src"
rel=""
for part in ${mutating_pkg//\// }; do
    mkdir -p "$work/src/$rel"
    for entry in "$gocode/$rel"*; do
        name="$(basename "$entry")"
        [ "$name" = "$part" ] || [ -e "$work/src/$rel$name" ] || ln -s "$entry" "$work/src/$rel$name"
    done
    rel="$rel$part/"
done
mkdir -p "$work/src/$mutating_pkg"
for f in "$SYSROOT/usr/share/gocode/src/$mutating_pkg"/*.go; do
    case "$f" in *_test.go) continue ;; esac
    sed 's|jsonpatch "github.com/evanphx/json-patch/v5"|jsonpatch "github.com/evanphx/json-patch"|' "$f" >"$work/src/$mutating_pkg/$(basename "$f")"
done
grep -q 'jsonpatch "github.com/evanphx/json-patch"$' "$work/src/$mutating_pkg/dispatcher.go" ||
    die "$mutating_pkg/dispatcher.go no longer imports json-patch v5 as jsonpatch: review the v4 overlay"
started=$(date +%s)
say "go build -p 1 against k8s.io/apiserver v$UPSTREAM ($(basename "$GOROOT_DIR"); a first build takes ~5 minutes)"
(
    cd "$work/src/admission-gateway-oracle"
    env GO111MODULE=off GOPATH="$work:$SYSROOT/usr/share/gocode" GOROOT="$GOROOT_DIR" \
        GOTOOLCHAIN=local GOPROXY=off GOFLAGS= CGO_ENABLED=0 GOCACHE="$GOCACHE_DIR" \
        PATH="$GOROOT_DIR/bin:$PATH" \
        go build -p 1 -trimpath -o "$OUT/oracle.new" \
        -ldflags "-X main.apiserverVersion=v$UPSTREAM -X main.debianVersion=$APISERVER_VERSION -X main.openapiDir=$SYSROOT/usr/share/gocode/src/k8s.io/client-go/openapi/openapitest/testdata" .
)
mv "$OUT/oracle.new" "$OUT/oracle"
echo "$OUT/oracle" >"$CACHE/oracle-current"
rm -rf "$work"
# Older builds (and what the one-binary layout left): all but the three newest.
ls -dt "$CACHE/oracle-$UPSTREAM"/*/ | tail -n +4 | xargs -r rm -rf
say "built $OUT/oracle in $(($(date +%s) - started)) s"
