#!/usr/bin/env bash
# Installs the third-party clients the interop tests use. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/pip install -q 'rocketmq==0.4.4'
