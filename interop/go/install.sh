#!/usr/bin/env bash
# Builds the Go clients of the interop suite (franz-go, sarama, rocketmq-client-go v2; versions pinned
# in go.mod / go.sum) into interop/go/bin/rokka-go.  Called by interop/install.sh.
#
# - Idempotent and fast: nothing runs when bin/rokka-go is newer than every source file, go.mod and go.sum.
# - Fails loudly: no `go`, a module that cannot be downloaded (Go module proxy) or a build error stops
#   the script with a non-zero exit and a line saying so.
set -euo pipefail
cd "$(dirname "$0")"
die() { echo "interop/go/install.sh: ERROR: $*" >&2; exit 1; }

command -v go >/dev/null || die "go is not on PATH (the machine's Go toolchain is needed for franz-go, sarama, rocketmq-client-go)"
BIN=bin/rokka-go
if [ -x "$BIN" ] && [ -z "$(find go.mod go.sum cmd -newer "$BIN" -print -quit)" ]; then
    exit 0
fi
echo "interop/go/install.sh: go build $BIN ($(go version | cut -d' ' -f3))"
mkdir -p bin
GOFLAGS="-mod=readonly -buildvcs=false" go build -o "$BIN.tmp" ./cmd/rokka-go || die "go build failed (see above)"
mv "$BIN.tmp" "$BIN"
("$BIN" </dev/null 2>&1 || true) | grep -q usage || die "$BIN does not run"
