#!/usr/bin/env bash
# Renders the kustomize base into deploy/fleet-role.yaml, the one file k3s can
# auto-deploy from its manifests directory, and the Helm chart deploy/chart
# from it. Run it after any change to deploy/base; a test fails while they
# differ.
set -euo pipefail
cd "$(dirname "$0")"
{
  echo "# fleet-role, rendered from deploy/base by deploy/render.sh (kubectl kustomize deploy/base)."
  echo "# Do not edit: change deploy/base and run deploy/render.sh. To install on k3s, copy it to"
  echo "# /var/lib/rancher/k3s/server/manifests/ on a server, or kubectl apply --server-side -f it."
  kubectl kustomize base
} >fleet-role.yaml.tmp
mv fleet-role.yaml.tmp fleet-role.yaml
# The install with acting on (deploy/acting): applied instead of
# fleet-role.yaml, never beside it.
{
  echo "# fleet-role with acting on (guided), rendered from deploy/acting by deploy/render.sh (kubectl kustomize deploy/acting)."
  echo "# Do not edit: change deploy/base or deploy/acting and run deploy/render.sh. Apply it in place of fleet-role.yaml:"
  echo "# kubectl apply --server-side -f it (docs/acting.md, \"Turn acting on\")."
  kubectl kustomize acting
} >fleet-role-acting.yaml.tmp
mv fleet-role-acting.yaml.tmp fleet-role-acting.yaml
# The chart: the same objects, the image and the settings made values.
go test ./ -run '^TestChartIsGenerated$' -count=1 -update >/dev/null
