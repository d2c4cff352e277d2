import { BadRequestException, Body, ConflictException, Controller, Get, HttpCode, Inject, NotFoundException, Param, Post, Query } from '@nestjs/common';
import { z } from 'zod';
import { AgentRuntime } from '../agent-runtime';
import type { CommandMailbox } from './command-mailbox';

/** The longest a poll waits for a command: below common HTTP idle timeouts, so proxies keep the request. */
const MAX_WAIT_MS = 30_000;

const PollQuery = z.object({ waitMs: z.coerce.number().int().min(0).max(MAX_WAIT_MS).default(0) });
const Outcome = z.union([z.object({ outcome: z.literal('succeeded') }), z.object({ outcome: z.literal('failed'), error: z.string().min(1).max(4000) })]);

function parse<T extends z.ZodType>(schema: T, input: unknown, what: string): z.infer<T> {
  const result = schema.safeParse(input ?? {});
  if (!result.success)
    throw new BadRequestException({
      error: `invalid ${what}`,
      issues: result.error.issues.map((i) => ({ path: i.path.join('.') || '(body)', message: i.message })),
    });
  return result.data;
}

/**
 * The commands of cooperate mode over the agent's local API (docs/integrators/integrate-your-job.md;
 * command-mailbox.ts has the delivery contract):
 *
 * - `GET /v1/commands?waitMs=N` — the commands not acknowledged yet, oldest first; with none, waits up
 *   to N ms (at most 30 s) for one. `{"commands": [...]}`.
 * - `POST /v1/commands/:commandId/ack` — the framework has it; it is not offered again.
 * - `POST /v1/commands/:commandId/outcome` `{"outcome":"succeeded"}` or `{"outcome":"failed","error":"…"}`
 *   — what the agent answers the controller. The same outcome twice is accepted once; another is a 409.
 *
 * An agent that supervises its role process answers 409 to all three: it carries commands out itself.
 */
@Controller('v1/commands')
export class CommandsApiController {
  constructor(@Inject(AgentRuntime) private readonly agent: AgentRuntime) {}

  @Get()
  async poll(@Query() query: unknown) {
    const { waitMs } = parse(PollQuery, query, 'query');
    return { commands: await this.mailbox().poll(waitMs) };
  }

  @Post(':commandId/ack')
  @HttpCode(200)
  ack(@Param('commandId') commandId: string) {
    const result = this.mailbox().acknowledge(commandId);
    if (result === 'unknown') throw new NotFoundException({ error: `no command ${commandId} is open on this agent` });
    return { commandId, result };
  }

  @Post(':commandId/outcome')
  @HttpCode(200)
  outcome(@Param('commandId') commandId: string, @Body() body: unknown) {
    const b = parse(Outcome, body, 'request body');
    const result = this.mailbox().answer(commandId, b.outcome === 'succeeded' ? { ok: true } : { ok: false, error: b.error });
    if (result === 'unknown') throw new NotFoundException({ error: `no command ${commandId} is open on this agent` });
    if (result === 'conflicts') throw new ConflictException({ error: `command ${commandId} was already answered with another outcome` });
    return { commandId, result };
  }

  private mailbox(): CommandMailbox {
    const mailbox = this.agent.mailbox;
    if (!mailbox)
      throw new ConflictException({
        error: 'this agent supervises its role process and carries commands out itself; set ROBUSTRL_INTEGRATION=cooperate for a framework that follows them',
      });
    return mailbox;
  }
}
