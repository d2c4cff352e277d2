import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import {
  busIdentityFromEnv,
  CLIENT_ROLES,
  grantAcls,
  KAFKA_BROKERS,
  KafkaBus,
  KafkaBusOptions,
  kafkaSecurityFromEnv,
  TOPIC_PREFIX,
  untilAvailable,
} from '@robustrl/bus';
import { formatMessageLine } from '@robustrl/contracts';
import { IdentityKey, identityKeyOf, IdentityUsageError } from './identity-command';
import { aclLine, Grant, grantOf, KafkaGrantArgs, KafkaGrantUsageError, standardGrants } from './kafka-grant';
import { JobStartArgs, jobStartedOf, JobStartUsageError } from './job-start';
import { runSimulateCommand, SimulateArgs, UsageError } from './simulate-command';
import { DEFAULT_TAIL_TOPICS, tail } from './tail';

const program = new Command().name('robustrl').description('robustrl: role-based fault tolerance for LLM RL post-training jobs');

program
  .command('tail')
  .description('follow robustrl topics and print one readable line per event (the audit trail)')
  .option('-t, --topic <topic...>', 'topics to follow (default: every robustrl topic and the dead-letter topic)')
  .option('-j, --job <jobId>', 'only this job (records are keyed by job id)')
  .option('--json', 'print one JSON object per record instead of a line', false)
  .option('-b, --from-beginning', 'start at the oldest retained record instead of now', false)
  .option('-n, --limit <count>', 'exit after printing this many records', (v) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a positive integer');
    return n;
  })
  .option('--brokers <list>', 'Kafka bootstrap servers, comma separated (default: $KAFKA_BROKERS)')
  .option('--topic-prefix <prefix>', 'topic prefix of the deployment (default: $ROBUSTRL_TOPIC_PREFIX)')
  .action(async (opts: { topic?: string[]; job?: string; json: boolean; fromBeginning: boolean; limit?: number; brokers?: string; topicPrefix?: string }) => {
    const brokers = brokersOf(opts.brokers);
    const topics = (opts.topic ?? DEFAULT_TAIL_TOPICS).map((t) => (t.includes('.') ? t : `robustrl.${t}`));
    const session = await tail({
      brokers,
      security: kafkaSecurityFromEnv(process.env),
      topics,
      topicPrefix: opts.topicPrefix ?? TOPIC_PREFIX.read(process.env),
      job: opts.job,
      json: opts.json,
      fromBeginning: opts.fromBeginning,
      limit: opts.limit,
      out: (line) => process.stdout.write(`${line}\n`),
      err: (line) => process.stderr.write(`${line}\n`),
    });
    const stop = async () => {
      await session.stop();
      process.exit(0);
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    await session.done;
    await stop();
  });

program
  .command('chaos')
  .description(
    'run the whole-system chaos campaign: every service, agents and the reference job as processes, seeded faults, invariants checked (options: --help)',
  )
  .helpOption(false)
  .allowUnknownOption()
  .argument('[options...]', 'passed on: --seeds, --faults, --steps, --deadline, --mix, --keep, --help')
  .action((args: string[]) => {
    // The campaign lives with the benchmarks (bench/): the CLI runs it as its own process, so the CLI depends on none of it.
    const script = join(__dirname, '..', '..', 'bench', 'dist', 'chaos-system.js');
    if (!existsSync(script)) {
      process.stderr.write(`${script} is missing: run npm run build first\n`);
      process.exit(2);
    }
    const child = spawn(process.execPath, [script, ...args], { stdio: 'inherit' });
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal));
    child.once('exit', (code, signal) => process.exit(code ?? (signal ? 130 : 1)));
  });

/** Bootstrap servers from --brokers or KAFKA_BROKERS; a clear error when neither names one. */
function brokersOf(flag: string | undefined): string[] {
  const brokers =
    flag === undefined
      ? (KAFKA_BROKERS.read(process.env) ?? [])
      : flag
          .split(',')
          .map((b) => b.trim())
          .filter(Boolean);
  if (brokers.length === 0) {
    program.error('no Kafka brokers: pass --brokers host:port or set KAFKA_BROKERS (deploy/local/services.sh env prints the local one)');
  }
  return brokers;
}

const job = program.command('job').description("announce a job's life to the control plane");
job
  .command('start')
  .description('publish JobStarted: the job began (or resumed) with these machines and detection windows; run it when the job launches')
  .requiredOption('-j, --job <jobId>', 'the job id (its agents report under the same ROBUSTRL_JOB_ID)')
  .option('--mode <mode>', 'sync, semi-sync or async', 'semi-sync')
  .option('--trainers <n>', 'trainer machines', '1')
  .option('--rollouts <n>', 'rollout machines', '0')
  .option('--resumed-from-step <step>', 'the checkpoint step a resumed job restarts from')
  .option('--run-id <id>', 'names this start: the same run id publishes the same event id (default: now)')
  .option('--trainer-idle-window <s>', 'trainer rule window, seconds (paper: 300)')
  .option('--rollout-silent-window <s>', 'rollout rule window, seconds (paper: 60)')
  .option('--agent-silent-window <s>', 'liveness rule window, seconds (default 60)')
  .option('--probe-timeout <s>', 'how long a probed agent has to answer, seconds')
  .option('--resume-grace <s>', 'after the detector was blind, how long windows wait, seconds')
  .option('--brokers <list>', 'Kafka bootstrap servers, comma separated (default: $KAFKA_BROKERS)')
  .option('--topic-prefix <prefix>', 'topic prefix of the deployment (default: $ROBUSTRL_TOPIC_PREFIX)')
  .action(async (opts: JobStartArgs & { brokers?: string; topicPrefix?: string }) => {
    process.env.KAFKAJS_NO_PARTITIONER_WARNING ??= '1';
    let message;
    try {
      message = jobStartedOf(opts, new Date());
    } catch (e) {
      if (e instanceof JobStartUsageError) program.error(`robustrl job start: ${e.message}`, { exitCode: 2 });
      throw e;
    }
    const bus = new KafkaBus({
      brokers: brokersOf(opts.brokers),
      clientId: 'robustrl-cli',
      topicPrefix: opts.topicPrefix ?? TOPIC_PREFIX.read(process.env),
      // kafkajs's start-up notices are noise here; a publish that fails throws, and that is reported.
      logger: { info: () => undefined, warn: () => undefined, error: (m) => process.stderr.write(`${m}\n`) },
      // A deployment that signs its records takes the operator's only when signed (docs/operators/security.md "Who speaks on the bus").
      identity: busIdentityFromEnv(process.env, { service: 'robustrl-cli' }),
      // A secured broker: TLS and the operator's login (KAFKA_SSL_CA_FILE, KAFKA_SASL_*).
      ...(kafkaSecurityFromEnv(process.env) as Pick<KafkaBusOptions, 'ssl' | 'sasl'>),
    });
    try {
      await bus.publish(message);
    } finally {
      await bus.close();
    }
    process.stdout.write(`${formatMessageLine(message)}\n`);
  });

const identity = program.command('identity').description("keys derived from the deployment's identity secret ($ROBUSTRL_IDENTITY_SECRET)");
/** A secret from `<name>` or the file `<name>_FILE` names. */
const secretSetting = (name: string): string | undefined => {
  const file = process.env[`${name}_FILE`]?.trim();
  return file ? readFileSync(file, 'utf8').trim() : process.env[name]?.trim() || undefined;
};
const printKey = (what: IdentityKey, machineId?: string, role?: string) => {
  try {
    const secret = secretSetting('ROBUSTRL_IDENTITY_SECRET');
    const commandSecret = what === 'controller-public-key' ? secretSetting('ROBUSTRL_CONTROLLER_COMMAND_SECRET') : undefined;
    process.stdout.write(`${identityKeyOf(what, secret, machineId, commandSecret, role)}\n`);
  } catch (e) {
    if (e instanceof IdentityUsageError || (e as NodeJS.ErrnoException).code === 'ENOENT')
      program.error(`robustrl identity: ${(e as Error).message}`, { exitCode: 2 });
    throw e;
  }
};
identity
  .command('machine-key <machineId>')
  .description("the key one machine's agent signs with (its ROBUSTRL_MACHINE_KEY); it speaks for that machine only")
  .action((machineId: string) => printKey('machine-key', machineId));
identity
  .command('role-certificate <machineId> <role>')
  .description("one machine's certificate for its role (its ROBUSTRL_ROLE_CERTIFICATE): a trainer or hybrid machine is refused without one")
  .action((machineId: string, role: string) => printKey('role-certificate', machineId, role));
identity
  .command('controller-public-key')
  .description(
    "the public key agents check the controller's commands with (their ROBUSTRL_CONTROLLER_PUBLIC_KEY); from ROBUSTRL_CONTROLLER_COMMAND_SECRET where set",
  )
  .action(() => printKey('controller-public-key'));
identity
  .command('control-plane-public-key')
  .description('the public key agents check a retirement, a release or a probe with (their ROBUSTRL_CONTROL_PLANE_PUBLIC_KEY)')
  .action(() => printKey('control-plane-public-key'));

const kafka = program.command('kafka').description('the broker side of a secured deployment (docs/operators/kafka.md)');
const waitSeconds = (v: string) => {
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError('expected seconds (0 or more)');
  return n;
};
/** Apply grants with the admin's login from the environment, waiting up to `wait` s for a broker that is starting. */
async function applyGrants(grants: Grant[], opts: { print: boolean; brokers?: string; wait: number }): Promise<void> {
  if (opts.print) {
    for (const grant of grants) for (const acl of grant.acls) process.stdout.write(`${aclLine(grant.principal, acl)}\n`);
    return;
  }
  const connection = { brokers: brokersOf(opts.brokers), security: kafkaSecurityFromEnv(process.env) };
  const deadline = Date.now() + opts.wait * 1000;
  const logger = { info: () => undefined, warn: (m: string) => process.stderr.write(`[kafka] ${m}\n`), error: () => undefined };
  for (const grant of grants) {
    await untilAvailable(`the broker to grant ${grant.principal}`, () => grantAcls(connection, grant.principal, grant.acls), {
      logger,
      cancelled: () => Date.now() >= deadline,
      maxDelayMs: 5_000,
    });
    process.stderr.write(`[kafka] ${grant.acls.length} ACLs of ${grant.role} granted to ${grant.principal}\n`);
  }
}
const grantOptions = (c: Command) =>
  c
    .option('--topic-prefix <prefix>', 'topic prefix of the deployment (default: $ROBUSTRL_TOPIC_PREFIX)')
    .option('--print', 'print the ACLs, one per line, and change nothing', false)
    .option('--wait <seconds>', 'wait this long for a broker that is not reachable yet', waitSeconds, 60)
    .option('--brokers <list>', 'Kafka bootstrap servers, comma separated (default: $KAFKA_BROKERS)');
grantOptions(
  kafka
    .command('grant <username>')
    .description("allow a broker login the topic ACLs of its role; run with the broker admin's login (KAFKA_SSL_CA_FILE, KAFKA_SASL_*)")
    .requiredOption('--role <role>', `what the login is: ${CLIENT_ROLES.join(', ')}`)
    .option('--machine <id>', "an agent's machine: its consumer groups are that machine's only (default: the username)"),
).action(async (username: string, opts: KafkaGrantArgs & { print: boolean; brokers?: string; wait: number }) => {
  let grant;
  try {
    grant = grantOf(username, { ...opts, topicPrefix: opts.topicPrefix ?? TOPIC_PREFIX.read(process.env) });
  } catch (e) {
    if (e instanceof KafkaGrantUsageError) program.error(`robustrl kafka grant: ${e.message}`, { exitCode: 2 });
    throw e;
  }
  await applyGrants([grant], opts);
});
grantOptions(
  kafka
    .command('grant-all')
    .description(
      "grant a deployment's logins by convention: each service's (named as the service), `operator`, and `agent-<machine>` per agent; with the admin's login",
    )
    .option('--agents <machines>', 'comma-separated machine ids whose agents get a login', '')
    .option('--login-prefix <prefix>', "what every login name starts with (the Helm chart's kafka.sasl.loginPrefix)", ''),
).action(async (opts: { agents: string; loginPrefix: string; topicPrefix?: string; print: boolean; brokers?: string; wait: number }) => {
  let grants;
  try {
    const agents = opts.agents
      .split(',')
      .map((a) => a.trim())
      .filter(Boolean);
    grants = standardGrants(agents, { topicPrefix: opts.topicPrefix ?? TOPIC_PREFIX.read(process.env), loginPrefix: opts.loginPrefix });
  } catch (e) {
    if (e instanceof KafkaGrantUsageError) program.error(`robustrl kafka grant-all: ${e.message}`, { exitCode: 2 });
    throw e;
  }
  await applyGrants(grants, opts);
});

program
  .command('simulate')
  .description('simulate a job under faults with the real control-plane deciders, comparing none / task-restart / robustrl')
  .option('-s, --scenario <name|file.json>', 'a built-in scenario (see --list) or a scenario file (schemas/simulation/scenario.schema.json)')
  .option('--strategies <list>', 'comma-separated: none, task-restart, robustrl (default: all three)')
  .option('--seed <n>', 'seed of the workload and the faults (default 1): the same seed gives the same report')
  .option('--json', 'print the report as one JSON object instead of the table', false)
  .option('--out <dir>', 'also write the report JSON and the charts (SVG) to this directory')
  .option('--list', 'list the built-in scenarios', false)
  .option('--all', 'run every built-in paper scenario and print the reproduction table (markdown)', false)
  .action(async (opts: SimulateArgs) => {
    try {
      await runSimulateCommand(opts, { out: (t) => process.stdout.write(`${t}\n`), err: (t) => process.stderr.write(`${t}\n`) });
    } catch (e) {
      if (e instanceof UsageError) program.error(`robustrl simulate: ${e.message}`, { exitCode: 2 });
      throw e;
    }
  });

program.parseAsync(process.argv).catch((err: unknown) => {
  process.stderr.write(`robustrl: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
