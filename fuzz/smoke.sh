#!/usr/bin/env bash
# The fuzz smoke that CI runs: every target for FUZZ_SECONDS (default 20)
# from its committed seed corpus (fuzz/seeds/<target>). New inputs go to a
# scratch directory, so the seeds are the same from run to run. A crash, a
# leak or a failed check in a target fails the script, with the input left
# in fuzz/artifacts/<target>. The long runs are in fuzz/README.md.
#
# Needs a nightly toolchain and cargo-fuzz (.ci/run installs both). Built
# with -O (release, no debug assertions) as the long runs of the connection
# targets are, into TERNIO_FUZZ_TARGET_DIR (default fuzz/target): the build
# takes about 10 CPU minutes cold, so CI keeps it in a cache directory.
set -euo pipefail
cd "$(dirname "$0")"
build=(-O --target-dir "${TERNIO_FUZZ_TARGET_DIR:-target}")

seconds="${FUZZ_SECONDS:-20}"
targets=(frame_decoder packet_decode handshake_responder open_sealed decompress
  server_connection client_frames envelope_decoder)

cargo +nightly fuzz build "${build[@]}"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for target in "${targets[@]}"; do
  mkdir -p "$scratch/$target" "seeds/$target"
  echo "fuzz smoke: $target for ${seconds} s"
  log="$scratch/$target.log"
  if ! cargo +nightly fuzz run "${build[@]}" "$target" "$scratch/$target" "seeds/$target" -- \
      -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz smoke: $target FAILED (the input is in fuzz/artifacts/$target)" >&2
    exit 1
  fi
  grep -E "^stat::number_of_executed_units|^stat::new_units_added" "$log" \
    | sed "s/^/  $target /"
done
