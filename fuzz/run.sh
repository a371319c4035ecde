#!/usr/bin/env bash
# Runs every fuzz target (or the ones named) for SECONDS each (default 30), one after another,
# on one core:   bash fuzz/run.sh [SECONDS] [TARGET...]
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`); the sanitizer flags it passes are
# nightly-only, which the stable toolchain accepts with RUSTC_BOOTSTRAP=1 (set here). Each run
# starts from the committed seeds (fuzz/corpus/TARGET) and the crashing inputs kept in
# fuzz/regressions/TARGET, and adds what it finds to fuzz/work/TARGET (not committed).
# A crash fails the script with libFuzzer's report; the input is saved under fuzz/artifacts/.
# So does a target that ran no input (libFuzzer's final count of executed units is 0 or absent).
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-30}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(review_decode json_patch config_load go_compat label_selector cel_eval mutating_policy)
export RUSTC_BOOTSTRAP=1
# cargo fuzz has no --locked: fail here instead if fuzz/Cargo.lock is not current.
cargo metadata --locked --format-version 1 >/dev/null
cargo fuzz build
for target in "${targets[@]}"; do
    mkdir -p "work/$target" "regressions/$target"
    log="work/$target.log"
    rm -f fuzz-*.log # -jobs=1: libFuzzer runs in a child process that writes fuzz-0.log
    if cargo fuzz run "$target" "work/$target" "corpus/$target" "regressions/$target" -- \
        -max_total_time="$seconds" -jobs=1 -workers=1 -rss_limit_mb=2048 -print_final_stats=1 \
        >"$log" 2>&1; then
        cat fuzz-*.log >>"$log" 2>/dev/null || true
        # How many inputs ran: -print_final_stats=1's count, else libFuzzer's `Done N runs`.
        runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
        [ -n "$runs" ] || runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -n 1)
        if [ -z "$runs" ] || [ "$runs" -eq 0 ]; then
            tail -n 30 "$log"
            echo "fuzz: $target: FAILED: ran ${runs:-an unknown number of} inputs, expected at least 1" \
                "(stat::number_of_executed_units or 'Done N runs'; full log: fuzz/$log)"
            exit 1
        fi
        echo "fuzz: $target: ${seconds}s, $runs executions, no crash"
    else
        cat fuzz-*.log >>"$log" 2>/dev/null || true
        grep -E -A8 'panicked at|ERROR: (libFuzzer|AddressSanitizer)' "$log" | head -n 40 || tail -n 60 "$log"
        grep -E '^(Failing input:|\s+artifacts/)' "$log" || true
        echo "fuzz: $target: FAILED (full log: fuzz/$log)"
        exit 1
    fi
done
echo "fuzz: ok"
