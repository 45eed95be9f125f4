#!/usr/bin/env bash
# Installs the powertools target's pinned dependencies into targets/powertools/.venv.
# Run from anywhere (usually /work/main: `bash targets/powertools/install.sh`).
# Idempotent: when .venv exists and was built from the current requirements.txt, it does nothing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"
req="$here/requirements.txt"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
echo "$want" > "$stamp"
