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

bash "$repo/tests/provision/provision.sh" oracle
oracle="$(cat "$CACHE/oracle-current")"
echo "== upstream: $("$oracle" --version)"
"$oracle" --review "$review" "$@"
if [ -z "${ORACLE_ONLY:-}" ]; then
    echo "== admission-gateway review --stage validate"
    status=0
    (cd "$repo" && cargo run -q --locked -- review --stage validate --timeout 10s --config "$@" "$review") || status=$?
    # review exits 1 on a denial: an answer, not a failure of this script.
    [ "$status" -le 1 ] || exit "$status"
fi
