// What the chart must render beyond the API's schemas (deploy/helm/test.sh): the paper's affinity rule
// (control plane off GPU nodes, agents on them), probes on /readyz and /healthz, a PodDisruptionBudget
// per service, non-root containers, no service account token but the controller's.
// Usage: node check-rendered.js < rendered.yaml   (prints one line per check, exits 1 on a failure)
'use strict';
const { parseAllDocuments } = require('yaml');
const text = require('node:fs').readFileSync(0, 'utf8');
const docs = parseAllDocuments(text)
  .map((d) => d.toJSON())
  .filter(Boolean);
const gpuKey = process.argv[2] || 'nvidia.com/gpu.present';
let failed = false;
const check = (ok, what) => {
  console.log(`${ok ? 'PASS' : 'FAIL'} chart: ${what}`);
  if (!ok) failed = true;
};
const workloads = docs.filter((d) => ['Deployment', 'StatefulSet', 'DaemonSet'].includes(d.kind));
const component = (d) => d.metadata.labels['app.kubernetes.io/component'];
// The job's own machines (job.workers) run on GPU nodes; everything else but the agents is kept off them.
const jobWorkers = workloads.filter((d) => component(d).startsWith('worker-'));
const controlPlane = workloads.filter((d) => d.kind !== 'DaemonSet' && !jobWorkers.includes(d));
// The job's Ray head is off GPU nodes too, but it is the framework's pod, not one of robustrl's services.
const jobParts = ['ray-head', 'driver'];
const offGpu = (spec) =>
  (spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms ?? []).some((t) =>
    (t.matchExpressions ?? []).some((e) => e.key === gpuKey && e.operator === 'NotIn'),
  );
check(
  controlPlane.length >= 5 && controlPlane.every((d) => offGpu(d.spec.template.spec)),
  `every control-plane workload (${controlPlane.map(component).join(', ')}) is kept off GPU nodes`,
);
const agents = workloads.filter((d) => d.kind === 'DaemonSet');
check(
  agents.every((d) => d.spec.template.spec.nodeSelector?.[gpuKey] !== undefined && d.spec.template.spec.hostIPC === true),
  `the agent DaemonSet runs on GPU nodes only, with the node's IPC namespace (${agents.length})`,
);
const services = controlPlane.filter((d) => !['kafka', 'postgresql', ...jobParts].includes(component(d)));
const probes = (c) => c.readinessProbe?.httpGet?.path === '/readyz' && c.livenessProbe?.httpGet?.path === '/healthz';
check(
  services.filter((d) => component(d) !== 'router').length === 5 && services.every((d) => d.spec.template.spec.containers.every(probes)),
  'every service is probed on /readyz (ready) and /healthz (alive)',
);
check(
  services.every(
    (d) =>
      d.spec.template.spec.securityContext?.runAsNonRoot === true && d.spec.template.spec.containers.every((c) => c.securityContext?.readOnlyRootFilesystem),
  ),
  'services run as non-root on a read-only root filesystem',
);
const pdbs = docs.filter((d) => d.kind === 'PodDisruptionBudget').map((d) => d.metadata.labels['app.kubernetes.io/component']);
check(
  services.every((d) => pdbs.includes(component(d))),
  `a PodDisruptionBudget per service (${pdbs.join(', ')})`,
);
const tokens = services.filter((d) => d.spec.template.spec.automountServiceAccountToken !== false).map(component);
check(tokens.length === 1 && tokens[0] === 'controller', `only the controller gets a service account token (${tokens.join(', ')})`);
const roles = docs.filter((d) => d.kind === 'Role' || d.kind === 'ClusterRole');
const verbs = roles.flatMap((r) => r.rules.flatMap((rule) => rule.resources.map((res) => `${res}:${rule.verbs.join('/')}`)));
check(
  verbs.every((v) => !v.includes('*') && !v.startsWith('secrets')),
  `RBAC grants named verbs on named resources, no secrets (${verbs.join(' ')})`,
);
const envOf = (c) => Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value]));
const commandKeyHolders = workloads.filter((d) =>
  d.spec.template.spec.containers.some((c) => (c.env ?? []).some((e) => e.name === 'ROBUSTRL_CONTROLLER_COMMAND_SECRET')),
);
check(
  commandKeyHolders.map(component).join(',') === 'controller',
  `only the controller is given its command secret (${commandKeyHolders.map(component).join(', ')})`,
);
const secured = workloads.filter((d) => d.spec.template.spec.containers.some((c) => envOf(c).KAFKA_SASL_MECHANISM));
if (secured.length > 0) {
  // Each service logs in as itself and its pod holds its own password only; each agent as its node.
  const ownLogin = (d) => {
    const c = d.spec.template.spec.containers[0];
    const login = (d.spec.template.spec.volumes ?? []).find((v) => v.name === 'kafka-login');
    return envOf(c).KAFKA_SASL_USERNAME?.endsWith(component(d)) && login?.secret.items.length === 1 && login.secret.items[0].key === component(d);
  };
  check(services.every(ownLogin), "every service logs in to Kafka as itself, with its own password only (not the other services')");
  check(
    agents.every((d) => envOf(d.spec.template.spec.containers[0]).KAFKA_SASL_USERNAME?.endsWith('agent-$(ROBUSTRL_MACHINE_ID)')),
    "every agent logs in as its node's agent (agent-<node name>)",
  );
  check(
    secured.every((d) => d.spec.template.spec.containers.every((c) => envOf(c).KAFKA_SSL_CA_FILE || envOf(c).KAFKA_SSL === 'true')),
    'every Kafka login goes over TLS',
  );
  const grant = docs.find((d) => d.kind === 'Job' && component(d) === 'kafka-acls');
  check(
    grant?.metadata.annotations['helm.sh/hook']?.includes('pre-install') &&
      grant.spec.template.spec.containers[0].args.join(' ').startsWith('robustrl kafka grant-all'),
    "the services' ACLs are granted before they start (a pre-install/pre-upgrade Job)",
  );
}
if (jobWorkers.length > 0) {
  // A verl-shaped job: every worker lands where its pool's agent runs, one machine to a node, with the
  // machine's GPUs and its agent's socket.
  const sameSelector = (a, b) => JSON.stringify(Object.entries(a ?? {}).sort()) === JSON.stringify(Object.entries(b ?? {}).sort());
  const agentOf = (w) => agents.find((a) => sameSelector(a.spec.template.spec.nodeSelector, w.spec.template.spec.nodeSelector));
  check(
    jobWorkers.every((w) => agentOf(w) && agentOf(w).metadata.labels['robustrl.io/agent-pool'] === w.metadata.labels['robustrl.io/agent-pool']),
    `every job worker is placed on its agent pool's nodes (${jobWorkers.map((w) => `${component(w)}→${w.metadata.labels['robustrl.io/agent-pool']}`).join(', ')})`,
  );
  const oneToANode = (w) =>
    (w.spec.template.spec.affinity?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution ?? []).some(
      (t) => t.topologyKey === 'kubernetes.io/hostname' && sameSelector(t.labelSelector.matchLabels, w.spec.selector.matchLabels),
    );
  check(jobWorkers.every(oneToANode), 'no two workers of one pool share a node (a pod is a machine)');
  const gpus = (w) => Number(w.spec.template.spec.containers[0].resources?.limits?.['nvidia.com/gpu'] ?? 0);
  check(
    jobWorkers.every((w) => gpus(w) > 0),
    `every worker requests its machine's GPUs (${jobWorkers.map(gpus).join(', ')})`,
  );
  const socketDir = (spec) => (spec.volumes ?? []).find((v) => v.name === 'agent-socket')?.hostPath?.path;
  check(
    jobWorkers.every((w) => {
      const spec = w.spec.template.spec;
      const env = envOf(spec.containers[0]);
      return socketDir(spec) && socketDir(spec) === socketDir(agentOf(w).spec.template.spec) && env.ROBUSTRL_AGENT_URL === 'unix:/run/robustrl/agent.sock';
    }) && agents.every((a) => envOf(a.spec.template.spec.containers[0]).ROBUSTRL_AGENT_SOCKET === '/run/robustrl/agent.sock'),
    "every worker reaches its node's agent over the agent's socket (the same node directory)",
  );
  check(
    agents.every(
      (a) =>
        envOf(a.spec.template.spec.containers[0]).ROBUSTRL_INTEGRATION === 'cooperate' && !envOf(a.spec.template.spec.containers[0]).ROBUSTRL_ROLLOUT_COMMAND,
    ),
    'the agents cooperate: the framework owns the processes, no role command',
  );
  const driver = docs.find((d) => d.kind === 'Job' && component(d) === 'driver');
  check(driver && driver.spec.backoffLimit === 0 && offGpu(driver.spec.template.spec), 'the driver runs once, off GPU nodes (robustrl never restarts it)');
}
const router = docs.find((d) => d.kind === 'Service' && component(d) === 'router');
if (router) {
  const rm = services.find((d) => component(d) === 'rollout-manager');
  const replicas = services.find((d) => component(d) === 'router');
  // The pods behind the router Service: the router replicas when there are any, else the rollout manager.
  const serving = replicas ?? rm;
  const c = serving.spec.template.spec.containers[0];
  const secretEnv = (container, name) => (container.env ?? []).find((e) => e.name === name)?.valueFrom?.secretKeyRef?.key;
  check(
    envOf(rm.spec.template.spec.containers[0]).ROBUSTRL_ROUTER === 'on' &&
      c.ports.some((p) => p.name === 'router') &&
      router.spec.ports[0].targetPort === 'router' &&
      sameLabels(router.spec.selector, serving.spec.selector.matchLabels) &&
      secretEnv(c, 'ROBUSTRL_TRAJECTORY_DATABASE_URL') === 'database-url',
    `the router is exposed (${router.spec.type ?? 'ClusterIP'} :${router.spec.ports[0].port}), served by ${
      replicas ? `${replicas.spec.replicas} router replicas` : 'the rollout manager'
    }, recording in the trajectory store`,
  );
  if (replicas) {
    const env = envOf(c);
    check(
      env.ROBUSTRL_ROUTER_REPLICA === 'on' &&
        (c.env ?? []).some((e) => e.name === 'ROBUSTRL_ROUTER_REPLICA_ID' && e.valueFrom?.fieldRef?.fieldPath === 'metadata.name') &&
        c.args[0] === 'rollout-manager',
      'each router replica is the rollout manager in replica mode, named by its pod (its own consumer group)',
    );
  }
}
function sameLabels(a, b) {
  return JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort());
}
process.exit(failed ? 1 : 0);
