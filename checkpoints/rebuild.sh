#!/usr/bin/env bash
# Rebuild the five shipped checkpoints, one after another, and print each run's wall time.
# Usage: bash checkpoints/rebuild.sh CORPUS_FILE...   (e.g. ../shared/data/*.txt)
# A killed rebuild continues where it stopped when run again: each run resumes from its
# <out>.resume.pt (saved every 100 steps), with exactly the same batches.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: $0 CORPUS_FILE..." >&2; exit 2; }
start=$(date +%s)
for scheme in ${LPOS_SCHEMES:-learned sinusoidal rope alibi none}; do
  python -m lpos train --scheme "$scheme" --data "$@" --out "checkpoints/$scheme.pt" --steps 1100 --resume
  echo "$scheme done after $(( $(date +%s) - start )) s"
done
echo "rebuilt in $(( $(date +%s) - start )) s"
