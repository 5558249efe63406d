#!/usr/bin/env bash
# Run the clickstream example end to end: a `weir up` cluster (started here unless
# BOOTSTRAP is set), sample click events, the Spark pipeline, its results.
#
#   examples/run_clickstream.sh                 # weir up on 127.0.0.1:9092.. (3 brokers)
#   BOOTSTRAP=host:9092 examples/run_clickstream.sh
#   BROKERS=1 PORT_BASE=0 EVENTS=50000 examples/run_clickstream.sh
#
# Variables: BOOTSTRAP, BROKERS (3), PORT_BASE (9092; 0 = free ports), WEIR_DATA_DIR
# (examples/.weir-data), EVENTS (20000), OUTPUT (examples/output), KEEP_CLUSTER (0: a
# cluster started here is stopped at the end).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
WEIR="$(dirname "$PY")/weir"
DATA_DIR="${WEIR_DATA_DIR:-$HERE/.weir-data}"
OUTPUT="${OUTPUT:-$HERE/output}"
BROKERS="${BROKERS:-3}"
export PYSPARK_PYTHON="$PY" PYSPARK_DRIVER_PYTHON="$PY"

started=0
if [ -z "${BOOTSTRAP:-}" ]; then
  "$WEIR" up --detach --brokers "$BROKERS" --port-base "${PORT_BASE:-9092}" \
    --data-dir "$DATA_DIR"
  started=1
  BOOTSTRAP="$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["bootstrap"])' \
    "$DATA_DIR/cluster.json")"
fi
cleanup() {
  if [ "$started" = 1 ] && [ "${KEEP_CLUSTER:-0}" != 1 ]; then
    "$WEIR" down --data-dir "$DATA_DIR" || true
  fi
}
trap cleanup EXIT

replication=$(( BROKERS < 3 ? BROKERS : 3 ))
echo "== producing sample clicks into $BOOTSTRAP"
"$PY" "$HERE/clickstream/produce_clicks.py" --bootstrap "$BOOTSTRAP" \
  --events "${EVENTS:-20000}" --replication "$replication"
echo "== running the Spark pipeline (results under $OUTPUT)"
"$PY" "$HERE/clickstream/pipeline.py" --bootstrap "$BOOTSTRAP" --output "$OUTPUT"
