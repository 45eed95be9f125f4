#!/usr/bin/env bash
# The hand check of README.md, as one script: a throwaway redis-server and server.py on free
# ports, (a) one POST, (b) the same key again, (c) burst.py 2x50 and 20x20; then both stopped.
# Usage (from /work/main): bash targets/powertools/check.sh   [extra env for server.py, e.g. PT_INPROGRESS_MS=1]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$here/install.sh"
tmp="$(mktemp -d /tmp/pt-check.XXXXXX)"
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
rport=$(free_port); port=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no >"$tmp/redis.log" 2>&1 &
rpid=$!
spid=""
cleanup() { [[ -n "$spid" ]] && kill "$spid" 2>/dev/null; kill "$rpid" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 50); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
export IDEMSIM_DB="$tmp/orders.db"
(cd "$here" && exec env PORT="$port" REDIS_URL="redis://127.0.0.1:$rport" "$@" .venv/bin/python server.py) >"$tmp/server.log" 2>&1 &
spid=$!
for _ in $(seq 100); do curl -sf "127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
post() { curl -s -i -X POST "127.0.0.1:$port/orders" -H 'Authorization: Bearer alice' -H "Idempotency-Key: $1" \
  -H "X-Intent: $1" -H 'Content-Type: application/json' -d '{"sku":"A1","quantity":2}' | tr -d '\r' | grep -Ei '^HTTP|^idempotent-replayed|^\{'; }
python3 --version; cat /proc/loadavg
echo "(a) first";  post "check-$port"
echo "(b) replay"; post "check-$port"
python3 - "$IDEMSIM_DB" "check-$port" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
print("rows for the key:", c.execute("SELECT id, customer, sku, quantity, intent FROM orders WHERE intent = ?", (sys.argv[2],)).fetchall())
EOF
echo "(c) double click"; python3 "$here/burst.py" "$port" 2 50
echo "(c) burst of 20";  python3 "$here/burst.py" "$port" 20 20
cat /proc/loadavg
echo "server stderr:"; cat "$tmp/server.log"
rm -rf "$tmp"
