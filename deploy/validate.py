"""Checks of deploy/ that need Python (run by deploy/validate.sh inside its virtualenv).

  validate.py kubernetes VERSION... -- RENDERED.yaml...   every document of kustomize's output
      against the Kubernetes schemas (kubernetes-validate, strict) or, for the Prometheus
      Operator's ServiceMonitor, deploy/kubernetes/schemas/servicemonitor.schema.json; then
      what the schemas cannot say: the pods' security context, a grace period that covers the
      drain, and for the Redis overlay a shared store and at least two replicas.
  validate.py compose DIR   compose.yaml (interpolated from .env.example) against the Compose
      specification (compose-spec), and its companions: the replicas alike, every file it
      mounts present, Prometheus and nginx pointing at the replicas, Grafana's provisioning.

Exits 1 with every problem found, one per line.
"""

import json
import pathlib
import re
import sys
import tomllib

import yaml

problems = []


def problem(where, message):
    problems.append(f"{where}: {message}")


# === Kubernetes ===


def kubernetes(versions, files):
    import jsonschema
    import kubernetes_validate

    schemas = pathlib.Path(__file__).parent / "kubernetes" / "schemas"
    custom = {
        ("monitoring.coreos.com/v1", "ServiceMonitor"): json.loads(
            (schemas / "servicemonitor.schema.json").read_text()
        )
    }
    for path in files:
        documents = [d for d in yaml.safe_load_all(pathlib.Path(path).read_text()) if d]
        if not documents:
            problem(path, "renders no document")
        for doc in documents:
            where = f"{path}: {doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
            schema = custom.get((doc.get("apiVersion"), doc.get("kind")))
            if schema is not None:
                for error in jsonschema.Draft202012Validator(schema).iter_errors(doc):
                    problem(where, f"{'/'.join(map(str, error.path))}: {error.message}")
                continue
            for version in versions:
                try:
                    kubernetes_validate.validate(doc, version, strict=True)
                except kubernetes_validate.ValidationError as error:
                    problem(where, f"Kubernetes {version}: {error.message}")
                except kubernetes_validate.SchemaNotFoundError:
                    problem(where, f"no schema in Kubernetes {version} (nor one of ours)")
        semantics(path, documents)


def semantics(path, documents):
    """What the schemas cannot check: hardening, the drain, the store replicas share."""
    by_kind = {}
    for doc in documents:
        by_kind.setdefault(doc["kind"], []).append(doc)
    for deployment in by_kind.get("Deployment", []):
        name = deployment["metadata"]["name"]
        pod = deployment["spec"]["template"]["spec"]
        where = f"{path}: Deployment/{name}"
        if pod.get("securityContext", {}).get("seccompProfile", {}).get("type") != "RuntimeDefault":
            problem(where, "the pod's seccompProfile is not RuntimeDefault")
        for container in pod["containers"]:
            context = container.get("securityContext", {})
            if context.get("runAsNonRoot") is not True:
                problem(where, f"{container['name']}: runAsNonRoot is not true")
            if context.get("readOnlyRootFilesystem") is not True:
                problem(where, f"{container['name']}: readOnlyRootFilesystem is not true")
            if context.get("allowPrivilegeEscalation") is not False:
                problem(where, f"{container['name']}: allowPrivilegeEscalation is not false")
            if context.get("capabilities", {}).get("drop") != ["ALL"]:
                problem(where, f"{container['name']}: capabilities do not drop ALL")
    gateway = next(
        (d for d in by_kind.get("Deployment", []) if d["metadata"]["name"] == "switchyard"), None
    )
    if gateway is None:
        problem(path, "no Deployment/switchyard")
        return
    config = gateway_config(path, gateway, by_kind.get("ConfigMap", []))
    if config is None:
        return
    drain(path, gateway, config)
    if "overlays/redis" in path or "redis" in pathlib.Path(path).stem:
        shared(path, gateway, config, by_kind)


def gateway_config(path, gateway, config_maps):
    """The switchyard.toml of the ConfigMap the gateway's pods mount."""
    volumes = gateway["spec"]["template"]["spec"].get("volumes", [])
    names = [v["configMap"]["name"] for v in volumes if "configMap" in v]
    for config_map in config_maps:
        if config_map["metadata"]["name"] in names:
            try:
                return tomllib.loads(config_map["data"]["switchyard.toml"])
            except (KeyError, tomllib.TOMLDecodeError) as error:
                problem(path, f"ConfigMap {config_map['metadata']['name']}: {error}")
                return None
    problem(path, f"the ConfigMap the gateway mounts ({names}) is not rendered")
    return None


def drain(path, gateway, config):
    """terminationGracePeriodSeconds covers the preStop pause, the calls' grace and the 5 s
    upstream sessions get to close (src/main.rs, CLOSE_GRACE)."""
    pod = gateway["spec"]["template"]["spec"]
    container = pod["containers"][0]
    pause = 0
    command = container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command")
    if command and command[-2:][0].endswith("sleep"):
        pause = int(command[-1])
    grace = config.get("server", {}).get("shutdown_grace_seconds", 10)
    needed = pause + grace + 5
    period = pod.get("terminationGracePeriodSeconds", 30)
    if period < needed:
        problem(
            path,
            f"terminationGracePeriodSeconds {period} < preStop {pause} + "
            f"shutdown_grace_seconds {grace} + 5",
        )
    rolling = gateway["spec"].get("strategy", {}).get("rollingUpdate", {})
    if rolling.get("maxUnavailable") not in (0, "0%"):
        problem(path, "a rolling update may take a pod away before its successor is ready")


def shared(path, gateway, config, by_kind):
    """The Redis overlay: a shared store, and replicas that use it."""
    store = config.get("store", {})
    if store.get("kind") != "redis":
        problem(path, f"[store] kind is {store.get('kind')!r}, not \"redis\"")
    if gateway["spec"].get("replicas", 1) < 2:
        problem(path, "fewer than 2 replicas")
    for hpa in by_kind.get("HorizontalPodAutoscaler", []):
        if hpa["spec"].get("minReplicas", 1) < 2:
            problem(path, "the autoscaler may go below 2 replicas")
    host = re.match(r"redis://([^:/]+)", store.get("url", ""))
    services = [s["metadata"]["name"] for s in by_kind.get("Service", [])]
    if not host or host.group(1) not in services:
        problem(path, f"[store] url {store.get('url')!r} names no rendered Service")


# === Compose ===


def compose(directory):
    import compose_spec

    directory = pathlib.Path(directory)
    env = {}
    for line in (directory / ".env.example").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            env[name] = value
    text = (directory / "compose.yaml").read_text()

    def interpolate(match):
        name, operator, argument = match.group(1), match.group(2), match.group(3)
        if name in env:
            return env[name]
        if operator == ":-":
            return argument
        problem("compose.yaml", f"${{{name}}} is set neither in .env.example nor by a default")
        return ""

    pattern = r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:[-?])([^}]*))?\}"
    text = re.sub(pattern, interpolate, text)
    try:
        parsed = compose_spec.PyOptions(apply_merge=True).from_yaml(text)
        parsed.validate()
    except ValueError as error:
        problem("compose.yaml", f"not a valid Compose file: {error}")
        return
    spec = parsed.to_dict()
    services = spec["services"]
    gateways = {name: s for name, s in services.items() if name.startswith("gateway-")}
    if len(gateways) < 2:
        problem("compose.yaml", f"{len(gateways)} gateway replicas")
    first = next(iter(gateways.values()))
    for name, service in gateways.items():
        for key in ("image", "command", "environment"):
            if service.get(key) != first.get(key):
                problem("compose.yaml", f"{name}: its {key} differs from the other replicas'")
    mounted(directory, services)
    config = tomllib.loads((directory / "switchyard.toml").read_text())
    companions(directory, gateways, config)


def mounted(directory, services):
    """Every file or folder a service mounts from the repository exists."""
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.get("source") if isinstance(volume, dict) else volume.split(":")[0]
            if source and source.startswith("."):
                if not (directory / source).exists():
                    problem("compose.yaml", f"{name} mounts {source}, which does not exist")


def companions(directory, gateways, config):
    """Prometheus scrapes, nginx balances and the admin listener accepts every replica."""
    names = sorted(gateways)
    admin_port = config["admin"]["listen"].rsplit(":", 1)[1]
    main_port = config["server"]["listen"].rsplit(":", 1)[1]
    prometheus = yaml.safe_load((directory / "prometheus.yml").read_text())
    targets = sorted(
        target
        for job in prometheus["scrape_configs"]
        for static in job.get("static_configs", [])
        for target in static["targets"]
    )
    if targets != [f"{name}:{admin_port}" for name in names]:
        problem("prometheus.yml", f"targets {targets} are not every replica's admin listener")
    if sorted(config["admin"].get("allowed_hosts", [])) != names:
        problem("switchyard.toml", "[admin] allowed_hosts does not name every replica")
    nginx = (directory / "nginx.conf").read_text()
    servers = sorted(re.findall(r"^\s*server\s+([\w.-]+:\d+)\s*;", nginx, re.MULTILINE))
    if servers != [f"{name}:{main_port}" for name in names]:
        problem("nginx.conf", f"upstream servers {servers} are not every replica")
    if "proxy_buffering off" not in nginx:
        problem("nginx.conf", "buffers answers (event streams need proxy_buffering off)")
    provisioning = directory / "grafana" / "provisioning"
    for kind in ("datasources", "dashboards"):
        files = list((provisioning / kind).glob("*.yaml"))
        if not files:
            problem("grafana", f"no {kind} provisioning file")
        for file in files:
            if yaml.safe_load(file.read_text()).get("apiVersion") != 1:
                problem(str(file), "apiVersion is not 1")


def main(argv):
    if argv[:1] == ["kubernetes"] and "--" in argv:
        split = argv.index("--")
        kubernetes(argv[1:split], argv[split + 1 :])
    elif argv[:1] == ["compose"] and len(argv) == 2:
        compose(argv[1])
    else:
        sys.exit(__doc__)
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
