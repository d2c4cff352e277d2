import { Inject, Module, OnModuleDestroy } from '@nestjs/common';
import { MessageBus } from '@robustrl/bus';
import { MESSAGE_BUS } from '@robustrl/service-kit';
import { AgentApiController } from './agent-api.controller';
import { agentConfigFromEnv } from './agent-config';
import { AgentRuntime } from './agent-runtime';
import { CommandsApiController } from './cooperate/commands-api.controller';

/**
 * Agent: the GPU-side service on every GPU machine (one per machine, not part of the embedded
 * control plane). Carries out restarts, answers probes, relays the framework's reports; moves
 * weights in a later milestone.
 */
@Module({
  controllers: [AgentApiController, CommandsApiController],
  providers: [{ provide: AgentRuntime, useFactory: (bus: MessageBus) => new AgentRuntime(bus, agentConfigFromEnv(process.env)), inject: [MESSAGE_BUS] }],
})
export class AgentModule implements OnModuleDestroy {
  constructor(@Inject(AgentRuntime) private readonly runtime: AgentRuntime) {}

  /**
   * Called by main once the HTTP server listens (Nest bootstraps modules before `listen`), so the
   * role process can reach the API from its first line.
   */
  async startWithApi(apiUrl: string): Promise<void> {
    await this.runtime.start(apiUrl);
  }

  /** SIGTERM: resolves when the agent may stop (a notice first, when the pod's grace period is known). */
  terminate(): Promise<void> {
    return this.runtime.terminate();
  }

  onModuleDestroy(): Promise<void> {
    return this.runtime.stop();
  }
}
