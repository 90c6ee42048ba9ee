#!/usr/bin/env python3
"""The Kubernetes manifests, rendered and checked offline. Every overlay of k8s/overlays renders with
`kubectl kustomize` (keys for the Curve component made by the real `warp-indexer keys` in a copy of
k8s/); every rendered object validates against the Kubernetes OpenAPI schemas (kubernetes-models
and @kubernetes-models/prometheus-operator, installed from npm into the build directory: node
tests/k8s/validate.mjs); then cross-checks: every container argument that is a flag is one its
binary accepts (asked with --help), every $(VAR) resolves, every probe's port is a container port
the binary listens on and its path one the binary serves, every Service and monitor selects pods
and names ports they have, every ConfigMap and Secret referenced is defined, each Curve Secret holds
one role's secret key alone, every overlay's broker reads bearer tokens from a mounted Secret, PDBs, HPAs and
NetworkPolicies select what exists, every pod runs hardened (non-root, read-only root, no
privilege escalation, capabilities dropped), the broker names every partition the indexer builds
and each has its leaves, the GPU overlay's leaves ask for a GPU, and the PrometheusRule holds
exactly the groups of the rules file.
usage: k8s_test.py BUILD_DIR SOURCE_DIR"""
import json, os, re, shutil, subprocess, sys, tempfile

build, source = sys.argv[1], os.path.abspath(sys.argv[2])


def fail(message):
    print("FAIL: " + message, file=sys.stderr)
    sys.exit(1)


try:
    import yaml
except ImportError:
    fail("python3-yaml is missing (deploy/install-deps.sh installs it)")
kubectl, npm, node = shutil.which("kubectl"), shutil.which("npm"), shutil.which("node")
if not kubectl:
    fail("kubectl is not installed: the manifests cannot be rendered (kubectl kustomize) on this machine")
if not npm or not node:
    fail("node and npm are needed for the offline schema validation (kubernetes-models)")

binaries = {"warp-indexer": os.path.join(build, "indexer/warp-indexer"), "warp-leaf": os.path.join(build, "leaf/warp-leaf"),
            "warp-broker": os.path.join(build, "broker/warp-broker")}
work = tempfile.mkdtemp(prefix="warp-k8s-")
try:
    tree = os.path.join(work, "k8s")
    shutil.copytree(os.path.join(source, "k8s"), tree, ignore=shutil.ignore_patterns("keys"))
    subprocess.run([binaries["warp-indexer"], "keys", "--out", os.path.join(tree, "components/curve/keys")], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([binaries["warp-indexer"], "signing-key", "--out", os.path.join(tree, "components/generation-signing/keys")],
                   check=True, stdout=subprocess.DEVNULL)
    os.makedirs(os.path.join(tree, "components/search-tokens/tokens"))
    with open(os.path.join(tree, "components/search-tokens/tokens/tokens"), "w") as f:
        f.write("a-search-token\n")
    validator = os.path.join(build, "k8s-validate")
    if not os.path.isdir(os.path.join(validator, "node_modules/@kubernetes-models/prometheus-operator")):
        os.makedirs(validator, exist_ok=True)
        installed = subprocess.run([npm, "install", "--prefix", validator, "--no-audit", "--no-fund", "--silent",
                                    "kubernetes-models@5", "@kubernetes-models/prometheus-operator@5"], capture_output=True, text=True)
        if installed.returncode != 0:
            fail("npm install of the schema packages failed: " + installed.stderr[-500:])
    shutil.copy(os.path.join(source, "tests/k8s/validate.mjs"), validator)

    help_text = {}

    def accepted_flags(binary, subcommand):
        key = (binary, subcommand)
        if key not in help_text:
            args = [binaries[binary]] + ([subcommand] if subcommand else []) + ["--help"]
            out = subprocess.run(args, capture_output=True, text=True)
            help_text[key] = set(re.findall(r"^\s+(--[a-z0-9-]+)", out.stdout + out.stderr, re.M))
            if not help_text[key]:
                fail("%s printed no flags" % " ".join(args))
        return help_text[key]

    rules_file = yaml.safe_load(open(os.path.join(source, "k8s/components/monitoring/warpsearch.rules.yml")))
    overlays = sorted(os.listdir(os.path.join(tree, "overlays")))
    if not {"cpu", "gpu"} <= set(overlays):
        fail("overlays cpu and gpu expected, found %s" % overlays)
    for overlay in overlays:
        rendered = subprocess.run([kubectl, "kustomize", os.path.join(tree, "overlays", overlay)], capture_output=True, text=True)
        if rendered.returncode != 0:
            fail("kubectl kustomize overlays/%s: %s" % (overlay, rendered.stderr))
        objects = [o for o in yaml.safe_load_all(rendered.stdout) if o]
        where = lambda o: "overlays/%s %s/%s" % (overlay, o["kind"], o["metadata"]["name"])
        # 1. Schemas (Secret data as the API server reads it: base64 with line breaks ignored).
        for o in objects:
            if o["kind"] == "Secret":
                o["data"] = {k: "".join(v.split()) for k, v in o.get("data", {}).items()}
        checked = subprocess.run([node, "validate.mjs"], input=json.dumps(objects), capture_output=True, text=True, cwd=validator)
        if checked.returncode != 0:
            fail("schema validation of overlays/%s:\n%s%s" % (overlay, "\n".join(
                l for l in checked.stdout.splitlines() if not l.startswith("valid")), checked.stderr[-500:]))
        by_kind = {}
        for o in objects:
            by_kind.setdefault(o["kind"], []).append(o)
        names = lambda kind: {o["metadata"]["name"] for o in by_kind.get(kind, [])}
        workloads = by_kind.get("Deployment", []) + by_kind.get("StatefulSet", [])
        configmaps = {o["metadata"]["name"]: o.get("data", {}) for o in by_kind.get("ConfigMap", [])}
        secrets = {o["metadata"]["name"]: o.get("data", {}) for o in by_kind.get("Secret", [])}
        selects = lambda selector, labels: all(labels.get(k) == v for k, v in selector.items())
        pods = [(w, w["spec"]["template"]["metadata"].get("labels", {}), w["spec"]["template"]["spec"]) for w in workloads]
        partitions_built, broker_partitions, leaf_partitions = None, [], []
        for w, labels, pod in pods:
            if not selects(w["spec"]["selector"]["matchLabels"], labels):
                fail("%s: its selector does not select its own pods" % where(w))
            security = pod.get("securityContext", {})
            if not security.get("runAsNonRoot") or not security.get("runAsUser"):
                fail("%s: pods must run as a non-root user" % where(w))
            if pod.get("automountServiceAccountToken") is not False:
                fail("%s: pods must not mount a service account token (automountServiceAccountToken: false)" % where(w))
            volumes = {v["name"]: v for v in pod.get("volumes", [])}
            for volume in volumes.values():
                if "emptyDir" in volume and not volume["emptyDir"].get("sizeLimit"):
                    fail("%s: emptyDir %s needs a sizeLimit" % (where(w), volume["name"]))
            egress = [o for o in by_kind.get("NetworkPolicy", []) if "Egress" in o["spec"].get("policyTypes", [])
                      and selects(o["spec"]["podSelector"]["matchLabels"], labels)]
            if not egress or not any(all(p.get("port") == 53 for p in rule.get("ports", [])) and "to" not in rule
                                     for o in egress for rule in o["spec"].get("egress", [])):
                fail("%s: its pods need an egress policy (default deny) that lets DNS through" % where(w))
            for volume in volumes.values():
                if "secret" in volume and volume["secret"]["secretName"] not in secrets:
                    fail("%s: Secret %s is not defined" % (where(w), volume["secret"]["secretName"]))
                if "secret" in volume:
                    for item in volume["secret"].get("items", []):
                        if item["key"] not in secrets[volume["secret"]["secretName"]]:
                            fail("%s: Secret %s has no key %s" % (where(w), volume["secret"]["secretName"], item["key"]))
                if "secret" in volume and volume["secret"]["secretName"].startswith("warpsearch-curve-"):
                    own = [k for k in secrets[volume["secret"]["secretName"]] if k.endswith(".key")]
                    if len(own) != 1:
                        fail("%s: Curve Secret %s holds the secret keys %s: one role's alone expected"
                             % (where(w), volume["secret"]["secretName"], own))
                if "configMap" in volume and volume["configMap"]["name"] not in configmaps:
                    fail("%s: ConfigMap %s is not defined" % (where(w), volume["configMap"]["name"]))
            for c in pod["containers"]:
                sc = c.get("securityContext", {})
                if sc.get("readOnlyRootFilesystem") is not True or sc.get("allowPrivilegeEscalation") is not False or \
                        sc.get("capabilities", {}).get("drop") != ["ALL"]:
                    fail("%s: container %s must have a read-only root, no privilege escalation, all capabilities dropped" % (where(w), c["name"]))
                if not c.get("resources", {}).get("requests") or not c["resources"].get("limits"):
                    fail("%s: container %s needs resource requests and limits" % (where(w), c["name"]))
                if "ephemeral-storage" not in c["resources"]["requests"] or "ephemeral-storage" not in c["resources"]["limits"]:
                    fail("%s: container %s needs ephemeral-storage requests and limits" % (where(w), c["name"]))
                for mount in c.get("volumeMounts", []):
                    if mount["name"] not in volumes and mount["name"] not in {t["metadata"]["name"] for t in w["spec"].get("volumeClaimTemplates", [])}:
                        fail("%s: mount %s has no volume" % (where(w), mount["name"]))
                env = {e["name"] for e in c.get("env", [])}
                for source_ref in c.get("envFrom", []):
                    name = source_ref.get("configMapRef", {}).get("name")
                    if name not in configmaps:
                        fail("%s: envFrom ConfigMap %s is not defined" % (where(w), name))
                    env |= set(configmaps[name])
                binary = c["command"][0]
                if binary not in binaries:
                    fail("%s: unknown binary %s" % (where(w), binary))
                args = [str(a) for a in c.get("args", [])]
                subcommand = args[0] if binary == "warp-indexer" else None
                flags = accepted_flags(binary, subcommand)
                for arg in args:
                    for var in re.findall(r"\$\(([A-Z0-9_]+)\)", arg):
                        if var not in env:
                            fail("%s: argument %s uses $(%s), which no env or ConfigMap defines" % (where(w), arg, var))
                    if arg.startswith("--") and arg not in flags:
                        fail("%s: %s does not accept %s (its --help lists %s)" % (where(w), binary, arg, sorted(flags)))
                value = lambda flag: args[args.index(flag) + 1] if flag in args else None
                if binary == "warp-broker":  # the search API closed by default: tokens from a mounted Secret
                    tokens = value("--auth-tokens")
                    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
                    holder = next((volumes.get(name) for path, name in mounts.items()
                                   if tokens and tokens.startswith(path.rstrip("/") + "/")), None)
                    if not tokens or not holder or "secret" not in holder:
                        fail("%s: the broker needs --auth-tokens from a mounted Secret (overlay %s)" % (where(w), overlay))
                # Generations signed by the indexer and checked by every leaf; the secret key in the
                # indexer's pod alone.
                key_flag = {"warp-indexer": "--signing-key", "warp-leaf": "--generation-key"}.get(binary)
                if key_flag:
                    key_file = value(key_flag)
                    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
                    holder = next((volumes.get(name) for path, name in mounts.items()
                                   if key_file and key_file.startswith(path.rstrip("/") + "/")), None)
                    if not key_file or not holder or "secret" not in holder:
                        fail("%s: %s needs %s from a mounted Secret (overlay %s)" % (where(w), binary, key_flag, overlay))
                    held = secrets[holder["secret"]["secretName"]]
                    if binary == "warp-leaf" and any(k.endswith("generation-signing.key") for k in held):
                        fail("%s: a leaf's Secret holds the generation signing key" % where(w))
                # Curve: the public key of every server the process connects to, in its mounted key folder
                # (a broker with --indexer needs indexer.pub; an indexer with --write broker.pub, its clients).
                curve_dir = value("--curve-keys")
                if curve_dir:
                    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
                    holder = volumes.get(mounts.get(curve_dir.rstrip("/"), ""), {})
                    files = {item["path"] for item in holder.get("secret", {}).get("items", [])}
                    needed = {"warp-broker": {"leaf.pub"} | ({"indexer.pub"} if value("--indexer") else set()),
                              "warp-leaf": {"indexer.pub", "broker.pub"},
                              "warp-indexer": {"leaf.pub"} | ({"broker.pub"} if value("--write") else set())}[binary]
                    if not needed <= files:
                        fail("%s: %s's Curve keys %s lack %s" % (where(w), binary, sorted(files), sorted(needed - files)))
                resolve = lambda text: re.sub(r"\$\(([A-Z0-9_]+)\)", lambda m: next(
                    (cm[m.group(1)] for cm in configmaps.values() if m.group(1) in cm), m.group(0)), text)
                ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
                served = {"warp-leaf": [value("--http")], "warp-broker": [value("--admin-listen") or value("--listen")],
                          "warp-indexer": [value("--metrics")]}[binary]
                http_ports = {int(s.rsplit(":", 1)[1]) for s in served if s}
                listen_flags = {"warp-leaf": ["--listen", "--search-listen", "--http"], "warp-broker": ["--listen", "--admin-listen"],
                                "warp-indexer": ["--publish", "--fetch", "--metrics", "--write", "--tail"]}[binary]
                listening = {int(value(f).rsplit(":", 1)[1]) for f in listen_flags if value(f)}
                for port in ports.values():
                    if port not in listening:
                        fail("%s: container port %d is not one %s listens on (%s)" % (where(w), port, binary, sorted(listening)))
                for probe_name in ("startupProbe", "readinessProbe", "livenessProbe"):
                    probe = c.get(probe_name)
                    if not probe:
                        continue
                    action = probe.get("httpGet") or probe.get("tcpSocket")
                    port = action["port"]
                    number = ports.get(port) if isinstance(port, str) else port
                    if number is None:
                        fail("%s: %s names port %s, which the container does not have" % (where(w), probe_name, port))
                    if "httpGet" in probe:
                        if number not in http_ports:
                            fail("%s: %s on port %d, where %s serves no HTTP" % (where(w), probe_name, number, binary))
                        if probe["httpGet"]["path"] not in ("/healthz", "/readyz"):
                            fail("%s: %s path %s is not served" % (where(w), probe_name, probe["httpGet"]["path"]))
                if binary == "warp-indexer":
                    partitions_built = int(resolve(value("--partitions")))
                if binary == "warp-broker" and value("--indexer") != "tcp://indexer:5603":
                    fail("%s: the broker sends writes to the indexer's write socket (--indexer tcp://indexer:5603)" % where(w))
                if binary == "warp-indexer" and (value("--write") != "tcp://0.0.0.0:5603" or value("--tail") != "tcp://0.0.0.0:5604"):
                    fail("%s: the indexer takes writes on 5603 and serves its log on 5604" % where(w))
                if binary == "warp-broker":
                    broker_partitions = sorted(int(args[i + 1].split("=")[0]) for i, a in enumerate(args) if a == "--partition")
                    for i, a in enumerate(args):
                        if a == "--partition":
                            dns = re.match(r"^\d+=dns:([a-z0-9-]+)\.\$\(POD_NAMESPACE\)\.svc\.cluster\.local:(\d+)$", args[i + 1])
                            if not dns or dns.group(1) not in names("Service"):
                                fail("%s: --partition %s does not name a Service of this namespace" % (where(w), args[i + 1]))
                if binary == "warp-leaf":
                    leaf_partitions.append(int(value("--partitions")))
                    if value("--follow") != "tcp://indexer:5601" or "indexer" not in names("Service"):
                        fail("%s: leaves follow the indexer Service" % where(w))
                    if value("--tail") != "tcp://indexer:5604":  # writes searched before a generation holds them
                        fail("%s: leaves tail the indexer's write log (--tail tcp://indexer:5604)" % where(w))
                    if overlay == "gpu":
                        if c["resources"]["limits"].get("nvidia.com/gpu") != 1 or not pod.get("tolerations") or not pod.get("nodeSelector"):
                            fail("%s: a GPU leaf needs nvidia.com/gpu 1, a toleration and a node selector" % where(w))
                        if resolve(value("--processor")) != "auto":
                            fail("%s: GPU leaves run --processor auto" % where(w))
        if partitions_built is None or broker_partitions != list(range(partitions_built)) or \
                sorted(set(leaf_partitions)) != list(range(partitions_built)):
            fail("overlays/%s: the indexer builds %s partitions, the broker names %s, leaves serve %s" %
                 (overlay, partitions_built, broker_partitions, sorted(set(leaf_partitions))))
        for s in by_kind.get("Service", []):
            matched = [(labels, pod) for _, labels, pod in pods if selects(s["spec"]["selector"], labels)]
            if not matched:
                fail("%s selects no pods" % where(s))
            for port in s["spec"]["ports"]:
                target = port.get("targetPort", port["port"])
                for labels, pod in matched:
                    container_ports = {p.get("name"): p["containerPort"] for c in pod["containers"] for p in c.get("ports", [])}
                    if (isinstance(target, str) and target not in container_ports) or \
                            (isinstance(target, int) and target not in container_ports.values()):
                        fail("%s: targetPort %s is not a port of the pods it selects" % (where(s), target))
        for kind in ("PodDisruptionBudget", "NetworkPolicy", "PodMonitor"):
            for o in by_kind.get(kind, []):
                selector = (o["spec"].get("selector") or o["spec"].get("podSelector"))["matchLabels"]
                if not any(selects(selector, labels) for _, labels, _ in pods):
                    fail("%s selects no pods" % where(o))
        for o in by_kind.get("ServiceMonitor", []):
            services = [s for s in by_kind["Service"] if selects(o["spec"]["selector"]["matchLabels"], s["metadata"].get("labels", {}))]
            if not services or not all(e["port"] in {p["name"] for s in services for p in s["spec"]["ports"]} for e in o["spec"]["endpoints"]):
                fail("%s selects no Service with its endpoint ports" % where(o))
        for o in by_kind.get("HorizontalPodAutoscaler", []):
            if o["spec"]["scaleTargetRef"]["name"] not in names(o["spec"]["scaleTargetRef"]["kind"]):
                fail("%s scales nothing that exists" % where(o))
        for o in by_kind.get("Ingress", []):
            for rule in o["spec"]["rules"]:
                for path in rule["http"]["paths"]:
                    if path["backend"]["service"]["name"] not in names("Service"):
                        fail("%s: backend Service missing" % where(o))
        for o in by_kind.get("PrometheusRule", []):
            if o["spec"]["groups"] != rules_file["groups"]:
                fail("%s differs from warpsearch.rules.yml (run k8s/components/monitoring/generate.py)" % where(o))
        dashboards = [o for o in by_kind.get("ConfigMap", []) if o["metadata"].get("labels", {}).get("grafana_dashboard") == "1"]
        if not dashboards or len(dashboards[0]["data"]) != 3:
            fail("overlays/%s: the three dashboards should be in a ConfigMap labelled grafana_dashboard: \"1\"" % overlay)
        print("k8s_test: overlays/%s: %d objects render, validate and cross-check (%d partitions)" %
              (overlay, len(objects), partitions_built))
    print("k8s_test: all checks passed")
finally:
    shutil.rmtree(work, ignore_errors=True)
