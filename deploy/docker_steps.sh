#!/usr/bin/env bash
# deploy/Dockerfile's steps without Docker (it was not available on the development machine): a fresh
# venv, the image's `pip install -r requirements.txt`, the files it copies, its start command (on
# 127.0.0.1 here, not 0.0.0.0), its HEALTHCHECK command; then stops. Exit status 0 when healthy.
#   bash deploy/docker_steps.sh [WORKDIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$(mktemp -d)}"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --retries 2 --timeout 60 -r "$root/requirements.txt"
mkdir -p "$work/app"
cp -r "$root/app.py" "$root/pyproject.toml" "$root/README.md" "$root/.streamlit" "$root/lpos" "$root/pages" \
      "$root/checkpoints" "$work/app/"
"$work/venv/bin/python" -c "import torch; assert not torch.version.cuda, torch.version.cuda; print('torch', torch.__version__)"
port=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
cd "$work/app"
STREAMLIT_SERVER_HEADLESS=true STREAMLIT_BROWSER_GATHER_USAGE_STATS=false \
  "$work/venv/bin/streamlit" run app.py --server.address=127.0.0.1 --server.port="$port" >"$work/streamlit.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 120); do  # the HEALTHCHECK's command, until it passes (start-period)
  if "$work/venv/bin/python" -c "import urllib.request, sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:$port/_stcore/health', timeout=2).status != 200)" 2>/dev/null; then
    echo "healthy: http://127.0.0.1:$port/_stcore/health"; exit 0
  fi
  sleep 1
done
echo "not healthy after 120 s: $work/streamlit.log"; tail -20 "$work/streamlit.log"; exit 1
