"""The ferryman chart (charts/ferryman), with the real helm and API server: lint, the schema's and
the templates' refusals, what it renders (security, labels, the pool spec and its hash,
no secret in values or ConfigMaps), and install / upgrade / uninstall on the control plane.

No pod runs on this control plane, so installs here pass --no-hooks (the migrate hook Job would
never finish); tests/k8s/test_chart_e2e.py installs the chart on a node, hooks and all.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.k8s

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "ferryman"
RECOMMENDED = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/part-of",
    "app.kubernetes.io/component",
    "helm.sh/chart",
)
LOCAL_VALUES = CHART / "values-local.yaml"
LOCAL_CLUSTER = ("-f", str(LOCAL_VALUES), "--set", "apiServer.port=6443")


def pool_spec_hash(lanes: str, pool_size: int) -> str:
    """The pool spec's hash (lanes and pool size), written out independently of the chart."""
    return hashlib.sha256(f"lanes={lanes};poolSize={pool_size}".encode()).hexdigest()[:16]


@pytest.fixture
def render(controlplane: Any) -> Callable[..., list[dict[str, Any]]]:
    """`render(*helm_args)`: the chart's objects (hooks included), as dicts."""

    def _render(*args: str) -> list[dict[str, Any]]:
        out = controlplane.helm("template", "fm", str(CHART), "-n", "ns1", *args).stdout
        return [doc for doc in yaml.safe_load_all(out) if doc]

    return _render


def refusal(controlplane: Any, *args: str) -> str:
    """helm template's error for these values (it must fail)."""
    result = controlplane.helm("template", "fm", str(CHART), *args, check=False)
    assert result.returncode != 0, f"helm accepted {args}:\n{result.stdout[:2000]}"
    return result.stderr


def only(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def pod_specs(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for o in objects:
        spec = o.get("spec", {})
        if o["kind"] == "CronJob":
            spec = spec["jobTemplate"]["spec"]
        if "template" in spec:
            yield f"{o['kind']}/{o['metadata']['name']}", spec["template"]["spec"]


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


# -- lint and refusals ----------------------------------------------------------------------------


def test_helm_lint_strict_is_clean(controlplane: Any) -> None:
    for values in ((), LOCAL_CLUSTER):
        result = controlplane.helm("lint", "--strict", str(CHART), *values)
        assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout, result.stdout
        assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (("--set", "worker.lanes=migrations:"), "/worker/lanes"),
        (("--set", "worker.lanes=Migrations:4"), "/worker/lanes"),
        (("--set", "worker.lanes=migrations:0"), "/worker/lanes"),
        (("--set", "worker.lanes=migrations:4;default:2"), "/worker/lanes"),
        (("--set-string", "worker.lanes="), "/worker/lanes"),
        (("--set", "worker.replicas=-1"), "/worker/replicas"),
        (("--set", "worker.poolSize=2"), "/worker/poolSize"),
        (("--set", "database.existingSecret="), "/database/existingSecret"),
        (("--set", "image.pullPolicy=Sometimes"), "/image/pullPolicy"),
        (("--set", "worker.lane=default:1"), "additional properties 'lane' not allowed"),
        (("--set", "operator.allowedSourceURLs={*.example.com}"), "/operator/allowedSourceURLs/0"),
        (
            ("--set", "extraEnv[0].name=FERRYMAN_DATABASE_URL", "--set", "extraEnv[0].value=x"),
            "/extraEnv/0",
        ),
    ],
)
def test_the_schema_refuses_bad_values_naming_the_field(
    controlplane: Any, values: tuple[str, ...], message: str
) -> None:
    error = refusal(controlplane, *values)
    assert "values don't meet the specifications of the schema" in error, error
    assert message in error, error


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            ("--set", "worker.poolSize=12"),
            'worker.poolSize 12 is too small for worker.lanes "migrations:4,critical:2,default:3":'
            " they need 9 connections plus 4 of the worker's own (notifier, poller, cron,"
            " heartbeat); set worker.poolSize to at least 13, or leave it empty",
        ),
        (
            ("--set", "worker.lanes=migrations\\,default:3"),
            'worker.lanes "migrations,default:3" has 1 lane(s) without a thread count, whose'
            " threads come from worker.poolSize, which is empty: set worker.poolSize to at least 8",
        ),
        (
            (
                "--set",
                "worker.lanes=migrations\\,critical:2\\,default",
                "--set",
                "worker.poolSize=7",
            ),
            "worker.poolSize 7 leaves 1 thread(s) for the 2 lane(s) of worker.lanes"
            ' "migrations,critical:2,default" without a thread count (after 4 of the worker\'s own'
            " connections and 2 for the other lanes), and each needs at least 1: set"
            " worker.poolSize to at least 8",
        ),
        (
            ("--set", "worker.lanes=default:1\\,default:2"),
            'worker.lanes "default:1,default:2" names lane "default" twice',
        ),
        (
            ("--set", "worker.terminationGracePeriodSeconds=35"),
            "worker.terminationGracePeriodSeconds 35 must exceed worker.preStopSleepSeconds +"
            " worker.shutdownGrace (35)",
        ),
    ],
)
def test_the_templates_refuse_what_the_schema_cannot_express(
    controlplane: Any, values: tuple[str, ...], message: str
) -> None:
    assert message in refusal(controlplane, *values)


# -- what it renders ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "lanes", "pool_size"),
    [
        ((), "migrations:4,critical:2,default:3", 13),
        (("--set", "worker.lanes= migrations:2\\, default:1 "), "migrations:2, default:1", 7),
        (("--set", "worker.lanes=migrations:2", "--set", "worker.poolSize=20"), "migrations:2", 20),
        (
            (
                "--set",
                "worker.lanes=migrations\\,critical:2\\,default",
                "--set",
                "worker.poolSize=15",
            ),
            "migrations,critical:2,default",
            15,
        ),
    ],
)
def test_the_worker_deployment_and_pool_spec_follow_shared_interface_3(
    render: Callable[..., list[dict[str, Any]]],
    values: tuple[str, ...],
    lanes: str,
    pool_size: int,
) -> None:
    objects = render("--set", "worker.replicas=3", *values)
    [spec_map] = [o for o in objects if o["kind"] == "ConfigMap"]
    assert spec_map["metadata"]["labels"]["ferryman.dev/pool-spec"] == "fm-ferryman"
    given_pool = next((v.split("=")[1] for v in values if v.startswith("worker.poolSize=")), "")
    assert spec_map["data"] == {
        "lanes": lanes,
        "replicas": "3",
        "poolSize": given_pool,
        "operatorConnections": "2",
        "reaperConnections": "2",
        "headroomConnections": "2",
    }
    deployment = only(objects, "Deployment", "fm-ferryman-worker")
    assert deployment["metadata"]["labels"]["ferryman.dev/workers"] == "fm-ferryman"
    assert deployment["metadata"]["namespace"] == spec_map["metadata"]["namespace"] == "ns1"
    assert deployment["spec"]["replicas"] == 3
    template = deployment["spec"]["template"]
    assert template["metadata"]["annotations"]["ferryman.dev/pool-spec-hash"] == pool_spec_hash(
        lanes, pool_size
    )
    [worker] = template["spec"]["containers"]
    assert worker["name"] == "worker" and worker["args"] == ["worker"]
    env = env_of(worker)
    assert env["FERRYMAN_LANES"] == lanes
    assert env["FERRYMAN_POOL_SIZE"] == str(pool_size)
    assert env["FERRYMAN_METRICS_PORT"] == "8000"


def test_every_pod_runs_unprivileged_with_resources_and_the_image(
    render: Callable[..., list[dict[str, Any]]],
) -> None:
    objects = render("--set", "image.tag=1.2.3")
    seen = {}
    for where, spec in pod_specs(objects):
        assert spec["securityContext"]["runAsNonRoot"] is True, where
        assert spec["securityContext"]["runAsUser"] == 10001, where
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert "hostNetwork" not in spec, where
        for container in spec["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, where
            assert context["allowPrivilegeEscalation"] is False, where
            assert context["capabilities"] == {"drop": ["ALL"]}, where
            assert container["image"] == "localhost/ferryman:1.2.3", where
            assert container["resources"]["requests"]["memory"], where
            assert container["resources"]["limits"]["memory"], where
            assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"], where
            seen[where] = container["args"]
    assert seen == {
        "Deployment/fm-ferryman-operator": [
            "operator",
            "--all-namespaces",
            "--liveness-port",
            "8081",
            "--metrics-port",
            "8082",
        ],
        "Deployment/fm-ferryman-worker": ["worker"],
        "CronJob/fm-ferryman-reaper": ["reap"],
        "Job/fm-ferryman-migrate": ["db", "migrate"],
    }


def test_every_object_carries_the_recommended_labels(
    render: Callable[..., list[dict[str, Any]]],
) -> None:
    objects = render()
    assert len(objects) >= 9
    for o in objects:
        labels = o["metadata"]["labels"]
        where = f"{o['kind']}/{o['metadata']['name']}"
        assert all(key in labels for key in RECOMMENDED), (where, labels)
        assert labels["app.kubernetes.io/instance"] == "fm", where
        assert labels["app.kubernetes.io/managed-by"] == "Helm", where
        assert labels["app.kubernetes.io/version"] == "0.1.0", where
    for o in objects:
        if o["kind"] == "Deployment":
            selector = o["spec"]["selector"]["matchLabels"]
            assert selector.items() <= o["spec"]["template"]["metadata"]["labels"].items()
            assert set(selector) == {
                "app.kubernetes.io/name",
                "app.kubernetes.io/instance",
                "app.kubernetes.io/component",
            }


def test_secrets_come_only_from_secret_references(
    render: Callable[..., list[dict[str, Any]]],
) -> None:
    objects = render(
        "--set",
        "database.existingSecret=pg-url",
        "--set",
        "database.secretKey=dsn",
        "--set",
        "sealing.existingSecret=seal",
    )
    assert not [o for o in objects if o["kind"] == "Secret"]
    text = yaml.safe_dump_all(objects)
    assert "postgres" not in text.replace("postgresql", "")  # no URL rendered anywhere
    for where, spec in pod_specs(objects):
        for container in spec["containers"]:
            assert env_of(container)["FERRYMAN_DATABASE_URL"] == {
                "secretKeyRef": {"name": "pg-url", "key": "dsn"}
            }, where
    for o in objects:
        if o["kind"] == "ConfigMap":
            assert not any("url" in key.lower() for key in o["data"]), o["data"]
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert "postgres" not in json.dumps(values)


def test_only_the_operator_and_the_workers_mount_the_sealing_key_and_no_source_secret(
    render: Callable[..., list[dict[str, Any]]],
) -> None:
    objects = render()
    [made] = [o for o in objects if o["kind"] == "Secret"]  # the key, made on install
    assert made["metadata"]["name"] == "fm-ferryman-sealing-key"
    assert made["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    import base64

    from cryptography.fernet import Fernet

    Fernet(base64.b64decode(made["data"]["key"]))  # a valid Fernet key
    mounting = {}
    for where, spec in pod_specs(objects):
        secrets = [v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v]
        mounting[where] = secrets
        for container in spec["containers"]:
            assert not [n for n in env_of(container) if n.startswith("FERRYMAN_CREDENTIAL")]
    assert mounting == {
        "Deployment/fm-ferryman-operator": ["fm-ferryman-sealing-key"],
        "Deployment/fm-ferryman-worker": ["fm-ferryman-sealing-key"],
        "CronJob/fm-ferryman-reaper": [],
        "Job/fm-ferryman-migrate": [],
    }
    worker = only(objects, "Deployment", "fm-ferryman-worker")["spec"]["template"]["spec"]
    [mount] = [m for m in worker["containers"][0]["volumeMounts"] if m["name"] == "sealing-key"]
    assert mount == {
        "name": "sealing-key",
        "mountPath": "/var/run/secrets/ferryman-sealing",
        "readOnly": True,
    }


def test_each_component_may_have_its_own_database_role(
    render: Callable[..., list[dict[str, Any]]],
) -> None:
    objects = render(
        "--set",
        "database.roles.operator=pg-operator",
        "--set",
        "database.roles.migrate=pg-owner",
    )
    secret_of = {
        where: env_of(spec["containers"][0])["FERRYMAN_DATABASE_URL"]["secretKeyRef"]["name"]
        for where, spec in pod_specs(objects)
    }
    assert secret_of == {
        "Deployment/fm-ferryman-operator": "pg-operator",
        "Deployment/fm-ferryman-worker": "ferryman-database",
        "CronJob/fm-ferryman-reaper": "ferryman-database",
        "Job/fm-ferryman-migrate": "pg-owner",
    }


def test_the_network_policy_is_off_by_default_and_lets_workers_reach_only_what_it_lists(
    render: Callable[..., list[dict[str, Any]]], controlplane: Any
) -> None:
    assert not [o for o in render() if o["kind"] == "NetworkPolicy"]
    assert "networkPolicy.databaseEgress" in refusal(
        controlplane, "--set", "networkPolicy.enabled=true"
    )
    objects = render(
        "--set",
        "networkPolicy.enabled=true",
        "--set",
        "networkPolicy.databaseEgress[0].ipBlock.cidr=10.0.5.7/32",
        "--set",
        "networkPolicy.sourceEgress[0].to[0].ipBlock.cidr=203.0.113.0/24",
        "--set",
        "networkPolicy.sourceEgress[0].ports[0].port=443",
    )
    policy = only(objects, "NetworkPolicy", "fm-ferryman-worker")["spec"]
    assert policy["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "worker"
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert [rule.get("to") for rule in policy["egress"]] == [
        [{"ipBlock": {"cidr": "10.0.5.7/32"}}],
        [{"ipBlock": {"cidr": "203.0.113.0/24"}}],
        None,  # DNS: port 53 anywhere
    ]
    assert [p["port"] for p in policy["egress"][2]["ports"]] == [53, 53]


def test_a_plaintext_credential_in_extra_env_is_refused(controlplane: Any) -> None:
    error = refusal(
        controlplane,
        "--set",
        "extraEnv[0].name=FERRYMAN_CREDENTIAL_DEMOCRM_TOKEN__TOKEN",
        "--set",
        "extraEnv[0].value=plaintext",
    )
    assert "extraEnv" in error


def test_the_workers_take_only_sealed_credentials_and_extra_env_cannot_change_it(
    controlplane: Any, render: Callable[..., list[dict[str, Any]]]
) -> None:
    [worker] = only(render(), "Deployment", "fm-ferryman-worker")["spec"]["template"]["spec"][
        "containers"
    ]
    assert env_of(worker)["FERRYMAN_LOCAL_CREDENTIALS"] == "false"
    assert env_of(worker)["FERRYMAN_SOURCE_MAX_RESPONSE_BYTES"] == str(64 * 2**20)
    assert env_of(worker)["FERRYMAN_SOURCE_TIMEOUT"] == "30"
    assert env_of(worker)["FERRYMAN_SOURCE_MAX_PAGES"] == "100000"
    [bounded] = only(render("--set", "worker.sourceMaxPages=500"), "Deployment",
                     "fm-ferryman-worker")["spec"]["template"]["spec"]["containers"]  # fmt: skip
    assert env_of(bounded)["FERRYMAN_SOURCE_MAX_PAGES"] == "500"
    [operator] = only(render(), "Deployment", "fm-ferryman-operator")["spec"]["template"]["spec"][
        "containers"
    ]
    protected = env_of(operator)["FERRYMAN_OPERATOR_PROTECTED_SECRETS"].split(",")
    assert protected == ["ns1/ferryman-database", "ns1/fm-ferryman-sealing-key"]
    error = refusal(
        controlplane,
        "--set",
        "extraEnv[0].name=FERRYMAN_LOCAL_CREDENTIALS",
        "--set",
        "extraEnv[0].value=true",
    )
    assert "extraEnv" in error


def test_the_workers_have_no_api_rights_and_no_token(
    render: Callable[..., list[dict[str, Any]]],
) -> None:
    objects = render()
    account = only(objects, "ServiceAccount", "fm-ferryman-worker")
    assert account["automountServiceAccountToken"] is False
    for where, spec in pod_specs(objects):
        if spec["serviceAccountName"] == "fm-ferryman-worker":
            assert spec["automountServiceAccountToken"] is False, where
    for o in objects:
        if o["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            names = {s["name"] for s in o["subjects"]}
            assert "fm-ferryman-worker" not in names, o["metadata"]["name"]
    operator = only(objects, "Deployment", "fm-ferryman-operator")["spec"]
    assert operator["template"]["spec"]["serviceAccountName"] == "fm-ferryman-operator"
    assert only(objects, "ServiceAccount", "fm-ferryman-operator")


def test_the_operator_runs_alone_and_is_probed(
    render: Callable[..., list[dict[str, Any]]],
) -> None:
    deployment = only(render(), "Deployment", "fm-ferryman-operator")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "liveness"}
    assert container["ports"] == [
        {"name": "liveness", "containerPort": 8081, "protocol": "TCP"},
        {"name": "metrics", "containerPort": 8082, "protocol": "TCP"},
    ]


def test_the_allow_list_of_source_urls_reaches_the_operator_only_when_given(
    render: Callable[..., list[dict[str, Any]]],
) -> None:
    def operator_env(*values: str) -> dict[str, Any]:
        deployment = only(render(*values), "Deployment", "fm-ferryman-operator")
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        return env_of(container)

    assert "FERRYMAN_OPERATOR_ALLOWED_SOURCE_URLS" not in operator_env()
    given = operator_env(
        "--set", "operator.allowedSourceURLs={https://*.hubapi.com,http://10.0.0.7:*}"
    )
    assert (
        given["FERRYMAN_OPERATOR_ALLOWED_SOURCE_URLS"] == "https://*.hubapi.com,http://10.0.0.7:*"
    )


def test_the_defaults_let_mappings_write_only_scoped_tables_of_public(
    render: Callable[..., list[dict[str, Any]]],
) -> None:
    """The operator (at admission) and the workers (before each write) get the same
    destinations; with the defaults, the safe ones."""

    def envs(*values: str) -> list[dict[str, Any]]:
        objects = render(*values)
        found = []
        for name in ("fm-ferryman-operator", "fm-ferryman-worker"):
            [container] = only(objects, "Deployment", name)["spec"]["template"]["spec"][
                "containers"
            ]
            found.append(env_of(container))
        return found

    operator, worker = envs()
    for env, prefix in ((operator, "FERRYMAN_OPERATOR_"), (worker, "FERRYMAN_")):
        assert env[f"{prefix}DESTINATION_SCHEMAS"] == "public"
        assert env[f"{prefix}DESTINATION_TABLES"] == ""
        assert env[f"{prefix}DESTINATION_UNSCOPED"] == "false"
    operator, worker = envs(
        "--set", "destinations.schemas={public,sales}", "--set", "destinations.tables={app.t}"
    )
    assert operator["FERRYMAN_OPERATOR_DESTINATION_SCHEMAS"] == "public,sales"
    assert worker["FERRYMAN_DESTINATION_SCHEMAS"] == "public,sales"
    assert worker["FERRYMAN_DESTINATION_TABLES"] == "app.t"


@pytest.mark.parametrize(
    "value",
    [
        "destinations.tables={public.ferryman_runs}",
        "destinations.schemas={pg_catalog}",
        "destinations.schemas={information_schema}",
        "destinations.schemas={Public}",
    ],
)
def test_the_values_never_let_mappings_write_ferrymans_or_postgresqls_tables(
    controlplane: Any, value: str
) -> None:
    assert "destinations" in refusal(controlplane, "--set", value)


def test_workers_stop_gracefully_and_are_probed(
    render: Callable[..., list[dict[str, Any]]],
) -> None:
    objects = render(
        "--set",
        "worker.shutdownGrace=100",
        "--set",
        "worker.terminationGracePeriodSeconds=120",
        "--set",
        "worker.metricsPort=9100",
    )
    spec = only(objects, "Deployment", "fm-ferryman-worker")["spec"]["template"]["spec"]
    [worker] = spec["containers"]
    assert env_of(worker)["FERRYMAN_SHUTDOWN_GRACE"] == "100"
    assert worker["lifecycle"]["preStop"] == {"sleep": {"seconds": 5}}
    assert spec["terminationGracePeriodSeconds"] == 120
    assert worker["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "health"}
    assert worker["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert worker["ports"] == [{"name": "health", "containerPort": 9100, "protocol": "TCP"}]
    assert env_of(worker)["FERRYMAN_METRICS_PORT"] == "9100"


def test_the_pdb_reaper_and_migrate_hook(render: Callable[..., list[dict[str, Any]]]) -> None:
    objects = render()
    pdb = only(objects, "PodDisruptionBudget", "fm-ferryman-worker")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "worker"
    cron = only(objects, "CronJob", "fm-ferryman-reaper")["spec"]
    assert cron["schedule"] == "*/5 * * * *"
    assert cron["concurrencyPolicy"] == "Forbid"
    assert cron["startingDeadlineSeconds"] == 120
    assert (cron["successfulJobsHistoryLimit"], cron["failedJobsHistoryLimit"]) == (3, 3)
    migrate = only(objects, "Job", "fm-ferryman-migrate")
    hooks = migrate["metadata"]["annotations"]
    assert hooks["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert hooks["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
    assert migrate["spec"]["backoffLimit"] == 2
    assert migrate["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    account = only(objects, "ServiceAccount", "fm-ferryman-migrate")["metadata"]["annotations"]
    assert int(account["helm.sh/hook-weight"]) < int(hooks["helm.sh/hook-weight"])


def test_the_local_values_file_puts_every_pod_on_the_host_network_with_local_images(
    render: Callable[..., list[dict[str, Any]]],
) -> None:
    objects = render(*LOCAL_CLUSTER)
    for where, spec in pod_specs(objects):
        assert spec["hostNetwork"] is True, where
        assert spec["dnsPolicy"] == "ClusterFirstWithHostNet", where
        for container in spec["containers"]:
            env = env_of(container)
            assert env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1", where
            assert env["KUBERNETES_SERVICE_PORT"] == "6443", where
            assert container["imagePullPolicy"] == "Never", where
    assert only(objects, "ConfigMap", "fm-ferryman-pool-spec")["data"]["replicas"] == "1"
    assert only(objects, "Deployment", "fm-ferryman-worker")["spec"]["replicas"] == 1
    # two workers cannot bind one host port: the rollout replaces them one by one
    worker = only(objects, "Deployment", "fm-ferryman-worker")["spec"]["strategy"]
    assert worker["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}


# -- on the API server ----------------------------------------------------------------------------


def test_install_upgrade_and_uninstall_on_the_api_server(
    controlplane: Any, namespace: str, wait_for: Callable[..., Any]
) -> None:
    helm, kubectl = controlplane.helm, controlplane.kubectl
    helm("install", "fm", str(CHART), "-n", namespace, "--no-hooks")
    kinds = "deployment,serviceaccount,configmap,cronjob,poddisruptionbudget"
    names = {
        (o["kind"], o["metadata"]["name"])
        for o in controlplane.kubectl_json(
            "get", kinds, "-n", namespace, "-l", "app.kubernetes.io/instance=fm"
        )["items"]
    }
    assert names == {
        ("Deployment", "fm-ferryman-operator"),
        ("Deployment", "fm-ferryman-worker"),
        ("ServiceAccount", "fm-ferryman-operator"),
        ("ServiceAccount", "fm-ferryman-worker"),
        ("ConfigMap", "fm-ferryman-pool-spec"),
        ("CronJob", "fm-ferryman-reaper"),
        ("PodDisruptionBudget", "fm-ferryman-worker"),
    }
    worker = controlplane.kubectl_json("get", "deployment", "fm-ferryman-worker", "-n", namespace)
    annotations = worker["spec"]["template"]["metadata"]["annotations"]
    assert annotations["ferryman.dev/pool-spec-hash"] == pool_spec_hash(
        "migrations:4,critical:2,default:3", 13
    )

    helm(
        "upgrade",
        "fm",
        str(CHART),
        "-n",
        namespace,
        "--no-hooks",
        "--set",
        "worker.lanes=migrations:6",
    )
    spec_map = controlplane.kubectl_json(
        "get", "configmap", "fm-ferryman-pool-spec", "-n", namespace
    )
    assert spec_map["data"]["lanes"] == "migrations:6"
    worker = controlplane.kubectl_json("get", "deployment", "fm-ferryman-worker", "-n", namespace)
    template = worker["spec"]["template"]
    assert template["metadata"]["annotations"]["ferryman.dev/pool-spec-hash"] == pool_spec_hash(
        "migrations:6", 10
    )
    assert env_of(template["spec"]["containers"][0])["FERRYMAN_POOL_SIZE"] == "10"

    helm("uninstall", "fm", "-n", namespace, "--wait")
    assert json.loads(helm("list", "-n", namespace, "-o", "json").stdout) == []

    def gone() -> bool:
        left = kubectl(
            "get", f"{kinds},replicaset,job,role,rolebinding", "-n", namespace, "-o", "name"
        ).stdout
        # the namespace's own: its default ServiceAccount and the cluster's CA ConfigMap
        cluster = kubectl(
            "get",
            "clusterrole,clusterrolebinding",
            "-l",
            "app.kubernetes.io/instance=fm",
            "-o",
            "name",
        ).stdout
        return not cluster.strip() and set(left.split()) <= {
            "serviceaccount/default",
            "configmap/kube-root-ca.crt",
        }

    wait_for(gone)
    crd = kubectl("get", "crd", "migrationruns.ferryman.dev", check=False)
    if (CHART / "crds").is_dir():  # helm never deletes a chart's CRDs (nor the runs in them)
        assert crd.returncode == 0, crd.stderr


def test_every_value_is_commented_and_known_to_the_schema() -> None:
    """Each key of values.yaml has a comment right above it (Kubernetes' own objects passed
    through as is, like resources, excepted), and the schema describes every key."""
    passthrough = {"resources", "podSecurityContext", "securityContext", "rollingUpdate"}
    lines = (CHART / "values.yaml").read_text().splitlines()
    parents: list[tuple[int, str]] = []
    uncommented = []
    for number, line in enumerate(lines):
        stripped = line.lstrip()
        if not stripped or stripped.startswith(("#", "-")) or ":" not in stripped:
            continue
        indent, key = len(line) - len(stripped), stripped.split(":", 1)[0]
        parents = [(i, k) for i, k in parents if i < indent]
        inside = {k for _, k in parents}
        parents.append((indent, key))
        if inside & passthrough:
            continue
        leaf = stripped.split(":", 1)[1].strip() != ""
        above = lines[number - 1].lstrip() if number else ""
        if leaf and not above.startswith("#"):
            uncommented.append(line)
    assert not uncommented, uncommented

    schema = json.loads((CHART / "values.schema.json").read_text())

    def check(values: dict[str, Any], node: dict[str, Any], path: str) -> None:
        assert node.get("additionalProperties") is False, f"{path or '/'} accepts unknown keys"
        for key, value in values.items():
            assert key in node["properties"], f"{path}/{key} is not in values.schema.json"
            nested = isinstance(value, dict) and node["properties"][key].get("properties")
            if nested and key not in passthrough:
                check(value, node["properties"][key], f"{path}/{key}")

    check(yaml.safe_load((CHART / "values.yaml").read_text()), schema, "")


def test_an_upgrade_over_fields_the_operator_wrote_needs_force_conflicts(
    controlplane: Any, namespace: str
) -> None:
    """helm 4 applies server-side. The operator patches the worker Deployment only when it
    differs from the pool spec, which the chart renders identically, so normally no field is
    the operator's. After a pool spec edited outside helm, the operator's patch owns the fields
    it wrote, and the next upgrade that changes them must force (as the README says). The patch
    below is the operator's, made with kubectl under the Python client's field manager; the
    operator's own tests cover when it patches."""
    helm = controlplane.helm
    helm("install", "fm", str(CHART), "-n", namespace, "--no-hooks")
    annotation = {"ferryman.dev/pool-spec-hash": pool_spec_hash("migrations:5", 9)}
    patch = {"spec": {"template": {"metadata": {"annotations": annotation}}}}
    controlplane.kubectl(
        "patch",
        "deployment",
        "fm-ferryman-worker",
        "-n",
        namespace,
        "--type=strategic",
        "--field-manager=OpenAPI-Generator",
        "-p",
        json.dumps(patch),
    )
    upgrade = ("upgrade", "fm", str(CHART), "-n", namespace, "--no-hooks")
    refused = helm(*upgrade, "--set", "worker.lanes=migrations:6", check=False)
    assert refused.returncode != 0
    assert "conflict" in refused.stderr and "pool-spec-hash" in refused.stderr, refused.stderr
    helm(*upgrade, "--set", "worker.lanes=migrations:6", "--force-conflicts")
    worker = controlplane.kubectl_json("get", "deployment", "fm-ferryman-worker", "-n", namespace)
    assert worker["spec"]["template"]["metadata"]["annotations"][
        "ferryman.dev/pool-spec-hash"
    ] == pool_spec_hash("migrations:6", 10)
    helm("uninstall", "fm", "-n", namespace)
