#!/usr/bin/env bash
# The gateway against the webhook direct and against nginx, in ONE run, per scenario.
#
#   loadtest/compare.sh SCENARIO... | all  [--write-readme]
#
# Scenarios: mutate-1 validate-1 mixed validate-8x20ms hung-ignore dead-ignore fleet-1000
# big-object many-ops inflight-2000 overload recording policy-size (loadtest/README.md says what
# each measures). For each, the script
# starts the mock webhook fleet (loadtest/mock_webhook.rs), nginx as a TLS keep-alive reverse
# proxy to it, and the gateway (release build) with a fleet pointing at it, all on random
# loopback ports; drives the same wrk load at each target, alternating targets over ROUNDS
# rounds; then a closed-loop c=1 run of each for the latency added. It prints throughput,
# p50/p99/p999, CPU per request of the serving processes (from /proc), RSS, the scenario's
# figure against its target, and last the line
#   result: gateway/nginx throughput=R1 p99=R2; added p50=X_us p99=Y_us
# (for `all`: a summary, then mutate-1's result line last). --write-readme rewrites the results
# section of loadtest/README.md from this run: all of it when every scenario ran, else only the
# rows of the scenarios that ran, with a line naming the run that measured them.
#
# Knobs (environment): ROUNDS (3), DURATION (2, seconds per measured run), C1_DURATION (1),
# WARMUP (1), CONNECTIONS (32), THREADS (wrk -t, 1), RUST_LOG (the gateway's, info),
# GATEWAY_BIN (the gateway build to measure), GATEWAY_B (a second build, measured beside it in
# mutate-1 and validate-1: two builds alternating in one run),
# KEEP_WORK=1 (keep the temporary directory: configurations, logs, wrk outputs).
# Needs cargo, openssl, curl, python3; installs wrk and nginx with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

ALL_SCENARIOS=(mutate-1 validate-1 mixed validate-8x20ms hung-ignore dead-ignore fleet-1000 big-object many-ops inflight-2000 overload recording policy-size)
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-2}
C1_DURATION=${C1_DURATION:-1}
WARMUP=${WARMUP:-1}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-1}
export RUST_LOG=${RUST_LOG:-info}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BASE_REVIEW=$ROOT/tests/fixtures/reviews/pod-create.json
README=$ROOT/loadtest/README.md
TICKS=$(getconf CLK_TCK)

log() { printf '==> %s\n' "$*" >&2; }
die() {
    printf 'error: %s\n' "$*" >&2
    exit 2
}
usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit "${1:-0}"
}

# --- arguments ----------------------------------------------------------------------------
SCENARIOS=()
ARGS="$*"
WRITE_README=
for arg in "$@"; do
    case $arg in
        -h | --help) usage 0 ;;
        --write-readme) WRITE_README=1 ;;
        all) SCENARIOS+=("${ALL_SCENARIOS[@]}") ;;
        -*) die "unknown option $arg (see --help)" ;;
        *)
            [[ " ${ALL_SCENARIOS[*]} " == *" $arg "* ]] || die "unknown scenario $arg; one of: ${ALL_SCENARIOS[*]} all"
            SCENARIOS+=("$arg")
            ;;
    esac
done
[ ${#SCENARIOS[@]} -gt 0 ] || usage 2

# --- tools --------------------------------------------------------------------------------
for tool in cargo openssl curl python3 base64 awk getconf; do
    command -v "$tool" > /dev/null || die "$tool is required"
done
install_packages() {
    local sudo=
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo > /dev/null || die "$* missing and we are not root: install $*"
        sudo=sudo
    fi
    log "installing $*"
    $sudo apt-get install -y "$@" > /dev/null 2>&1 || {
        $sudo apt-get update > /dev/null
        $sudo apt-get install -y "$@" > /dev/null
    }
}
missing=()
command -v wrk > /dev/null || missing+=(wrk)
command -v nginx > /dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx)
[ ${#missing[@]} -eq 0 ] || install_packages "${missing[@]}"
NGINX_BIN=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX_BIN" ] || die "nginx could not be installed"
command -v wrk > /dev/null || die "wrk could not be installed"
# 2,000 connections in flight need 3 descriptors each in some processes.
ulimit -n "$(ulimit -Hn)" 2> /dev/null || true
[ "$(ulimit -n)" = unlimited ] || [ "$(ulimit -n)" -ge 8192 ] || log "ulimit -n is $(ulimit -n): inflight-2000 may fail"

# --- build --------------------------------------------------------------------------------
log "building (release)"
cargo build --release --locked --example mock-webhook --example passthrough --bin admission-gateway >&2 \
    || die "the release build failed"
GATEWAY_BIN=${GATEWAY_BIN:-$TARGET_DIR/release/admission-gateway}  # override to compare another build
GATEWAY_B=${GATEWAY_B:-} # a second build, measured beside the first in mutate-1 and validate-1
[ -z "$GATEWAY_B" ] || [ -x "$GATEWAY_B" ] || die "GATEWAY_B=$GATEWAY_B is not an executable"
MOCK_BIN=$TARGET_DIR/release/examples/mock-webhook
PASSTHROUGH_BIN=$TARGET_DIR/release/examples/passthrough
[ -x "$GATEWAY_BIN" ] && [ -x "$MOCK_BIN" ] && [ -x "$PASSTHROUGH_BIN" ] || die "the release build failed"

# --- work directory and cleanup -------------------------------------------------------------
WORK=$(mktemp -d -t admission-gateway-compare.XXXXXX)
mkdir -p "$WORK/logs"
PIDS=()
alive() { # PID is running (not a zombie)
    local line
    read -r line 2> /dev/null < "/proc/$1/stat" || return 1
    line=${line##*) }
    [ "${line%% *}" != Z ]
}
stop_all() {
    local pid i running
    for pid in "${PIDS[@]}"; do kill "$pid" 2> /dev/null || true; done
    for i in $(seq 50); do
        running=
        for pid in "${PIDS[@]}"; do alive "$pid" && running=1; done
        [ -n "$running" ] || break
        sleep 0.1
    done
    for pid in "${PIDS[@]}"; do kill -9 "$pid" 2> /dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2> /dev/null || true; done
    PIDS=()
}
cleanup() {
    stop_all
    if [ -n "${KEEP_WORK:-}" ]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- certificates: a CA and one serving certificate for 127.0.0.1, used by every server -----
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$WORK/ca.key" -out "$WORK/ca.crt" -days 1 -subj "/CN=admission-gateway compare CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2> /dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$WORK/tls.key" -out "$WORK/tls.csr" -subj "/CN=127.0.0.1" 2> /dev/null
printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
    "extendedKeyUsage=serverAuth" "subjectAltName=IP:127.0.0.1" > "$WORK/tls.ext"
openssl x509 -req -in "$WORK/tls.csr" -CA "$WORK/ca.crt" -CAkey "$WORK/ca.key" -CAcreateserial \
    -days 1 -extfile "$WORK/tls.ext" -out "$WORK/tls.crt" 2> /dev/null
CA_BUNDLE=$(base64 -w0 < "$WORK/ca.crt")

# --- review bodies -------------------------------------------------------------------------
# body NAME BYTES [LABEL=VALUE...]: pod-create.json, compact, with these labels, padded with
# annotations to about BYTES; prints its path.
body() {
    local out=$WORK/body-$1.json
    [ -f "$out" ] || python3 - "$BASE_REVIEW" "$out" "${@:2}" << 'EOF'
import json, sys
source, out, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
review = json.load(open(source))
metadata = review["request"]["object"]["metadata"]
metadata.setdefault("labels", {}).update(dict(a.split("=", 1) for a in sys.argv[4:]))
notes = metadata.setdefault("annotations", {})
current, i = len(json.dumps(review, separators=(",", ":"))), 0
while current < size:
    key = "loadtest.example.com/pad-%06d" % i
    value = "x" * max(1, min(200, size - current - len(key) - 6))
    notes[key] = value
    current, i = current + len(key) + len(value) + 6, i + 1
open(out, "w").write(json.dumps(review, separators=(",", ":")))
EOF
    echo "$out"
}
size_of() { wc -c < "$1" | tr -d ' '; }

# --- processes -----------------------------------------------------------------------------
# wait_line FILE PATTERN WHAT PID: up to 30 s for a line matching PATTERN in FILE.
wait_line() {
    local i
    for i in $(seq 600); do
        grep -q "$2" "$1" 2> /dev/null && return 0
        kill -0 "$4" 2> /dev/null || { cat "$1" "${1%.*}.err" >&2 2> /dev/null || true; die "$3 exited"; }
        sleep 0.05
    done
    cat "$1" >&2
    die "$3 not ready after 30 s"
}

# start_mock HOOK...: the mock fleet on HTTPS (and a refusing port); sets MOCK, MOCK_PID, REFUSING.
start_mock() {
    local args=() hook
    for hook; do args+=(--hook "$hook"); done
    "$MOCK_BIN" --listen 127.0.0.1:0 --tls-cert "$WORK/tls.crt" --tls-key "$WORK/tls.key" \
        --refuse 127.0.0.1:0 "${args[@]}" > "$WORK/mock.out" 2> "$WORK/mock.err" &
    MOCK_PID=$!
    PIDS+=("$MOCK_PID")
    # Both lines: the mock may print them in either order.
    wait_line "$WORK/mock.out" '^refusing on ' mock-webhook "$MOCK_PID"
    wait_line "$WORK/mock.out" '^listening on https://' mock-webhook "$MOCK_PID"
    MOCK=$(sed -n 's#^listening on https://##p' "$WORK/mock.out")
    REFUSING=$(sed -n 's#^refusing on ##p' "$WORK/mock.out")
}

# start_gateway NAME FLEET_FILE [BINARY [ARGS...]]: sets GW_ADDR[NAME], GW_PID[NAME],
# GW_METRICS[NAME], GW_START_MS[NAME] (start to ready) and GW_IDLE_MIB[NAME] (RSS once ready,
# before any review); ARGS go to `serve` (BINARY empty: the usual one).
declare -A GW_ADDR GW_PID GW_METRICS GW_START_MS GW_IDLE_MIB
start_gateway() {
    local name=$1 fleet=$2 binary=${3:-$GATEWAY_BIN} started line
    shift $(($# > 3 ? 3 : $#))
    started=$(date +%s%N)
    NO_COLOR=1 "$binary" serve --config "$fleet" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
        --tls-cert "$WORK/tls.crt" --tls-key "$WORK/tls.key" "$@" > /dev/null 2> "$WORK/logs/$name.log" &
    GW_PID[$name]=$!
    PIDS+=("$!")
    # Its default log format, JSON lines, as deployed: one info line per review. The log is
    # kept out of the fleet's directory, which the gateway watches (as a mounted ConfigMap
    # would be).
    wait_line "$WORK/logs/$name.log" '"message":"serving"' "gateway $name" "${GW_PID[$name]}"
    GW_START_MS[$name]=$((($(date +%s%N) - started) / 1000000))
    line=$(grep -m1 '"message":"serving"' "$WORK/logs/$name.log")
    GW_ADDR[$name]=$(sed -n 's/.*"address":"\([0-9.:]*\)".*/\1/p' <<< "$line")
    GW_METRICS[$name]=$(sed -n 's/.*"metrics_address":"\([0-9.:]*\)".*/\1/p' <<< "$line")
    [ "$(curl -s "http://${GW_METRICS[$name]}/readyz")" = ok ] || die "gateway $name: /readyz is not ok"
    sleep 0.2
    GW_IDLE_MIB[$name]=$(awk -v k="$(memory_kb VmRSS "${GW_PID[$name]}")" 'BEGIN { printf "%.1f", k / 1024 }')
}

# start_passthrough [VAR [ARGS...]]: the stack's floor (loadtest/passthrough.rs), a pass-through
# HTTPS proxy to the mock on the gateway's own runtime, TLS and HTTP stack; ARGS such as
# --codec go to it. Sets $VAR (PASSTHROUGH unless given: its address) and ${VAR}_PID.
start_passthrough() {
    local var=${1:-PASSTHROUGH} pid
    shift $(($# > 0 ? 1 : 0))
    "$PASSTHROUGH_BIN" --listen 127.0.0.1:0 --tls-cert "$WORK/tls.crt" --tls-key "$WORK/tls.key" \
        --upstream "https://$MOCK" --ca "$WORK/ca.crt" "$@" > "$WORK/$var.out" 2> "$WORK/$var.err" &
    pid=$!
    PIDS+=("$pid")
    wait_line "$WORK/$var.out" '^listening on https://' passthrough "$pid"
    printf -v "$var" '%s' "$(sed -n 's#^listening on https://##p' "$WORK/$var.out")"
    printf -v "${var}_PID" '%s' "$pid"
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# children PID: the processes whose parent is PID.
children() {
    local f line rest state ppid
    for f in /proc/[0-9]*/stat; do
        read -r line 2> /dev/null < "$f" || continue
        rest=${line##*) }
        read -r state ppid _ <<< "$rest"
        [ "$ppid" = "$1" ] && { f=${f#/proc/}; echo "${f%/stat}"; }
    done
    return 0
}

# start_nginx [READ_TIMEOUT]: nginx (master + one worker per core) on a free port, a TLS
# keep-alive reverse proxy: / to the mock, /dead/ to the refusing port. Sets NGINX, NGINX_PIDS.
start_nginx() {
    local dir=$WORK/nginx port i
    mkdir -p "$dir/tmp"
    port=$(free_port)
    cat > "$dir/nginx.conf" << EOF
daemon off;
master_process on;
worker_processes auto;
worker_rlimit_nofile 20000;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 10000; }
http {
    access_log off;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    client_max_body_size 4m;
    client_body_buffer_size 4m;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    upstream mock {
        server $MOCK max_fails=0;
        keepalive 256;
        keepalive_requests 1000000;
    }
    upstream dead {
        server $REFUSING max_fails=0;
    }
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_ssl_verify on;
    proxy_ssl_trusted_certificate $WORK/ca.crt;
    proxy_ssl_name 127.0.0.1;
    proxy_ssl_session_reuse on;
    proxy_read_timeout ${1:-60s};
    # Answers beyond the buffers (many-ops: megabytes) stay in memory: the workers may not
    # write a temporary file under the run's private directory.
    proxy_max_temp_file_size 0;
    proxy_next_upstream off;
    server {
        listen 127.0.0.1:$port ssl;
        ssl_certificate $WORK/tls.crt;
        ssl_certificate_key $WORK/tls.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        location / { proxy_pass https://mock; }
        location /dead/ { proxy_pass https://dead/; }
    }
}
EOF
    "$NGINX_BIN" -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" > "$dir/out" 2>&1 &
    local pid=$!
    PIDS+=("$pid")
    NGINX=127.0.0.1:$port
    for i in $(seq 200); do
        kill -0 "$pid" 2> /dev/null || { cat "$dir/out" "$dir/error.log" >&2; die "nginx exited"; }
        [ "$(curl -sk -o /dev/null -w '%{http_code}' --max-time 1 "https://$NGINX/" || true)" != 000 ] && break
        sleep 0.05
    done
    NGINX_PIDS="$pid $(children "$pid" | tr '\n' ' ')"
}

# --- fleets (admissionregistration.k8s.io/v1 YAML) -----------------------------------------
# configuration KIND NAME: a configuration's head; webhooks follow.
configuration() {
    printf -- '---\napiVersion: admissionregistration.k8s.io/v1\nkind: %s\nmetadata:\n  name: %s\nwebhooks:\n' "$1" "$2"
}
# gateway_config FIELD: VALUE: a GatewayConfig document with that one setting.
gateway_config() {
    printf -- '---\napiVersion: admission-gateway/v1alpha1\nkind: GatewayConfig\nmetadata:\n  name: gateway\n%s %s\n' "$1" "$2"
}
# webhook name=N url=U [policy=Fail] [timeout=10] [group=] [resource=pods] [selector=K=V]
webhook() {
    local name='' url='' policy=Fail timeout=10 group='' resource=pods selector='' arg
    for arg; do
        case $arg in
            name=*) name=${arg#name=} ;;
            url=*) url=${arg#url=} ;;
            policy=*) policy=${arg#policy=} ;;
            timeout=*) timeout=${arg#timeout=} ;;
            group=*) group=${arg#group=} ;;
            resource=*) resource=${arg#resource=} ;;
            selector=*) selector=${arg#selector=} ;;
        esac
    done
    printf '  - name: %s\n    clientConfig:\n      url: %s\n      caBundle: %s\n' "$name" "$url" "$CA_BUNDLE"
    printf '    rules:\n      - operations: ["CREATE"]\n        apiGroups: ["%s"]\n        apiVersions: ["v1"]\n        resources: ["%s"]\n' "$group" "$resource"
    [ -z "$selector" ] || printf '    objectSelector:\n      matchLabels:\n        %s: "%s"\n' "${selector%%=*}" "${selector#*=}"
    printf '    failurePolicy: %s\n    sideEffects: None\n    timeoutSeconds: %s\n    admissionReviewVersions: ["v1"]\n' "$policy" "$timeout"
}

# --- targets and measurements -------------------------------------------------------------
T_NAMES=()
declare -A T_LABEL T_URL T_BODY T_PATHS T_FRONT T_EXPECT T_COUNTED AGG
# target NAME LABEL URL BODY FRONT_PIDS EXPECT [PATHS]: EXPECT is matched against
# "HTTP_CODE BODY" of one request sent before the load (to the first of PATHS, if any).
# target NAME LABEL URL BODY FRONT_PIDS EXPECT [PATHS [COUNTED]]: EXPECT is the answer the
# check before the load must give ("code body" contains it); COUNTED, what wrk counts as the
# expected answer when it differs (wrk.lua's EXPECT: a status and a space, or text an HTTP 200
# body contains; by default EXPECT). Only expected answers are throughput (req/s).
target() {
    T_NAMES+=("$1")
    T_LABEL[$1]=$2 T_URL[$1]=$3 T_BODY[$1]=$4 T_FRONT[$1]=$5 T_EXPECT[$1]=$6 T_PATHS[$1]=${7:-}
    T_COUNTED[$1]=${8:-$6}
}
reset_scenario() {
    stop_all
    T_NAMES=()
    T_LABEL=() T_URL=() T_BODY=() T_PATHS=() T_FRONT=() T_EXPECT=() T_COUNTED=() AGG=()
    CONNS=$CONNECTIONS WRK_THREADS=$THREADS S_ROUNDS=$ROUNDS S_DURATION=$DURATION S_WARMUP=$WARMUP
    C1_TARGETS=all WRK_TIMEOUT=10 SAMPLE_IN_FLIGHT=
    rm -rf "$WORK/res" "$WORK/nginx" && mkdir -p "$WORK/res" "$WORK/wrk"
}

check_target() {
    local name=$1 url=${T_URL[$1]} answer code first
    first=${T_PATHS[$name]%% *}
    [ -z "$first" ] || url="${url%/}$first"
    code=$(curl -sS --cacert "$WORK/ca.crt" -o "$WORK/check.out" -w '%{http_code}' --max-time 15 \
        -H 'Content-Type: application/json' --data-binary "@${T_BODY[$name]}" "$url") || die "POST $url failed"
    answer="$code $(head -c 2000 "$WORK/check.out")"
    [[ $answer == *${T_EXPECT[$name]}* ]] || die "$name: POST $url: expected ${T_EXPECT[$name]}, got: $answer"
}

cpu_ticks() { # utime + stime of these processes (all threads), in clock ticks
    local pid files=()
    for pid; do files+=("/proc/$pid/stat"); done
    [ ${#files[@]} -gt 0 ] || { echo 0; return; }
    awk '{ s = $0; sub(/^.*\) /, "", s); split(s, f, " "); t += f[12] + f[13] } END { print t + 0 }' "${files[@]}"
}
memory_kb() { # memory_kb VmRSS|VmHWM PID...: summed over the processes
    local field=$1 pid files=()
    shift
    for pid; do files+=("/proc/$pid/status"); done
    [ ${#files[@]} -gt 0 ] || { echo 0; return; }
    awk -v k="$field:" '$1 == k { t += $2 } END { print t + 0 }' "${files[@]}"
}
mock_stats() { curl -s --cacert "$WORK/ca.crt" "https://$MOCK/_stats"; }
mock_calls() { mock_stats | awk '{ t += $2 } END { print t + 0 }'; }
mock_in_flight() { mock_stats | awk '{ t += $3 } END { print t + 0 }'; }

# run NAME CONNECTIONS SECONDS OUT: one wrk run; its wrk-result line and the serving processes'
# CPU, memory and the mock's calls, as key=value, in OUT.
run() {
    local name=$1 conns=$2 seconds=$3 out=$4 threads=$WRK_THREADS front=${T_FRONT[$1]}
    local calls0 front0 mock0 result wrk=$WORK/wrk/${4##*/}.txt sampler=
    [ "$conns" -ge "$threads" ] || threads=$conns
    calls0=$(mock_calls) front0=$(cpu_ticks $front) mock0=$(cpu_ticks "$MOCK_PID")
    echo 0 > "$wrk.in-flight"
    if [ -n "$SAMPLE_IN_FLIGHT" ]; then # the mock's calls in flight, 2/3 into the run
        (sleep "$(awk -v s="$seconds" 'BEGIN { print s * 2 / 3 }')" && mock_in_flight > "$wrk.in-flight") &
        sampler=$!
    fi
    BODY=${T_BODY[$name]} PATHS=${T_PATHS[$name]} EXPECT=${T_COUNTED[$name]} wrk -t"$threads" -c"$conns" -d"${seconds}s" \
        --timeout "${WRK_TIMEOUT}s" -s "$ROOT/loadtest/wrk.lua" "${T_URL[$name]}" > "$wrk" 2>&1 \
        || { cat "$wrk" >&2; die "wrk against $name failed"; }
    [ -z "$sampler" ] || wait "$sampler" || true
    result=$(grep '^wrk-result ' "$wrk") || { cat "$wrk" >&2; die "wrk against $name: no result"; }
    echo "${result#wrk-result } front_ticks=$(($(cpu_ticks $front) - front0))" \
        "mock_ticks=$(($(cpu_ticks "$MOCK_PID") - mock0)) calls=$(($(mock_calls) - calls0))" \
        "rss_kb=$(memory_kb VmRSS $front) hwm_kb=$(memory_kb VmHWM $front) in_flight=$(cat "$wrk.in-flight")" > "$out"
}

# aggregate TAG NAME: over the rounds, into AGG[TAG/NAME/FIELD]: rps (total expected answers /
# total time), p50/p99/p999 (median of the rounds), max, front_us and mock_us (CPU per
# request), calls (mock calls per request), rss/hwm (MiB, last / highest), errors (wrk's
# socket errors), non2xx, requests, expected and other (answers that were / were not the
# expected one), s429 (answers 429) and other_statuses (STATUS:COUNT,… of the others).
aggregate() {
    local key value
    while read -r key value; do AGG[$1/$2/$key]=$value; done < <(awk -v ticks="$TICKS" '
        function median(v, n,    i, j, t) {
            for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
            return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        }
        {
            n++
            for (i = 1; i <= NF; i++) { split($i, kv, "="); r[kv[1]] = kv[2] }
            requests += r["requests"]; duration += r["duration_us"]
            p50[n] = r["p50_us"]; p99[n] = r["p99_us"]; p999[n] = r["p999_us"]; mean += r["mean_us"] * r["requests"]
            if (r["max_us"] > max) max = r["max_us"]
            front += r["front_ticks"]; mock += r["mock_ticks"]; calls += r["calls"]
            errors += r["connect_errors"] + r["read_errors"] + r["write_errors"] + r["timeouts"]; non2xx += r["non2xx"]
            expected += r["expected"]; other += r["other"]; s429 += r["s429"]
            m = split(r["other_statuses"] == "-" ? "" : r["other_statuses"], pairs, ",")
            for (j = 1; j <= m; j++) { split(pairs[j], sc, ":"); by[sc[1]] += sc[2] }
            rss = r["rss_kb"]; if (r["hwm_kb"] > hwm) hwm = r["hwm_kb"]; if (r["in_flight"] > in_flight) in_flight = r["in_flight"]
        }
        END {
            if (n == 0) exit
            q = requests > 0 ? requests : 1
            statuses = ""; for (code in by) statuses = statuses (statuses == "" ? "" : ",") code ":" by[code]
            printf "requests %d\nrps %.1f\np50 %.1f\np99 %.1f\np999 %.1f\nmax %d\nmean %.1f\n", requests, expected * 1e6 / duration, median(p50, n), median(p99, n), median(p999, n), max, mean / q
            printf "expected %d\nother %d\ns429 %d\nother_statuses %s\n", expected, other, s429, statuses == "" ? "-" : statuses
            printf "in_flight %d\nfront_us %.1f\nmock_us %.1f\ncalls %.2f\nrss %.1f\nhwm %.1f\nerrors %d\nnon2xx %d\n", in_flight, front * 1e6 / ticks / q, mock * 1e6 / ticks / q, calls / q, rss / 1024, hwm / 1024, errors, non2xx
        }' "$WORK/res/$1.$2".[0-9]*)
}
get() { echo "${AGG[$1/$2/$3]:-0}"; }

# measure: warm-up, ROUNDS rounds of every target at CONNS, then ROUNDS rounds at c=1.
measure() {
    local name r c1=()
    [ "$C1_TARGETS" = all ] && c1=("${T_NAMES[@]}") || read -ra c1 <<< "$C1_TARGETS"
    for name in "${T_NAMES[@]}"; do check_target "$name"; done
    if [ "$S_WARMUP" != 0 ]; then
        for name in "${T_NAMES[@]}"; do run "$name" "$CONNS" "$S_WARMUP" "$WORK/res/warmup"; done
    fi
    for r in $(seq "$S_ROUNDS"); do
        log "$SCENARIO: round $r/$S_ROUNDS, c=$CONNS, ${S_DURATION}s each: ${T_NAMES[*]}"
        for name in "${T_NAMES[@]}"; do run "$name" "$CONNS" "$S_DURATION" "$WORK/res/load.$name.$r"; done
    done
    for r in $(seq "$S_ROUNDS"); do
        [ ${#c1[@]} -gt 0 ] || break
        log "$SCENARIO: round $r/$S_ROUNDS, c=1, ${C1_DURATION}s each: ${c1[*]}"
        for name in "${c1[@]}"; do run "$name" 1 "$C1_DURATION" "$WORK/res/c1.$name.$r"; done
    done
    for name in "${T_NAMES[@]}"; do
        aggregate load "$name"
        [[ " ${c1[*]} " == *" $name "* ]] && aggregate c1 "$name"
    done
    return 0
}

# --- reporting ------------------------------------------------------------------------------
fmt() { awk -v v="$1" -v f="$2" 'BEGIN { printf f, v }'; }
ms() { awk -v v="$1" 'BEGIN { printf "%.3f", v / 1000 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", a - b }'; }
# verdict VALUE OP LIMIT -> met / MISSED (OP: le, ge)
verdict() {
    awk -v v="$1" -v op="$2" -v l="$3" 'BEGIN { ok = op == "le" ? v <= l : v >= l; print ok ? "met" : "MISSED" }'
}

print_tables() {
    local name front
    printf '\n%-26s %9s %8s %8s %9s %8s %9s %8s %9s %7s %7s\n' "c=$CONNS, $S_ROUNDS×${S_DURATION}s" \
        req/s "p50 ms" "p99 ms" "p999 ms" "calls/r" "front µs" "mock µs" "RSS MiB" errors other
    for name in "${T_NAMES[@]}"; do
        front=${T_FRONT[$name]}
        printf '%-26s %9.0f %8s %8s %9s %8s %9s %8s %9s %7s %7s\n' "${T_LABEL[$name]}" "$(get load "$name" rps)" \
            "$(ms "$(get load "$name" p50)")" "$(ms "$(get load "$name" p99)")" "$(ms "$(get load "$name" p999)")" \
            "$(get load "$name" calls)" "$([ -n "$front" ] && fmt "$(get load "$name" front_us)" %.0f || echo -)" \
            "$(fmt "$(get load "$name" mock_us)" %.0f)" "$([ -n "$front" ] && get load "$name" rss || echo -)" \
            "$(get load "$name" errors)" "$(get load "$name" other)"
    done
    for name in "${T_NAMES[@]}"; do # the answers not counted as throughput, by status
        [ "$(get load "$name" other)" = 0 ] && continue
        echo "  ${T_LABEL[$name]}: $(get load "$name" other) of $(get load "$name" requests) answers were not the expected ${T_COUNTED[$name]} (status:count $(get load "$name" other_statuses)); not counted in req/s"
    done
    [ -n "${AGG[c1/${T_NAMES[0]}/rps]:-}${AGG[c1/${T_NAMES[-1]}/rps]:-}" ] || return 0
    printf '\n%-26s %9s %8s %8s %9s\n' "c=1, $S_ROUNDS×${C1_DURATION}s" req/s "p50 µs" "p99 µs" "p999 µs"
    for name in "${T_NAMES[@]}"; do
        [ -n "${AGG[c1/$name/rps]:-}" ] || continue
        printf '%-26s %9.0f %8.0f %8.0f %9.0f\n' "${T_LABEL[$name]}" "$(get c1 "$name" rps)" \
            "$(get c1 "$name" p50)" "$(get c1 "$name" p99)" "$(get c1 "$name" p999)"
    done
}

# figure WHAT MEASURED TARGET VERDICT: one line of the scenario's figures (and of the README).
figure() {
    printf '  %-58s %-30s target %-16s %s\n' "$1" "$2" "$3" "$4"
    printf '%s|%s|%s|%s|%s\n' "$SCENARIO" "$1" "$2" "$3" "$4" >> "$WORK/figures"
}

# result GATEWAY NGINX BASE [TAG]: the last line; added latency at c=1 (TAG: which runs) vs BASE.
result() {
    local g=$1 n=$2 base=$3 tag=${4:-c1} line
    line="result: gateway/nginx throughput=$(ratio "$(get load "$g" rps)" "$(get load "$n" rps)")"
    line+=" p99=$(ratio "$(get load "$g" p99)" "$(get load "$n" p99)")"
    line+="; added p50=$(minus "$(get "$tag" "$g" p50)" "$(get "$tag" "$base" p50)")_us"
    line+=" p99=$(minus "$(get "$tag" "$g" p99)" "$(get "$tag" "$base" p99)")_us"
    printf '%s|%s\n' "$SCENARIO" "$line" >> "$WORK/results"
    echo
    echo "$line"
}

# The usual figures: throughput vs nginx, latency added at c=1 over the webhook direct.
standard_figures() {
    local g=$1 n=$2 d=$3 what=${4:-}
    local thr added50 added99
    thr=$(ratio "$(get load "$g" rps)" "$(get load "$n" rps)")
    added50=$(minus "$(get c1 "$g" p50)" "$(get c1 "$d" p50)")
    added99=$(minus "$(get c1 "$g" p99)" "$(get c1 "$d" p99)")
    if [ -z "$what" ]; then
        figure "throughput gateway/nginx" "${thr}×" "≥ 1.0×" "$(verdict "$thr" ge 1.0)"
        figure "latency added over the webhook direct, c=1, p50" "${added50} µs" "≤ 100 µs" "$(verdict "$added50" le 100)"
        figure "latency added over the webhook direct, c=1, p99" "${added99} µs" "≤ 1000 µs" "$(verdict "$added99" le 1000)"
    else
        figure "throughput gateway/nginx ($what)" "${thr}×" "—" "(no target)"
        figure "latency added over one webhook direct, c=1, p50/p99" "${added50} / ${added99} µs" "—" "(no target)"
    fi
}

# floor_figures GATEWAY PASSTHROUGH NGINX [CODEC]: where the stack's floor stands against nginx,
# and what the gateway's own work on a review costs above it; with CODEC (the pass-through with
# --codec), how much of that the review's JSON alone costs (no targets: they explain the others).
floor_figures() {
    local g=$1 p=$2 n=$3 c=${4:-} gus pus cus
    gus=$(get load "$g" front_us) pus=$(get load "$p" front_us)
    figure "stack floor: pass-through/nginx throughput" "$(ratio "$(get load "$p" rps)" "$(get load "$n" rps)")×" \
        "—" "(no target)"
    figure "gateway CPU per review over the pass-through's" "+$(minus "$gus" "$pus") µs ($(fmt "$gus" %.0f) vs $(fmt "$pus" %.0f))" \
        "—" "(no target)"
    if [ -n "$c" ]; then
        cus=$(get load "$c" front_us)
        figure "codec floor: pass-through+codec/nginx throughput" \
            "$(ratio "$(get load "$c" rps)" "$(get load "$n" rps)")×" "—" "(no target)"
        figure "the review's codec alone, CPU over the pass-through's" "+$(minus "$cus" "$pus") µs" "—" "(no target)"
        figure "gateway own steps: CPU over the codec floor's" "+$(minus "$gus" "$cus") µs" \
            "—" "(no target)"
    fi
    # The load keeps every core busy, so a target's throughput is the machine's CPU time over
    # what one request costs everyone (client, mock, target): the gateway's CPU per review
    # at which its throughput would be 0.9× nginx's is what it spends now less the difference.
    local cores cut
    cores=$(nproc)
    cut=$(awk -v c="$cores" -v g="$(get load "$g" rps)" -v n="$(get load "$n" rps)" \
        'BEGIN { printf "%.1f", (g > 0 && n > 0) ? c * 1e6 / g - c * 1e6 / (0.9 * n) : 0 }')
    figure "gateway CPU per review that would give 0.9× nginx" \
        "$(fmt "$(awk -v g="$gus" -v c="$cut" 'BEGIN { print g - c }')" %.0f) µs (now $(fmt "$gus" %.0f); $cores cores busy)" \
        "—" "(no target)"
}

# second_build STAGE PATH EXPECT: with GATEWAY_B, that build too, on the same fleet, as target
# gatewayb (in every round, beside the first).
second_build() {
    [ -n "$GATEWAY_B" ] || return 0
    start_gateway gatewayb "$WORK/fleet.yaml" "$GATEWAY_B"
    target gatewayb "gateway B /$1" "https://${GW_ADDR[gatewayb]}/$1?timeout=10s" "$(body 10k $PAD)" \
        "${GW_PID[gatewayb]}" "$2"
}

# second_build_figures: the second build against the first, measured in the same rounds.
second_build_figures() {
    [ -n "$GATEWAY_B" ] || return 0
    figure "gateway B/gateway throughput" "$(ratio "$(get load gatewayb rps)" "$(get load gateway rps)")×" \
        "—" "(no target)"
    figure "gateway B CPU per review, against gateway's" \
        "$(fmt "$(get load gatewayb front_us)" %.1f) vs $(fmt "$(get load gateway front_us)" %.1f) µs" "—" "(no target)"
}

gateway_log_note() { # warnings and errors in a gateway's log
    local n
    n=$(grep -cE '"level":"(WARN|ERROR)"' "$WORK/logs/$1.log" || true)
    echo "  gateway log ($1): $n WARN/ERROR lines (RUST_LOG=$RUST_LOG)"
}

# --- scenarios ------------------------------------------------------------------------------
PAD=10240 # the 10 KB Pod review
GATEWAY_MUTATE='"patchType":"JSONPatch"'
ALLOWED='"allowed":true'

scenario_mutate-1() {
    TITLE="one mutating webhook adding a label, $(size_of "$(body 10k $PAD)") B Pod review, TLS both legs"
    start_mock "/label=label:loadtest=yes"
    start_nginx
    start_passthrough
    { configuration MutatingWebhookConfiguration loadtest
      webhook name=label.loadtest.example.com url="https://$MOCK/label"; } > "$WORK/fleet.yaml"
    start_gateway gateway "$WORK/fleet.yaml"
    target direct "direct (mock /label)" "https://$MOCK/label" "$(body 10k $PAD)" "" "$GATEWAY_MUTATE"
    target nginx "nginx -> mock" "https://$NGINX/label" "$(body 10k $PAD)" "$NGINX_PIDS" "$GATEWAY_MUTATE"
    target passthrough "pass-through -> mock" "https://$PASSTHROUGH/label" "$(body 10k $PAD)" "$PASSTHROUGH_PID" "$GATEWAY_MUTATE"
    target gateway "gateway /mutate" "https://${GW_ADDR[gateway]}/mutate?timeout=10s" "$(body 10k $PAD)" "${GW_PID[gateway]}" "$GATEWAY_MUTATE"
    second_build mutate "$GATEWAY_MUTATE"
    measure
    print_tables
    echo
    standard_figures gateway nginx direct
    floor_figures gateway passthrough nginx
    second_build_figures
    gateway_log_note gateway
    result gateway nginx direct
}

scenario_validate-1() {
    TITLE="one validating webhook (allows), $(size_of "$(body 10k $PAD)") B Pod review, TLS both legs"
    start_mock "/allow=allow"
    start_nginx
    start_passthrough
    start_passthrough CODEC --codec
    { configuration ValidatingWebhookConfiguration loadtest
      webhook name=allow.loadtest.example.com url="https://$MOCK/allow"; } > "$WORK/fleet.yaml"
    start_gateway gateway "$WORK/fleet.yaml"
    target direct "direct (mock /allow)" "https://$MOCK/allow" "$(body 10k $PAD)" "" "$ALLOWED"
    target nginx "nginx -> mock" "https://$NGINX/allow" "$(body 10k $PAD)" "$NGINX_PIDS" "$ALLOWED"
    target passthrough "pass-through -> mock" "https://$PASSTHROUGH/allow" "$(body 10k $PAD)" "$PASSTHROUGH_PID" "$ALLOWED"
    target codec "pass-through+codec -> mock" "https://$CODEC/allow" "$(body 10k $PAD)" "$CODEC_PID" "$ALLOWED"
    target gateway "gateway /validate" "https://${GW_ADDR[gateway]}/validate?timeout=10s" "$(body 10k $PAD)" "${GW_PID[gateway]}" "$ALLOWED"
    second_build validate "$ALLOWED"
    measure
    print_tables
    echo
    standard_figures gateway nginx direct
    floor_figures gateway passthrough nginx codec
    second_build_figures
    gateway_log_note gateway
    result gateway nginx direct
}

scenario_mixed() {
    TITLE="2 mutating + 2 validating webhooks; every connection alternates /mutate and /validate (the gateway: 2 webhook calls per request; direct and nginx: 1, alternating a label and an allow webhook)"
    start_mock "/label-a=label:loadtest-a=yes" "/label-b=label:loadtest-b=yes" "/allow-a=allow" "/allow-b=allow"
    start_nginx
    { configuration MutatingWebhookConfiguration loadtest-mutating
      webhook name=a.label.loadtest.example.com url="https://$MOCK/label-a"
      webhook name=b.label.loadtest.example.com url="https://$MOCK/label-b"
      configuration ValidatingWebhookConfiguration loadtest-validating
      webhook name=a.allow.loadtest.example.com url="https://$MOCK/allow-a"
      webhook name=b.allow.loadtest.example.com url="https://$MOCK/allow-b"; } > "$WORK/fleet.yaml"
    start_gateway gateway "$WORK/fleet.yaml"
    local b
    b=$(body 10k $PAD)
    # The check sees the first path's answer (a patch); under load every other answer is a
    # validating one, without a patch: what is counted is `allowed: true`, which both carry.
    target direct "direct (mock, alternating)" "https://$MOCK/" "$b" "" "$GATEWAY_MUTATE" "/label-a /allow-a" "$ALLOWED"
    target nginx "nginx -> mock" "https://$NGINX/" "$b" "$NGINX_PIDS" "$GATEWAY_MUTATE" "/label-a /allow-a" "$ALLOWED"
    target gateway "gateway /mutate,/validate" "https://${GW_ADDR[gateway]}/" "$b" "${GW_PID[gateway]}" "$GATEWAY_MUTATE" \
        "/mutate?timeout=10s /validate?timeout=10s" "$ALLOWED"
    measure
    print_tables
    echo
    standard_figures gateway nginx direct "2 webhook calls vs 1"
    gateway_log_note gateway
    result gateway nginx direct
}

scenario_validate-8x20ms() {
    TITLE="8 validating webhooks of 20 ms vs 1 of 20 ms (one gateway; the review's label selects the fleet)"
    start_mock "/v20=allow,delay:20ms"
    start_nginx
    local i
    { configuration ValidatingWebhookConfiguration loadtest-one
      webhook name=one.loadtest.example.com url="https://$MOCK/v20" selector=loadtest-fleet=one
      configuration ValidatingWebhookConfiguration loadtest-eight
      for i in 1 2 3 4 5 6 7 8; do
          webhook name="v$i.eight.loadtest.example.com" url="https://$MOCK/v20" selector=loadtest-fleet=eight
      done; } > "$WORK/fleet.yaml"
    start_gateway gateway "$WORK/fleet.yaml"
    local one eight
    one=$(body 10k-one $PAD loadtest-fleet=one) eight=$(body 10k-eight $PAD loadtest-fleet=eight)
    target direct "direct (mock /v20)" "https://$MOCK/v20" "$one" "" "$ALLOWED"
    target nginx "nginx -> mock" "https://$NGINX/v20" "$one" "$NGINX_PIDS" "$ALLOWED"
    target gateway1 "gateway, 1 webhook" "https://${GW_ADDR[gateway]}/validate?timeout=10s" "$one" "${GW_PID[gateway]}" "$ALLOWED"
    target gateway8 "gateway, 8 webhooks" "https://${GW_ADDR[gateway]}/validate?timeout=10s" "$eight" "${GW_PID[gateway]}" "$ALLOWED"
    measure
    print_tables
    echo
    local load c1
    load=$(ratio "$(get load gateway8 p50)" "$(get load gateway1 p50)")
    c1=$(ratio "$(get c1 gateway8 p50)" "$(get c1 gateway1 p50)")
    figure "p50, 8 webhooks / 1 webhook, c=$CONNS" "${load}×" "≤ 1.1×" "$(verdict "$load" le 1.1)"
    figure "p50, 8 webhooks / 1 webhook, c=1" "${c1}×" "≤ 1.1×" "$(verdict "$c1" le 1.1)"
    figure "p99 under load, gateway (8 webhooks) / nginx" "$(ratio "$(get load gateway8 p99)" "$(get load nginx p99)")×" "—" "(no target)"
    gateway_log_note gateway
    result gateway8 nginx direct
}

scenario_hung-ignore() {
    TITLE="a hanging validating webhook, timeoutSeconds 1, failurePolicy Ignore; the caller's ?timeout=2s (direct: a webhook answering after exactly 1 s; nginx: proxy_read_timeout 1s, 504)"
    start_mock "/hang=hang" "/sleep1s=allow,delay:1s"
    start_nginx 1s
    { configuration ValidatingWebhookConfiguration loadtest
      webhook name=hang.loadtest.example.com url="https://$MOCK/hang" policy=Ignore timeout=1
      # Every call waits its timeout here: fast failure (which would eject the webhook after
      # 5 timeouts and answer at once) is dead-ignore's subject.
      gateway_config ejectAfterFailures: 0; } > "$WORK/fleet.yaml"
    start_gateway gateway "$WORK/fleet.yaml"
    local b
    b=$(body 10k $PAD)
    target direct "direct (mock, 1 s delay)" "https://$MOCK/sleep1s" "$b" "" "$ALLOWED"
    target nginx "nginx -> hang (504 at 1 s)" "https://$NGINX/hang" "$b" "$NGINX_PIDS" "504 "
    target gateway "gateway /validate" "https://${GW_ADDR[gateway]}/validate?timeout=2s" "$b" "${GW_PID[gateway]}" "$ALLOWED"
    CONNS=8 S_WARMUP=0 C1_TARGETS= WRK_TIMEOUT=5 S_DURATION=4
    measure
    print_tables
    echo
    local p50 p99 max ok
    p50=$(fmt "$(get load gateway p50)" %.0f) p99=$(fmt "$(get load gateway p99)" %.0f) max=$(get load gateway max)
    ok=$(awk -v a="$p50" -v b="$p99" -v m="$max" 'BEGIN { ok = a >= 950000 && b <= 1050000 && m < 1800000; print ok ? "met" : "MISSED" }')
    figure "answered at (p50 / p99 / max), caller's timeout 2 s" "$(ms "$p50") / $(ms "$p99") / $(ms "$max") ms" "1000 ± 50 ms" "$ok"
    gateway_log_note gateway
    result gateway nginx direct load
}

scenario_dead-ignore() {
    TITLE="a validating webhook whose port refuses connections, failurePolicy Ignore, vs no webhook (one gateway; the review's label selects); nginx: its upstream refusing, 502"
    start_mock "/allow=allow"
    start_nginx
    { configuration ValidatingWebhookConfiguration loadtest
      webhook name=dead.loadtest.example.com url="https://$REFUSING/allow" policy=Ignore selector=loadtest-fleet=dead; } > "$WORK/fleet.yaml"
    start_gateway gateway "$WORK/fleet.yaml"
    local none dead
    none=$(body 10k-none $PAD loadtest-fleet=none) dead=$(body 10k-dead $PAD loadtest-fleet=dead)
    target nginx "nginx -> refusing (502)" "https://$NGINX/dead/allow" "$dead" "$NGINX_PIDS" "502 "
    target none "gateway, no webhook" "https://${GW_ADDR[gateway]}/validate?timeout=10s" "$none" "${GW_PID[gateway]}" "$ALLOWED"
    target dead "gateway, dead webhook" "https://${GW_ADDR[gateway]}/validate?timeout=10s" "$dead" "${GW_PID[gateway]}" "$ALLOWED"
    measure
    print_tables
    echo
    local a50 a99
    a50=$(minus "$(get c1 dead p50)" "$(get c1 none p50)") a99=$(minus "$(get c1 dead p99)" "$(get c1 none p99)")
    figure "latency added by the dead webhook vs none, c=1, p50/p99" "$a50 / $a99 µs" "—" "(no target)"
    figure "throughput, dead webhook / none" "$(ratio "$(get load dead rps)" "$(get load none rps)")×" "—" "(no target)"
    gateway_log_note gateway
    result dead nginx none
}

# fleet_of N: N validating webhooks, the last (in the API server's order) matching the review:
# half of the others on other resources, half on pods with an objectSelector that does not match.
fleet_of() {
    local n=$1 per=100 i c=0
    [ "$n" -gt "$per" ] || per=$n
    for ((i = 0; i < n - 1; i++)); do
        if ((i % per == 0)); then configuration ValidatingWebhookConfiguration "$(printf 'loadtest-%04d' $c)"; c=$((c + 1)); fi
        if ((i % 2)); then
            webhook name="h$i.loadtest.example.com" url="https://$MOCK/allow" selector="loadtest-hook=h$i"
        else
            webhook name="h$i.loadtest.example.com" url="https://$MOCK/allow" group=apps resource=deployments
        fi
    done
    ((i % per == 0)) && configuration ValidatingWebhookConfiguration "$(printf 'loadtest-%04d' $c)"
    webhook name=match.loadtest.example.com url="https://$MOCK/allow"
}

scenario_fleet-1000() {
    TITLE="1,000 validating webhooks, one matching (the last), vs 10; the others on other resources or pods with a non-matching objectSelector"
    start_mock "/allow=allow"
    start_nginx
    fleet_of 10 > "$WORK/fleet-10.yaml"
    fleet_of 1000 > "$WORK/fleet-1000.yaml"
    start_gateway gateway10 "$WORK/fleet-10.yaml"
    start_gateway gateway1000 "$WORK/fleet-1000.yaml"
    local b
    b=$(body 10k $PAD)
    target direct "direct (mock /allow)" "https://$MOCK/allow" "$b" "" "$ALLOWED"
    target nginx "nginx -> mock" "https://$NGINX/allow" "$b" "$NGINX_PIDS" "$ALLOWED"
    target gateway10 "gateway, 10 webhooks" "https://${GW_ADDR[gateway10]}/validate?timeout=10s" "$b" "${GW_PID[gateway10]}" "$ALLOWED"
    target gateway1000 "gateway, 1,000 webhooks" "https://${GW_ADDR[gateway1000]}/validate?timeout=10s" "$b" "${GW_PID[gateway1000]}" "$ALLOWED"
    measure
    print_tables
    echo
    local thr p50 cpu
    thr=$(ratio "$(get load gateway10 rps)" "$(get load gateway1000 rps)")
    p50=$(ratio "$(get c1 gateway1000 p50)" "$(get c1 gateway10 p50)")
    cpu=$(ratio "$(get load gateway1000 front_us)" "$(get load gateway10 front_us)")
    figure "throughput, 10 webhooks / 1,000" "${thr}×" "≤ 2×" "$(verdict "$thr" le 2)"
    figure "p50 at c=1, 1,000 webhooks / 10" "${p50}×" "≤ 2×" "$(verdict "$p50" le 2)"
    figure "gateway CPU per review, 1,000 webhooks / 10" "${cpu}×" "—" "(no target)"
    echo "  start to ready: ${GW_START_MS[gateway10]} ms with 10 webhooks, ${GW_START_MS[gateway1000]} ms with 1,000"
    echo "  RSS once ready: ${GW_IDLE_MIB[gateway10]} MiB with 10 webhooks, ${GW_IDLE_MIB[gateway1000]} MiB with 1,000"
    result gateway1000 nginx direct
}

scenario_big-object() {
    local small big
    small=$(body 150k 153600) big=$(body 1536k 1572864)
    TITLE="a $(size_of "$big") B Pod review through 5 mutating webhooks (each adds a label) vs a $(size_of "$small") B one; direct and nginx: one webhook call with the big review"
    start_mock "/label-1=label:loadtest-1=yes" "/label-2=label:loadtest-2=yes" "/label-3=label:loadtest-3=yes" \
        "/label-4=label:loadtest-4=yes" "/label-5=label:loadtest-5=yes"
    start_nginx
    local i
    { configuration MutatingWebhookConfiguration loadtest
      for i in 1 2 3 4 5; do webhook name="l$i.loadtest.example.com" url="https://$MOCK/label-$i"; done; } > "$WORK/fleet.yaml"
    start_gateway gateway "$WORK/fleet.yaml"
    target direct "direct (mock, big)" "https://$MOCK/label-1" "$big" "" "$GATEWAY_MUTATE"
    target nginx "nginx -> mock, big" "https://$NGINX/label-1" "$big" "$NGINX_PIDS" "$GATEWAY_MUTATE"
    target small "gateway, 5 webhooks, small" "https://${GW_ADDR[gateway]}/mutate?timeout=10s" "$small" "${GW_PID[gateway]}" "$GATEWAY_MUTATE"
    target big "gateway, 5 webhooks, big" "https://${GW_ADDR[gateway]}/mutate?timeout=10s" "$big" "${GW_PID[gateway]}" "$GATEWAY_MUTATE"
    CONNS=4
    measure
    print_tables
    echo
    local size_ratio time_ratio ok
    size_ratio=$(ratio "$(size_of "$big")" "$(size_of "$small")")
    time_ratio=$(ratio "$(get c1 big p50)" "$(get c1 small p50)")
    ok=$(verdict "$time_ratio" le "$(awk -v s="$size_ratio" 'BEGIN { print s * 1.25 }')")
    figure "time at c=1 p50, big / small (size ratio ${size_ratio}×)" "${time_ratio}×" "≤ 1.25 × size" "$ok"
    figure "gateway time per MiB at c=1 p50, big / small" \
        "$(awk -v b="$(get c1 big p50)" -v s="$(get c1 small p50)" -v r="$size_ratio" 'BEGIN { printf "%.1f / %.1f ms", b / 1000 / (1572864 / 1048576), s / 1000 / (1572864 / 1048576 / r) }')" "—" "(linear: equal)"
    gateway_log_note gateway
    result big nginx direct
}

scenario_many-ops() {
    local ten hundred
    ten=$(body ops-10k $PAD operations=10k) hundred=$(body ops-100k $PAD operations=100k)
    TITLE="one mutating webhook answering a JSONPatch of 10,000 or 100,000 operations (each adds a label) to a $(size_of "$hundred") B Pod review; direct and nginx: the 100,000-operation answer"
    start_mock "/labels-10k=labels:10000" "/labels-100k=labels:100000"
    start_nginx
    { configuration MutatingWebhookConfiguration loadtest
      webhook name=ops-10k.loadtest.example.com url="https://$MOCK/labels-10k" selector=operations=10k timeout=30
      webhook name=ops-100k.loadtest.example.com url="https://$MOCK/labels-100k" selector=operations=100k timeout=30
    } > "$WORK/fleet.yaml"
    start_gateway gateway "$WORK/fleet.yaml"
    # The answers are megabytes: "allowed" comes before the patch in each.
    target direct "direct (mock, 100k ops)" "https://$MOCK/labels-100k" "$hundred" "" "$ALLOWED"
    target nginx "nginx -> mock, 100k ops" "https://$NGINX/labels-100k" "$hundred" "$NGINX_PIDS" "$ALLOWED"
    target ten "gateway, 10k ops" "https://${GW_ADDR[gateway]}/mutate?timeout=30s" "$ten" "${GW_PID[gateway]}" "$ALLOWED"
    target hundred "gateway, 100k ops" "https://${GW_ADDR[gateway]}/mutate?timeout=30s" "$hundred" "${GW_PID[gateway]}" "$ALLOWED"
    CONNS=2 WRK_TIMEOUT=30
    measure
    print_tables
    echo
    local p50 ratio_ops
    p50=$(get c1 hundred p50)
    ratio_ops=$(ratio "$p50" "$(get c1 ten p50)")
    figure "gateway time at c=1 p50, 100,000 operations" "$(ms "$p50") ms" "< 1000 ms" "$(verdict "$p50" le 1000000)"
    figure "time at c=1 p50, 100,000 / 10,000 operations" "${ratio_ops}×" "≤ 12.5× (linear: 10×)" \
        "$(verdict "$ratio_ops" le 12.5)"
    figure "gateway time over nginx's at c=1 p50, 100,000 operations" \
        "+$(ms "$(minus "$p50" "$(get c1 nginx p50)")") ms" "—" "(no target)"
    gateway_log_note gateway
    result hundred nginx direct
}

scenario_inflight-2000() {
    TITLE="memory: the gateway idle, and with 2,000 reviews in flight (wrk -c2000, one mutating webhook answering after 2 s, 10 KB reviews)"
    start_mock "/label=label:loadtest=yes,delay:2s"
    start_nginx
    { configuration MutatingWebhookConfiguration loadtest
      webhook name=label.loadtest.example.com url="https://$MOCK/label"
      # Room for the 2,000 (the default cap, 1,024, would answer the rest 429: see overload).
      gateway_config maxReviewsInFlight: 4096; } > "$WORK/fleet.yaml"
    start_gateway gateway "$WORK/fleet.yaml"
    local idle=${GW_IDLE_MIB[gateway]} b
    b=$(body 10k $PAD)
    target direct "direct (mock, 2 s)" "https://$MOCK/label" "$b" "" "$GATEWAY_MUTATE"
    target nginx "nginx -> mock" "https://$NGINX/label" "$b" "$NGINX_PIDS" "$GATEWAY_MUTATE"
    target gateway "gateway /mutate" "https://${GW_ADDR[gateway]}/mutate?timeout=10s" "$b" "${GW_PID[gateway]}" "$GATEWAY_MUTATE"
    CONNS=2000 WRK_THREADS=2 S_ROUNDS=1 S_DURATION=7 S_WARMUP=0 C1_TARGETS= SAMPLE_IN_FLIGHT=1
    measure
    # The RSS as the load stops and after: the allocator's free memory should go back (src/alloc.rs).
    local after=() fds=() peak in_flight waited=0 at
    # +200 s: after the upstream connections left idle in the pools are closed (90 to 180 s
    # after they went idle: src/alloc.rs) and the allocator collected after them (190 s).
    for at in 0 2 5 10 200; do
        sleep $((at - waited)); waited=$at
        after+=("+${at}s $(awk -v k="$(memory_kb VmRSS "${GW_PID[gateway]}")" 'BEGIN { printf "%.1f", k / 1024 }')")
        fds+=("$(find "/proc/${GW_PID[gateway]}/fd" -mindepth 1 2> /dev/null | wc -l)")
    done
    print_tables
    echo
    peak=$(get load gateway hwm)
    in_flight=$(get load gateway in_flight)
    figure "gateway RSS idle (after start, fleet loaded)" "$idle MiB" "≤ 30 MiB" "$(verdict "$idle" le 30)"
    figure "gateway peak RSS, $in_flight reviews in flight" "$peak MiB" "≤ 200 MiB" "$(verdict "$peak" le 200)"
    echo "  in flight: the mock's unanswered calls, sampled 2/3 into each run (direct $(get load direct in_flight), nginx $(get load nginx in_flight), gateway $in_flight)"
    local at10=${after[3]##* } at200=${after[4]##* }
    # At +10 s the pools still hold the upstream connections the burst left idle (up to 256,
    # tens of KiB each: how many is chance), so that figure has no target.
    figure "gateway RSS 10 s after the load / idle (${fds[3]} fds open)" "$at10 / $idle MiB" "—" "(reference)"
    figure "gateway RSS 200 s after (idle connections closed) / idle" "$at200 / $idle MiB" "≤ 2 × idle" "$(verdict "$at200" le "$(awk -v i="$idle" 'BEGIN { print i * 2 }')")"
    echo "  gateway RSS after the load (MiB): $(IFS=,; echo "${after[*]}" | sed 's/,/, /g'); descriptors open: $(IFS=,; echo "${fds[*]}" | sed 's/,/, /g'); nginx peak (master + workers): $(get load nginx hwm) MiB"
    gateway_log_note gateway
    result gateway nginx direct load
}

scenario_overload() {
    TITLE="overload: 2,000 connections against a webhook answering after 1 s, the gateway capped at maxReviewsInFlight 100 (beyond: 429 at once); direct and nginx: no cap"
    start_mock "/allow=allow,delay:1s"
    start_nginx
    { configuration ValidatingWebhookConfiguration loadtest
      webhook name=slow.loadtest.example.com url="https://$MOCK/allow"
      gateway_config maxReviewsInFlight: 100; } > "$WORK/fleet.yaml"
    start_gateway gateway "$WORK/fleet.yaml"
    local idle=${GW_IDLE_MIB[gateway]} b
    b=$(body 10k $PAD)
    target direct "direct (mock, 1 s)" "https://$MOCK/allow" "$b" "" "$ALLOWED"
    target nginx "nginx -> mock" "https://$NGINX/allow" "$b" "$NGINX_PIDS" "$ALLOWED"
    target gateway "gateway /validate (cap 100)" "https://${GW_ADDR[gateway]}/validate?timeout=10s" "$b" "${GW_PID[gateway]}" "$ALLOWED"
    CONNS=2000 WRK_THREADS=2 S_ROUNDS=1 S_DURATION=7 S_WARMUP=0 C1_TARGETS= SAMPLE_IN_FLIGHT=1 WRK_TIMEOUT=5
    measure
    print_tables
    echo
    local requests refused served peak
    requests=$(get load gateway requests) refused=$(get load gateway s429)
    served=$(awk -v r="$(get load gateway expected)" -v s=7 'BEGIN { printf "%.0f", r / s }')
    peak=$(get load gateway hwm)
    figure "reviews answered 200 per second (cap 100, webhook 1 s)" "$served" "≈ 100" "(reference)"
    figure "answers that were 429 (Retry-After), of all" "$refused of $requests" "—" "(reference)"
    figure "answers neither 200 allowed nor 429, of all" "$(($(get load gateway other) - refused)) of $requests" "0" \
        "$(verdict "$(($(get load gateway other) - refused))" le 0)"
    figure "gateway calls in flight at the webhook, sampled" "$(get load gateway in_flight)" "≤ 100" "$(verdict "$(get load gateway in_flight)" le 100)"
    figure "gateway peak RSS under the flood / idle" "$peak / $idle MiB" "≤ 200 MiB" "$(verdict "$peak" le 200)"
    gateway_log_note gateway
    result gateway nginx direct load
}

# recorded NAME RESULT: the gateway's admission_gateway_recorded_reviews_total{result=RESULT}.
recorded() {
    curl -s "http://${GW_METRICS[$1]}/metrics" |
        awk -v s="admission_gateway_recorded_reviews_total{result=\"$2\"}" '$1 == s { print $2; f = 1 } END { if (!f) print 0 }'
}

scenario_recording() {
    TITLE="recording (serve --record): one validating webhook (allows), the same gateway build three times in one run: recording off, on, and on with a slow disk (the test-only --record-write-delay 2ms: at most ~500 lines/s, so the queue fills and entries are dropped)"
    start_mock "/allow=allow"
    start_nginx
    { configuration ValidatingWebhookConfiguration loadtest
      webhook name=allow.loadtest.example.com url="https://$MOCK/allow"; } > "$WORK/fleet.yaml"
    start_gateway off "$WORK/fleet.yaml"
    start_gateway on "$WORK/fleet.yaml" "" --record "$WORK/recording-on"
    start_gateway slow "$WORK/fleet.yaml" "" --record "$WORK/recording-slow" --record-write-delay 2ms
    local b
    b=$(body 10k $PAD)
    target direct "direct (mock /allow)" "https://$MOCK/allow" "$b" "" "$ALLOWED"
    target nginx "nginx -> mock" "https://$NGINX/allow" "$b" "$NGINX_PIDS" "$ALLOWED"
    target off "gateway, recording off" "https://${GW_ADDR[off]}/validate?timeout=10s" "$b" "${GW_PID[off]}" "$ALLOWED"
    target on "gateway, recording on" "https://${GW_ADDR[on]}/validate?timeout=10s" "$b" "${GW_PID[on]}" "$ALLOWED"
    target slow "gateway, recording, slow disk" "https://${GW_ADDR[slow]}/validate?timeout=10s" "$b" "${GW_PID[slow]}" "$ALLOWED"
    measure
    print_tables
    echo
    # on: every review recorded, the target; slow: only the writer's queue limits it (a disk
    # slower than the reviews), what that costs the reviews and how many entries it drops.
    local name lost throughput
    for name in on slow; do
        throughput=$(ratio "$(get load "$name" rps)" "$(get load off rps)")
        lost=$(($(recorded "$name" dropped) + $(recorded "$name" failed)))
        if [ "$name" = on ]; then
            figure "recording on/off: throughput, every review recorded" "${throughput}×" "≥ 0.9×" "$(verdict "$throughput" ge 0.9)"
        else
            figure "recording slow/off: throughput, the writer's queue the limit" "${throughput}×" "—" "(reference)"
        fi
        figure "recording $name/off: p50 / p99, c=$CONNS" \
            "$(ratio "$(get load "$name" p50)" "$(get load off p50)")× / $(ratio "$(get load "$name" p99)" "$(get load off p99)")×" "—" "(reference)"
        figure "recording $name/off: p50 / p99, c=1" \
            "$(ratio "$(get c1 "$name" p50)" "$(get c1 off p50)")× / $(ratio "$(get c1 "$name" p99)" "$(get c1 off p99)")×" "—" "(reference)"
        figure "recording $name: CPU per review over off" "+$(minus "$(get load "$name" front_us)" "$(get load off front_us)") µs" "—" "(reference)"
        if [ "$name" = on ]; then
            figure "recording on: written / dropped / failed" "$(recorded on written) / $(recorded on dropped) / $(recorded on failed)" \
                "0 dropped or failed" "$(verdict "$lost" le 0)"
        else
            figure "recording slow: written / dropped / failed" "$(recorded slow written) / $(recorded slow dropped) / $(recorded slow failed)" "—" "(reference)"
        fi
    done
    figure "answers not 200 allowed (off, on, slow)" "$(get load off other), $(get load on other), $(get load slow other)" "0" \
        "$(verdict "$(($(get load off other) + $(get load on other) + $(get load slow other)))" le 0)"
    echo "  recording directories after the run: on $(du -sh "$WORK/recording-on" | cut -f1) ($(find "$WORK/recording-on" -name 'reviews-*' | wc -l) files), slow $(du -sh "$WORK/recording-slow" | cut -f1)"
    gateway_log_note on
    gateway_log_note slow
    result on nginx direct
}

# labelled_body N: a Pod review with N labels (policy-size).
labelled_body() {
    local out=$WORK/body-labels-$1.json
    [ -f "$out" ] || python3 - "$BASE_REVIEW" "$out" "$1" << 'EOF'
import json, sys
source, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
review = json.load(open(source))
review["request"]["object"]["metadata"]["labels"] = {"label-%05d" % i: "v%d" % i for i in range(n)}
json.dump(review, open(out, "w"), separators=(",", ":"))
EOF
    echo "$out"
}

scenario_policy-size() {
    local expression="object.metadata.labels.all(k, object.metadata.labels[k] != '')"
    TITLE="a ValidatingAdmissionPolicy, $expression, over a Pod of 3,200 labels: the gateway with the policy and without it (the evaluation's CPU is the difference), against upstream's own plugin (k8s.io/apiserver 0.36.4 in process, tests/oracle) on the same review"
    start_mock "/allow=allow"
    start_nginx
    mkdir -p "$WORK/policy-fleet"
    { configuration ValidatingWebhookConfiguration loadtest
      webhook name=allow.loadtest.example.com url="https://$MOCK/allow"; } > "$WORK/fleet.yaml"
    cp "$WORK/fleet.yaml" "$WORK/policy-fleet/fleet.yaml"
    cat > "$WORK/policy-fleet/policy.yaml" << EOF
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: labels-not-empty
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["pods"]}
  validations:
  - expression: "$expression"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: labels-not-empty
spec:
  policyName: labels-not-empty
  validationActions: [Deny]
EOF
    start_gateway without "$WORK/fleet.yaml"
    start_gateway policy "$WORK/policy-fleet"
    local big small
    big=$(labelled_body 3200) small=$(labelled_body 10)
    target direct "direct (mock /allow), 3,200 labels" "https://$MOCK/allow" "$big" "" "$ALLOWED"
    target nginx "nginx -> mock, 3,200 labels" "https://$NGINX/allow" "$big" "$NGINX_PIDS" "$ALLOWED"
    target without "gateway, no policy, 3,200 labels" "https://${GW_ADDR[without]}/validate?timeout=10s" "$big" "${GW_PID[without]}" "$ALLOWED"
    target policy "gateway, policy, 3,200 labels" "https://${GW_ADDR[policy]}/validate?timeout=10s" "$big" "${GW_PID[policy]}" "$ALLOWED"
    target small "gateway, policy, 10 labels" "https://${GW_ADDR[policy]}/validate?timeout=10s" "$small" "${GW_PID[policy]}" "$ALLOWED"
    CONNS=8
    measure
    print_tables
    echo
    # Upstream's plugin on the same review and policy, in process: its CPU per Validate call.
    bash "$ROOT/tests/provision/provision.sh" oracle > "$WORK/logs/oracle-provision.log" 2>&1 \
        || die "provisioning the oracle failed ($WORK/logs/oracle-provision.log)"
    local oracle upstream_us gateway_us
    oracle=$(cat "${ADMISSION_GATEWAY_CACHE:-$HOME/.cache/admission-gateway}/oracle-current")
    printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n' \
        "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["request"]["namespace"])' "$big")" > "$WORK/namespace.yaml"
    "$oracle" --review "$big" --bench 200 "$WORK/policy-fleet/policy.yaml" "$WORK/namespace.yaml" > "$WORK/oracle.json" \
        || die "the oracle failed on the review"
    grep -q '"allowed": true' "$WORK/oracle.json" || die "upstream did not allow the review: $(cat "$WORK/oracle.json")"
    upstream_us=$(python3 -c 'import json,sys; print("%.0f" % (json.load(open(sys.argv[1]))["cpuNanosPerCall"] / 1000))' "$WORK/oracle.json")
    gateway_us=$(minus "$(get load policy front_us)" "$(get load without front_us)")
    figure "policy evaluation CPU per review, 3,200 labels (policy − no policy)" "$gateway_us µs" "—" "(reference)"
    figure "upstream plugin CPU per Validate, same review" "$upstream_us µs" "—" "(reference)"
    figure "gateway / upstream CPU per evaluation" "$(ratio "$gateway_us" "$upstream_us")×" "≤ 1.0" "$(verdict "$(ratio "$gateway_us" "$upstream_us")" le 1.0)"
    figure "small review beside it (10 labels): p99 at c=$CONNS" "$(awk -v p="$(get load small p99)" 'BEGIN { printf "%.2f ms", p / 1000 }')" "—" "(reference)"
    local bad=$(($(get load policy other) + $(get load small other) + $(get load without other)))
    figure "answers not 200 allowed" "$bad" "0" "$(verdict "$bad" le 0)"
    gateway_log_note policy
    result policy nginx direct
}

# --- main -----------------------------------------------------------------------------------
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
STARTED=$(date +%s)
: > "$WORK/figures"
: > "$WORK/results"
for SCENARIO in "${SCENARIOS[@]}"; do
    reset_scenario
    TITLE=
    log "scenario $SCENARIO"
    "scenario_$SCENARIO" > "$WORK/report" || die "scenario $SCENARIO failed"
    echo
    echo "=== $SCENARIO: $TITLE"
    echo "    wrk -t$WRK_THREADS, POST over keep-alive HTTPS; every target in turn, $S_ROUNDS rounds; mock ${MOCK}, nginx ${NGINX:-}, load average now $(cut -d' ' -f1-3 /proc/loadavg)"
    cat "$WORK/report"
done
stop_all
ELAPSED=$(($(date +%s) - STARTED))

NGINX_VERSION=$("$NGINX_BIN" -v 2>&1 | sed 's#.*/##' || true)
WRK_VERSION=$( (wrk -v 2>&1 || true) | head -1 | awk '{ print $2 }')
MACHINE="$(nproc) cores ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), $(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), Linux $(uname -r); nginx $NGINX_VERSION, wrk $WRK_VERSION; wrk, nginx, gateway and mock share the cores; load average before $LOAD_BEFORE, after $(cut -d' ' -f1-3 /proc/loadavg)"

if [ ${#SCENARIOS[@]} -gt 1 ]; then
    echo
    echo "=== summary ($ELAPSED s) — $MACHINE"
    awk -F'|' '{ printf "  %-16s %-58s %-30s target %-16s %s\n", $1, $2, $3, $4, $5 }' "$WORK/figures"
    echo
    awk -F'|' '{ printf "  %-16s %s\n", $1, $2 }' "$WORK/results"
fi

# Every scenario of the suite in this run: the results section is written anew; fewer: only
# their rows are replaced, with a line saying which run measured them.
ALL_RUN=1
for scenario in "${ALL_SCENARIOS[@]}"; do
    [[ " ${SCENARIOS[*]} " == *" $scenario "* ]] || ALL_RUN=
done

if [ -n "$WRITE_README" ] && [ -z "$ALL_RUN" ]; then
    grep -q '^<!-- results: written by' "$README" || die "$README has no results section to update"
    sed -n 's/^\([^|]*\)|result: gateway\/nginx throughput=\([^ ]*\) p99=\([^;]*\); added p50=\([^ ]*\)_us p99=\([^ ]*\)_us$/| `\1` | \2× | \3× | \4 µs | \5 µs |/p' \
        "$WORK/results" > "$WORK/readme-results"
    awk -F'|' '{ printf "| `%s` | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }' "$WORK/figures" > "$WORK/readme-figures"
    names=$(printf '`%s`, ' "${SCENARIOS[@]}")
    names=${names%, }
    # The knobs this run changed from their defaults, named with it.
    knobs=
    [ "$ROUNDS" = 3 ] || knobs+="ROUNDS=$ROUNDS "
    [ "$DURATION" = 2 ] || knobs+="DURATION=$DURATION "
    [ "$C1_DURATION" = 1 ] || knobs+="C1_DURATION=$C1_DURATION "
    [ "$WARMUP" = 1 ] || knobs+="WARMUP=$WARMUP "
    [ "$CONNECTIONS" = 32 ] || knobs+="CONNECTIONS=$CONNECTIONS "
    [ "$THREADS" = 1 ] || knobs+="THREADS=$THREADS "
    echo "Rows of $names: measured $(date -u '+%Y-%m-%d %H:%M UTC') at \`$(git rev-parse --short HEAD 2> /dev/null || echo '?')\`$(git diff --quiet HEAD -- src 2> /dev/null || echo ' (src/ modified)') in ${ELAPSED} s by \`${knobs}loadtest/compare.sh $ARGS\`, on $MACHINE." \
        > "$WORK/readme-provenance"
    python3 - "$README" "$WORK/readme-results" "$WORK/readme-figures" "$WORK/readme-provenance" "$names" "${SCENARIOS[@]}" << 'EOF_PY'
import sys
readme, results, figures, provenance, names, scenarios = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]
lines = open(readme).read().split("\n")
begin = next(i for i, line in enumerate(lines) if line.startswith("<!-- results: written by"))
end = next(i for i, line in enumerate(lines) if i > begin and line.startswith("<!-- results: end -->"))
section = lines[begin:end]
ours = tuple("| `%s` |" % name for name in scenarios)
new_rows = [open(results).read().splitlines(), open(figures).read().splitlines()]
out, table, replaced = [], -1, False
for line in section:
    if line.startswith("| scenario |"):
        table, replaced = table + 1, False
    elif line.startswith("Rows of " + names + ":"):
        continue  # the same scenarios' rows, measured before
    elif line.startswith(ours):
        if not replaced and 0 <= table < 2:
            out.extend(new_rows[table])
            new_rows[table], replaced = [], True
        continue
    elif line == "" and 0 <= table < 2 and new_rows[table] and out and out[-1].startswith("|"):
        out.extend(new_rows[table])  # scenarios that had no rows: at the end of the table
        new_rows[table] = []
    out.append(line)
# After the run that measured the rest: the lines of other partial runs, then this one's.
measured = next(i for i, line in enumerate(out) if line.startswith("Measured "))
after = measured + 1
while after < len(out) and (out[after] == "" or out[after].startswith("Rows of ")):
    after += 1
kept = [line for line in out[measured + 1:after] if line.startswith("Rows of ")]
paragraphs = []
for line in kept + [open(provenance).read().strip()]:
    paragraphs += ["", line]
out[measured + 1:after] = paragraphs + [""]
open(readme, "w").write("\n".join(lines[:begin] + out + lines[end:]))
EOF_PY
    log "wrote the rows of $names into $README"
fi

if [ -n "$WRITE_README" ] && [ -n "$ALL_RUN" ]; then
    {
        echo "<!-- results: written by \`loadtest/compare.sh $ARGS\`; do not edit by hand -->"
        echo
        echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') at \`$(git rev-parse --short HEAD 2> /dev/null || echo '?')\`$(git diff --quiet HEAD -- src 2> /dev/null || echo ' (src/ modified)') in ${ELAPSED} s on $MACHINE."
        echo
        echo "| scenario | gateway/nginx throughput | gateway/nginx p99 | added p50 | added p99 |"
        echo "| --- | --- | --- | --- | --- |"
        sed -n 's/^\([^|]*\)|result: gateway\/nginx throughput=\([^ ]*\) p99=\([^;]*\); added p50=\([^ ]*\)_us p99=\([^ ]*\)_us$/| `\1` | \2× | \3× | \4 µs | \5 µs |/p' "$WORK/results"
        echo
        echo "| scenario | figure | measured | target | |"
        echo "| --- | --- | --- | --- | --- |"
        awk -F'|' '{ printf "| `%s` | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }' "$WORK/figures"
        echo
        echo "<!-- results: end -->"
    } > "$WORK/readme-results"
    grep -q '^<!-- results: written by' "$README" || die "$README has no results section to replace"
    awk -v new="$WORK/readme-results" '
        /^<!-- results: written by/ { while ((getline line < new) > 0) print line; skip = 1; next }
        skip && /^<!-- results: end -->/ { skip = 0; next }
        !skip { print }' "$README" > "$WORK/README.md"
    cp "$WORK/README.md" "$README"
    log "wrote the results into $README"
fi

if [ ${#SCENARIOS[@]} -gt 1 ]; then
    # The headline, last: mutate-1's if it ran, else the last scenario's.
    line=$(awk -F'|' '$1 == "mutate-1" { print $2 }' "$WORK/results")
    echo
    echo "${line:-$(tail -1 "$WORK/results" | cut -d'|' -f2)}"
fi
