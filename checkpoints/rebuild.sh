#!/usr/bin/env bash
# Rebuild the five shipped checkpoints, one after another, and print the total wall time.
# Usage: bash checkpoints/rebuild.sh CORPUS_FILE...   (e.g. ../shared/data/*.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: $0 CORPUS_FILE..." >&2; exit 2; }
start=$(date +%s)
for scheme in learned sinusoidal rope alibi none; do
  python -m lpos train --scheme "$scheme" --data "$@" --out "checkpoints/$scheme.pt" --steps 500
  echo "$scheme done after $(( $(date +%s) - start )) s"
done
echo "rebuilt all five in $(( $(date +%s) - start )) s"
