#!/usr/bin/env bash
# One case by hand, through upstream's admission code (the oracle) and through the gateway:
#
#   bash tests/oracle/run-case.sh REVIEW.json CONFIG...
#
# REVIEW.json: an AdmissionReview v1. CONFIG: files or directories of Kubernetes objects (YAML
# or JSON): ValidatingAdmissionPolicies, their bindings, Namespaces, parameter ConfigMaps and
# Secrets, webhook configurations (for their matchConditions). Provisions the oracle first
# (tests/provision/provision.sh oracle: minutes the first time), prints upstream's answer, then
# runs `admission-gateway review --stage validate` on the same files (built with cargo).
# ORACLE_ONLY=1 skips the gateway.
#
# WEBHOOKS=1: the webhook dispatchers instead (the oracle's mode "webhooks", as
# tests/integration/oracle_webhooks.rs runs it): CONFIG holds Mutating/ValidatingWebhookConfigurations
# and Namespaces, whose webhooks both sides really call (clientConfig.url and caBundle: they must
# be listening), and the gateway runs `review --stage admit` (the mutating chain, then the
# validating webhooks). A GatewayConfig in CONFIG is for the gateway only: list it with
# GATEWAY_CONFIG=FILE instead (tests/integration/oracle_webhooks.rs gives it
# `auditPatchAnnotations: true`, `ejectAfterFailures: 0`).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
CACHE="${ADMISSION_GATEWAY_CACHE:-$HOME/.cache/admission-gateway}"

if [ $# -lt 2 ]; then
    echo "usage: bash tests/oracle/run-case.sh REVIEW.json CONFIG..." >&2
    exit 2
fi
review="$1"
shift
[ -f "$review" ] || { echo "run-case: $review: no such file" >&2; exit 2; }

mode=() stage=validate timeout=10s gateway_config=()
if [ -n "${WEBHOOKS:-}" ]; then
    mode=(--webhooks) stage=admit timeout=30s
    [ -z "${GATEWAY_CONFIG:-}" ] || gateway_config=("$GATEWAY_CONFIG")
fi

bash "$repo/tests/provision/provision.sh" oracle
oracle="$(cat "$CACHE/oracle-current")"
echo "== upstream: $("$oracle" --version)"
"$oracle" "${mode[@]}" --review "$review" "$@"
if [ -z "${ORACLE_ONLY:-}" ]; then
    echo "== admission-gateway review --stage $stage"
    status=0
    (cd "$repo" && cargo run -q --locked -- review --stage "$stage" --timeout "$timeout" --config "$@" "${gateway_config[@]}" "$review") || status=$?
    # review exits 1 on a denial: an answer, not a failure of this script.
    [ "$status" -le 1 ] || exit "$status"
fi
