#!/usr/bin/env bash
# Rebuild the shipped checkpoints and print each run's wall time: one per position scheme (a scheme's name
# may hold a hyphen: rope-partial, p-rope), learned-32 (the learned scheme trained on windows of at most 32
# tokens: SCHEME-L with L a number means --max-length L) and learned-rand (a table of 1,024 rows read at random
# positions: SCHEME-rand means --random-positions 1024).
# Usage: bash checkpoints/rebuild.sh CORPUS_FILE...   (e.g. ../shared/data/*.txt)
# Each run uses one torch thread (a run is bit-identical only for the same thread count), so two
# lanes run side by side on a 2-core machine: learned, rope, none, cope, t5, rope-partial, rnope |
# sinusoidal, alibi, learned-32, fire, learned-rand, p-rope.
# A killed rebuild continues where it stopped when run again: each run resumes from its
# <out>.resume.pt (saved every 100 steps), with exactly the same batches.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: $0 CORPUS_FILE..." >&2; exit 2; }
start=$(date +%s)
lane() {
  for name in "$@"; do
    begun=$(date +%s)
    window=() scheme=$name
    if [[ $name =~ ^(.+)-rand$ ]]; then scheme=${BASH_REMATCH[1]} window=(--random-positions 1024)
    elif [[ $name =~ ^(.+)-([0-9]+)$ ]]; then scheme=${BASH_REMATCH[1]} window=(--max-length "${BASH_REMATCH[2]}"); fi
    python -m lpos train --scheme "$scheme" "${window[@]}" --data "${files[@]}" --out "checkpoints/$name.pt" \
      --steps 1100 --threads 1 --resume --no-progress
    echo "$name trained in $(( $(date +%s) - begun )) s"
  done
}
files=("$@")
lane ${LPOS_LANE_A:-learned rope none cope t5 rope-partial rnope} & a=$!
lane ${LPOS_LANE_B:-sinusoidal alibi learned-32 fire learned-rand p-rope} & b=$!
wait $a && wait $b
echo "rebuilt in $(( $(date +%s) - start )) s"
# what the pages draw from each model and fixed texts: checkpoints/<name>.views.pt (lpos.precomputed), and
# checkpoints/shipped.cards.pt, every model's card without its weights (lpos.checkpoints.cards)
python -m lpos precompute
