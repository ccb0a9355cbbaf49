#!/usr/bin/env bash
# One sample the way the original shell probe took it, cut to the minimum
# such a probe must run each period: read the Nodes and its own record, fetch
# the local etcd member's metrics page, build the sample and the new window
# with jq, and write it back with a merge patch of the record's one key,
# entry. It measures no connects and no memory: only what the Go probe's
# sample is compared against.
# Inputs (environment): KUBECONFIG, NS, CM (its record, a ConfigMap shaped
# as a probe's), NODE (the host), METRICS, WINDOW, WORK.
set -euo pipefail
cd "$WORK"
kubectl get nodes -o json >nodes.json
kubectl -n "$NS" get configmap "$CM" -o json >cm.json
curl -sS --max-time 5 -o page.txt "$METRICS"
# Files, not arguments: Linux refuses one argument over 128 KiB, which a
# full window passes.
jq -n --rawfile page page.txt --slurpfile nodes nodes.json --slurpfile cm cm.json \
  --arg node "$NODE" --argjson window "$WINDOW" '
  def wanted: test("^etcd_(disk_wal_fsync_duration_seconds|disk_backend_commit_duration_seconds|network_peer_round_trip_time_seconds)_(bucket|sum|count)|^etcd_server_(is_leader|is_learner|has_leader|leader_changes_seen_total|quota_backend_bytes|id)|^etcd_network_active_peers|^etcd_mvcc_db_total_size_in_bytes");
  ($page | split("\n") | map(select(length > 0 and (startswith("#") | not) and wanted)
     | capture("^(?<k>[^ ]+) (?<v>[^ ]+)$") | {(.k): (.v | tonumber)}) | add) as $metrics
  | ($nodes[0].items | map(select(.metadata.labels["node-role.kubernetes.io/etcd"] == "true")
     | {name: .metadata.name, address: .metadata.annotations["etcd.k3s.cattle.io/node-address"]})) as $voters
  | (($cm[0].data // {}).entry // "{\"last\":{},\"samples\":[]}" | fromjson) as $old
  # Counters as what they gained since the last sample (zeros dropped), gauges as they are.
  | ($metrics | with_entries(
       if (.key | test("_(bucket|sum|count|total)(\\{|$)")) then .value -= ($old.last[.key] // 0) else . end)
     | with_entries(select(.value != 0))) as $gained
  | {at: now, connect: ($voters | map(select(.name != $node) | {(.name): .address}) | add), etcd: $gained} as $sample
  | {data: {entry: ({last: $metrics, samples: ($old.samples + [$sample] | .[-$window:])} | tojson)}}
' >patch.json
kubectl -n "$NS" patch configmap "$CM" --type merge --patch-file patch.json >/dev/null
