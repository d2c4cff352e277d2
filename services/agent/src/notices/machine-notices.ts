import type { AgentConfig } from '../agent-config';
import { NoticeWatcher } from './notice-watcher';
import { TerminationNotice } from './termination-notice';

/**
 * Every way this agent hears that its machine is about to go (docs/planned-failures.md): the cloud's
 * metadata notices (notice-watcher.ts) and SIGTERM with the pod's grace period (termination-notice.ts),
 * each reported once as the machine's `node-draining` with the time it has left.
 */
export class MachineNotices {
  private readonly cloud: NoticeWatcher;
  private readonly termination: TerminationNotice;
  /** The control plane ordered this machine replaced: a SIGTERM after it is that order carried out. */
  private replacementOrdered: string | null = null;
  /** A notice was reported: this machine is leaving, its roles are being moved. */
  private reported = false;

  constructor(
    config: Pick<AgentConfig, 'notices' | 'terminationGraceMs'>,
    agent: {
      /** Report the machine's departure, `departsInMs` from now. */
      report: (detail: string, departsInMs: number) => Promise<void>;
      rolesRunning: () => boolean;
      closing: () => boolean;
      logger: { log: (line: string) => void; warn: (line: string) => void };
    },
  ) {
    const report = (detail: string, departsInMs: number) => agent.report(detail, departsInMs).then(() => void (this.reported = true));
    this.cloud = new NoticeWatcher(config.notices.sources, {
      pollMs: config.notices.pollMs,
      vmName: config.notices.vmName,
      report: (detail, notice) => report(detail, Math.max(0, notice.deadline.getTime() - Date.now())),
      logger: agent.logger,
    });
    this.termination = new TerminationNotice({
      graceMs: config.terminationGraceMs,
      rolesRunning: agent.rolesRunning,
      expected: () =>
        agent.closing()
          ? 'the agent is already stopping'
          : this.replacementOrdered
            ? `the control plane replaced this machine (${this.replacementOrdered})`
            : null,
      report,
      log: agent.logger.log,
    });
  }

  /** Whether this machine announced its departure (a notice was reported): its trainer stops at its next checkpoint. */
  get departing(): boolean {
    return this.reported;
  }

  /** The framework reported the departure itself (`POST /v1/errors` with `node-draining`): the same as a notice read here. */
  announced(): void {
    this.reported = true;
  }

  start(): void {
    this.cloud.start();
  }

  stop(): Promise<void> {
    return this.cloud.stop();
  }

  /** The control plane's ReplaceMachine for this machine, carried out by the orchestrator (a SIGTERM follows). */
  replacementOrderedBy(commandId: string): void {
    this.replacementOrdered ??= commandId;
  }

  /** The process got SIGTERM: resolves when it may stop (termination-notice.ts). */
  terminate(): Promise<void> {
    return this.termination.terminate();
  }
}
