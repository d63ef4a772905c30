#!/usr/bin/env bash
# prof cluster against HTA (tests/cli/cluster_hta.py) with the Python that has HTA: $PORTKIT_HTA_PYTHON,
# else python3. Exit 77 (skipped) when HTA is not importable there.
set -uo pipefail
cd "$(dirname "$0")/../.."
exec "${PORTKIT_HTA_PYTHON:-python3}" tests/cli/cluster_hta.py "${1:?usage: $0 PATH/TO/portkit}"
