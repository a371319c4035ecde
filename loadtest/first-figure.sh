#!/usr/bin/env bash
# The first load figure: throughput and p50/p99 latency of the gateway's POST /validate with
# ONE allowing TLS webhook behind it, next to the same load sent to that webhook directly,
# both measured in the same run. Everything on 127.0.0.1; every run is bounded.
#
#   bash loadtest/first-figure.sh
#
# Knobs (environment): THREADS (wrk -t, 1), CONNECTIONS (wrk -c, 16), DURATION (5s),
# WARMUP (2s), REVIEW (the AdmissionReview POSTed, tests/fixtures/reviews/pod-create.json),
# KEEP_WRK_OUTPUT=1 (print wrk's own output), KEEP_WORK=1 (keep the temporary directory and its
# logs), RUST_LOG (passed to the gateway; its default is info, one line per review).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

THREADS=${THREADS:-1}
CONNECTIONS=${CONNECTIONS:-16}
DURATION=${DURATION:-5s}
WARMUP=${WARMUP:-2s}
REVIEW=${REVIEW:-$ROOT/tests/fixtures/reviews/pod-create.json}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

for tool in cargo openssl curl python3 base64 awk; do
    command -v "$tool" > /dev/null || die "$tool is required"
done

# --- wrk ------------------------------------------------------------------------------------
if ! command -v wrk > /dev/null; then
    log "installing wrk"
    SUDO=
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo > /dev/null || die "wrk is missing and we are not root (install wrk)"
        SUDO=sudo
    fi
    if ! $SUDO apt-get install -y wrk > /dev/null 2>&1; then
        $SUDO apt-get update > /dev/null
        $SUDO apt-get install -y wrk > /dev/null
    fi
    command -v wrk > /dev/null || die "wrk could not be installed"
fi

# --- build ----------------------------------------------------------------------------------
log "building (release)"
cargo build --release --locked --example mock-webhook --bin admission-gateway
GATEWAY_BIN=$TARGET_DIR/release/admission-gateway
WEBHOOK_BIN=$TARGET_DIR/release/examples/mock-webhook
[ -x "$GATEWAY_BIN" ] || die "$GATEWAY_BIN not built"
[ -x "$WEBHOOK_BIN" ] || die "$WEBHOOK_BIN not built"

# --- cleanup --------------------------------------------------------------------------------
WORK=$(mktemp -d -t admission-gateway-loadtest.XXXXXX)
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2> /dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2> /dev/null || true
    done
    if [ -n "${KEEP_WORK:-}" ]; then
        log "kept $WORK (certificates, fleet.yaml, gateway.log, webhook.log, wrk outputs)"
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- certificates: a CA and one serving certificate for 127.0.0.1 -------------------------
log "generating a CA and a serving certificate in $WORK"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$WORK/ca.key" -out "$WORK/ca.crt" -days 1 -subj "/CN=admission-gateway loadtest CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    2> /dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$WORK/tls.key" -out "$WORK/tls.csr" -subj "/CN=127.0.0.1" 2> /dev/null
cat > "$WORK/tls.ext" << 'EOF'
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1
EOF
openssl x509 -req -in "$WORK/tls.csr" -CA "$WORK/ca.crt" -CAkey "$WORK/ca.key" -CAcreateserial \
    -days 1 -extfile "$WORK/tls.ext" -out "$WORK/tls.crt" 2> /dev/null

# --- free loopback ports (held together so they differ) -----------------------------------
read -r WPORT GPORT MPORT < <(python3 - << 'EOF'
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
for s in socks:
    s.close()
EOF
)

# --- the fleet: one allowing validating webhook ----------------------------------------------
cat > "$WORK/fleet.yaml" << EOF
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: loadtest
webhooks:
  - name: allow.loadtest.example.com
    clientConfig:
      url: https://127.0.0.1:$WPORT/validate
      caBundle: $(base64 -w0 < "$WORK/ca.crt")
    rules:
      - operations: ["CREATE"]
        apiGroups: [""]
        apiVersions: ["v1"]
        resources: ["pods"]
    failurePolicy: Fail
    sideEffects: None
    timeoutSeconds: 10
    admissionReviewVersions: ["v1"]
EOF

# --- start the webhook and the gateway -------------------------------------------------------
log "starting mock-webhook on 127.0.0.1:$WPORT"
"$WEBHOOK_BIN" --listen "127.0.0.1:$WPORT" --tls-cert "$WORK/tls.crt" --tls-key "$WORK/tls.key" \
    > "$WORK/webhook.log" 2>&1 &
PIDS+=($!)
WEBHOOK_PID=$!
log "starting admission-gateway on 127.0.0.1:$GPORT (metrics 127.0.0.1:$MPORT)"
"$GATEWAY_BIN" serve --config "$WORK/fleet.yaml" --listen "127.0.0.1:$GPORT" \
    --metrics-listen "127.0.0.1:$MPORT" --tls-cert "$WORK/tls.crt" --tls-key "$WORK/tls.key" \
    > "$WORK/gateway.log" 2>&1 &
PIDS+=($!)
GATEWAY_PID=$!

# wait_for NAME PID URL: up to 10 s for URL to answer over HTTPS at all.
wait_for() {
    local name=$1 pid=$2 url=$3 i
    for i in $(seq 100); do
        if ! kill -0 "$pid" 2> /dev/null; then
            cat "$WORK/$name.log" >&2 || true
            die "$name exited before becoming ready"
        fi
        if [ "$(curl -sk -o /dev/null -w '%{http_code}' --max-time 1 "$url" || true)" != 000 ]; then
            return 0
        fi
        sleep 0.1
    done
    cat "$WORK/$name.log" >&2 || true
    die "$name not ready after 10 s ($url)"
}
wait_for webhook "$WEBHOOK_PID" "https://127.0.0.1:$WPORT/"
wait_for gateway "$GATEWAY_PID" "https://127.0.0.1:$GPORT/healthz"
[ "$(curl -sk "https://127.0.0.1:$GPORT/healthz")" = ok ] || die "gateway /healthz did not answer ok"

# --- both answer allowed (checking the certificate chain as the API server would) ---------
DIRECT_URL="https://127.0.0.1:$WPORT/validate"
GATEWAY_URL="https://127.0.0.1:$GPORT/validate?timeout=10s"
for url in "$DIRECT_URL" "$GATEWAY_URL"; do
    answer=$(curl -sS --cacert "$WORK/ca.crt" -H 'Content-Type: application/json' \
        --data-binary "@$REVIEW" --max-time 10 "$url") || die "POST $url failed"
    case $answer in
        *'"allowed":true'*) log "POST $url: allowed" ;;
        *) cat "$WORK/gateway.log" >&2; die "POST $url did not answer allowed: $answer" ;;
    esac
done

# --- load ----------------------------------------------------------------------------------
cat > "$WORK/post.lua" << EOF
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local file = assert(io.open("$REVIEW", "rb"))
wrk.body = file:read("*a")
file:close()
EOF

# run_wrk NAME DURATION URL: wrk's output in $WORK/NAME.wrk
run_wrk() {
    wrk -t"$THREADS" -c"$CONNECTIONS" -d"$2" --latency -s "$WORK/post.lua" "$3" > "$WORK/$1.wrk" 2>&1 \
        || { cat "$WORK/$1.wrk" >&2; die "wrk against $3 failed"; }
}

metric() { # the gateway's admission_gateway_reviews_total for allowed="$1" (0 if absent)
    curl -s "http://127.0.0.1:$MPORT/metrics" \
        | awk -v a="$1" '$1 == "admission_gateway_reviews_total{stage=\"validate\",allowed=\"" a "\"}" { n = $2 } END { print n + 0 }'
}

log "warm-up: $WARMUP each"
run_wrk warmup-direct "$WARMUP" "$DIRECT_URL"
run_wrk warmup-gateway "$WARMUP" "$GATEWAY_URL"
denied_before=$(metric false)
log "measuring: wrk -t$THREADS -c$CONNECTIONS -d$DURATION --latency, direct then gateway"
run_wrk direct "$DURATION" "$DIRECT_URL"
run_wrk gateway "$DURATION" "$GATEWAY_URL"
denied=$(($(metric false) - denied_before))

# --- the table -----------------------------------------------------------------------------
# field FILE WHAT: Requests/sec, or a latency percentile (50%, 99%) in milliseconds.
field() {
    awk -v what="$2" '
        function ms(v) {
            if (v ~ /us$/) return substr(v, 1, length(v) - 2) / 1000
            if (v ~ /ms$/) return substr(v, 1, length(v) - 2) + 0
            if (v ~ /m$/)  return substr(v, 1, length(v) - 1) * 60000
            if (v ~ /s$/)  return substr(v, 1, length(v) - 1) * 1000
            return v + 0
        }
        what == "rps" && $1 == "Requests/sec:" { print $2 + 0 }
        what != "rps" && $1 == what { print ms($2); exit }
    ' "$1"
}
non2xx() { awk '/Non-2xx or 3xx responses:/ { n = $NF } END { print n + 0 }' "$1"; }
sockerr() { # total socket errors (connect, read, write, timeout)
    awk '/Socket errors:/ { gsub(",", ""); n = $4 + $6 + $8 + $10 } END { print n + 0 }' "$1"
}

d_rps=$(field "$WORK/direct.wrk" rps) g_rps=$(field "$WORK/gateway.wrk" rps)
d_p50=$(field "$WORK/direct.wrk" 50%) g_p50=$(field "$WORK/gateway.wrk" 50%)
d_p99=$(field "$WORK/direct.wrk" 99%) g_p99=$(field "$WORK/gateway.wrk" 99%)

echo
echo "admission-gateway first figure — $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores shared by wrk, gateway and webhook"
echo "wrk -t$THREADS -c$CONNECTIONS -d$DURATION --latency, POST $(basename "$REVIEW"), HTTPS keep-alive, 1 allowing webhook"
echo
printf '%-22s %12s %10s %10s %8s %8s\n' "" "requests/s" "p50 ms" "p99 ms" "non-2xx" "sock.err"
printf '%-22s %12.0f %10.3f %10.3f %8d %8d\n' "direct (webhook)" "$d_rps" "$d_p50" "$d_p99" \
    "$(non2xx "$WORK/direct.wrk")" "$(sockerr "$WORK/direct.wrk")"
printf '%-22s %12.0f %10.3f %10.3f %8d %8d\n' "gateway /validate" "$g_rps" "$g_p50" "$g_p99" \
    "$(non2xx "$WORK/gateway.wrk")" "$(sockerr "$WORK/gateway.wrk")"
awk -v dr="$d_rps" -v gr="$g_rps" -v d50="$d_p50" -v g50="$g_p50" -v d99="$d_p99" -v g99="$g_p99" 'BEGIN {
    printf "%-22s %11.2fx %+10.3f %+10.3f   (throughput ratio; added latency, ms)\n", "gateway/direct", gr / dr, g50 - d50, g99 - d99
}'
echo
echo "gateway reviews answered allowed=false during the measured run: $denied"
warnings=$(grep -cE 'WARN|ERROR' "$WORK/gateway.log" || true)
echo "gateway log lines at WARN/ERROR: $warnings"
if [ "$warnings" -gt 0 ]; then
    grep -E 'WARN|ERROR' "$WORK/gateway.log" | sed 's/\x1b\[[0-9;]*m//g' | head -5
fi
if [ -n "${KEEP_WRK_OUTPUT:-}" ]; then
    for name in direct gateway; do
        echo
        echo "--- wrk: $name"
        cat "$WORK/$name.wrk"
    done
fi
